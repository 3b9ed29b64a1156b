// BuildTree: a group's aggregation tree over a topology (inca/tree/topology.h).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "inca/tree/topology.h"

namespace inca::tree {

namespace {

// The switch each rank sits behind; InvalidArgument naming the first rank
// that is missing, repeated or behind no switch.
absl::StatusOr<std::vector<int>> SwitchOfRanks(const Topology& t,
                                               const std::vector<Member>& members) {
  const size_t n = members.size();
  if (n == 0) return absl::InvalidArgumentError("a group needs at least one rank");
  std::map<std::array<uint8_t, 16>, int> host_switch;  // (Validate: every address parses)
  for (const HostSpec& h : t.hosts) host_switch[*NormalizeIp(h.address)] = *t.SwitchIndex(h.at);
  std::vector<int> of(n, -1);
  for (const Member& m : members) {
    if (m.rank < 0 || static_cast<size_t>(m.rank) >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", m.rank, " is not in 0..", n - 1, " (", n, " members)"));
    }
    if (of[static_cast<size_t>(m.rank)] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", m.rank, " is listed twice"));
    }
    const auto ip = NormalizeIp(m.address);
    const auto sw = ip ? host_switch.find(*ip) : host_switch.end();
    if (sw == host_switch.end()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", m.rank, ": host ", m.address,
                                                     " is behind no switch of the topology"));
    }
    of[static_cast<size_t>(m.rank)] = sw->second;
  }
  return of;
}

// Each switch's parent index in `plane` (-1 for a root), looked up once.
std::vector<int> Parents(const Topology& t, int plane) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < t.switches.size(); ++i) index[t.switches[i].name] = static_cast<int>(i);
  std::vector<int> out;
  for (const SwitchSpec& s : t.switches) {
    const std::string& p = s.ParentIn(plane);
    out.push_back(p.empty() ? -1 : index.at(p));
  }
  return out;
}

int TopOf(const std::vector<int>& parent, int s) {
  while (parent[static_cast<size_t>(s)] >= 0) s = parent[static_cast<size_t>(s)];
  return s;
}

}  // namespace

absl::StatusOr<Tree> BuildTree(const Topology& topology, const std::vector<Member>& members,
                               int plane) {
  if (absl::Status st = topology.Validate(); !st.ok()) return st;
  auto of = SwitchOfRanks(topology, members);
  if (!of.ok()) return of.status();
  const size_t switches = topology.switches.size();
  const std::vector<int> parent = Parents(topology, plane);
  // Every switch on a rank's way up is in the tree; all ways must meet.
  std::vector<char> in_tree(switches, 0);
  std::vector<std::vector<int>> ranks_at(switches);
  const int top = TopOf(parent, (*of)[0]);
  for (size_t r = 0; r < of->size(); ++r) {
    const int s = (*of)[r];
    if (TopOf(parent, s) != top) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks 0 and ", r, " share no switch (their roots are '",
                       topology.switches[static_cast<size_t>(top)].name, "' and '",
                       topology.switches[static_cast<size_t>(TopOf(parent, s))].name, "')"));
    }
    ranks_at[static_cast<size_t>(s)].push_back(static_cast<int>(r));
    for (int at = s; at >= 0 && !in_tree[static_cast<size_t>(at)];
         at = parent[static_cast<size_t>(at)]) {
      in_tree[static_cast<size_t>(at)] = 1;
    }
  }
  // Each switch's children in the tree, in topology order.
  std::vector<std::vector<int>> children(switches);
  for (size_t c = 0; c < switches; ++c) {
    if (in_tree[c] && parent[c] >= 0) {
      children[static_cast<size_t>(parent[c])].push_back(static_cast<int>(c));
    }
  }
  auto children_of = [&](int s) { return children[static_cast<size_t>(s)]; };
  // The root is the lowest switch every way passes: go down while a switch
  // has no ranks of its own and one child in the tree.
  int root = top;
  for (std::vector<int> c = children_of(root);
       ranks_at[static_cast<size_t>(root)].empty() && c.size() == 1; c = children_of(root)) {
    root = c[0];
  }
  Tree tree;
  tree.world_size = static_cast<int>(members.size());
  tree.node_of_rank.assign(members.size(), -1);
  std::vector<int> level;
  // Breadth first from the root: parents before children.
  TreeNode top_node;
  top_node.switch_index = root;
  tree.nodes.push_back(top_node);
  level.push_back(0);
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const int s = tree.nodes[i].switch_index;
    tree.nodes[i].ranks = ranks_at[static_cast<size_t>(s)];
    for (int r : tree.nodes[i].ranks)
      tree.node_of_rank[static_cast<size_t>(r)] = static_cast<int>(i);
    for (int c : children_of(s)) {
      const int index = tree.nodes[i].members();
      tree.nodes[i].children.push_back(static_cast<int>(tree.nodes.size()));
      TreeNode child;
      child.switch_index = c;
      child.parent = static_cast<int>(i);
      child.index_at_parent = index;
      tree.nodes.push_back(std::move(child));
      level.push_back(level[i] + 1);
    }
    if (tree.nodes[i].members() > kMaxMembersPerSwitch) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch '", topology.switches[static_cast<size_t>(s)].name, "' would hold ",
                       tree.nodes[i].members(),
                       " members of the group (ranks behind it and child switches); at most ",
                       kMaxMembersPerSwitch));
    }
    tree.depth = std::max(tree.depth, level[i] + 1);
  }
  for (size_t i = tree.nodes.size(); i-- > 0;) {
    TreeNode& n = tree.nodes[i];
    n.ranks_beneath += static_cast<int>(n.ranks.size());
    if (n.parent >= 0) tree.nodes[static_cast<size_t>(n.parent)].ranks_beneath += n.ranks_beneath;
  }
  std::function<void(int)> walk = [&](int i) {
    const TreeNode& n = tree.nodes[static_cast<size_t>(i)];
    tree.reduction_order.insert(tree.reduction_order.end(), n.ranks.begin(), n.ranks.end());
    for (int c : n.children) walk(c);
  };
  walk(tree.root);
  return tree;
}

absl::StatusOr<Tree> LeastLoadedTree(const Topology& topology, const std::vector<Member>& members,
                                     const std::vector<int>& load) {
  absl::StatusOr<Tree> best = absl::InternalError("no plane");
  std::pair<int, int64_t> best_cost{INT_MAX, INT64_MAX};
  for (int plane = 0; plane < topology.planes(); ++plane) {
    absl::StatusOr<Tree> t = BuildTree(topology, members, plane);
    if (!t.ok()) {
      if (plane == 0) best = t.status();
      continue;
    }
    std::pair<int, int64_t> cost{0, 0};
    for (const TreeNode& n : t->nodes) {
      const auto i = static_cast<size_t>(n.switch_index);
      const int l = i < load.size() ? load[i] : 0;
      cost.first = std::max(cost.first, l);
      cost.second += l;
    }
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(t);
    }
  }
  return best;
}

}  // namespace inca::tree
