#include "inca/sim/olaf_nodes.h"

#include <cmath>

namespace inca::sim {

namespace {
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}
}  // namespace

absl::StatusOr<std::unique_ptr<WorkerLoop>> WorkerLoop::Create(const WorkerNodeConfig& config,
                                                               WorkerHost* host) {
  olaf::WorkerOptions o;
  o.cluster_id = config.cluster_id;
  o.worker_id = config.worker_id;
  o.send_control = config.send_control;
  o.seed = config.seed;
  o.clock = config.clock;
  auto core = olaf::WorkerCore::Create(o);
  if (!core.ok()) return core.status();
  return std::unique_ptr<WorkerLoop>(new WorkerLoop(config, host, *std::move(core)));
}

WorkerLoop::WorkerLoop(const WorkerNodeConfig& config, WorkerHost* host,
                       std::unique_ptr<olaf::WorkerCore> core)
    : config_(config),
      host_(host),
      core_(std::move(core)),
      rng_(config.seed),
      grad_(config.elements, 0.001f) {}

TimeNs WorkerLoop::Jitter() {
  return config_.jitter_ns > 0
             ? static_cast<TimeNs>(Uniform01(rng_) * static_cast<double>(config_.jitter_ns))
             : 0;
}

TimeNs WorkerLoop::LocalNow() {
  const TimeNs t = host_->Now();
  return t + config_.clock_offset_ns +
         static_cast<TimeNs>(static_cast<double>(t) * config_.clock_drift_ppm * 1e-6);
}

void WorkerLoop::At(TimeNs at) {
  if (at < config_.stop_ns) host_->At(at, [this] { Tick(); });
}

void WorkerLoop::Start() {
  At(config_.phase_ns + Jitter());
}

void WorkerLoop::Tick() {
  const TimeNs now = host_->Now();
  uint32_t version = 0;
  if (const olaf::AssembledModel* m = core_->latest_model()) version = m->model_version;
  if (config_.compute) config_.compute(grad_, version);
  auto s = core_->GenerateWithDraw(grad_, version, LocalNow(), Uniform01(rng_));
  const bool sent = s.ok() && s->sent;
  if (sent) {
    for (auto& d : s->datagrams) {
      bytes_sent_ += d.size() + config_.frame_overhead_bytes;
      host_->SendUp(std::move(d));
    }
  }
  if (config_.closed_loop && sent) {
    waiting_ = true;
    wait_version_ = version;
    const uint64_t token = ++wait_token_;
    host_->At(now + std::max<TimeNs>(config_.model_wait_ns, 1), [this, token] {
      if (waiting_ && wait_token_ == token) Resume(/*timed_out=*/true);
    });
    return;
  }
  if (config_.closed_loop) {  // send control held it back: roll out again
    ScheduleNext(now);
    return;
  }
  if (config_.dist == PeriodDist::kExponential) {
    ScheduleNext(now);
  } else {
    // Fixed periods on a grid (phase + k·period), jitter drawn afresh each
    // time: workers that share a phase stay in step.
    ++ticks_;
    At(config_.phase_ns + ticks_ * config_.period_ns + Jitter());
  }
}

// The next rollout takes one period (exponential or fixed) plus jitter from `after`.
void WorkerLoop::ScheduleNext(TimeNs after) {
  const TimeNs jitter = Jitter();  // drawn before the gap, as runs have always drawn them
  TimeNs gap = config_.period_ns;
  if (config_.dist == PeriodDist::kExponential) {
    gap = static_cast<TimeNs>(-std::log(1.0 - Uniform01(rng_)) *
                              static_cast<double>(config_.period_ns));
  }
  At(after + std::max<TimeNs>(gap + jitter, 1));
}

void WorkerLoop::Resume(bool timed_out) {
  waiting_ = false;
  ++wait_token_;
  if (timed_out) ++waits_timed_out_;
  ScheduleNext(host_->Now());
}

void WorkerLoop::OnDatagram(std::span<const uint8_t> datagram) {
  core_->OnDatagram(datagram, LocalNow());
  if (!waiting_) return;
  if (const olaf::AssembledModel* m = core_->latest_model();
      m && m->model_version > wait_version_) {
    Resume(/*timed_out=*/false);
  }
}

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Create(std::string name,
                                                               const WorkerNodeConfig& config) {
  std::unique_ptr<WorkerNode> node(new WorkerNode(std::move(name)));
  auto loop = WorkerLoop::Create(config, node.get());
  if (!loop.ok()) return loop.status();
  node->loop_ = *std::move(loop);
  return node;
}

absl::StatusOr<std::unique_ptr<PsNode>> PsNode::Create(std::string name, PsNodeConfig config) {
  if (!config.ps.apply) config.ps.apply = [](const olaf::AppliedUpdate&) {};
  auto core = olaf::PsCore::Create(std::move(config.ps));
  if (!core.ok()) return core.status();
  return std::unique_ptr<PsNode>(new PsNode(std::move(name), *std::move(core)));
}

void PsNode::Receive(dp::PortId port, Packet packet) {
  olaf::PsResult r = core_->OnDatagram(packet, sim().now());
  if (!r.ack.empty()) Send(port, std::move(r.ack));
  for (auto& m : r.models) Send(port, std::move(m));
}

class SwitchNode::Sink final : public dp::PacketSink {
 public:
  explicit Sink(SwitchNode* node) : node_(node) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    node_->Send(egress, Packet(packet.begin(), packet.end()));
  }

 private:
  SwitchNode* node_;
};

absl::StatusOr<std::unique_ptr<SwitchNode>> SwitchNode::Create(std::string name,
                                                               const olaf::OlafSwitchConfig& config,
                                                               TimeNs clock_offset_ns) {
  auto p = olaf::OlafSwitch::Create(config);
  if (!p.ok()) return p.status();
  return std::unique_ptr<SwitchNode>(
      new SwitchNode(std::move(name), *std::move(p), clock_offset_ns));
}

SwitchNode::SwitchNode(std::string name, std::unique_ptr<olaf::OlafSwitch> program,
                       TimeNs clock_offset_ns)
    : Node(std::move(name)),
      program_(std::move(program)),
      sink_(std::make_unique<Sink>(this)),
      clock_offset_ns_(clock_offset_ns) {}

SwitchNode::~SwitchNode() = default;

void SwitchNode::Receive(dp::PortId port, Packet packet) {
  program_->Process(packet, port, sim().now() + clock_offset_ns_, *sink_);
  ArmWake();
}

void SwitchNode::ArmWake() {
  TimeNs next = program_->NextWakeNs();
  if (next == olaf::OlafSwitch::kIdle) return;
  next -= clock_offset_ns_;  // on the simulator's clock
  if (next >= wake_at_) return;
  wake_at_ = next;
  sim().Schedule(next, [this, next] {
    if (wake_at_ != next) return;  // superseded by an earlier wake
    Wake();
  });
}

void SwitchNode::Wake() {
  wake_at_ = olaf::OlafSwitch::kIdle;
  program_->Advance(sim().now() + clock_offset_ns_, *sink_);
  ArmWake();
}

void ClusterEdge::Receive(dp::PortId port, Packet p) {
  olaf::OlafPacket pkt;
  const bool ok = olaf::ParseOlaf(p, &pkt) == olaf::OlafParseError::kOk;
  if (port != 0) {  // from a worker: learn its port, pass everything up
    if (ok && pkt.type == olaf::OlafType::kUpdate) by_worker_[pkt.update.worker_id] = port;
    Send(0, std::move(p));
    return;
  }
  if (!ok) return;
  if (pkt.type == olaf::OlafType::kAck) {
    if (auto it = by_worker_.find(pkt.ack.worker_id); it != by_worker_.end()) {
      Send(it->second, std::move(p));
    }
  } else if (pkt.type == olaf::OlafType::kModel) {
    for (dp::PortId q = 1; q <= workers_; ++q) Send(q, p);
  }
}

PoissonSource::PoissonSource(std::string name, PoissonSourceConfig config)
    : Node(std::move(name)), config_(std::move(config)), rng_(config_.seed) {}

void PoissonSource::Start() {
  Next();
}

void PoissonSource::Next() {
  if (sent_ >= config_.max_updates) return;
  const double gap_s = -std::log(1.0 - Uniform01(rng_)) / config_.rate_per_s;
  sim().ScheduleIn(std::max<TimeNs>(1, static_cast<TimeNs>(gap_s * 1e9)), [this] {
    const uint32_t bytes = config_.size_bytes ? config_.size_bytes(rng_) : 4000;
    olaf::UpdateHeader h;
    h.cluster_id = 0;
    h.worker_id = 1;
    h.update_id = static_cast<uint32_t>(sent_);
    h.gen_time_ns = static_cast<uint64_t>(sim().now());
    std::vector<uint8_t> payload(bytes, 0);
    Send(0, olaf::BuildUpdate(h, payload));
    ++sent_;
    Next();
  });
}

}  // namespace inca::sim
