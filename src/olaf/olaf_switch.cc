#include "inca/olaf/olaf_switch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

using dp::DropReason;
using dp::Outcome;
using dp::PortId;
using dp::TimeNs;

DropReason FromParseError(OlafParseError e) {
  switch (e) {
    case OlafParseError::kOk:
    case OlafParseError::kNotOlaf:
    case OlafParseError::kTooShort: return DropReason::kTooShort;
    case OlafParseError::kBadVersion: return DropReason::kBadVersion;
    case OlafParseError::kUnknownType: return DropReason::kUnknownType;
    case OlafParseError::kUnknownFlags: return DropReason::kUnknownFlags;
    case OlafParseError::kPayloadLenMismatch: return DropReason::kPayloadLenMismatch;
    case OlafParseError::kPayloadMisaligned: return DropReason::kPayloadMisaligned;
    case OlafParseError::kEmptyPayload: return DropReason::kEmptyPayload;
    case OlafParseError::kFragmentOutOfRange: return DropReason::kFragmentOutOfRange;
    case OlafParseError::kZeroMergedCount: return DropReason::kZeroMergedCount;
  }
  return DropReason::kTooShort;
}

absl::Status OlafSwitchConfig::Validate() const {
  if (absl::Status s = queue().Validate(); !s.ok()) return s;
  if (egress_rate_bps > 10'000'000'000'000ull) {
    return absl::InvalidArgumentError(absl::StrCat("egress_rate_bps ", egress_rate_bps,
                                                   " must be at most 10 Tbit/s (0 = unpaced)"));
  }
  if (egress_overhead_bytes > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("egress_overhead_bytes ", egress_overhead_bytes, " must be at most 1024"));
  }
  if (ps_port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps_port ", ps_port, " must be below ", dp::kMaxPorts));
  }
  if (max_workers == 0 || max_workers > (1u << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_workers ", max_workers, " must be in 1..1048576"));
  }
  if (cluster_table_capacity == 0 || cluster_table_capacity > ClusterTable::kMaxCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster_table_capacity ", cluster_table_capacity, " must be in 1..65536"));
  }
  return absl::OkStatus();
}

QueueConfig OlafSwitchConfig::queue() const {
  QueueConfig q;
  q.depth = depth;
  q.max_payload_bytes = max_payload_bytes;
  q.delta_t_ns = delta_t_ns;
  q.tau_ns = tau_ns;
  q.max_clusters = max_clusters;
  return q;
}

absl::Status OlafSwitch::SetRunTimeParams(dp::TimeNs delta_t_ns, dp::TimeNs tau_ns,
                                          uint32_t depth) {
  if (absl::Status s = queue_->SetRunTimeParams(delta_t_ns, tau_ns, depth); !s.ok()) return s;
  config_.delta_t_ns = delta_t_ns;
  config_.tau_ns = tau_ns;
  config_.depth = depth;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OlafSwitch>> OlafSwitch::Create(const OlafSwitchConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<UpdateQueue>> q =
      UpdateQueue::Create(config.policy, config.queue());
  if (!q.ok()) return q.status();
  return std::unique_ptr<OlafSwitch>(new OlafSwitch(config, *std::move(q)));
}

OlafSwitch::OlafSwitch(const OlafSwitchConfig& config, std::unique_ptr<UpdateQueue> queue)
    : config_(config),
      queue_(std::move(queue)),
      cluster_table_(config.cluster_table_capacity),
      out_buf_(kOlafUpdateHeaderBytes + config.max_payload_bytes) {
  routes_.fill(-1);
  workers_.reserve(config.max_workers);
  cluster_ports_.reserve(config.max_clusters);
}

OlafSwitch::~OlafSwitch() = default;

absl::Status OlafSwitch::BindPort(PortId port, const FlowKey& flow) {
  if (port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", port, " must be below ", dp::kMaxPorts));
  }
  flows_[port] = flow;
  return absl::OkStatus();
}

absl::Status OlafSwitch::UnbindPort(PortId port) {
  if (port >= dp::kMaxPorts || !flows_[port].has_value()) {
    return absl::NotFoundError(absl::StrCat("port ", port, " has no bound flow"));
  }
  flows_[port].reset();
  // Its workers are forgotten: the port may next be bound to another peer,
  // which must not receive their MODELs and ACKs. They are learned again
  // from their next update.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second.port == port) {
      PortCount(it->second.cluster_id, port, -1);
      workers_.erase(it++);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

std::optional<FlowKey> OlafSwitch::BoundFlow(PortId port) const {
  if (port >= dp::kMaxPorts) return std::nullopt;
  return flows_[port];
}

absl::Status OlafSwitch::SetPassthroughRoute(PortId in, PortId out) {
  if (in >= dp::kMaxPorts || out >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("ports ", in, " -> ", out, " must be below ", dp::kMaxPorts));
  }
  routes_[in] = out;
  return absl::OkStatus();
}

absl::Status OlafSwitch::ClearPassthroughRoute(PortId in) {
  if (in >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(absl::StrCat("port ", in, " must be below ", dp::kMaxPorts));
  }
  routes_[in] = -1;
  return absl::OkStatus();
}

TimeNs OlafSwitch::NextWakeNs() const {
  return queue_->empty() ? kIdle : link_free_ns_;
}

OlafQueueState OlafSwitch::queue_state(TimeNs now) const {
  OlafQueueState s;
  s.occupancy = queue_->occupancy();
  s.depth = config_.depth;
  s.queue_util = queue_->queue_util();
  s.active_clusters = queue_->ActiveClusters(now);
  s.link_free_ns = link_free_ns_;
  return s;
}

std::optional<OlafClusterStats> OlafSwitch::cluster(uint16_t cluster_id, TimeNs now) const {
  const QueueCounters* q = queue_->cluster(cluster_id);
  if (q == nullptr) return std::nullopt;
  OlafClusterStats s;
  s.cluster_id = cluster_id;
  s.queue = *q;
  s.aom = queue_->aom().Stats(cluster_id, now);
  if (const auto it = cluster_ports_.find(cluster_id); it != cluster_ports_.end()) {
    for (uint32_t n : it->second) s.workers += n;
  }
  return s;
}

std::optional<WorkerRoute> OlafSwitch::worker(uint32_t worker_id) const {
  const auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

void OlafSwitch::ClearWorkers() {
  workers_.clear();
  cluster_ports_.clear();
  all_ports_.fill(0);
}

Outcome OlafSwitch::Drop(DropReason r) {
  ++totals_.dropped;
  ++totals_.drops[static_cast<size_t>(r)];
  return Outcome::Dropped(r);
}

void OlafSwitch::PortCount(uint16_t cluster_id, PortId port, int delta) {
  auto& per_port = cluster_ports_[cluster_id];
  per_port[port] = static_cast<uint32_t>(static_cast<int>(per_port[port]) + delta);
  all_ports_[port] = static_cast<uint32_t>(static_cast<int>(all_ports_[port]) + delta);
}

bool OlafSwitch::Learn(uint32_t worker_id, PortId port, uint16_t cluster_id) {
  const auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    if (workers_.size() >= config_.max_workers) return false;
    workers_.emplace(worker_id, WorkerRoute{port, cluster_id});
    PortCount(cluster_id, port, +1);
    return true;
  }
  WorkerRoute& w = it->second;
  if (w.port != port || w.cluster_id != cluster_id) {  // moved
    PortCount(w.cluster_id, w.port, -1);
    w = WorkerRoute{port, cluster_id};
    PortCount(cluster_id, port, +1);
  }
  return true;
}

void OlafSwitch::Transmit(TimeNs start, size_t bytes, dp::PacketSink& out) {
  out.Emit(config_.ps_port, std::span<const uint8_t>(out_buf_.data(), bytes));
  ++totals_.updates_tx;
  if (start > link_free_ns_) link_frac_ = 0;  // the link was idle
  link_free_ns_ = start;
  const uint64_t rate = config_.egress_rate_bps;
  if (rate == 0) return;
  const uint64_t total =
      (uint64_t{bytes} + config_.egress_overhead_bytes) * 8 * 1'000'000'000ull + link_frac_;
  link_free_ns_ += static_cast<TimeNs>(total / rate);
  link_frac_ = total % rate;
}

void OlafSwitch::Pump(TimeNs now, dp::PacketSink& out) {
  // A queued entry implies the link was busy when it arrived, so each
  // transmission starts exactly when the previous one ends.
  while (!queue_->empty() && link_free_ns_ <= now) {
    const TimeNs start = link_free_ns_;
    const size_t n = queue_->Dequeue(start, out_buf_);
    if (n == 0) break;  // everything left was stale
    Transmit(start, n, out);
  }
}

void OlafSwitch::DoAdvance(TimeNs now, dp::PacketSink& out) {
  Pump(now, out);
  queue_->Expire(now);
}

Outcome OlafSwitch::DoProcess(std::span<const uint8_t> packet, PortId ingress, TimeNs now,
                              dp::PacketSink& out) {
  Pump(now, out);
  if (ingress >= dp::kMaxPorts) return Drop(DropReason::kBadIngressPort);
  if (!HasOlafMagic(packet)) return Passthrough(packet, ingress, out);
  OlafPacket p;
  if (const OlafParseError e = ParseOlaf(packet, &p); e != OlafParseError::kOk) {
    return Drop(FromParseError(e));
  }
  const bool from_ps = ingress == config_.ps_port;
  switch (p.type) {
    case OlafType::kUpdate:
      if (from_ps) return Drop(DropReason::kWrongDirection);
      return OnUpdate(p, ingress, now, out);
    case OlafType::kAck:
      if (!from_ps) return Drop(DropReason::kWrongDirection);
      return OnAck(p, now, out);
    case OlafType::kModel:
      if (!from_ps) return Drop(DropReason::kWrongDirection);
      return OnModel(packet, p, now, out);
  }
  return Drop(DropReason::kUnknownType);
}

Outcome OlafSwitch::OnUpdate(const OlafPacket& p, PortId ingress, TimeNs now, dp::PacketSink& out) {
  ++totals_.updates_rx;
  UpdateHeader h = p.update;
  const std::optional<FlowKey>& flow = flows_[ingress];
  if (h.worker_id == kUnstampedWorker) {
    if (!flow.has_value()) return Drop(DropReason::kUnboundPort);
    h.worker_id = WorkerIdOf(*flow);
  }
  if (const auto c = flow.has_value() ? cluster_table_.Lookup(flow->src_port) : std::nullopt) {
    h.cluster_id = *c;
  } else if (h.cluster_id == kUnassignedCluster) {
    return Drop(DropReason::kUnknownCluster);
  }
  if (!queue_->RegisterCluster(h.cluster_id)) return Drop(DropReason::kClustersExhausted);
  if (!Learn(h.worker_id, ingress, h.cluster_id)) return Drop(DropReason::kWorkersExhausted);

  const bool cut_through = queue_->empty() && link_free_ns_ <= now;
  const EnqueueResult r = queue_->Enqueue(h, p.payload, now);
  if (r.action == EnqueueAction::kDropped) return Drop(r.reason);
  if (cut_through) {
    const size_t n = queue_->Dequeue(now, out_buf_);
    Transmit(now, n, out);
    ++totals_.updates_cut_through;
    return Outcome::Forwarded();
  }
  ++totals_.updates_absorbed;
  return Outcome::Aggregated();
}

Outcome OlafSwitch::OnAck(const OlafPacket& p, TimeNs now, dp::PacketSink& out) {
  const auto it = workers_.find(p.ack.worker_id);
  if (it == workers_.end()) return Drop(DropReason::kUnknownWorker);
  AckHeader a = p.ack;
  const uint32_t mine = queue_->queue_util();
  if (mine > a.queue_util) {
    a.queue_util = mine;
    a.active_clusters =
        static_cast<uint16_t>(std::min<uint32_t>(queue_->ActiveClusters(now), 0xFFFF));
    ++totals_.acks_restamped;
  }
  std::array<uint8_t, kOlafAckBytes> buf;
  SerializeAck(a, buf);
  out.Emit(it->second.port, buf);
  ++totals_.acks_forwarded;
  return Outcome::Forwarded();
}

Outcome OlafSwitch::OnModel(std::span<const uint8_t> packet, const OlafPacket& p, TimeNs now,
                            dp::PacketSink& out) {
  ++totals_.models_rx;
  ps_clock_.OnPsTime(p.model.gen_time_ns, now);
  queue_->set_ps_clock_offset(ps_clock_.offset());
  const std::array<uint32_t, dp::kMaxPorts>* ports = &all_ports_;
  if (p.model.cluster_id != kAllClusters) {
    const auto it = cluster_ports_.find(p.model.cluster_id);
    if (it == cluster_ports_.end()) return Drop(DropReason::kNoRoute);
    ports = &it->second;
  }
  uint64_t copies = 0;
  for (PortId port = 0; port < dp::kMaxPorts; ++port) {
    if ((*ports)[port] == 0) continue;
    out.Emit(port, packet);
    ++copies;
  }
  if (copies == 0) return Drop(DropReason::kNoRoute);
  totals_.model_copies_tx += copies;
  return Outcome::Forwarded();
}

Outcome OlafSwitch::Passthrough(std::span<const uint8_t> packet, PortId ingress,
                                dp::PacketSink& out) {
  int egress = routes_[ingress];
  if (egress < 0 && ingress != config_.ps_port) egress = config_.ps_port;
  if (egress < 0) return Drop(DropReason::kNoRoute);
  out.Emit(static_cast<PortId>(egress), packet);
  ++totals_.passthrough;
  return Outcome::Forwarded();
}

}  // namespace inca::olaf
