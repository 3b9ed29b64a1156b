#include "sim/cais_nodes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "inca/util/endian.h"
#include "inca/wire/mgmt.h"
#include "util/spdlog_event_log.h"

namespace inca::sim {

uint32_t VirtualChunks::Extra(uint32_t chunk_id, size_t payload_bytes) const {
  if (chunk_size == 0 || payload_bytes != sizeof(float)) return 0;
  const uint32_t j = block_chunks != 0 ? chunk_id % block_chunks : chunk_id;
  const uint64_t first = uint64_t{j} * chunk_size;
  if (first >= bytes) return 0;
  const uint64_t stands_for = std::min<uint64_t>(chunk_size, bytes - first);
  return static_cast<uint32_t>(stands_for - sizeof(float));
}

void VirtualLedger::Put(uint32_t seq, const VirtualChunks& v) {
  for (auto& [s, k] : kept_) {
    if (s == seq) {
      k = v;
      return;
    }
  }
  if (kept_.size() >= kKept) kept_.pop_front();
  kept_.emplace_back(seq, v);
}

uint32_t VirtualLedger::Extra(uint32_t seq, uint32_t chunk_id, size_t payload_bytes) const {
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    if (it->first == seq) return it->second.Extra(chunk_id, payload_bytes);
  }
  return 0;
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

// ----------------------------------------------------- background traffic

namespace {

struct RingWire {
  Be32 dst, step, index, bytes;
};
static_assert(sizeof(RingWire) == kRingHeaderBytes);

}  // namespace

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

bool IsBackground(const Packet& packet) {
  RingHeader h;
  return packet.size() == kRingHeaderBytes && GetRing(packet, &h) && h.step == kBackgroundStep;
}

// ------------------------------------------------------------ BackgroundNode

BackgroundNode::BackgroundNode(std::string name, int ranks, double link_bps,
                               BackgroundTraffic traffic, uint32_t payload, uint32_t overhead_bytes,
                               uint64_t seed)
    : Node(std::move(name)),
      ranks_(ranks),
      flow_bps_(traffic.flow_bps > 0 ? traffic.flow_bps : link_bps),
      flows_per_s_(traffic.load * traffic.share * link_bps * ranks /
                   (8.0 * static_cast<double>(traffic.flow_bytes))),
      traffic_(traffic),
      payload_(payload / 4 * 4),
      overhead_(overhead_bytes),
      rng_(seed) {}

absl::StatusOr<std::unique_ptr<BackgroundNode>> BackgroundNode::Create(
    std::string name, int ranks, double link_bps, BackgroundTraffic traffic, uint32_t payload,
    uint32_t overhead_bytes, uint64_t seed) {
  if (ranks < 1 || payload / 4 * 4 == 0 || traffic.flow_bytes == 0) {
    return absl::InvalidArgumentError(
        "background traffic needs ranks, a payload of at least 4 bytes and a flow size");
  }
  return std::unique_ptr<BackgroundNode>(
      new BackgroundNode(std::move(name), ranks, link_bps, traffic, payload, overhead_bytes, seed));
}

void BackgroundNode::Start() {
  if (flows_per_s_ > 0) Arrive();
}

// Schedules the next flow's arrival (exponential gaps), and starts this one
// unless it is the first call.
void BackgroundNode::Arrive() {
  std::exponential_distribution<double> gap(flows_per_s_);
  const auto at = sim().now() + static_cast<TimeNs>(std::llround(gap(rng_) * 1e9));
  sim().Schedule(at, [this] {
    ++flows_;
    std::uniform_int_distribution<int> pick(0, ranks_ - 1);
    SendFlow(static_cast<uint32_t>(pick(rng_)), traffic_.flow_bytes);
    Arrive();
  });
}

void BackgroundNode::SendFlow(uint32_t dst, uint64_t left) {
  const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(payload_, left) / 4 * 4);
  if (bytes == 0) return;
  Packet p(kRingHeaderBytes);
  PutRing(RingHeader{dst, kBackgroundStep, 0, bytes}, p.data());
  Send(0, std::move(p), bytes);
  ++packets_;
  const auto gap = static_cast<TimeNs>(
      std::llround(static_cast<double>(kRingHeaderBytes + bytes + overhead_) * 8e9 / flow_bps_));
  if (left > bytes) {
    sim().Schedule(sim().now() + gap, [this, dst, rest = left - bytes] { SendFlow(dst, rest); });
  }
}

// ------------------------------------------------------------ CaisSwitchNode

// The dispatcher's output onto the simulated links: a switch port's packets
// to the link whose endpoint holds the port, a management reply to the link
// it came from. Also the trace, and the timing mode's wire charge.
class CaisSwitchNode::Output final : public switchd::CaisDispatcher::Output {
 public:
  explicit Output(CaisSwitchNode* node) : node_(node) {}
  // A result's payload is copied once, straight into the simulated packet.
  void ToPort(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
              uint64_t /*share*/) override {
    Packet packet;
    packet.reserve(head.size() + payload.size());
    packet.insert(packet.end(), head.begin(), head.end());
    packet.insert(packet.end(), payload.begin(), payload.end());
    if (node_->trace_) node_->trace_(false, port, packet);
    uint32_t extra = 0;
    wire::CaisPacketView v;
    if (node_->ledger_ != nullptr && wire::ParseCais(packet, &v) == wire::CaisParseError::kOk) {
      extra = node_->ledger_->Extra(v.header.seq_num, v.header.chunk_id, v.payload.size());
    }
    const int link = node_->LinkOf(port);
    if (link < 0) return;  // the port's endpoint left (the reducer counts its output)
    node_->Send(static_cast<dp::PortId>(link), std::move(packet), extra);
  }
  void Reply(std::span<const uint8_t> mgmt) override {
    node_->Send(from, Packet(mgmt.begin(), mgmt.end()));
  }
  void Ingress(dp::PortId port, std::span<const uint8_t> data) override {
    if (node_->trace_) node_->trace_(true, port, data);
  }
  dp::PortId from = 0;  // the link of the datagram being handled

 private:
  CaisSwitchNode* node_;
};

absl::StatusOr<std::unique_ptr<CaisSwitchNode>> CaisSwitchNode::Create(
    std::string name, const cais::CaisConfig& config, int ranks,
    std::shared_ptr<const VirtualLedger> ledger, SwitchPipeline pipeline) {
  if (ranks < 1 || ranks > cais::kMaxGroupMembers) {
    return absl::InvalidArgumentError(absl::StrCat("a CAIS switch node needs 1..",
                                                   cais::kMaxGroupMembers, " ranks, got ", ranks));
  }
  auto r = cais::CaisReducer::Create(config);
  if (!r.ok()) return r.status();
  // One group (0) of every port, any operation: what a JOIN installs; link
  // L is switch port L.
  cais::PortMask ports;
  for (int p = 0; p < ranks; ++p) ports.add(static_cast<dp::PortId>(p));
  const cais::Rule rule{cais::RuleKey{0, std::nullopt, std::nullopt}, ports, ports, std::nullopt};
  if (absl::Status st = (*r)->rules().Add(rule); !st.ok()) return st;
  std::unique_ptr<CaisSwitchNode> node(
      new CaisSwitchNode(std::move(name), ranks, *std::move(r), std::move(ledger), pipeline));
  for (int l = 0; l < ranks; ++l) {
    if (absl::Status st = node->ports_->AddStatic(static_cast<dp::PortId>(l), HostEndpoint(l));
        !st.ok()) {
      return st;
    }
  }
  return node;
}

CaisSwitchNode::CaisSwitchNode(std::string name, int ranks,
                               std::unique_ptr<cais::CaisReducer> reducer,
                               std::shared_ptr<const VirtualLedger> ledger, SwitchPipeline pipeline)
    : PipelinedSwitch(std::move(name), pipeline),
      ranks_(ranks),
      reducer_(std::move(reducer)),
      ports_(std::make_unique<membership::PortTable>()),
      output_(std::make_unique<Output>(this)),
      ledger_(std::move(ledger)) {
  for (int l = 0; l < ranks; ++l) {
    endpoint_of_.push_back(HostEndpoint(l));
    link_of_.emplace(HostEndpoint(l), l);
  }
  dispatcher_ = std::make_unique<switchd::CaisDispatcher>(
      reducer_.get(), ports_.get(), switchd::DispatcherOptions{.log = &ProcessEventLog()});
}

CaisSwitchNode::~CaisSwitchNode() = default;

void CaisSwitchNode::Process(dp::PortId port, Packet packet) {
  // Not a rank's port, or background on a fabric: forwarded as is.
  if (port >= ranks_ || (routes_ != nullptr && IsBackground(packet))) {
    ForwardBackground(port, std::move(packet));
    return;
  }
  // Chunk timeouts are driven by the packets that arrive.
  dispatcher_->Advance(sim().now(), *output_);
  output_->from = port;
  dispatcher_->OnDatagram(packet, endpoint_of_[port], sim().now(), *output_);
}

void CaisSwitchNode::ForwardBackground(dp::PortId port, Packet packet) {
  RingHeader h;
  if (!GetRing(packet, &h) || h.step != kBackgroundStep ||
      (routes_ != nullptr ? !routes_->Has(h.dst) : h.dst >= static_cast<uint32_t>(ranks_))) {
    ++background_malformed_;
    return;
  }
  ++background_forwarded_;
  const dp::PortId out = routes_ ? routes_->Pick(port, h.dst) : static_cast<dp::PortId>(h.dst);
  Send(out, std::move(packet), h.bytes);
}

net::Endpoint CaisSwitchNode::HostEndpoint(int link) {
  // 198.18.0.0/15, the benchmarking range: one address per host link.
  return *net::Endpoint::Parse(absl::StrCat("198.18.", link / 256, ".", link % 256, ":7000"));
}

void CaisSwitchNode::FormGroups(uint32_t seq_start, TimeNs lease_ns) {
  reducer_->rules().Delete(cais::RuleKey{0, std::nullopt, std::nullopt}).IgnoreError();
  dispatcher_.reset();
  ports_ = std::make_unique<membership::PortTable>();
  dispatcher_ = std::make_unique<switchd::CaisDispatcher>(
      reducer_.get(), ports_.get(),
      switchd::DispatcherOptions{
          .seq_start = seq_start, .lease = lease_ns, .log = &ProcessEventLog()});
  formed_ = true;
}

void CaisSwitchNode::SetPeers(const std::vector<net::Endpoint>& peers, const net::Endpoint& self) {
  const size_t n = std::min(peers.size(), endpoint_of_.size());
  for (size_t l = 0; l < n; ++l) link_of_.erase(endpoint_of_[l]);  // all first: names move
  for (size_t l = 0; l < n; ++l) {
    endpoint_of_[l] = peers[l];
    link_of_[peers[l]] = static_cast<int>(l);
  }
  self_ = self;
}

void CaisSwitchNode::Execute(const std::function<void(Control&)>& fn) {
  Control c{*reducer_, *ports_, dispatcher_->groups(), config_, sim().now()};
  fn(c);
}

counters::SwitchCounters CaisSwitchNode::counters() const {
  counters::SwitchCounters c;
  c.ports_bound = ports_->size();
  switchd::FillDispatcherCounters(*dispatcher_, &c);
  return c;
}

const membership::GroupManager* CaisSwitchNode::groups() const {
  return formed_ ? &dispatcher_->groups() : nullptr;
}
uint64_t CaisSwitchNode::unknown_sender() const {
  return dispatcher_->counters().unknown_sender;
}
uint64_t CaisSwitchNode::mgmt_malformed() const {
  return dispatcher_->counters().mgmt_malformed;
}

int CaisSwitchNode::LinkOf(dp::PortId port) const {
  const net::Endpoint* e = ports_->endpoint(port);
  if (e == nullptr) return -1;
  auto it = link_of_.find(*e);
  return it == link_of_.end() ? -1 : it->second;
}

// -------------------------------------------------------------- CaisRankNode

// The client cores' datagrams onto the rank's link: data (OpCore, with
// the timing mode's wire charge) and management (SessionCore).
class CaisRankLoop::Sink final : public client::DatagramSink, public client::MgmtSink {
 public:
  explicit Sink(CaisRankLoop* loop) : loop_(loop) {}
  void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
    loop_->host_->SendDatagram(wire::SerializeCais(h, payload),
                               loop_->virt_.Extra(h.chunk_id, payload.size()));
  }
  void Send(std::span<const uint8_t> mgmt) override {
    loop_->host_->SendDatagram(Packet(mgmt.begin(), mgmt.end()), 0);
  }

 private:
  CaisRankLoop* loop_;
};

namespace {

client::SessionConfig RankSession(int rank, const client::TransportConfig& config) {
  client::SessionConfig s;
  s.transport = config;
  s.rank = rank;
  return s;
}

}  // namespace

CaisRankLoop::CaisRankLoop(RankHost* host, int rank, const client::TransportConfig& config,
                           RankDone done, VirtualChunks virt, std::shared_ptr<VirtualLedger> ledger)
    : host_(host),
      session_(RankSession(rank, config)),
      path_(config),
      sink_(std::make_unique<Sink>(this)),
      done_(std::move(done)),
      whole_virt_(virt),
      virt_(virt),
      ledger_(std::move(ledger)) {}

CaisRankLoop::~CaisRankLoop() = default;

absl::Status CaisRankLoop::Begin(uint32_t seq, wire::CaisOp op, std::vector<float>* in,
                                 std::vector<float>* out) {
  if (op != wire::CaisOp::kAllReduce && op != wire::CaisOp::kReduceScatter &&
      op != wire::CaisOp::kAllGather) {
    return absl::InvalidArgumentError(
        absl::StrCat("a simulated rank runs all-reduce, reduce-scatter or all-gather, not op ",
                     static_cast<int>(op)));
  }
  if (op != wire::CaisOp::kAllReduce && out == nullptr) {
    return absl::InvalidArgumentError("reduce-scatter and all-gather need an output");
  }
  Launch(seq, op, in, out);
  return absl::OkStatus();
}

void CaisRankLoop::Launch(uint32_t seq, wire::CaisOp op, std::vector<float>* in,
                          std::vector<float>* out) {
  whole_ = client::SwitchOp{};
  whole_.op = op;
  block_ = op == wire::CaisOp::kReduceScatter ? out->size() : in->size();
  whole_.count = block_;
  if (op == wire::CaisOp::kAllReduce) {
    whole_.data = reinterpret_cast<uint8_t*>(in->data());
  } else {
    whole_.in = reinterpret_cast<const uint8_t*>(in->data());
    whole_.out = reinterpret_cast<uint8_t*>(out->data());
    whole_.block_stride_bytes = block_ * sizeof(float);
  }
  offset_ = 0;
  next_seq_ = seq;
  total_ = client::SwitchPhaseResult{};
  StartPiece();
}

// As the Communicator runs an operation of more than 65,535 chunks: in
// pieces (client::PieceElements), one after the other, each its own
// sequence number. In timing mode an element is a chunk, and the piece's
// chunks stand for its share of the block's bytes.
void CaisRankLoop::StartPiece() {
  const bool blocked = whole_.op != wire::CaisOp::kAllReduce;
  const client::TransportConfig& config = session_.config().transport;
  const size_t per = std::max<size_t>(1, config.chunk_size / sizeof(float));
  const size_t piece = client::PieceElements(whole_, config.chunk_size, config.world_size);
  const size_t count = std::min(piece, block_ - offset_);
  if (whole_virt_.chunk_size != 0) {
    const uint64_t first = uint64_t{offset_} * whole_virt_.chunk_size;
    virt_.bytes = std::min<uint64_t>(uint64_t{piece / per} * whole_virt_.chunk_size,
                                     whole_virt_.bytes - std::min(first, whole_virt_.bytes));
    virt_.block_chunks = blocked ? static_cast<uint32_t>((count + per - 1) / per) : 0;
  }
  op_ = client::PieceOf(whole_, offset_, count);
  op_.seq = next_seq_++;
  if (ledger_ != nullptr && virt_.chunk_size != 0) ledger_->Put(op_.seq, virt_);
  result_ = client::SwitchPhaseResult{};
  core_ = session_.StartOp(op_, &path_, &result_, host_->Now());
  Pump();
}

void CaisRankLoop::EndPiece() {
  total_.have.insert(total_.have.end(), result_.have.begin(), result_.have.end());
  total_.total_chunks += result_.total_chunks;
  client::AddCounters(result_, &total_);
  offset_ += op_.count;
}

void CaisRankLoop::JoinFirst(uint64_t job, RankDone joined, uint8_t group) {
  client::SessionConfig s = session_.config();
  s.job = job;
  s.transport.group_id = group;
  session_ = client::SessionCore(s);
  joining_ = true;
  on_joined_ = std::move(joined);
}

void CaisRankLoop::Start() {
  if (!joining_) return;
  session_.StartJoin(host_->Now(), *sink_);
  host_->At(host_->Now() + 20 * dp::kNsPerMs, [this] { JoinTick(); });
}

void CaisRankLoop::JoinTick() {
  if (session_.state() != client::SessionCore::State::kJoining) return;
  const TimeNs next = session_.JoinTick(host_->Now(), *sink_);
  host_->At(next, [this] { JoinTick(); });
}

void CaisRankNode::Receive(dp::PortId, Packet packet) {
  if (IsBackground(packet)) {
    ++background_;
    return;
  }
  loop_.OnDatagram(packet);
}

void CaisRankLoop::OnDatagram(std::span<const uint8_t> packet) {
  const bool was_joining = session_.state() == client::SessionCore::State::kJoining;
  const bool running = core_ && !core_->Finished();  // else late, or early for the next piece
  if (session_.OnDatagram(packet, host_->Now(), core_.get())) {
    if (was_joining && session_.formed()) {
      next_seq_ = session_.seq_base() + 1;
      if (on_joined_) on_joined_(session_.config().rank);
    }
    return;
  }
  if (running) Pump();
}

void CaisRankLoop::Pump() {
  core_->Pump(host_->Now(), *sink_);
  if (core_->Finished()) {
    wake_at_ = -1;
    EndPiece();
    if (offset_ < block_) {
      StartPiece();
      return;
    }
    total_.complete =
        std::all_of(total_.have.begin(), total_.have.end(), [](uint8_t h) { return h != 0; });
    done_(session_.config().rank);
    return;
  }
  Arm();
}

// One wake per rank in the queue: a deadline that moves later (each ACK
// moves the oldest chunk's) is left to the wake already queued, which
// looks again when it fires; only an earlier one queues another. (A wake
// per move would leave a stale event per datagram in the queue.)
void CaisRankLoop::Arm() {
  const TimeNs at = std::max(host_->Now(), core_->NextDeadline());
  if (wake_at_ >= 0 && wake_at_ <= at) return;
  wake_at_ = at;
  client::OpCore* core = core_.get();
  host_->At(at, [this, at, core] {
    // Superseded by an earlier wake, or an operation that has ended.
    if (wake_at_ != at || core_.get() != core || core->Finished()) return;
    wake_at_ = -1;
    if (core->NextDeadline() > host_->Now()) {
      Arm();  // moved on since: not due yet
      return;
    }
    Pump();
  });
}

// ------------------------------------------------------------- ForwarderNode

void ForwarderNode::Process(dp::PortId port, Packet packet) {
  RingHeader h;
  if (!GetRing(packet, &h) || (routes_ ? !routes_->Has(h.dst) : h.dst >= dp::kMaxPorts)) {
    ++dropped_;
    return;
  }
  ++forwarded_;
  const auto extra = static_cast<uint32_t>(h.bytes - (packet.size() - kRingHeaderBytes));
  const dp::PortId out = routes_ ? routes_->Pick(port, h.dst) : static_cast<dp::PortId>(h.dst);
  Send(out, std::move(packet), extra);
}

}  // namespace inca::sim
