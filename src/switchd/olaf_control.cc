#include "switchd/olaf_control.h"

#include "absl/strings/str_cat.h"
#include "switchd/string_compat.h"

namespace inca::switchd {

absl::Status OlafControl::NotCais() const {
  return control::WrongProgram(
      server_->config().program.policy == olaf::QueuePolicy::kFifo ? "fifo" : "olaf", "cais");
}

absl::StatusOr<std::vector<control::PortInfo>> OlafControl::ListPorts() {
  std::vector<control::PortInfo> out;
  server_->Execute([&](OlafServer::Control& c) {
    for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
      if (const net::Endpoint* e = c.ports.endpoint(p)) {
        out.push_back({p, e->ToString(), c.ports.is_static(p)});
      }
    }
  });
  return out;
}

absl::StatusOr<int> OlafControl::ReleasePort(uint16_t port) {
  if (port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", port, " is out of range; ports are 0..", dp::kMaxPorts - 1));
  }
  bool released = false;
  server_->Execute([&](OlafServer::Control& c) {
    const auto p = static_cast<dp::PortId>(port);
    released = c.ports.Remove(p);
    if (released) (void)c.program.UnbindPort(p);  // the peer is bound again by its next datagram
  });
  if (!released) return absl::NotFoundError(absl::StrCat("port ", port, " is not bound"));
  return 0;
}

absl::StatusOr<std::map<std::string, std::string>> OlafControl::GetConfig() {
  const OlafServerConfig& c = server_->config();
  return std::map<std::string, std::string>{
      {"program", std::string(olaf::ToString(c.program.policy))},
      {"ps", c.ps},
      {"depth", absl::StrCat(c.program.depth)},
      {"delta_t_ms", absl::StrCat(static_cast<double>(c.program.delta_t_ns) / 1e6)},
      {"tau_ms", absl::StrCat(static_cast<double>(c.program.tau_ns) / 1e6)},
      {"egress_rate_bps", absl::StrCat(c.program.egress_rate_bps)},
      {"max_payload_bytes", absl::StrCat(c.program.max_payload_bytes)},
      {"max_workers", absl::StrCat(c.program.max_workers)},
      {"max_clusters", absl::StrCat(c.program.max_clusters)},
      {"lease_ms", absl::StrCat(c.lease_ms)},
  };
}

absl::Status OlafControl::SetConfig(const std::map<std::string, std::string>& values) {
  auto current = GetConfig();
  for (const auto& [k, v] : values) {
    if (current->count(k) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", k,
          "'; an OLAF switch has program, ps, depth, delta_t_ms, tau_ms, egress_rate_bps, "
          "max_payload_bytes, max_workers, max_clusters, lease_ms"));
    }
  }
  return absl::FailedPreconditionError(
      "OLAF switch settings are fixed while it runs; restart inca-switchd with the new values "
      "(the cluster table changes at run time: SetClusterMapping / olaf-cli clusters set)");
}

absl::StatusOr<control::Stats> OlafControl::GetStats() {
  const OlafServerCounters sc = server_->counters();
  control::Stats st;
  st.rx_packets = sc.program.rx_packets;
  st.tx_packets = sc.program.tx_packets;
  st.unknown_sender = sc.ports_exhausted;
  st.conserved = sc.Conserved();
  for (size_t i = 1; i < dp::kDropReasonCount; ++i) {
    if (sc.program.drops_by_reason[i] != 0) {
      st.drops[std::string(dp::ToString(static_cast<dp::DropReason>(i)))] =
          sc.program.drops_by_reason[i];
    }
  }
  return st;
}

absl::Status OlafControl::SetClusterMapping(uint16_t src_port, uint16_t cluster_id) {
  absl::Status s;
  server_->Execute(
      [&](OlafServer::Control& c) { s = c.program.cluster_table().Set(src_port, cluster_id); });
  return s;
}

absl::Status OlafControl::DeleteClusterMapping(uint16_t src_port) {
  absl::Status s;
  server_->Execute([&](OlafServer::Control& c) { s = c.program.cluster_table().Erase(src_port); });
  return s;
}

absl::StatusOr<std::vector<control::ClusterMapping>> OlafControl::ListClusterMappings() {
  std::vector<control::ClusterMapping> out;
  server_->Execute([&](OlafServer::Control& c) {
    for (const olaf::ClusterMapping& m : c.program.cluster_table().Dump()) {
      out.push_back({m.udp_port, m.cluster_id});
    }
  });
  return out;
}

absl::StatusOr<control::OlafStats> OlafControl::GetOlafStats() {
  control::OlafStats st;
  server_->Execute([&](OlafServer::Control& c) {
    const olaf::OlafSwitch& p = c.program;
    const olaf::OlafSwitchConfig& cfg = p.config();
    const olaf::OlafQueueState q = p.queue_state(c.now);
    st.policy = std::string(p.name());
    st.depth = q.depth;
    st.occupancy = q.occupancy;
    st.queue_util = static_cast<double>(q.queue_util) / 0xFFFFFF;
    st.active_clusters = q.active_clusters;
    st.egress_rate_bps = cfg.egress_rate_bps;
    st.delta_t_ms = static_cast<double>(cfg.delta_t_ns) / 1e6;
    st.tau_ms = static_cast<double>(cfg.tau_ns) / 1e6;
    const olaf::OlafCounters& t = p.totals();
    st.updates_rx = t.updates_rx;
    st.updates_absorbed = t.updates_absorbed;
    st.updates_cut_through = t.updates_cut_through;
    st.updates_tx = t.updates_tx;
    st.acks_forwarded = t.acks_forwarded;
    st.models_rx = t.models_rx;
    st.model_copies_tx = t.model_copies_tx;
    st.passthrough = t.passthrough;
    st.dropped = t.dropped;
    for (size_t r = 0; r < olaf::kOlafDropReasonCount; ++r) {
      if (t.drops[r] != 0) {
        st.drops[std::string(olaf::ToString(static_cast<olaf::OlafDropReason>(r)))] = t.drops[r];
      }
    }
    st.conserved = p.counters().Conserved() && p.queue().totals().Conserved();
    for (uint16_t id : p.cluster_ids()) {
      const std::optional<olaf::OlafClusterStats> cs = p.cluster(id, c.now);
      if (!cs) continue;
      control::OlafClusterInfo o;
      o.cluster_id = id;
      o.workers = cs->workers;
      o.offered = cs->queue.offered;
      o.enqueued = cs->queue.enqueued;
      o.merged = cs->queue.merged;
      o.dequeued = cs->queue.dequeued;
      o.dequeued_worker_updates = cs->queue.dequeued_worker_updates;
      o.occupancy = cs->queue.occupancy;
      for (size_t r = 0; r < olaf::kQueueDropReasonCount; ++r) {
        if (cs->queue.dropped[r] != 0) {
          o.dropped += cs->queue.dropped[r];
          o.drops[std::string(olaf::ToString(static_cast<olaf::QueueDropReason>(r)))] =
              cs->queue.dropped[r];
        }
      }
      if (cs->aom) {
        o.aom_valid = true;
        o.aom_current_ms = static_cast<double>(cs->aom->current_ns) / 1e6;
        o.aom_peak_ms = static_cast<double>(cs->aom->peak_max_ns) / 1e6;
        o.aom_average_ms = cs->aom->average_ns / 1e6;
      }
      st.clusters.push_back(std::move(o));
    }
  });
  return st;
}

absl::StatusOr<OlafControlService> StartOlafControlService(OlafServer* server,
                                                           const std::string& listen,
                                                           const std::string& token) {
  OlafControlService svc;
  svc.plane = std::make_unique<OlafControl>(server);
  if (listen == "off") return svc;
  control::ControlServerOptions o;
  o.listen = listen;
  o.token = token;
  auto grpc_server = control::ControlServer::Start(o, svc.plane.get());
  if (!grpc_server.ok()) return grpc_server.status();
  svc.server = std::move(*grpc_server);
  return svc;
}

}  // namespace inca::switchd
