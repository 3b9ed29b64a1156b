// The host baselines on inca-sim (docs/sim.md, "CAIS"): a ring all-reduce
// as NCCL and Gloo run it (reduce-scatter then all-gather, each block cut
// into packets and pipelined packet by packet), and NCCL's double binary
// tree, through the same star with the switch as a plain forwarder
// (ForwarderNode, cais_nodes.h).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "inca/sim/simulator.h"
#include "inca/wire/cais.h"
#include "sim/cais_nodes.h"

namespace inca::sim {

// What the host baselines share: a rank that sends slices of its tensor
// in packets (RingHeader, then the slice) to other ranks through the
// switch, paced at its link's rate (a NIC's pacing, so its own transmit
// queue never overflows). Packets wait in streams, each FIFO in the order
// they became ready; the link serves the streams round-robin (the ring has
// one, the tree one per tree and direction, as NCCL's channels share a
// NIC).
class HostCollectiveNode : public Node {
 public:
  // Whether a host collective of `ranks` ranks and `payload_bytes` per
  // packet can run: InvalidArgument without 2 ranks and a payload of at
  // least 4 bytes. The ring's and the tree's constructors expect a shape
  // that passed.
  static absl::Status CheckShape(int ranks, uint32_t payload_bytes);
  uint64_t malformed() const { return malformed_; }
  uint64_t background() const { return background_; }
  // Several jobs: this rank's ranks are numbered from `base` on the wire
  // (rank k of the job is rank base + k of the network). Before the run.
  void set_rank_base(int base) { base_ = base; }

 protected:
  HostCollectiveNode(std::string name, int rank, int ranks, uint32_t payload_bytes, double link_bps,
                     uint32_t overhead_bytes, TimeNs step_latency_ns, RankDone done);
  struct Ready {
    TimeNs at;
    RingHeader h;  // bytes: the slice's length
    size_t first;  // the slice's first element
  };
  // Starts an operation over `count` elements of `data` (nullptr: timing
  // mode, nothing carried) that ends when `to_receive` packets arrived.
  void Reset(std::vector<float>* data, size_t count, uint64_t to_receive);
  // Packet `index` of the element range [b0, b1): (first, count).
  std::pair<size_t, size_t> Slice(size_t b0, size_t b1, uint32_t index) const;
  uint32_t PacketsIn(size_t elements) const;
  // A packet for `dst` of slice (first, count), ready after the step
  // latency, in stream `stream` (< kStreams).
  void Enqueue(uint32_t dst, uint32_t step, uint32_t index, size_t first, size_t count,
               size_t stream = 0);
  static constexpr size_t kStreams = 4;
  // Checks a received packet against the slice it should carry and adds it
  // into (or copies it over) the tensor; false (counted) if malformed.
  bool Take(const Packet& packet, const RingHeader& h, size_t first, size_t count, bool add);
  // One packet fewer to receive; the rank is done at zero.
  void Received();

  int rank_, n_;
  int base_ = 0;  // set_rank_base
  uint32_t payload_;
  std::vector<float>* data_ = nullptr;
  size_t count_ = 0;
  uint64_t to_receive_ = 0;
  uint64_t malformed_ = 0;
  uint64_t background_ = 0;  // background packets received and discarded

 private:
  void SendNext();
  double link_bps_;
  uint32_t overhead_;
  TimeNs step_latency_;
  RankDone done_;
  std::deque<Ready> streams_[kStreams];
  size_t last_stream_ = 0;  // the one served last
  TimeNs link_free_at_ = 0;
  int64_t link_free_ps_ = 0;
  bool sending_ = false;
};

// One rank of the ring. An all-reduce is 2(n-1) steps: step s sends block
// (rank - s) mod n to rank + 1; in the first n-1 steps the receiver adds
// the block into its own copy, in the last n-1 it takes it as is. A
// reduce-scatter is the first n-1 steps alone, with the blocks shifted by
// one so that rank r ends with block r reduced; an all-gather is the last
// n-1 alone, rank r starting with block r. Packet j of step s may leave
// once packet j of step s-1 has arrived, plus `step_latency_ns` (the
// per-step software cost α of the closed form).
class RingRankNode final : public HostCollectiveNode {
 public:
  RingRankNode(std::string name, int rank, int ranks, uint32_t payload_bytes, double link_bps,
               uint32_t overhead_bytes, TimeNs step_latency_ns, RankDone done)
      : HostCollectiveNode(std::move(name), rank, ranks, payload_bytes, link_bps, overhead_bytes,
                           step_latency_ns, std::move(done)) {}
  // Runs `op` over `count` elements of `data` in place (n blocks; a
  // reduce-scatter leaves block r of rank r reduced, an all-gather fills
  // every block from rank r's block r); data nullptr: timing mode (nothing
  // is carried, every slice is charged on the wire).
  // InvalidArgument for another collective.
  absl::Status Begin(std::vector<float>* data, size_t count,
                     wire::CaisOp op = wire::CaisOp::kAllReduce);
  void Receive(dp::PortId port, Packet packet) override;

 private:
  std::pair<size_t, size_t> BlockSlice(uint32_t block, uint32_t index) const;
  uint32_t BlockOf(uint32_t step, int rank) const;
  void SendStep(uint32_t step, uint32_t index);
  uint32_t packets_per_block_ = 0;
  uint32_t steps_ = 0;      // 2(n-1), or n-1
  uint32_t add_steps_ = 0;  // the first ones, which add
  int shift_ = 0;           // block (rank - step - shift) mod n
};

// One rank of NCCL's double binary tree: the tensor's two halves each go
// up one binary tree (reduce: a rank adds its children's packets into its
// own and sends the sum to its parent) and down it again (broadcast from
// the root), packet by packet. Tree 0 places rank r at heap position r,
// tree 1 at n-1-r, so that the ranks inside one tree are leaves of the
// other (for even n). Steps: 2t (reduce) and 2t + 1 (broadcast) of tree t.
class TreeRankNode final : public HostCollectiveNode {
 public:
  TreeRankNode(std::string name, int rank, int ranks, uint32_t payload_bytes, double link_bps,
               uint32_t overhead_bytes, TimeNs step_latency_ns, RankDone done)
      : HostCollectiveNode(std::move(name), rank, ranks, payload_bytes, link_bps, overhead_bytes,
                           step_latency_ns, std::move(done)) {}
  // An all-reduce only (another op: InvalidArgument).
  absl::Status Begin(std::vector<float>* data, size_t count,
                     wire::CaisOp op = wire::CaisOp::kAllReduce);
  void Receive(dp::PortId port, Packet packet) override;

  // The tree's shape, for the closed form: rank r's parent (-1 at the root)
  // and children in tree t of n ranks.
  static int Parent(int n, int t, int r);
  static std::vector<int> Children(int n, int t, int r);

 private:
  std::pair<size_t, size_t> HalfSlice(int t, uint32_t index) const;
  void Forward(int t, uint32_t index);  // the reduced packet, up or down
  std::vector<uint32_t> got_[2];        // children's packets reduced, per packet
};

}  // namespace inca::sim
