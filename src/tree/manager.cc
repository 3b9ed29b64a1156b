#include "inca/tree/manager.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/event_format.h"

namespace inca::tree {

AggregationManager::AggregationManager(Topology topology,
                                       std::vector<control::ControlPlane*> planes,
                                       ManagerConfig config, EventLog* log)
    : topology_(std::move(topology)),
      planes_(std::move(planes)),
      config_(config),
      log_(log),
      up_(topology_.switches.size(), false),
      last_ok_(topology_.switches.size(), INT64_MIN / 2) {
  static NullEventLog none;
  if (log_ == nullptr) log_ = &none;
  planes_.resize(topology_.switches.size(), nullptr);
}

control::CaisControlPlane* AggregationManager::Cais(int index) const {
  control::ControlPlane* p = planes_[static_cast<size_t>(index)];
  return p == nullptr ? nullptr : p->cais();
}

AggregationManager::Read AggregationManager::ReadSwitch(int index, dp::TimeNs now) {
  Read r;
  const auto i = static_cast<size_t>(index);
  const std::string& name = topology_.switches[i].name;
  control::CaisControlPlane* cais = Cais(index);
  absl::Status error = absl::UnavailableError("no control API for it");
  if (cais != nullptr) {
    auto groups = cais->ListGroups();
    auto ports = groups.ok() ? planes_[i]->ListPorts() : groups.status();
    if (ports.ok()) {
      r.ok = true;
      r.groups = std::move(*groups);
      r.view.switch_index = index;
      for (const control::PortInfo& p : *ports) r.view.ports.push_back({p.port, p.endpoint});
      r.view.groups = static_cast<int>(r.groups.size());
      for (const control::GroupInfo& g : r.groups) {
        if (g.formed || g.source != "join" || g.members.empty()) continue;
        FormingGroup f{g.group_id, g.job, g.world_size, {}};
        for (const auto& m : g.members) f.ranks.push_back({m.rank, m.port, m.endpoint});
        r.view.forming.push_back(std::move(f));
        r.view.next_seq_base = g.seq_base;  // what a group formed now would get
        first_seen_.try_emplace({g.group_id, g.job}, now);
      }
    } else {
      error = ports.status();
      ++counters_.switch_errors;
    }
  }
  if (r.ok) {
    last_ok_[i] = now;
    if (!up_[i]) Emit(*log_, LogLevel::kInfo, "event=switch_up switch={}", name);
    up_[i] = true;
  } else if (up_[i] && now - last_ok_[i] >= config_.switch_lease_ns) {
    up_[i] = false;
    Emit(*log_, LogLevel::kWarn, "event=switch_down switch={} error=\"{}\"", name,
         std::string(error.message()));
  }
  return r;
}

void AggregationManager::DestroyWhereHeld(const InstalledTree& t, const std::vector<Read>& reads) {
  for (int sw : t.switches) {
    const Read& r = reads[static_cast<size_t>(sw)];
    // Only where this tree's group is (another job's forming group of the
    // same id, the next run's, is left alone).
    const bool held = r.ok && std::any_of(r.groups.begin(), r.groups.end(), [&](auto& g) {
                        return g.group_id == t.group_id && g.job == t.job && g.tree;
                      });
    if (!held) continue;
    const absl::Status s = Cais(sw)->DestroyGroup(t.group_id);
    if (!s.ok() && !absl::IsNotFound(s)) ++counters_.switch_errors;
  }
}

void AggregationManager::Withdraw(const InstalledTree& t, const std::vector<Read>& reads,
                                  const std::string& why) {
  DestroyWhereHeld(t, reads);
  ++counters_.trees_withdrawn;
  Emit(*log_, LogLevel::kWarn, "event=tree_withdrawn group={} job={:#x} reason=\"{}\"", t.group_id,
       t.job, why);
}

void AggregationManager::Review(const std::vector<Read>& reads) {
  std::vector<InstalledTree> kept;
  for (const InstalledTree& t : trees_) {
    std::string down, lost;
    int readable = 0, with_ranks = 0;
    for (int sw : t.switches) {
      const auto i = static_cast<size_t>(sw);
      if (!up_[i]) {
        down = topology_.switches[i].name;
        break;
      }
      if (!reads[i].ok) continue;  // a missed answer: judged when its lease runs out
      ++readable;
      const auto g = std::find_if(reads[i].groups.begin(), reads[i].groups.end(), [&](auto& x) {
        return x.group_id == t.group_id && x.job == t.job && x.tree;
      });
      if (g == reads[i].groups.end()) {
        // Ranks of the job JOINing there again: the group was lost under
        // them (a lease, an operator). None: they left (the job ends).
        // A relay (no ranks of its own) that lost it was restarted or
        // cleared: its children's partials would meet no rule there.
        const bool rejoined = std::any_of(
            reads[i].groups.begin(), reads[i].groups.end(),
            [&](auto& x) { return x.group_id == t.group_id && x.job == t.job && !x.formed; });
        const bool relay = std::find(t.relays.begin(), t.relays.end(), sw) != t.relays.end();
        if ((rejoined || relay) && lost.empty()) lost = topology_.switches[i].name;
      } else if (!g->members.empty()) {
        ++with_ranks;
      }
    }
    if (!down.empty()) {
      Withdraw(t, reads, absl::StrCat("switch ", down, " is down"));
    } else if (readable == static_cast<int>(t.switches.size()) && with_ranks == 0) {
      // Every rank left (the job ended): the switches with no rank of it
      // let it go now rather than after a lease.
      DestroyWhereHeld(t, reads);
      ++counters_.trees_retired;
      Emit(*log_, LogLevel::kInfo, "event=tree_retired group={} job={:#x}", t.group_id, t.job);
    } else if (!lost.empty()) {
      Withdraw(t, reads, absl::StrCat("switch ", lost, " no longer holds the group"));
    } else {
      kept.push_back(t);
    }
  }
  trees_ = std::move(kept);
}

double AggregationManager::Setting(int sw, const std::string& key) const {
  auto c = planes_[static_cast<size_t>(sw)]->GetConfig();
  if (!c.ok() || !c->contains(key)) return -1;
  char* end = nullptr;
  const double v = std::strtod(c->at(key).c_str(), &end);
  return end != nullptr && *end == '\0' ? v : -1;
}

absl::Status AggregationManager::CheckSettings(const TreePlan& plan,
                                               const std::vector<Read>& reads) {
  for (const SwitchInstall& in : plan.installs) {
    const SwitchSpec& spec = topology_.switches[static_cast<size_t>(in.switch_index)];
    // The group's reserved part of the pending chunks there, once it forms.
    int groups = 1;
    for (const control::GroupInfo& g : reads[static_cast<size_t>(in.switch_index)].groups) {
      groups += g.formed && g.group_id != plan.group_id ? 1 : 0;
    }
    const double share = Setting(in.switch_index, "group_share"),
                 pending = Setting(in.switch_index, "max_pending_chunks");
    const auto reserved = static_cast<int64_t>(share * pending / groups);
    if (share >= 0 && pending >= 0 && reserved < config_.window_chunks &&
        warned_.insert({"share", in.switch_index, groups}).second) {
      Emit(*log_, LogLevel::kWarn,
           "event=tree_share_below_window switch={} groups={} reserved_chunks={} "
           "window_chunks={} hint=\"a group sure of fewer slots than its window can be turned "
           "away while others borrow (raise max_pending_chunks or group_share there; "
           "docs/design/tree.md)\"",
           spec.name, groups, reserved, config_.window_chunks);
    }
    if (!in.uplink || in.parent_switch < 0) continue;
    const int parent = in.parent_switch;
    const std::string& parent_name = topology_.switches[static_cast<size_t>(parent)].name;
    const double chunk = Setting(in.switch_index, "chunk_size"),
                 parent_chunk = Setting(parent, "chunk_size");
    if (chunk >= 0 && parent_chunk >= 0 && chunk > parent_chunk) {
      return absl::FailedPreconditionError(absl::StrCat(
          "switch ", spec.name, " takes chunks of up to ", chunk, " bytes, its parent ",
          parent_name, " only ", parent_chunk, ": its partials could not go up"));
    }
    const double mine = Setting(in.switch_index, "timeout_ms"),
                 theirs = Setting(parent, "timeout_ms");
    if (mine >= 0 && theirs >= 0 && mine <= theirs &&
        warned_.insert({"timeout", in.switch_index, parent}).second) {
      Emit(*log_, LogLevel::kWarn,
           "event=tree_timeouts_inverted switch={} timeout_ms={} parent={} parent_timeout_ms={} "
           "hint=\"a switch must wait longer than its parent, or its own timeout hands chunks "
           "back that the root would have completed (docs/design/tree.md)\"",
           spec.name, mine, parent_name, theirs);
    }
  }
  return absl::OkStatus();
}

uint16_t AggregationManager::WindowCap(const TreePlan& plan,
                                       const std::vector<std::bitset<256>>& present) const {
  double cap = 0;
  for (const SwitchInstall& in : plan.installs) {
    // A switch the ranks joined advises its own share, live (it counts the
    // groups that come and go there); the cap is for the switches above.
    if (std::any_of(in.members.begin(), in.members.end(),
                    [](const PlannedMember& m) { return m.rank >= 0; })) {
      continue;
    }
    const double pending = Setting(in.switch_index, "max_pending_chunks");
    const size_t groups = present[static_cast<size_t>(in.switch_index)].count();
    if (pending < 0 || groups == 0) continue;
    const double fair = std::max(1.0, std::floor(pending / static_cast<double>(groups)));
    cap = cap == 0 ? fair : std::min(cap, fair);
  }
  return static_cast<uint16_t>(std::min<double>(cap, UINT16_MAX));
}

void AggregationManager::Install(const TreePlan& plan, std::vector<Read>& reads, dp::TimeNs now,
                                 uint16_t window_cap) {
  if (absl::Status s = CheckSettings(plan, reads); !s.ok()) {
    Refuse(plan.group_id, plan.job, std::string(s.message()));
    return;
  }
  std::vector<int> done;
  const auto bound = [&](int sw, uint16_t port, const std::string& endpoint) {
    for (const BoundPort& b : reads[static_cast<size_t>(sw)].view.ports) {
      if (b.port == port && b.endpoint == endpoint) return true;
    }
    return false;
  };
  const auto reg = [&](control::CaisControlPlane* cais, int sw, uint16_t port,
                       const std::string& endpoint) {
    absl::Status s = cais->RegisterPort(port, endpoint);
    if (s.ok()) reads[static_cast<size_t>(sw)].view.ports.push_back({port, endpoint});
    return s;
  };
  absl::Status failed;
  int failed_at = -1;
  for (const SwitchInstall& in : plan.installs) {
    control::CaisControlPlane* cais = Cais(in.switch_index);
    const auto step = [&]() -> absl::Status {
      for (const PlannedMember& m : in.members) {
        if (m.child_switch < 0 || bound(in.switch_index, m.port, m.endpoint)) continue;
        if (auto s = reg(cais, in.switch_index, m.port, m.endpoint); !s.ok()) return s;
      }
      if (in.uplink && !bound(in.switch_index, *in.uplink, in.parent_endpoint)) {
        if (auto s = reg(cais, in.switch_index, *in.uplink, in.parent_endpoint); !s.ok()) {
          return s;
        }
      }
      control::TreeInstall ti{plan.group_id, plan.job,  static_cast<uint16_t>(plan.world_size),
                              plan.seq_base, {},        in.uplink,
                              in.rank_ports, window_cap};
      for (const PlannedMember& m : in.members) ti.members.push_back(m.port);
      return cais->InstallTree(ti).status();
    };
    failed = step();
    if (!failed.ok()) {
      failed_at = in.switch_index;
      break;
    }
    done.push_back(in.switch_index);
  }
  if (!failed.ok()) {
    for (int sw : done) (void)Cais(sw)->DestroyGroup(plan.group_id);
    ++counters_.install_failures;
    if (!failed_once_.insert({plan.group_id, plan.job, std::string(failed.message())}).second) {
      return;  // logged already
    }
    if (failed_once_.size() > 4096) failed_once_.clear();
    Emit(*log_, LogLevel::kWarn,
         "event=tree_install_failed group={} job={:#x} switch={} error=\"{}\"", plan.group_id,
         plan.job, topology_.switches[static_cast<size_t>(failed_at)].name,
         std::string(failed.message()));
    return;
  }
  InstalledTree t{
      plan.group_id, plan.job, plan.world_size, plan.seq_base, plan.tree.depth, done, {}, now, 0};
  for (const SwitchInstall& in : plan.installs) {
    if (std::none_of(in.members.begin(), in.members.end(),
                     [](const PlannedMember& m) { return m.rank >= 0; })) {
      t.relays.push_back(in.switch_index);
    }
  }
  if (auto it = first_seen_.find({plan.group_id, plan.job}); it != first_seen_.end()) {
    t.formation_ns = now - it->second;
    first_seen_.erase(it);
  }
  std::vector<std::string> names;
  for (int sw : done) names.push_back(topology_.switches[static_cast<size_t>(sw)].name);
  ++counters_.trees_installed;
  Emit(*log_, LogLevel::kInfo,
       "event=tree_installed group={} job={:#x} world_size={} depth={} switches={} seq_base={} "
       "formation_ms={:.1f}",
       t.group_id, t.job, t.world_size, t.depth, absl::StrJoin(names, ","), t.seq_base,
       static_cast<double>(t.formation_ns) / 1e6);
  trees_.push_back(std::move(t));
}

bool AggregationManager::Refuse(uint8_t group, uint64_t job, const std::string& why) {
  if (!refused_.insert({group, job, why}).second) return false;
  if (refused_.size() > 4096) refused_.clear();  // bounded; a fault may be logged again
  ++counters_.trees_refused;
  Emit(*log_, LogLevel::kWarn, "event=tree_refused group={} job={:#x} error=\"{}\"", group, job,
       why);
  return true;
}

bool AggregationManager::Clear(const TreePlan& plan, const std::vector<Read>& reads) {
  for (const SwitchInstall& in : plan.installs) {
    const auto i = static_cast<size_t>(in.switch_index);
    if (!up_[i]) return false;
    for (const control::GroupInfo& g : reads[i].groups) {
      if (g.group_id != plan.group_id || !g.formed) continue;
      const bool ours = std::any_of(trees_.begin(), trees_.end(), [&](const InstalledTree& t) {
        return t.group_id == g.group_id && t.job == g.job;
      });
      if (g.tree && !ours) {
        // A tree this manager no longer keeps (withdrawn while the switch
        // was unreachable, or a manager restarted): gone before the new one.
        (void)Cais(in.switch_index)->DestroyGroup(g.group_id);
        continue;
      }
      Refuse(
          plan.group_id, plan.job,
          absl::StrCat("switch ", topology_.switches[i].name, " holds group ", g.group_id, " for ",
                       g.tree ? "another tree" : "a group of its own", " (job ", g.job, ")"));
      return false;
    }
  }
  return true;
}

void AggregationManager::Tick(dp::TimeNs now) {
  ++counters_.rounds;
  std::vector<Read> reads;
  std::vector<SwitchView> views;
  for (size_t i = 0; i < topology_.switches.size(); ++i) {
    reads.push_back(ReadSwitch(static_cast<int>(i), now));
    if (reads.back().ok) views.push_back(reads.back().view);
  }
  Review(reads);
  const std::vector<PlanOutcome> outcomes = PlanTrees(topology_, views);
  // The groups at each switch once this round's trees are in: what each
  // tree's window cap divides the switches' slots among.
  std::vector<std::bitset<256>> present(topology_.switches.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    for (const control::GroupInfo& g : reads[i].groups) present[i].set(g.group_id);
  }
  for (const PlanOutcome& o : outcomes) {
    if (!o.plan.ok()) continue;
    for (const SwitchInstall& in : o.plan->installs) {
      present[static_cast<size_t>(in.switch_index)].set(o.plan->group_id);
    }
  }
  for (const PlanOutcome& o : outcomes) {
    if (!o.plan.ok()) {
      // A switch of the tree has not answered yet: the next round.
      if (absl::IsUnavailable(o.plan.status())) continue;
      Refuse(o.group_id, o.job, std::string(o.plan.status().message()));
      continue;
    }
    if (Clear(*o.plan, reads)) Install(*o.plan, reads, now, WindowCap(*o.plan, present));
  }
  // Bounded: forget formation starts of groups no switch reports any more.
  if (first_seen_.size() > 4096) first_seen_.clear();
}

}  // namespace inca::tree
