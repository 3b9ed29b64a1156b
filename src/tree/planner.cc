#include "inca/tree/planner.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "inca/dataplane/program.h"

namespace inca::tree {

std::string HostOfEndpoint(const std::string& endpoint) {
  if (!endpoint.empty() && endpoint.front() == '[') {
    const size_t close = endpoint.find(']');
    return close == std::string::npos ? std::string() : endpoint.substr(1, close - 1);
  }
  const size_t colon = endpoint.rfind(':');
  return colon == std::string::npos ? std::string() : endpoint.substr(0, colon);
}

namespace {

// LeastLoadedTree's load of a switch that has not reported: above any
// number of groups a switch holds.
constexpr int kUnreportedLoad = 1 << 20;

// The ranks of one (group, job) across the switches.
struct Gathered {
  int world_size = -1;
  std::string fault;                                  // set: no plan, this error
  std::vector<std::pair<size_t, JoinedRank>> joined;  // (view index, rank)
};

// The lowest port at or above `from` that `taken` lacks; dp::kMaxPorts if none.
uint16_t FreePort(const std::set<uint16_t>& taken, uint16_t from) {
  uint16_t p = from;
  while (p < dp::kMaxPorts && taken.contains(p)) ++p;
  return p;
}

absl::StatusOr<SwitchInstall> InstallAt(const Topology& t, const Tree& tree, size_t node,
                                        const SwitchView& view,
                                        const std::vector<std::pair<size_t, JoinedRank>>& joined,
                                        const std::vector<size_t>& view_of_switch) {
  const TreeNode& n = tree.nodes[node];
  SwitchInstall in;
  in.switch_index = n.switch_index;
  std::set<uint16_t> taken;
  for (const BoundPort& b : view.ports) taken.insert(b.port);
  // The port a neighbour at `endpoint` already has here, or a free one at
  // or above `from`.
  const auto port_for = [&](const std::string& endpoint, uint16_t from) {
    for (const BoundPort& b : view.ports) {
      if (b.endpoint == endpoint) return b.port;
    }
    return FreePort(taken, from);
  };
  uint16_t next = 0;
  for (int r : n.ranks) {
    for (const auto& [v, jr] : joined) {
      if (jr.rank == r && view_of_switch[static_cast<size_t>(n.switch_index)] == v) {
        in.members.push_back({jr.port, r, -1, jr.endpoint});
        taken.insert(jr.port);
        next = std::max<uint16_t>(next, static_cast<uint16_t>(jr.port + 1));
      }
    }
  }
  // Child switches after the ranks: their ports above every rank's, so that
  // the reduction order (ascending ports) is the ranks', then the children's.
  const std::string& name = t.switches[static_cast<size_t>(n.switch_index)].name;
  const auto no_port = [&] {
    return absl::ResourceExhaustedError(
        absl::StrCat("switch ", name, " has no free port for the tree"));
  };
  for (int c : n.children) {
    const int sw = tree.nodes[static_cast<size_t>(c)].switch_index;
    const std::string& address = t.switches[static_cast<size_t>(sw)].address;
    const uint16_t p = port_for(address, next);
    if (p >= dp::kMaxPorts) return no_port();
    in.members.push_back({p, -1, sw, address});
    taken.insert(p);
    next = std::max<uint16_t>(next, static_cast<uint16_t>(p + 1));
  }
  std::sort(in.members.begin(), in.members.end(),
            [](const PlannedMember& a, const PlannedMember& b) { return a.port < b.port; });
  if (n.parent >= 0) {
    const int psw = tree.nodes[static_cast<size_t>(n.parent)].switch_index;
    in.parent_switch = psw;
    in.parent_endpoint = t.switches[static_cast<size_t>(psw)].address;
    const uint16_t p = port_for(in.parent_endpoint, next);
    if (p >= dp::kMaxPorts) return no_port();
    in.uplink = p;
  }
  // Each rank's port here for the ranks' JOIN replies: its own, the child's
  // leading to it, or the uplink.
  in.rank_ports.assign(static_cast<size_t>(tree.world_size), in.uplink.value_or(0));
  for (int r = 0; r < tree.world_size; ++r) {
    int at = tree.node_of_rank[static_cast<size_t>(r)];
    while (at >= 0 && at != static_cast<int>(node) &&
           tree.nodes[static_cast<size_t>(at)].parent != static_cast<int>(node)) {
      at = tree.nodes[static_cast<size_t>(at)].parent;
    }
    if (at < 0) continue;  // not beneath this switch: the uplink
    for (const PlannedMember& m : in.members) {
      if (at == static_cast<int>(node)
              ? m.rank == r
              : m.child_switch == tree.nodes[static_cast<size_t>(at)].switch_index) {
        in.rank_ports[static_cast<size_t>(r)] = m.port;
      }
    }
  }
  return in;
}

// The plan of a complete group, or its fault.
absl::StatusOr<TreePlan> PlanOne(const Topology& t, const std::vector<SwitchView>& views,
                                 uint8_t group, uint64_t job, const Gathered& g) {
  std::vector<size_t> view_of_switch(t.switches.size(), SIZE_MAX);
  for (size_t v = 0; v < views.size(); ++v) {
    view_of_switch[static_cast<size_t>(views[v].switch_index)] = v;
  }
  std::vector<Member> members;
  for (const auto& [v, jr] : g.joined) {
    const std::string host = HostOfEndpoint(jr.endpoint);
    const std::optional<int> behind = t.SwitchOfHost(host);
    const int at = views[v].switch_index;
    if (!behind || *behind != at) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", jr.rank, " joined switch ", t.switches[static_cast<size_t>(at)].name,
          " but the topology puts its host ", host,
          behind ? absl::StrCat(" behind ", t.switches[static_cast<size_t>(*behind)].name)
                 : std::string(" behind no switch")));
    }
    members.push_back({jr.rank, host});
  }
  // The plane whose switches carry the fewest groups (this round's plans
  // before it included); a switch that has not reported (down, or no
  // control address) weighs as full, so a plane through it is taken only
  // when no other has a tree (and then waits for it, below).
  std::vector<int> load(t.switches.size(), kUnreportedLoad);
  for (const SwitchView& v : views) load[static_cast<size_t>(v.switch_index)] = v.groups;
  absl::StatusOr<Tree> tree = LeastLoadedTree(t, members, load);
  if (!tree.ok()) return tree.status();
  TreePlan plan{group, job, g.world_size, 0, *tree, {}};
  // Above the next seq_base of every switch the ranks joined, in
  // serial-number order (the counters wrap); a switch with no rank of the
  // group reports none, and the install moves its counter past the tree's.
  for (size_t i = 0; i < g.joined.size(); ++i) {
    const uint32_t next = views[g.joined[i].first].next_seq_base;
    if (i == 0 || static_cast<int32_t>(next - plan.seq_base) > 0) plan.seq_base = next;
  }
  for (size_t node = 0; node < tree->nodes.size(); ++node) {
    const int sw = tree->nodes[node].switch_index;
    const size_t v = view_of_switch[static_cast<size_t>(sw)];
    if (v == SIZE_MAX) {
      return absl::UnavailableError(absl::StrCat(
          "switch ", t.switches[static_cast<size_t>(sw)].name, " of the tree has not reported"));
    }
    absl::StatusOr<SwitchInstall> in =
        InstallAt(t, *tree, node, views[v], g.joined, view_of_switch);
    if (!in.ok()) return in.status();
    plan.installs.push_back(std::move(*in));
  }
  return plan;
}

}  // namespace

std::vector<PlanOutcome> PlanTrees(const Topology& t, const std::vector<SwitchView>& views) {
  std::map<std::pair<uint8_t, uint64_t>, Gathered> groups;
  for (size_t v = 0; v < views.size(); ++v) {
    const std::string& name = t.switches[static_cast<size_t>(views[v].switch_index)].name;
    for (const FormingGroup& f : views[v].forming) {
      Gathered& g = groups[{f.group_id, f.job}];
      if (g.world_size < 0) g.world_size = f.world_size;
      if (g.world_size != f.world_size && g.fault.empty()) {
        g.fault = absl::StrCat("its ranks disagree on the world size (", g.world_size, " and ",
                               f.world_size, " at ", name, ")");
      }
      for (const JoinedRank& r : f.ranks) g.joined.emplace_back(v, r);
    }
  }
  // The ports each plan binds to a neighbour, seen by the plans after it in
  // this round as bound already (so that two trees planned together give
  // one neighbour one port, never one port to two neighbours).
  std::vector<SwitchView> working = views;
  std::vector<size_t> view_of_switch(t.switches.size(), SIZE_MAX);
  for (size_t v = 0; v < views.size(); ++v) {
    view_of_switch[static_cast<size_t>(views[v].switch_index)] = v;
  }
  const auto bind = [&](const SwitchInstall& in, uint16_t port, const std::string& endpoint) {
    std::vector<BoundPort>& ports =
        working[view_of_switch[static_cast<size_t>(in.switch_index)]].ports;
    if (std::none_of(ports.begin(), ports.end(),
                     [&](const BoundPort& b) { return b.endpoint == endpoint; })) {
      ports.push_back({port, endpoint});
    }
  };
  std::vector<PlanOutcome> out;
  for (auto& [key, g] : groups) {
    const auto& [group, job] = key;
    std::vector<int> seen(static_cast<size_t>(std::max(g.world_size, 0)), 0);
    for (const auto& [v, jr] : g.joined) {
      if (jr.rank < 0 || jr.rank >= g.world_size) {
        if (g.fault.empty()) g.fault = absl::StrCat("rank ", jr.rank, " is outside the world size");
      } else if (++seen[static_cast<size_t>(jr.rank)] == 2 && g.fault.empty()) {
        g.fault = absl::StrCat("rank ", jr.rank, " joined twice");
      }
    }
    const bool complete =
        std::all_of(seen.begin(), seen.end(), [](int n) { return n >= 1; }) && !seen.empty();
    if (g.fault.empty() && !complete) continue;  // ranks still missing
    PlanOutcome o{group, job, absl::InternalError("")};
    if (!g.fault.empty()) {
      o.plan = absl::FailedPreconditionError(g.fault);
    } else {
      o.plan = PlanOne(t, working, group, job, g);
    }
    if (o.plan.ok()) {
      for (const SwitchInstall& in : o.plan->installs) {
        for (const PlannedMember& m : in.members) {
          if (m.child_switch >= 0) bind(in, m.port, m.endpoint);
        }
        if (in.uplink) bind(in, *in.uplink, in.parent_endpoint);
        // The group is at this switch now (where its ranks joined, its
        // forming group counted it already).
        if (std::none_of(in.members.begin(), in.members.end(),
                         [](const PlannedMember& m) { return m.rank >= 0; })) {
          ++working[view_of_switch[static_cast<size_t>(in.switch_index)]].groups;
        }
      }
    }
    if (!o.plan.ok()) {
      o.plan = absl::Status(o.plan.status().code(), absl::StrCat("group ", group, " job ", job,
                                                                 ": ", o.plan.status().message()));
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace inca::tree
