// CAIS on inca-sim: the nodes of a simulated star (docs/sim.md, "CAIS").
//
// CaisSwitchNode runs the real CaisReducer (the program inca-switchd runs);
// CaisRankNode runs the client's transport core (client::OpCore and
// client::PathState, what the Communicator drives over UDP). Only time and
// the wire are simulated, so the packets these nodes exchange are the bytes
// the real processes would exchange.
//
// RingRankNode and ForwarderNode are the baseline: a ring all-reduce as
// NCCL and Gloo run it (reduce-scatter then all-gather, each block cut into
// packets and pipelined packet by packet), through the same star with the
// switch as a plain forwarder.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "client/transport_core.h"
#include "inca/cais/reducer.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

// Timing mode (docs/sim.md, "CAIS"): each chunk of an operation of `bytes`
// carries one f32 (4 bytes) and is charged on the wire as the chunk of
// `chunk_size` it stands for, so that a 200 MB all-reduce costs the events,
// not the memory, of one. chunk_size 0: byte-exact mode.
struct VirtualChunks {
  uint32_t chunk_size = 0;
  uint64_t bytes = 0;
  // Extra wire bytes for a CAIS datagram with this chunk id and payload.
  uint32_t Extra(uint32_t chunk_id, size_t payload_bytes) const;
};

// The switch's packet rate (its hardware model beside chunk_size and the
// slot memory): a pipeline that takes one packet every 1/pps, in arrival
// order, with at most queue_packets waiting (more are dropped and counted).
// pps 0: every packet at once, as an ASIC at line rate.
struct SwitchPipeline {
  double pps = 0;
  uint32_t queue_packets = 4096;
};

// A switch node behind such a pipeline; Process() sees each packet as it
// leaves the pipeline.
class PipelinedSwitch : public Node {
 public:
  void Receive(dp::PortId port, Packet packet) final;
  uint64_t pipeline_dropped() const { return pipeline_dropped_; }

 protected:
  PipelinedSwitch(std::string name, SwitchPipeline pipeline)
      : Node(std::move(name)), pipeline_(pipeline) {}
  virtual void Process(dp::PortId port, Packet packet) = 0;

 private:
  void Next();
  SwitchPipeline pipeline_;
  std::deque<std::pair<dp::PortId, Packet>> waiting_;
  bool scheduled_ = false;
  uint64_t pipeline_dropped_ = 0;
};

// The switch: port p is rank p's link. Chunk timeouts are driven by the
// packets that arrive (Advance before each), as in inca-switchd's loop.
class CaisSwitchNode final : public PipelinedSwitch {
 public:
  CaisSwitchNode(std::string name, const cais::CaisConfig& config, int ranks,
                 VirtualChunks virt = {}, SwitchPipeline pipeline = {});
  ~CaisSwitchNode() override;
  const cais::CaisReducer& reducer() const { return *reducer_; }

 private:
  void Process(dp::PortId port, Packet packet) override;
  class Sink;
  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<Sink> sink_;
  VirtualChunks virt_;
};

// What a rank node does between operations: the scenario starts each
// operation on every rank (Begin) and hears when a rank is done.
using RankDone = std::function<void(int rank)>;

// One rank of the switch path: all-reduces of f32 sums, one at a time.
class CaisRankNode final : public Node {
 public:
  CaisRankNode(std::string name, int rank, const client::TransportConfig& config, RankDone done,
               VirtualChunks virt = {});
  ~CaisRankNode() override;
  // Starts operation `seq` over `data` (reduced in place; kept by the caller
  // until done).
  void Begin(uint32_t seq, std::vector<float>* data);
  void Receive(dp::PortId port, Packet packet) override;
  const client::SwitchPhaseResult& result() const { return result_; }
  const client::PathState& path() const { return path_; }

 private:
  class Sink;
  void Pump();
  int rank_;
  client::TransportConfig config_;
  client::GroupLayout layout_;
  client::PathState path_;
  client::SwitchOp op_;
  client::SwitchPhaseResult result_;
  std::unique_ptr<client::OpCore> core_;
  std::unique_ptr<Sink> sink_;
  RankDone done_;
  VirtualChunks virt_;
  TimeNs wake_at_ = -1;
};

// The ring's wire format, inside the UDP payload (16 bytes, then the
// packet's slice of the block): destination rank, step, packet index within
// the block, and the slice's length in bytes. In timing mode the slice is
// left out and charged on the wire instead.
struct RingHeader {
  uint32_t dst = 0;
  uint32_t step = 0;
  uint32_t index = 0;
  uint32_t bytes = 0;
};
inline constexpr size_t kRingHeaderBytes = 16;

// The switch as a plain forwarder: a ring packet goes out of the port of
// its destination rank (with its elided slice charged again).
class ForwarderNode final : public PipelinedSwitch {
 public:
  explicit ForwarderNode(std::string name, SwitchPipeline pipeline = {})
      : PipelinedSwitch(std::move(name), pipeline) {}
  uint64_t forwarded() const { return forwarded_; }
  uint64_t dropped() const { return dropped_; }  // malformed or to no port

 private:
  void Process(dp::PortId port, Packet packet) override;
  uint64_t forwarded_ = 0;
  uint64_t dropped_ = 0;
};

// One rank of the ring. Step s (0 .. 2(n-1)-1) sends block (rank - s) mod n
// to rank + 1; in the first n-1 steps the receiver adds the block into its
// own copy, in the last n-1 it takes it as is. Packet j of step s may leave
// once packet j of step s-1 has arrived, plus `step_latency_ns` (the
// per-step software cost α of the closed form). The rank sends at its
// link's rate (a NIC's pacing), so its own transmit queue never overflows.
class RingRankNode final : public Node {
 public:
  RingRankNode(std::string name, int rank, int ranks, uint32_t payload_bytes, double link_bps,
               uint32_t overhead_bytes, TimeNs step_latency_ns, RankDone done);
  // Reduces `count` elements of `data` in place; data nullptr: timing mode
  // (nothing is carried, every slice is charged on the wire).
  void Begin(std::vector<float>* data, size_t count);
  void Receive(dp::PortId port, Packet packet) override;
  uint64_t malformed() const { return malformed_; }

 private:
  struct Ready {
    TimeNs at;
    uint32_t step;
    uint32_t index;
  };
  // Elements [first, first + count) of packet `index` of block `b`.
  std::pair<size_t, size_t> Slice(uint32_t block, uint32_t index) const;
  uint32_t BlockOf(uint32_t step, int rank) const;
  void Enqueue(Ready r);
  void SendNext();
  int rank_, n_;
  uint32_t payload_;
  double link_bps_;
  uint32_t overhead_;
  TimeNs step_latency_;
  RankDone done_;
  std::vector<float>* data_ = nullptr;
  size_t count_ = 0;
  uint32_t packets_per_block_ = 0;
  uint64_t to_receive_ = 0;
  std::vector<Ready> queue_;  // ready packets, FIFO by readiness
  size_t head_ = 0;
  TimeNs link_free_at_ = 0;
  bool sending_ = false;
  uint64_t malformed_ = 0;
};

}  // namespace inca::sim
