// A network of switches and the aggregation tree of one group over it, as
// pure data and functions (no sockets, clock or logging): what the
// aggregation manager builds and installs, what inca-sim's fabrics will run,
// and what the tests check (docs/design/tree.md).
//
// A topology names its switches, each with its parent (none for a root) and
// the rate of its link toward it, and the hosts behind each switch, by IP
// address. The tree of a group is every switch on the path from a switch
// its ranks sit behind up to their lowest common ancestor, which is the
// tree's root. At each switch of the tree the members are, in this order,
// the ranks behind it (by rank) and then its child switches (in topology
// order): a member's index is its rank in that switch's group, and the
// depth-first order of the members fixes the tree's reduction order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace inca::tree {

// The most members one switch's group holds (the reducer's port mask).
inline constexpr int kMaxMembersPerSwitch = 64;
// The most switches a topology names.
inline constexpr size_t kMaxSwitches = 4096;

struct SwitchSpec {
  std::string name;       // unique within the topology
  std::string address;    // its data-plane endpoint, "HOST:PORT" (what a child joins)
  std::string control;    // its control API, "HOST:PORT" (what the manager calls)
  std::string parent;     // empty: a root
  double uplink_bps = 0;  // the link toward the parent (0: not stated)
  // Every switch it can send up to, `parent` first (YAML `parents:`; empty
  // or one: just `parent`). With several, the topology has planes: in
  // plane j a switch goes up to parents[j mod their number], so a fabric
  // whose switches each link to several above (spines, cores) has trees
  // rooted at each of them (docs/design/tree.md, "Planes").
  std::vector<std::string> parents;
  // Its parent in plane `plane`.
  const std::string& ParentIn(int plane) const {
    return parents.size() > 1 ? parents[static_cast<size_t>(plane) % parents.size()] : parent;
  }
};

struct HostSpec {
  std::string address;  // an IPv4 or IPv6 literal
  std::string at;       // the switch it sits behind
};

struct Topology {
  std::vector<SwitchSpec> switches;
  std::vector<HostSpec> hosts;

  // From YAML (docs/design/tree.md, "Topology"): `switches:` a list of
  // {name, address, control, parent, uplink_bps}, `hosts:` a list of {at, addresses}.
  // InvalidArgument on one line naming `source` and what is wrong.
  static absl::StatusOr<Topology> FromYaml(std::string_view text, std::string_view source);
  // Names unique and non-empty, every parent named, no cycle, every host's
  // address an IP literal behind a named switch and listed once.
  absl::Status Validate() const;
  // The index of the switch named `name`.
  std::optional<int> SwitchIndex(std::string_view name) const;
  // The switch a host address sits behind (the address normalised, so that
  // 198.18.0.10 and ::ffff:198.18.0.10 are one host).
  std::optional<int> SwitchOfHost(std::string_view address) const;
  // How many planes: the most parents any switch lists (at least 1).
  int planes() const;
};

// One member of a group: its rank and its host's address.
struct Member {
  int rank = 0;
  std::string address;
};

struct TreeNode {
  int switch_index = 0;       // into Topology::switches
  int parent = -1;            // into Tree::nodes; -1 at the root
  int index_at_parent = -1;   // this switch's member index (rank) at its parent
  std::vector<int> ranks;     // ranks behind this switch directly, ascending
  std::vector<int> children;  // child nodes, in topology order
  int ranks_beneath = 0;      // ranks in this subtree
  // Members here: ranks.size() + children.size().
  int members() const { return static_cast<int>(ranks.size() + children.size()); }
};

struct Tree {
  std::vector<TreeNode> nodes;  // nodes[root] is the root; parents before children
  int root = 0;
  int world_size = 0;
  std::vector<int> node_of_rank;  // the node each rank sits behind
  // The ranks in the order the tree combines their contributions (depth
  // first, members in order).
  std::vector<int> reduction_order;
  int depth = 0;  // 1 for one switch

  // The member index at `node` that leads toward `rank` (its own index when
  // the rank is behind `node` directly); nullopt when the rank is not in
  // `node`'s subtree.
  std::optional<int> MemberToward(int node, int rank) const;
};

// The tree of a group whose ranks 0..n-1 are `members` (each rank once),
// in plane `plane` (each switch's parent is SwitchSpec::ParentIn(plane)).
// InvalidArgument naming the rank for a host behind no switch, and naming the
// switch when it would hold more than kMaxMembersPerSwitch members.
absl::StatusOr<Tree> BuildTree(const Topology& topology, const std::vector<Member>& members,
                               int plane = 0);

// The group's tree in the plane whose switches carry the fewest groups
// already: `load[s]` groups at switch s; the plane with the least
// load on its busiest switch, then the least load in all, then the
// lowest. So groups planned one after another (each adding itself to the
// switches of its tree) are rooted at different spines or cores while
// there are free ones. Plane 0's error when no plane has a tree.
absl::StatusOr<Tree> LeastLoadedTree(const Topology& topology, const std::vector<Member>& members,
                                     const std::vector<int>& load);

// An IP literal (v4 or v6) as 16 bytes, v4 as ::ffff:a.b.c.d; nullopt when it
// is not one.
std::optional<std::array<uint8_t, 16>> NormalizeIp(std::string_view address);

}  // namespace inca::tree
