#include "switchd/olaf_control.h"

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "switchd/port_control.h"
#include "switchd/settings.h"

namespace inca::switchd {

std::string OlafControl::program() const {
  return server_->config().program.policy == olaf::QueuePolicy::kFifo ? "fifo" : "olaf";
}

absl::StatusOr<std::vector<control::PortInfo>> OlafControl::ListPorts() {
  std::vector<control::PortInfo> out;
  server_->Execute([&](OlafServer::Control& c) { out = PortInfos(c.ports); });
  return out;
}

absl::StatusOr<int> OlafControl::ReleasePort(uint16_t port) {
  if (absl::Status s = CheckPortInRange(port); !s.ok()) return s;
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
  olaf::OlafSwitchConfig live;
  server_->Execute([&](OlafServer::Control& x) { live = x.program.config(); });
  std::lock_guard<std::mutex> lock(mu_);
  return std::map<std::string, std::string>{
      {"program", std::string(olaf::ToString(live.policy))},
      {"ps", c.ps},
      {"depth", absl::StrCat(live.depth)},
      {"delta_t_ms", absl::StrCat(static_cast<double>(live.delta_t_ns) / 1e6)},
      {"tau_ms", absl::StrCat(static_cast<double>(live.tau_ns) / 1e6)},
      {"egress_rate_bps", absl::StrCat(live.egress_rate_bps)},
      {"max_payload_bytes", absl::StrCat(live.max_payload_bytes)},
      {"max_workers", absl::StrCat(live.max_workers)},
      {"max_clusters", absl::StrCat(live.max_clusters)},
      {"lease_ms", absl::StrCat(c.lease_ms)},
      {"verify_epsilon", absl::StrCat(epsilon_)},
      {"last_change", last_change_},
  };
}

namespace {

constexpr const char* kOlafKeys =
    "delta_t_ms, tau_ms, depth, verify_epsilon and override change at run time; program, ps, "
    "egress_rate_bps, max_payload_bytes, max_workers, max_clusters, lease_ms are fixed";

absl::Status BadValue(const std::string& key, const std::string& value, const char* range) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad value '", value, "' for ", key, ": must be ", range));
}

// One run-time key of an OLAF switch into `p` (and *override).
absl::Status ParseOlafKey(const std::string& k, const std::string& v, olafverify::OlafProposal* p,
                          double* tau_ms, bool* override_change) {
  double x = 0;
  if (k == "override") {
    if (v != "true" && v != "false") return BadValue(k, v, "true or false");
    *override_change = v == "true";
  } else if (k == "delta_t_ms" || k == "tau_ms" || k == "depth") {
    // Checked as the flag and the YAML key are: olaf_<key> in switchd/settings.cc.
    const auto* setting = FindSetting("olaf_" + k);
    auto parsed = settings::Parse(setting->spec, v);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value '", v, "' for ", k, ": ", parsed.status().message()));
    }
    if (k == "depth") {
      p->depth = static_cast<uint32_t>(std::get<uint64_t>(*parsed));
    } else {
      (k == "delta_t_ms" ? p->delta_t_ms : *tau_ms) = std::get<double>(*parsed);
    }
  } else if (k == "verify_epsilon") {
    if (!absl::SimpleAtod(v, &x) || !(x >= 0 && x <= 1)) return BadValue(k, v, "in [0, 1]");
    p->epsilon = x;
  } else {
    return absl::NotFoundError(k);
  }
  return absl::OkStatus();
}

}  // namespace

olafverify::OlafObserved OlafControl::Observe() {
  olafverify::OlafObserved o;
  server_->Execute([&](OlafServer::Control& c) {
    const olaf::UpdateQueue& q = c.program.queue();
    for (uint16_t id : q.Clusters()) {
      if (auto ns = q.MeanOfferIntervalNs(id, c.now))
        o.cluster_periods_ms.emplace_back(id, *ns / 1e6);
    }
    const olaf::QueueCounters& t = q.totals();
    if (t.dequeued > 0) {
      o.mean_update_bytes =
          static_cast<double>(t.dequeued_bytes) / static_cast<double>(t.dequeued) +
          olaf::kOlafUpdateHeaderBytes;
    }
    const olaf::OlafSwitchConfig& cfg = c.program.config();
    o.max_payload_bytes = cfg.max_payload_bytes;
    o.egress_rate_bps = cfg.egress_rate_bps;
    o.egress_overhead_bytes = cfg.egress_overhead_bytes;
  });
  return o;
}

absl::Status OlafControl::SetConfig(const std::map<std::string, std::string>& values) {
  absl::StatusOr<std::map<std::string, std::string>> current = GetConfig();
  if (!current.ok()) return current.status();
  olafverify::OlafProposal p;
  double tau_ms = 0;
  bool override_change = false;
  olaf::OlafSwitchConfig live;
  uint32_t capacity = 0;
  server_->Execute([&](OlafServer::Control& c) {
    live = c.program.config();
    capacity = c.program.queue().capacity();
  });
  p.delta_t_ms = static_cast<double>(live.delta_t_ns) / 1e6;
  tau_ms = static_cast<double>(live.tau_ns) / 1e6;
  p.depth = live.depth;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.epsilon = epsilon_;
  }
  // All-or-nothing: every key is checked before anything changes.
  for (const auto& [k, v] : values) {
    const absl::Status st = ParseOlafKey(k, v, &p, &tau_ms, &override_change);
    if (st.ok()) continue;
    if (!absl::IsNotFound(st)) return st;
    const auto it = current->find(k);
    if (it == current->end() || k == "last_change") {
      return absl::InvalidArgumentError(absl::StrCat("unknown key '", k, "'; ", kOlafKeys));
    }
    if (it->second != v) {
      return absl::FailedPreconditionError(absl::StrCat(
          k, " is fixed while inca-switchd runs (restart it with the new value); ", kOlafKeys));
    }
  }
  if (p.depth > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth ", p.depth, " must be in 1..", capacity,
                     " (the storage allocated at start; restart with a larger --depth for more)"));
  }
  // The verifier's question is about ΔT, the depth and ε; τ only shapes
  // merges, which the model does not weigh. FIFO has no fairness to verify.
  std::string note = "applied; not verified: only tau_ms changed";
  const bool verify = live.policy == olaf::QueuePolicy::kOlaf &&
                      (p.delta_t_ms * 1e6 != static_cast<double>(live.delta_t_ns) ||
                       p.depth != live.depth || values.count("verify_epsilon") > 0);
  if (live.policy != olaf::QueuePolicy::kOlaf) note = "applied; not verified: FIFO program";
  if (verify) {
    const olafverify::OlafGateVerdict v = olafverify::VerifyOlafChange(p, Observe());
    if (!v.fair && !override_change) {
      spdlog::warn("event=olaf_config_refused reason=\"{}\"", v.reason);
      return absl::FailedPreconditionError(absl::StrCat(
          "refused: ", v.reason, " (set override=true to apply it anyway; it will be logged)"));
    }
    note = !v.verified ? absl::StrCat("applied; ", v.reason)
           : v.fair    ? "applied; verified: can be fair"
                       : absl::StrCat("applied with override; ", v.reason);
    if (!v.fair) spdlog::warn("event=olaf_config_override reason=\"{}\"", v.reason);
  }
  absl::Status applied;
  server_->Execute([&](OlafServer::Control& c) {
    applied = c.program.SetRunTimeParams(static_cast<dp::TimeNs>(p.delta_t_ms * 1e6),
                                         static_cast<dp::TimeNs>(tau_ms * 1e6), p.depth);
  });
  if (!applied.ok()) return applied;
  spdlog::info(
      "event=olaf_config_set delta_t_ms={} tau_ms={} depth={} verify_epsilon={} note=\"{}\"",
      p.delta_t_ms, tau_ms, p.depth, p.epsilon, note);
  std::lock_guard<std::mutex> lock(mu_);
  epsilon_ = p.epsilon;
  last_change_ = note;
  return absl::OkStatus();
}

absl::StatusOr<control::Stats> OlafControl::GetStats() {
  const counters::OlafServerCounters sc = server_->counters();
  control::Stats st;
  static_cast<counters::HostCounters&>(st.counters) = sc;
  st.counters.reducer = sc.program;
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
  st.server = server_->counters();  // the published snapshot: host, program and OLAF counters
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
    st.dropped = t.dropped;
    for (size_t r = 0; r < dp::kDropReasonCount; ++r) {
      if (t.drops[r] != 0) {
        st.drops[std::string(dp::ToString(static_cast<dp::DropReason>(r)))] = t.drops[r];
      }
    }
    st.conserved = p.counters().Conserved() && p.queue().totals().Conserved();
    for (uint16_t id : p.cluster_ids()) {
      const std::optional<olaf::OlafClusterStats> cs = p.cluster(id, c.now);
      if (!cs) continue;
      control::OlafClusterInfo o;
      o.cluster_id = id;
      o.workers = cs->workers;
      o.queue = cs->queue;
      for (size_t r = 0; r < olaf::kQueueDropReasonCount; ++r) {
        if (cs->queue.dropped[r] != 0) {
          o.dropped += cs->queue.dropped[r];
          o.drops[std::string(dp::ToString(olaf::kQueueDropReasons[r]))] = cs->queue.dropped[r];
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
