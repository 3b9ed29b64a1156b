// The aggregation manager (docs/design/tree.md, "The aggregation manager"):
// the loop that learns where each group's ranks JOINed, builds a tree per
// group once every rank has joined somewhere (PlanTrees), installs it on
// every switch of the tree through the control API, parents first, and
// withdraws it when a switch of it stops answering or loses the group.
//
// Time and I/O are injected: Tick(now) is called by its host
// (inca-controller --topology, or a test), the switches are
// control::ControlPlane objects (gRPC clients, or in-process planes), and
// events go to an EventLog. No sockets, threads or clock here.
//
// One round (Tick):
//   1. Reads every switch: ListGroups and ListPorts. A switch that has not
//      answered for `switch_lease_ns` is down (event=switch_down); it is up
//      again at its next answer (event=switch_up).
//   2. Withdraws each installed tree that has a switch down, that a
//      switch lost under ranks that now JOIN it again (a lease ran out, an
//      operator's destroy), or that a switch with no rank of its own (the
//      root) no longer holds (restarted within the lease, or silent for its
//      lease_ms): DestroyGroup at the others, so that every rank
//      re-JOINs and the group is built again from what is alive
//      (event=tree_withdrawn). A tree none of whose switches holds a rank
//      of it any more ended with its job (its ranks LEFT): it is destroyed
//      where it lingers (event=tree_retired).
//   3. Plans the groups now complete (PlanTrees) and installs each plan
//      (CheckSettings: refused when a switch takes larger chunks than its
//      parent; warning once, event=tree_timeouts_inverted, for a switch
//      whose chunk timeout is not above its parent's, and
//      event=tree_share_below_window where the group would be sure of
//      fewer pending chunks than the ranks' window):
//      RegisterPort for a child's or the parent's port not bound yet, then
//      InstallTree, root first. A refused install rolls back the switches
//      done (DestroyGroup) and is counted (install_failures); the next
//      round tries again. A group that cannot be built (ranks disagree, a
//      host behind the wrong switch) is logged once (event=tree_refused)
//      and its ranks keep waiting, then use the host path after their JOIN
//      timeout.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "inca/control/control_plane.h"
#include "inca/dataplane/program.h"
#include "inca/tree/planner.h"
#include "inca/tree/topology.h"
#include "inca/util/event_log.h"

namespace inca::tree {

struct ManagerConfig {
  // A switch that has not answered for this long is down and its trees are
  // withdrawn (inca-controller --switch-lease-ms).
  dp::TimeNs switch_lease_ns = 3'000 * dp::kNsPerMs;
  // The ranks' window (the client's max_pending_chunks): each switch of a
  // tree should reserve at least this many pending chunks for the group
  // (inca-controller --window-chunks; a warning, not a refusal).
  int64_t window_chunks = 64;
};

// A tree the manager installed and still keeps.
struct InstalledTree {
  uint8_t group_id = 0;
  uint64_t job = 0;
  int world_size = 0;
  uint32_t seq_base = 0;
  int depth = 0;
  std::vector<int> switches;  // parents first (Topology::switches indices)
  // Those with no rank of their own (the root, a spine): only a restart, an
  // operator or a lease takes the group from one while its ranks run.
  std::vector<int> relays;
  dp::TimeNs installed_at = 0;
  // From the first round that saw one of its ranks JOINed to the install.
  dp::TimeNs formation_ns = 0;
};

struct ManagerCounters {
  uint64_t rounds = 0;
  uint64_t trees_installed = 0;
  uint64_t trees_withdrawn = 0;
  uint64_t trees_retired = 0;
  uint64_t install_failures = 0;
  uint64_t trees_refused = 0;  // groups that cannot be built (distinct faults)
  uint64_t switch_errors = 0;  // control calls that failed
};

class AggregationManager {
 public:
  // `planes[i]` is the control API of topology.switches[i] (nullptr: not
  // managed, always down); each must outlive the manager. `log` may be
  // nullptr (kept nowhere).
  AggregationManager(Topology topology, std::vector<control::ControlPlane*> planes,
                     ManagerConfig config, EventLog* log);

  // One round at `now` (see above).
  void Tick(dp::TimeNs now);

  const std::vector<InstalledTree>& trees() const { return trees_; }
  const ManagerCounters& counters() const { return counters_; }
  const Topology& topology() const { return topology_; }
  bool up(int switch_index) const { return up_[static_cast<size_t>(switch_index)]; }

 private:
  // What one switch answered this round.
  struct Read {
    bool ok = false;
    std::vector<control::GroupInfo> groups;
    SwitchView view;
  };
  Read ReadSwitch(int index, dp::TimeNs now);
  void Review(const std::vector<Read>& reads);
  void Withdraw(const InstalledTree& t, const std::vector<Read>& reads, const std::string& why);
  // DestroyGroup at the switches that hold `t`'s group (this round's reads).
  void DestroyWhereHeld(const InstalledTree& t, const std::vector<Read>& reads);
  // The ports it registers join `reads`' views: the round's later
  // installs find them bound (one port per neighbour, shared by trees).
  // Every switch of the tree gets `window_cap` (TreeInstall::window_chunks).
  void Install(const TreePlan& plan, std::vector<Read>& reads, dp::TimeNs now, uint16_t window_cap);
  // The least fair share of the tree's switches above its ranks' (which
  // advise their own, live): max_pending_chunks over the groups `present`
  // there (this round's trees included); 0 when none says its
  // max_pending_chunks (or the tree is one switch).
  uint16_t WindowCap(const TreePlan& plan, const std::vector<std::bitset<256>>& present) const;
  control::CaisControlPlane* Cais(int index) const;
  // Whether every switch of `plan` is up and free for its group id (a
  // stale tree there is destroyed first). False: not this round.
  bool Clear(const TreePlan& plan, const std::vector<Read>& reads);
  // Logs and counts a group that cannot be built, once per fault; true
  // when this fault is new.
  bool Refuse(uint8_t group, uint64_t job, const std::string& why);
  // The switches' settings a tree depends on: an error (the tree is
  // refused) for a switch whose chunk_size exceeds its parent's; a warning
  // once per (switch, parent) whose chunk timeout is not above the
  // parent's (the root decides; docs/design/tree.md, "Timeouts"), and once
  // per (switch, groups there) where the group's reserved part of the
  // pending chunks would be below `window_chunks`.
  absl::Status CheckSettings(const TreePlan& plan, const std::vector<Read>& reads);
  // A number from switch `sw`'s GetConfig; -1 when it has none.
  double Setting(int sw, const std::string& key) const;

  Topology topology_;
  std::vector<control::ControlPlane*> planes_;
  ManagerConfig config_;
  EventLog* log_;
  std::vector<bool> up_;
  std::vector<dp::TimeNs> last_ok_;
  std::vector<InstalledTree> trees_;
  // (group, job) -> the first round one of its ranks was seen JOINed.
  std::map<std::pair<uint8_t, uint64_t>, dp::TimeNs> first_seen_;
  std::set<std::tuple<uint8_t, uint64_t, std::string>> refused_;      // logged once
  std::set<std::tuple<uint8_t, uint64_t, std::string>> failed_once_;  // logged once
  std::set<std::tuple<std::string, int, int>> warned_;  // (what, switch, parent or groups)
  ManagerCounters counters_;
};

}  // namespace inca::tree
