#include "sim/cais_nodes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "inca/util/endian.h"

namespace inca::sim {

uint32_t VirtualChunks::Extra(uint32_t chunk_id, size_t payload_bytes) const {
  if (chunk_size == 0 || payload_bytes != sizeof(float)) return 0;
  const uint64_t first = uint64_t{chunk_id} * chunk_size;
  if (first >= bytes) return 0;
  const uint64_t stands_for = std::min<uint64_t>(chunk_size, bytes - first);
  return static_cast<uint32_t>(stands_for - sizeof(float));
}

// ----------------------------------------------------------- PipelinedSwitch

void PipelinedSwitch::Receive(dp::PortId port, Packet packet) {
  if (pipeline_.pps <= 0) {
    Process(port, std::move(packet));
    return;
  }
  if (waiting_.size() >= pipeline_.queue_packets) {
    ++pipeline_dropped_;
    return;
  }
  waiting_.emplace_back(port, std::move(packet));
  if (!scheduled_) {
    scheduled_ = true;
    sim().Schedule(sim().now(), [this] { Next(); });
  }
}

void PipelinedSwitch::Next() {
  auto [port, packet] = std::move(waiting_.front());
  waiting_.pop_front();
  Process(port, std::move(packet));
  if (waiting_.empty()) {
    scheduled_ = false;
    return;
  }
  const auto service = static_cast<TimeNs>(std::llround(1e9 / pipeline_.pps));
  sim().Schedule(sim().now() + service, [this] { Next(); });
}

// ------------------------------------------------------------ CaisSwitchNode

class CaisSwitchNode::Sink final : public dp::PacketSink {
 public:
  explicit Sink(CaisSwitchNode* node) : node_(node) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    uint32_t extra = 0;
    wire::CaisPacketView v;
    if (node_->virt_.chunk_size != 0 && wire::ParseCais(packet, &v) == wire::CaisParseError::kOk) {
      extra = node_->virt_.Extra(v.header.chunk_id, v.payload.size());
    }
    node_->Send(egress, Packet(packet.begin(), packet.end()), extra);
  }

 private:
  CaisSwitchNode* node_;
};

CaisSwitchNode::CaisSwitchNode(std::string name, const cais::CaisConfig& config, int ranks,
                               VirtualChunks virt, SwitchPipeline pipeline)
    : PipelinedSwitch(std::move(name), pipeline), sink_(std::make_unique<Sink>(this)), virt_(virt) {
  auto r = cais::CaisReducer::Create(config);
  if (!r.ok()) throw std::invalid_argument(std::string(r.status().message()));
  reducer_ = std::move(*r);
  // One group (0) of every port, any operation: what a JOIN installs.
  cais::PortMask ports;
  for (int p = 0; p < ranks; ++p) ports.add(static_cast<dp::PortId>(p));
  const cais::Rule rule{cais::RuleKey{0, std::nullopt, std::nullopt}, ports, ports, std::nullopt};
  if (auto st = reducer_->rules().Add(rule); !st.ok()) {
    throw std::invalid_argument(std::string(st.message()));
  }
}

CaisSwitchNode::~CaisSwitchNode() = default;

void CaisSwitchNode::Process(dp::PortId port, Packet packet) {
  reducer_->Advance(sim().now(), *sink_);
  reducer_->Process(packet, port, sim().now(), *sink_);
}

// -------------------------------------------------------------- CaisRankNode

class CaisRankNode::Sink final : public client::DatagramSink {
 public:
  explicit Sink(CaisRankNode* node) : node_(node) {}
  void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
    Packet d(wire::kCaisHeaderBytes + payload.size());
    wire::SerializeCaisHeader(h, d);
    if (!payload.empty()) {
      std::memcpy(d.data() + wire::kCaisHeaderBytes, payload.data(), payload.size());
    }
    node_->Send(0, std::move(d), node_->virt_.Extra(h.chunk_id, payload.size()));
  }

 private:
  CaisRankNode* node_;
};

CaisRankNode::CaisRankNode(std::string name, int rank, const client::TransportConfig& config,
                           RankDone done, VirtualChunks virt)
    : Node(std::move(name)),
      rank_(rank),
      config_(config),
      path_(config),
      sink_(std::make_unique<Sink>(this)),
      done_(std::move(done)),
      virt_(virt) {
  layout_.my_index = rank;
  for (int k = 0; k < config.world_size; ++k) {
    layout_.rank_at_index.push_back(k);
    layout_.index_of_rank.push_back(k);
  }
}

CaisRankNode::~CaisRankNode() = default;

void CaisRankNode::Begin(uint32_t seq, std::vector<float>* data) {
  op_ = client::SwitchOp{};
  op_.data = reinterpret_cast<uint8_t*>(data->data());
  op_.count = data->size();
  op_.seq = seq;
  result_ = client::SwitchPhaseResult{};
  core_ = std::make_unique<client::OpCore>(config_, layout_, op_, &path_, &result_);
  core_->Start(sim().now());
  Pump();
}

void CaisRankNode::Receive(dp::PortId, Packet packet) {
  if (!core_ || core_->Finished()) return;  // late results of an operation already done
  core_->OnDatagram(packet, sim().now());
  Pump();
}

void CaisRankNode::Pump() {
  core_->Pump(sim().now(), *sink_);
  if (core_->Finished()) {
    wake_at_ = -1;
    done_(rank_);
    return;
  }
  const TimeNs at = std::max(sim().now(), core_->NextDeadline());
  if (at == wake_at_) return;
  wake_at_ = at;
  client::OpCore* core = core_.get();
  sim().Schedule(at, [this, at, core] {
    // Superseded by a later Pump, or an operation that has ended.
    if (wake_at_ != at || core_.get() != core || core->Finished()) return;
    wake_at_ = -1;
    Pump();
  });
}

// ------------------------------------------------------------- ForwarderNode

namespace {

struct RingWire {
  Be32 dst, step, index, bytes;
};
static_assert(sizeof(RingWire) == kRingHeaderBytes);

void PutRing(const RingHeader& h, uint8_t* out) {
  RingWire w;
  w.dst.set(h.dst);
  w.step.set(h.step);
  w.index.set(h.index);
  w.bytes.set(h.bytes);
  std::memcpy(out, &w, sizeof(w));
}

bool GetRing(const Packet& p, RingHeader* h) {
  if (p.size() < kRingHeaderBytes) return false;
  RingWire w;
  std::memcpy(&w, p.data(), sizeof(w));
  *h = RingHeader{w.dst.value(), w.step.value(), w.index.value(), w.bytes.value()};
  const size_t carried = p.size() - kRingHeaderBytes;  // 0 in timing mode
  return (carried == h->bytes || carried == 0) && h->bytes % sizeof(float) == 0;
}

}  // namespace

void ForwarderNode::Process(dp::PortId, Packet packet) {
  RingHeader h;
  if (!GetRing(packet, &h) || h.dst >= dp::kMaxPorts) {
    ++dropped_;
    return;
  }
  ++forwarded_;
  const auto extra = static_cast<uint32_t>(h.bytes - (packet.size() - kRingHeaderBytes));
  Send(static_cast<dp::PortId>(h.dst), std::move(packet), extra);
}

// -------------------------------------------------------------- RingRankNode

RingRankNode::RingRankNode(std::string name, int rank, int ranks, uint32_t payload_bytes,
                           double link_bps, uint32_t overhead_bytes, TimeNs step_latency_ns,
                           RankDone done)
    : Node(std::move(name)),
      rank_(rank),
      n_(ranks),
      payload_(payload_bytes / 4 * 4),
      link_bps_(link_bps),
      overhead_(overhead_bytes),
      step_latency_(step_latency_ns),
      done_(std::move(done)) {
  if (n_ < 2 || payload_ == 0) throw std::invalid_argument("a ring needs 2 ranks and a payload");
}

std::pair<size_t, size_t> RingRankNode::Slice(uint32_t block, uint32_t index) const {
  const size_t count = count_;
  const size_t b0 = count * block / static_cast<size_t>(n_);
  const size_t b1 = count * (block + 1) / static_cast<size_t>(n_);
  const size_t per = payload_ / sizeof(float);
  const size_t first = b0 + size_t{index} * per;
  return {first, first >= b1 ? 0 : std::min(per, b1 - first)};
}

uint32_t RingRankNode::BlockOf(uint32_t step, int rank) const {
  const int b = ((rank - static_cast<int>(step)) % n_ + n_) % n_;
  return static_cast<uint32_t>(b);
}

void RingRankNode::Begin(std::vector<float>* data, size_t count) {
  data_ = data;
  count_ = count;
  const size_t per = payload_ / sizeof(float);
  const size_t largest = (count + static_cast<size_t>(n_) - 1) / static_cast<size_t>(n_);
  packets_per_block_ = static_cast<uint32_t>(std::max<size_t>(1, (largest + per - 1) / per));
  queue_.clear();
  head_ = 0;
  to_receive_ = 0;
  // Every non-empty packet of the blocks this rank receives, over all steps.
  for (uint32_t s = 0; s < static_cast<uint32_t>(2 * (n_ - 1)); ++s) {
    for (uint32_t j = 0; j < packets_per_block_; ++j) {
      to_receive_ += Slice(BlockOf(s, rank_ - 1), j).second > 0 ? 1 : 0;
    }
  }
  for (uint32_t j = 0; j < packets_per_block_; ++j) {
    if (Slice(BlockOf(0, rank_), j).second > 0) Enqueue({sim().now() + step_latency_, 0, j});
  }
  if (to_receive_ == 0) done_(rank_);
}

void RingRankNode::Enqueue(Ready r) {
  queue_.push_back(r);
  if (!sending_) SendNext();
}

void RingRankNode::SendNext() {
  sending_ = false;
  if (head_ == queue_.size()) {
    queue_.clear();
    head_ = 0;
    return;
  }
  const Ready r = queue_[head_];
  const TimeNs at = std::max({sim().now(), r.at, link_free_at_});
  if (at > sim().now()) {
    sending_ = true;
    sim().Schedule(at, [this] { SendNext(); });
    return;
  }
  ++head_;
  const auto [first, count] = Slice(BlockOf(r.step, rank_), r.index);
  const RingHeader h{static_cast<uint32_t>((rank_ + 1) % n_), r.step, r.index,
                     static_cast<uint32_t>(count * sizeof(float))};
  const uint32_t carried = data_ != nullptr ? h.bytes : 0;
  Packet p(kRingHeaderBytes + carried);
  PutRing(h, p.data());
  if (carried) std::memcpy(p.data() + kRingHeaderBytes, data_->data() + first, carried);
  link_free_at_ = sim().now() +
                  static_cast<TimeNs>(static_cast<double>(kRingHeaderBytes + h.bytes + overhead_) *
                                      8e9 / link_bps_);
  Send(0, std::move(p), h.bytes - carried);
  if (head_ < queue_.size()) {
    sending_ = true;
    sim().Schedule(std::max(link_free_at_, queue_[head_].at), [this] { SendNext(); });
  }
}

void RingRankNode::Receive(dp::PortId, Packet packet) {
  RingHeader h;
  const auto last = static_cast<uint32_t>(2 * (n_ - 1));
  if (to_receive_ == 0 || !GetRing(packet, &h) || h.dst != static_cast<uint32_t>(rank_) ||
      h.step >= last || h.index >= packets_per_block_) {
    ++malformed_;
    return;
  }
  const auto [first, count] = Slice(BlockOf(h.step, rank_ - 1), h.index);
  if (count * sizeof(float) != h.bytes) {
    ++malformed_;
    return;
  }
  if (data_ != nullptr) {
    if (packet.size() != kRingHeaderBytes + h.bytes) {
      ++malformed_;
      return;
    }
    const uint8_t* in = packet.data() + kRingHeaderBytes;
    float* out = data_->data() + first;
    if (h.step < static_cast<uint32_t>(n_ - 1)) {  // reduce-scatter: add
      for (size_t i = 0; i < count; ++i) {
        float v;
        std::memcpy(&v, in + i * sizeof(float), sizeof(float));
        out[i] += v;
      }
    } else {  // all-gather: the reduced block as it is
      std::memcpy(out, in, h.bytes);
    }
  }
  if (h.step + 1 < last) Enqueue({sim().now() + step_latency_, h.step + 1, h.index});
  if (--to_receive_ == 0) done_(rank_);
}

}  // namespace inca::sim
