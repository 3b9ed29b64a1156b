#include "switchd/switch_control.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "inca/control/reducer_stats.h"
#include "switchd/cais_dispatcher.h"
#include "switchd/port_control.h"
#include "switchd/settings.h"

namespace inca::switchd {

namespace {

std::string Fmt(double v) {
  return absl::StrCat(v);
}

// Parses one config value; the message names the key and the range.
absl::Status ParseDouble(const std::string& key, const std::string& v, double lo, double hi,
                         double* out) {
  double d = 0;
  if (!absl::SimpleAtod(v, &d) || !(d >= lo && d <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "='", v, "' must be a number in [", lo, ", ", hi, "]"));
  }
  *out = d;
  return absl::OkStatus();
}

}  // namespace

SwitchControl::SwitchControl(ControlTarget* target, int controller_port)
    : SwitchControl(std::vector<ControlTarget*>{target}, controller_port) {}

SwitchControl::SwitchControl(std::vector<ControlTarget*> shards, int controller_port)
    : shards_(std::move(shards)), controller_port_(controller_port) {}

void SwitchControl::ForEach(const std::function<void(ControlTarget::Control&)>& fn) {
  for (ControlTarget* s : shards_) s->Execute(fn);
}

double SwitchControl::offload_threshold() const {
  std::lock_guard lock(mu_);
  return offload_threshold_;
}

absl::Status SwitchControl::AddRule(const cais::Rule& rule) {
  absl::Status s;
  ForEach([&](ControlTarget::Control& c) { s.Update(c.reducer.rules().Add(rule)); });
  return s;
}

absl::Status SwitchControl::DeleteRule(const cais::RuleKey& key) {
  absl::Status s;
  ForEach([&](ControlTarget::Control& c) { s.Update(c.reducer.rules().Delete(key)); });
  return s;
}

absl::StatusOr<std::vector<cais::Rule>> SwitchControl::DumpRules() {
  std::vector<cais::Rule> rules;
  First([&](ControlTarget::Control& c) { rules = c.reducer.rules().Dump(); });
  return rules;
}

absl::StatusOr<std::vector<control::PortInfo>> SwitchControl::ListPorts() {
  std::vector<control::PortInfo> out;
  First([&](ControlTarget::Control& c) { out = PortInfos(c.ports); });
  return out;
}

absl::StatusOr<int> SwitchControl::ReleasePort(uint16_t port) {
  if (absl::Status s = CheckPortInRange(port); !s.ok()) return s;
  absl::StatusOr<int> n = 0;
  bool first = true;
  ForEach([&](ControlTarget::Control& c) {
    // Shard 0's count of groups dissolved (each shard forms its own copy).
    absl::StatusOr<int> one = c.groups.ReleasePort(static_cast<dp::PortId>(port));
    if (first || (n.ok() && !one.ok())) n = one;
    first = false;
  });
  return n;
}

absl::Status SwitchControl::RegisterPort(uint16_t port, const std::string& endpoint) {
  if (absl::Status s = CheckPortInRange(port); !s.ok()) return s;
  auto ep = net::Endpoint::Parse(endpoint);
  if (!ep.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint '", endpoint, "' must be IP:PORT: ", ep.status().message()));
  }
  absl::Status s;
  ForEach([&](ControlTarget::Control& c) {
    s.Update(c.ports.AddStatic(static_cast<dp::PortId>(port), *ep));
  });
  return s;
}

absl::StatusOr<control::GroupInfo> SwitchControl::CreateGroup(uint8_t group_id,
                                                              const std::vector<uint16_t>& ports) {
  if (ports.empty()) {
    return absl::InvalidArgumentError("a group needs at least one port");
  }
  cais::PortMask mask;
  for (uint16_t p : ports) {
    if (absl::Status s = CheckPortInRange(p); !s.ok()) return s;
    if (mask.contains(p)) {
      return absl::InvalidArgumentError(absl::StrCat("port ", p, " is listed twice"));
    }
    mask.add(p);
  }
  absl::Status s;
  ForEach([&](ControlTarget::Control& c) {
    if (!s.ok()) return;  // a shard refused: the others are left alone
    if (c.groups.group(group_id) != nullptr) {
      s = absl::AlreadyExistsError(absl::StrCat(
          "group ", group_id, " is being formed by hosts (JOIN); pick another group id"));
      return;
    }
    s = c.reducer.rules().Add({{group_id, std::nullopt, std::nullopt}, mask, mask, std::nullopt});
  });
  if (!s.ok()) return s;
  {
    std::lock_guard lock(mu_);
    control_groups_[group_id] = ports;
  }
  control::GroupInfo g;
  g.group_id = group_id;
  g.world_size = static_cast<uint16_t>(ports.size());
  g.rank_ports = ports;
  g.formed = true;
  g.source = "control";
  return g;
}

absl::Status SwitchControl::DestroyGroup(uint8_t group_id) {
  {
    std::lock_guard lock(mu_);
    if (control_groups_.count(group_id) == 0) {
      // A JOIN-formed (or forming) group: dissolved, its ports released. A
      // live job re-forms it at its next JOIN; a dead one is gone.
      bool destroyed = false;
      ForEach(
          [&](ControlTarget::Control& c) { destroyed = c.groups.Destroy(group_id) || destroyed; });
      return destroyed ? absl::OkStatus()
                       : absl::NotFoundError(absl::StrCat("no group ", group_id));
    }
    control_groups_.erase(group_id);
  }
  absl::Status s;
  ForEach([&](ControlTarget::Control& c) {
    s.Update(c.reducer.rules().Delete({group_id, std::nullopt, std::nullopt}));
  });
  return s;
}

control::GroupInfo GroupInfoOf(const membership::GroupManager& groups,
                               const membership::GroupState& st, dp::TimeNs now) {
  control::GroupInfo info;
  info.group_id = st.group_id;
  info.world_size = st.world_size;
  if (st.formed) info.rank_ports = st.rank_ports();
  info.formed = st.formed;
  info.seq_base = st.formed ? st.seq_base : groups.next_seq_base();
  info.source = "join";
  info.job = st.job;
  for (size_t r = 0; r < st.ranks.size(); ++r) {
    if (st.ranks[r]) {
      info.members.push_back({static_cast<uint16_t>(r), static_cast<uint16_t>(st.ranks[r]->port),
                              st.ranks[r]->endpoint.ToString()});
    }
  }
  info.tree = st.tree;
  for (dp::PortId p : st.tree_members) info.tree_members.push_back(static_cast<uint16_t>(p));
  if (st.tree_uplink) info.uplink = static_cast<uint16_t>(*st.tree_uplink);
  info.contended = st.formed && groups.Contended(st.group_id, now - 1000 * dp::kNsPerMs);
  for (int b = 0; b < wire::kSizeClasses; ++b) {
    const auto& t = st.timings[b];
    if (t[0].samples == 0 && t[1].samples == 0) continue;
    control::OffloadTiming o;
    o.bin = b;
    for (auto [from, to] : {std::pair{&t[0], &o.switch_path}, std::pair{&t[1], &o.host_path}}) {
      to->samples = from->samples;
      to->mean_us = from->mean_us;
      to->mean_bytes = from->mean_bytes;
      to->best_us_per_byte = from->BestUsPerByte();
      to->age_ms = from->samples == 0 ? -1 : (now - from->last) / dp::kNsPerMs;
    }
    info.timings.push_back(o);
  }
  return info;
}

namespace {
// GroupInfoOf, with the window the group's members are advised.
control::GroupInfo AdvisedInfo(const ControlTarget::Control& c, const membership::GroupState& st) {
  control::GroupInfo info = GroupInfoOf(c.groups, st, c.now);
  info.window_chunks = WindowAdvice(c.reducer, c.groups, st.group_id);
  return info;
}
}  // namespace

void ApplyOffload(const control::GroupOffload& g, cais::CaisReducer& reducer) {
  reducer.SetOffloadRange(g.group_id, g.min_bytes, g.max_bytes);
  reducer.SetOffloadBins(g.group_id, g.measured_bins, g.offload_bins, g.explore_bins);
  reducer.SetOffloadHold(g.group_id, g.fallback_hold);
}

absl::StatusOr<control::GroupInfo> SwitchControl::InstallTree(const control::TreeInstall& t) {
  if (shards_.size() > 1) {
    return absl::FailedPreconditionError(
        "a sharded switch (--threads > 1) cannot be part of a tree of switches; run it with "
        "--threads 1");
  }
  membership::TreeGroup tg{t.group_id, t.job,        t.world_size, t.seq_base,
                           {},         std::nullopt, t.rank_ports, t.window_chunks};
  for (uint16_t p : t.members) {
    if (absl::Status s = CheckPortInRange(p); !s.ok()) return s;
    tg.members.push_back(static_cast<dp::PortId>(p));
  }
  if (t.uplink) {
    if (absl::Status s = CheckPortInRange(*t.uplink); !s.ok()) return s;
    tg.uplink = static_cast<dp::PortId>(*t.uplink);
  }
  {
    std::lock_guard lock(mu_);
    if (control_groups_.count(t.group_id) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("group ", t.group_id, " was created by the control API; destroy it first"));
    }
  }
  absl::StatusOr<control::GroupInfo> out = absl::InternalError("no shard");
  First([&](ControlTarget::Control& c) {
    if (absl::Status s = c.groups.InstallTree(tg, c.now); !s.ok()) {
      out = s;
      return;
    }
    out = AdvisedInfo(c, *c.groups.group(t.group_id));
  });
  return out;
}

absl::StatusOr<std::vector<control::GroupInfo>> SwitchControl::ListGroups() {
  std::vector<control::GroupInfo> out;
  First([&](ControlTarget::Control& c) {
    for (int g = 0; g < 256; ++g) {
      const membership::GroupState* st = c.groups.group(static_cast<uint8_t>(g));
      if (st == nullptr) continue;
      out.push_back(AdvisedInfo(c, *st));
    }
  });
  std::lock_guard lock(mu_);
  for (const auto& [g, ports] : control_groups_) {
    control::GroupInfo info;
    info.group_id = g;
    info.world_size = static_cast<uint16_t>(ports.size());
    info.rank_ports = ports;
    info.formed = true;
    info.source = "control";
    out.push_back(info);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.group_id < b.group_id; });
  return out;
}

namespace {

// The CAIS program's settings the control API shows: those it can change
// while the switch runs, and those it cannot (they size memory or sockets).
bool CaisRunTime(const settings::Spec& s) {
  return s.runtime && s.key.rfind("olaf_", 0) != 0;
}
bool CaisFixed(const settings::Spec& s) {
  return s.key == "chunk_size" || s.key == "sram_bytes" || s.key == "deterministic" ||
         s.key == "threads";
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> SwitchControl::GetConfig() {
  SwitchdConfig c;
  First([&](ControlTarget::Control& ctl) {
    c = ctl.config;
    c.cais = ctl.reducer.config();
    c.cais.sram_bytes *= shards_.size();  // each shard holds its share
    c.lease_ms = static_cast<uint32_t>(ctl.groups.lease() / dp::kNsPerMs);
  });
  std::map<std::string, std::string> out;
  for (const auto& s : SwitchdSettings()) {
    if (CaisRunTime(s.spec) || CaisFixed(s.spec)) out[s.spec.key] = settings::Format(s.get(c));
  }
  out["controller_port"] = absl::StrCat(controller_port_);
  out["offload_threshold"] = Fmt(offload_threshold());
  return out;
}

absl::Status SwitchControl::SetConfig(const std::map<std::string, std::string>& values) {
  SwitchdConfig c;
  First([&](ControlTarget::Control& ctl) {
    c = ctl.config;
    c.cais = ctl.reducer.config();
  });
  const uint32_t lease_before = c.lease_ms;
  double threshold = offload_threshold();
  std::vector<std::string> known;
  for (const auto& s : SwitchdSettings()) {
    if (CaisRunTime(s.spec)) known.push_back(s.spec.key);
  }
  known.push_back("offload_threshold");
  // Every value is checked against its declaration before any is applied.
  for (const auto& [key, v] : values) {
    if (key == "offload_threshold") {
      if (absl::Status s = ParseDouble(key, v, 0, 1e9, &threshold); !s.ok()) return s;
      continue;
    }
    const auto* setting = FindSetting(key);
    if (setting != nullptr && CaisRunTime(setting->spec)) {
      auto parsed = settings::Parse(setting->spec, v);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, "='", v, "': ", parsed.status().message()));
      }
      setting->set(&c, *parsed);
    } else if ((setting != nullptr && CaisFixed(setting->spec)) || key == "controller_port") {
      return absl::FailedPreconditionError(absl::StrCat(
          key, " is fixed while the switch runs; restart inca-switchd with the new value"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", key, "'; known: ", absl::StrJoin(known, ", "),
          " (and read-only chunk_size, sram_bytes, deterministic, threads, controller_port; "
          "docs/settings.md)"));
    }
  }
  absl::Status s;
  ForEach([&](ControlTarget::Control& ctl) {
    if (!s.ok()) return;
    s = ctl.reducer.UpdateConfig(c.cais);
    if (!s.ok()) return;
    ctl.config.cais = c.cais;
    if (c.lease_ms != lease_before) {
      ctl.config.lease_ms = c.lease_ms;
      ctl.groups.set_lease(dp::TimeNs{c.lease_ms} * dp::kNsPerMs);
    }
  });
  if (!s.ok()) return s;
  std::lock_guard lock(mu_);
  offload_threshold_ = threshold;
  return absl::OkStatus();
}

absl::StatusOr<control::Stats> SwitchControl::GetStats() {
  std::vector<control::Stats> parts(shards_.size());
  std::vector<std::string> endpoints;
  for (size_t i = 0; i < shards_.size(); ++i) {
    control::Stats& st = parts[i];
    shards_[i]->Execute(
        [&](ControlTarget::Control& c) { control::CollectReducerStats(c.reducer, &st); });
    // The published counters (a snapshot of the switch thread's), so that
    // host, reducer and CAIS figures are of one moment.
    st.counters = shards_[i]->counters();
    st.ingress_queue_delay_us = control::IngressQueueDelayUs(st.counters);
    endpoints.push_back(shards_[i]->endpoint());
  }
  return control::MergeShards(parts, endpoints);
}

absl::Status SwitchControl::SetOffloadPolicy(const control::OffloadPolicy& policy) {
  const bool name_ok = !policy.controller.empty() && policy.controller.size() <= 64 &&
                       std::all_of(policy.controller.begin(), policy.controller.end(), [](char ch) {
                         return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                                ch == '_' || ch == '.' || ch == ':';
                       });
  if (!name_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload policy: controller name '", policy.controller,
                     "' must be 1-64 characters of letters, digits, '-', '_', '.' or ':'"));
  }
  std::array<bool, 256> seen{};
  for (const control::GroupOffload& g : policy.groups) {
    if (seen[g.group_id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("offload policy lists group ", g.group_id, " twice"));
    }
    seen[g.group_id] = true;
  }
  ForEach([&](ControlTarget::Control& c) {
    for (const control::GroupOffload& g : policy.groups) ApplyOffload(g, c.reducer);
  });
  std::lock_guard lock(mu_);
  // Groups not listed keep their last decision.
  std::map<uint8_t, control::GroupOffload> merged;
  for (const auto& g : policy_.groups) merged[g.group_id] = g;
  for (const auto& g : policy.groups) merged[g.group_id] = g;
  policy_ = policy;
  policy_.groups.clear();
  for (const auto& [id, g] : merged) policy_.groups.push_back(g);
  policy_.updated_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  return absl::OkStatus();
}

absl::StatusOr<control::OffloadPolicy> SwitchControl::GetOffloadPolicy() {
  std::lock_guard lock(mu_);
  return policy_;
}

absl::Status SwitchControl::Health() {
  return absl::OkStatus();
}

}  // namespace inca::switchd
