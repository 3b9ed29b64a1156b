// The data-plane program interface: the pure core that inca-switchd, inca-sim
// and the tests all drive.
//
// Contract for every Program:
//  - No sockets, threads, wall clock or global randomness. Time arrives as an
//    argument (TimeNs, monotonic nanoseconds chosen by the driver); packets
//    leave through a PacketSink the driver supplies.
//  - Not thread-safe: one driver thread owns a Program.
//  - Every packet handed to Process() is accounted for exactly once: it is
//    aggregated (absorbed into switch state), forwarded (caused packets to be
//    emitted), or dropped with a named DropReason. ProgramCounters::Conserved()
//    checks rx == aggregated + forwarded + dropped.
//  - A Program never crashes on packet contents: every byte sequence is valid
//    input.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "inca/dataplane/drop_reason.h"
#include "inca/util/counters.h"

namespace inca::dp {

// Switch port number. Ports are small integers assigned by the driver (the
// port table in inca-switchd, a link in inca-sim).
using PortId = uint16_t;
inline constexpr PortId kMaxPorts = 1024;

// Monotonic time in nanoseconds, injected by the driver.
using TimeNs = int64_t;
inline constexpr TimeNs kNsPerMs = 1'000'000;

// Receives the packets a Program emits. The spans are valid only for the
// duration of the call: a sink that defers sending must copy.
//
// EmitGather emits `head` followed by `payload` as one packet. Payloads
// emitted with the same nonzero `share` hold the same bytes (one result to
// several ports), so that a sink may send a copy it already made of one of
// them (docs/design/cais-core.md, "Egress"); 0 shares nothing. The default
// joins the two and calls Emit.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void Emit(PortId egress, std::span<const uint8_t> packet) = 0;
  virtual void EmitGather(PortId egress, std::span<const uint8_t> head,
                          std::span<const uint8_t> payload, uint64_t share);
};

enum class Verdict : uint8_t {
  kAggregated,  // absorbed into switch state (may also have completed a chunk)
  kForwarded,   // caused one or more packets to be emitted, without absorbing
  kDropped,     // discarded; see DropReason
};

std::string_view ToString(Verdict verdict);

struct Outcome {
  Verdict verdict = Verdict::kDropped;
  DropReason reason = DropReason::kNone;

  static constexpr Outcome Aggregated() { return {Verdict::kAggregated, DropReason::kNone}; }
  static constexpr Outcome Forwarded() { return {Verdict::kForwarded, DropReason::kNone}; }
  static constexpr Outcome Dropped(DropReason r) { return {Verdict::kDropped, r}; }
};

// Counters the Program base class keeps for every program.
struct ProgramCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t aggregated = 0;
  uint64_t forwarded = 0;
  uint64_t dropped = 0;
  uint64_t tx_packets = 0;  // packets emitted (a multicast counts once per port)
  uint64_t tx_bytes = 0;
  std::array<uint64_t, kDropReasonCount> drops_by_reason{};

  // rx == aggregated + forwarded + dropped, and the per-reason drops add up.
  bool Conserved() const;
};

// ProgramCounters' figures, declared once (inca/util/counters.h); `prom` is
// the family's suffix (inca_reducer_<prom> for CAIS). Drops by reason are
// written beside them (dp::DropReason's own table).
inline constexpr counters::Counter<ProgramCounters> kProgramCounters[] = {
    {1, "rx_packets", "received_packets_total", counters::Kind::kCounter, 1,
     "Packets handed to the program.", &ProgramCounters::rx_packets},
    {2, "rx_bytes", "received_bytes_total", counters::Kind::kCounter, 1,
     "Bytes handed to the program.", &ProgramCounters::rx_bytes},
    {3, "aggregated", "aggregated_packets_total", counters::Kind::kCounter, 1,
     "Packets absorbed into switch state.", &ProgramCounters::aggregated},
    {4, "forwarded", "forwarded_packets_total", counters::Kind::kCounter, 1,
     "Packets that caused emissions without being absorbed.", &ProgramCounters::forwarded},
    {5, "dropped", "dropped_total", counters::Kind::kCounter, 1, "Packets dropped (all reasons).",
     &ProgramCounters::dropped},
    {6, "tx_packets", "sent_packets_total", counters::Kind::kCounter, 1,
     "Packets the program emitted (a multicast counts once per port).",
     &ProgramCounters::tx_packets},
    {7, "tx_bytes", "sent_bytes_total", counters::Kind::kCounter, 1, "Bytes the program emitted.",
     &ProgramCounters::tx_bytes},
};

// Base of all data-plane programs (CAIS reducer, OLAF queue, FIFO, ...).
// Public non-virtual entry points own the counters and invariants; programs
// implement the private Do* hooks (ns-3 QueueDisc::Enqueue -> DoEnqueue).
class Program {
 public:
  virtual ~Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Handles one packet that arrived on `ingress` at time `now`. `now` must not
  // go backwards across calls to Process() and Advance().
  Outcome Process(std::span<const uint8_t> packet, PortId ingress, TimeNs now, PacketSink& out);

  // Lets time pass without a packet: expires timers (e.g. CAIS chunk
  // timeouts), possibly emitting packets (fallback notices).
  void Advance(TimeNs now, PacketSink& out);

  const ProgramCounters& counters() const { return counters_; }
  virtual std::string_view name() const = 0;

 protected:
  Program() = default;

 private:
  virtual Outcome DoProcess(std::span<const uint8_t> packet, PortId ingress, TimeNs now,
                            PacketSink& out) = 0;
  virtual void DoAdvance(TimeNs now, PacketSink& out) = 0;

  ProgramCounters counters_;
};

}  // namespace inca::dp
