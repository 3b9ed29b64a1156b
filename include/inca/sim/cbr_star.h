// The constant-rate star of inca-sim's comparisons with ns-3 (docs/sim.md,
// "Against ns-3"; docs/ns3.md): `sources` hosts send UDP datagrams of
// `payload` bytes at a constant rate, evenly staggered, each on its own
// link into one switch, whose link to one sink is the bottleneck. The
// switch is either a plain drop-tail link queue (the engines' comparison,
// tools/sim-cbr-star) or inca's OLAF switch program with the FIFO or OLAF
// policy, the sources then being OLAF workers sending one update each
// period (the ns-3 adapter's comparison, inca/ns3/olaf_ns3.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "inca/sim/olaf_nodes.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

enum class CbrSwitch : uint8_t { kPlain, kFifo, kOlaf };
std::string_view ToString(CbrSwitch s);  // "plain", "fifo", "olaf"

struct CbrStarConfig {
  CbrSwitch sw = CbrSwitch::kPlain;
  int sources = 9;
  double rate_gbps = 6;  // each sender's, UDP payload bits
  double source_link_gbps = 100;
  double bottleneck_gbps = 40;
  uint32_t payload = 9000;  // UDP payload bytes (fifo/olaf: 40 of header + a multiple of 4)
  uint32_t queue = 8;       // packets that may wait at the bottleneck
  uint32_t framing = 30;    // bytes on the wire beyond the payload (UDP 8 + IPv4 20 + PPP 2)
  double delay_us = 1;      // every link's propagation delay
  double duration_s = 10;   // sending time; a second more drains

  // InvalidArgument naming the field.
  absl::Status Validate() const;
  // The sending period, rounded to the ns, and the datagrams each source sends.
  TimeNs period_ns() const;
  uint64_t per_source() const;
};

struct CbrStarResult {
  std::string simulator;
  uint64_t offered = 0;    // datagrams sent
  uint64_t delivered = 0;  // datagrams the sink received
  uint64_t dropped = 0;    // at the bottleneck (arrival drops and evictions)
  uint64_t merged = 0;     // OLAF: folded into a queued update
  uint64_t events = 0;
  double wall_s = 0;
};
// One JSON line.
std::string ToJson(const CbrStarResult& r);

absl::StatusOr<CbrStarResult> RunCbrStar(const CbrStarConfig& c);

// Source `i`'s worker with a switch program: cluster i, worker i + 1, one
// update of payload bytes each period from its staggered phase, per_source()
// of them.
WorkerNodeConfig CbrWorker(const CbrStarConfig& c, int i);

}  // namespace inca::sim
