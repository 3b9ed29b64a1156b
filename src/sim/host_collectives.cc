#include "sim/host_collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace inca::sim {

// -------------------------------------------------------- HostCollectiveNode

HostCollectiveNode::HostCollectiveNode(std::string name, int rank, int ranks,
                                       uint32_t payload_bytes, double link_bps,
                                       uint32_t overhead_bytes, TimeNs step_latency_ns,
                                       RankDone done)
    : Node(std::move(name)),
      rank_(rank),
      n_(ranks),
      payload_(payload_bytes / 4 * 4),
      link_bps_(link_bps),
      overhead_(overhead_bytes),
      step_latency_(step_latency_ns),
      done_(std::move(done)) {}

absl::Status HostCollectiveNode::CheckShape(int ranks, uint32_t payload_bytes) {
  if (ranks < 2 || payload_bytes / 4 * 4 == 0) {
    return absl::InvalidArgumentError(
        "a host collective needs 2 ranks and a payload of at least 4 bytes");
  }
  return absl::OkStatus();
}

void HostCollectiveNode::Reset(std::vector<float>* data, size_t count, uint64_t to_receive) {
  data_ = data;
  count_ = count;
  to_receive_ = to_receive;
  for (auto& q : streams_) q.clear();
}

std::pair<size_t, size_t> HostCollectiveNode::Slice(size_t b0, size_t b1, uint32_t index) const {
  const size_t per = payload_ / sizeof(float);
  const size_t first = b0 + size_t{index} * per;
  return {first, first >= b1 ? 0 : std::min(per, b1 - first)};
}

uint32_t HostCollectiveNode::PacketsIn(size_t elements) const {
  const size_t per = payload_ / sizeof(float);
  return static_cast<uint32_t>((elements + per - 1) / per);
}

void HostCollectiveNode::Enqueue(uint32_t dst, uint32_t step, uint32_t index, size_t first,
                                 size_t count, size_t stream) {
  const RingHeader h{dst + static_cast<uint32_t>(base_), step, index,
                     static_cast<uint32_t>(count * sizeof(float))};
  streams_[stream].push_back(Ready{sim().now() + step_latency_, h, first});
  if (!sending_) SendNext();
}

void HostCollectiveNode::SendNext() {
  sending_ = false;
  const TimeNs now = sim().now();
  // The next stream after the last one served whose first packet is ready.
  size_t pick = kStreams;
  TimeNs earliest = INT64_MAX;
  for (size_t k = 1; k <= kStreams; ++k) {
    const size_t i = (last_stream_ + k) % kStreams;
    if (streams_[i].empty()) continue;
    if (streams_[i].front().at <= now) {
      pick = i;
      break;
    }
    earliest = std::min(earliest, streams_[i].front().at);
  }
  const TimeNs at = pick < kStreams ? std::max(now, link_free_at_) : earliest;
  if (at == INT64_MAX) return;  // nothing left to send
  if (at > now) {
    sending_ = true;
    sim().Schedule(at, [this] { SendNext(); });
    return;
  }
  last_stream_ = pick;
  const Ready r = streams_[pick].front();
  streams_[pick].pop_front();
  const uint32_t carried = data_ != nullptr ? r.h.bytes : 0;
  Packet p(kRingHeaderBytes + carried);
  PutRing(r.h, p.data());
  if (carried) std::memcpy(p.data() + kRingHeaderBytes, data_->data() + r.first, carried);
  // Paced to the picosecond, as the link keeps time (Network::Send).
  link_free_ps_ = std::max(link_free_ps_, now * 1000) +
                  std::llround(static_cast<double>(kRingHeaderBytes + r.h.bytes + overhead_) *
                               8e12 / link_bps_);
  link_free_at_ = (link_free_ps_ + 999) / 1000;
  Send(0, std::move(p), r.h.bytes - carried);
  for (const auto& q : streams_) {
    if (!q.empty()) {
      sending_ = true;
      sim().Schedule(link_free_at_, [this] { SendNext(); });
      break;
    }
  }
}

bool HostCollectiveNode::Take(const Packet& packet, const RingHeader& h, size_t first, size_t count,
                              bool add) {
  if (count * sizeof(float) != h.bytes ||
      (data_ != nullptr && packet.size() != kRingHeaderBytes + h.bytes)) {
    ++malformed_;
    return false;
  }
  if (data_ == nullptr) return true;
  const uint8_t* in = packet.data() + kRingHeaderBytes;
  float* out = data_->data() + first;
  if (add) {
    for (size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, in + i * sizeof(float), sizeof(float));
      out[i] += v;
    }
  } else {
    std::memcpy(out, in, h.bytes);
  }
  return true;
}

void HostCollectiveNode::Received() {
  if (--to_receive_ == 0) done_(rank_);
}

// -------------------------------------------------------------- RingRankNode

std::pair<size_t, size_t> RingRankNode::BlockSlice(uint32_t block, uint32_t index) const {
  const size_t n = static_cast<size_t>(n_);
  return Slice(count_ * block / n, count_ * (block + 1) / n, index);
}

uint32_t RingRankNode::BlockOf(uint32_t step, int rank) const {
  const int b = ((rank - static_cast<int>(step) - shift_) % n_ + n_) % n_;
  return static_cast<uint32_t>(b);
}

void RingRankNode::SendStep(uint32_t step, uint32_t index) {
  const auto [first, count] = BlockSlice(BlockOf(step, rank_), index);
  Enqueue(static_cast<uint32_t>((rank_ + 1) % n_), step, index, first, count);
}

absl::Status RingRankNode::Begin(std::vector<float>* data, size_t count, wire::CaisOp op) {
  const auto n1 = static_cast<uint32_t>(n_ - 1);
  switch (op) {
    case wire::CaisOp::kAllReduce: steps_ = 2 * n1, add_steps_ = n1, shift_ = 0; break;
    case wire::CaisOp::kReduceScatter: steps_ = n1, add_steps_ = n1, shift_ = 1; break;
    case wire::CaisOp::kAllGather: steps_ = n1, add_steps_ = 0, shift_ = 0; break;
    default:
      return absl::InvalidArgumentError("the ring runs all-reduce, reduce-scatter or all-gather");
  }
  const size_t largest = (count + static_cast<size_t>(n_) - 1) / static_cast<size_t>(n_);
  Reset(data, count, 0);
  packets_per_block_ = std::max<uint32_t>(1, PacketsIn(largest));
  // Every non-empty packet of the blocks this rank receives, over all steps.
  uint64_t expect = 0;
  for (uint32_t s = 0; s < steps_; ++s) {
    for (uint32_t j = 0; j < packets_per_block_; ++j) {
      expect += BlockSlice(BlockOf(s, rank_ - 1), j).second > 0 ? 1 : 0;
    }
  }
  to_receive_ = expect + 1;  // held at one until every first packet is queued
  for (uint32_t j = 0; j < packets_per_block_; ++j) {
    if (BlockSlice(BlockOf(0, rank_), j).second > 0) SendStep(0, j);
  }
  Received();
  return absl::OkStatus();
}

void RingRankNode::Receive(dp::PortId, Packet packet) {
  if (IsBackground(packet)) {
    ++background_;
    return;
  }
  RingHeader h;
  if (to_receive_ == 0 || !GetRing(packet, &h) || h.dst != static_cast<uint32_t>(base_ + rank_) ||
      h.step >= steps_ || h.index >= packets_per_block_) {
    ++malformed_;
    return;
  }
  const auto [first, count] = BlockSlice(BlockOf(h.step, rank_ - 1), h.index);
  // Reduce-scatter steps add; all-gather steps take the block.
  if (!Take(packet, h, first, count, h.step < add_steps_)) return;
  if (h.step + 1 < steps_) SendStep(h.step + 1, h.index);
  Received();
}

// -------------------------------------------------------------- TreeRankNode

namespace {

int PositionOf(int n, int t, int r) {
  return t == 0 ? r : n - 1 - r;
}

}  // namespace

int TreeRankNode::Parent(int n, int t, int r) {
  const int pos = PositionOf(n, t, r);
  return pos == 0 ? -1 : PositionOf(n, t, (pos - 1) / 2);  // the map is its own inverse
}

std::vector<int> TreeRankNode::Children(int n, int t, int r) {
  std::vector<int> out;
  const int pos = PositionOf(n, t, r);
  for (int c : {2 * pos + 1, 2 * pos + 2}) {
    if (c < n) out.push_back(PositionOf(n, t, c));
  }
  return out;
}

std::pair<size_t, size_t> TreeRankNode::HalfSlice(int t, uint32_t index) const {
  const size_t h = count_ / 2;
  return t == 0 ? Slice(0, h, index) : Slice(h, count_, index);
}

absl::Status TreeRankNode::Begin(std::vector<float>* data, size_t count, wire::CaisOp op) {
  if (op != wire::CaisOp::kAllReduce) {
    return absl::InvalidArgumentError("the tree runs all-reduce only");
  }
  Reset(data, count, 0);
  uint64_t expect = 0;
  for (int t = 0; t < 2; ++t) {
    const size_t len = t == 0 ? count / 2 : count - count / 2;
    const uint32_t packets = PacketsIn(len);
    got_[t].assign(packets, 0);
    const size_t kids = Children(n_, t, rank_).size();
    expect += packets * (kids + (Parent(n_, t, rank_) >= 0 ? 1 : 0));
  }
  to_receive_ = expect + 1;  // held at one until every leaf packet is queued
  for (int t = 0; t < 2; ++t) {
    if (!Children(n_, t, rank_).empty()) continue;
    for (uint32_t j = 0; j < got_[t].size(); ++j) Forward(t, j);  // a leaf's own packets go up
  }
  Received();
  return absl::OkStatus();
}

void TreeRankNode::Forward(int t, uint32_t index) {
  const auto [first, count] = HalfSlice(t, index);
  const int parent = Parent(n_, t, rank_);
  if (parent >= 0 && got_[t][index] != UINT32_MAX) {
    // Reduced here (or a leaf): up to the parent.
    Enqueue(static_cast<uint32_t>(parent), static_cast<uint32_t>(2 * t), index, first, count,
            static_cast<size_t>(2 * t));
    return;
  }
  for (int c : Children(n_, t, rank_)) {  // the final value: down to the children
    Enqueue(static_cast<uint32_t>(c), static_cast<uint32_t>(2 * t + 1), index, first, count,
            static_cast<size_t>(2 * t + 1));
  }
}

void TreeRankNode::Receive(dp::PortId, Packet packet) {
  if (IsBackground(packet)) {
    ++background_;
    return;
  }
  RingHeader h;
  if (to_receive_ == 0 || !GetRing(packet, &h) || h.dst != static_cast<uint32_t>(base_ + rank_) ||
      h.step >= 4) {
    ++malformed_;
    return;
  }
  const int t = static_cast<int>(h.step / 2);
  const bool reduce = h.step % 2 == 0;
  if (h.index >= got_[t].size() || (reduce && got_[t][h.index] == UINT32_MAX)) {
    ++malformed_;
    return;
  }
  const auto [first, count] = HalfSlice(t, h.index);
  if (!Take(packet, h, first, count, reduce)) return;
  if (reduce) {
    if (++got_[t][h.index] == Children(n_, t, rank_).size()) {
      if (Parent(n_, t, rank_) < 0) got_[t][h.index] = UINT32_MAX;  // the root: final
      Forward(t, h.index);
    }
  } else {
    got_[t][h.index] = UINT32_MAX;  // final
    Forward(t, h.index);
  }
  Received();
}

}  // namespace inca::sim
