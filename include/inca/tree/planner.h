// The aggregation manager's decisions, as a pure core (no sockets, clock or
// logging; docs/design/tree.md, "The aggregation manager"): from what every
// switch reports of the groups forming there (the ranks that JOINed it and
// their endpoints), which groups are complete across the network, the tree
// of each (BuildTree), and what to install at each switch of it, parents
// first. inca-controller's manager mode will poll the switches, feed this
// core and carry out its plans through the control API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/tree/topology.h"

namespace inca::tree {

// A rank that JOINed a switch: its switch port and source endpoint.
struct JoinedRank {
  int rank = 0;
  uint16_t port = 0;
  std::string endpoint;  // "IP:PORT" or "[IPv6]:PORT"
};

// A group forming at one switch (ListGroups, ListPorts).
struct FormingGroup {
  uint8_t group_id = 0;
  uint64_t job = 0;
  int world_size = 0;
  std::vector<JoinedRank> ranks;
};

// A port bound at a switch (ListPorts).
struct BoundPort {
  uint16_t port = 0;
  std::string endpoint;
};

// What one switch of the topology reports.
struct SwitchView {
  int switch_index = 0;  // into Topology::switches
  // The seq_base the switch would give a group formed now (ListGroups'
  // forming groups report it); read only where ranks joined.
  uint32_t next_seq_base = 0;
  std::vector<BoundPort> ports;  // ports taken (JOINs, static registrations)
  std::vector<FormingGroup> forming;
  // Groups at the switch, formed or forming: the load that picks each
  // tree's plane (LeastLoadedTree).
  int groups = 0;
};

// One member of a switch's group in a tree: a rank (at the port it JOINed)
// or a child switch (at a port the manager registers for its address).
struct PlannedMember {
  uint16_t port = 0;
  int rank = -1;          // >= 0: a rank
  int child_switch = -1;  // >= 0: a child switch (into Topology::switches)
  std::string endpoint;   // the rank's source, or the child's data address
};

// What to install at one switch of a tree. A child switch or the parent
// already bound at the switch (another group's tree) keeps its port: one
// port per neighbour, shared by every group through it. Otherwise child
// ports are the lowest free above the ranks' and the uplink's above those.
struct SwitchInstall {
  int switch_index = 0;
  std::vector<PlannedMember> members;  // ascending ports: the reduction order
  std::optional<uint16_t> uplink;      // below the root: the port for the parent
  std::string parent_endpoint;         // the parent's data address
  int parent_switch = -1;              // the parent in this tree (into Topology::switches)
  // world_size entries: each rank's port here (its own, the child's leading
  // to it, else the uplink), what the ranks' JOIN replies carry.
  std::vector<uint16_t> rank_ports;
};

struct TreePlan {
  uint8_t group_id = 0;
  uint64_t job = 0;
  int world_size = 0;
  uint32_t seq_base = 0;  // one for the whole tree
  Tree tree;
  std::vector<SwitchInstall> installs;  // parents before children
};

// One group's outcome: a plan, or why it cannot be built (one line, naming
// the group and the fault: ranks that disagree on the world size, a rank
// joined twice, a rank that joined a switch the topology does not put its
// host behind, more than 64 members at a switch, no free port).
struct PlanOutcome {
  uint8_t group_id = 0;
  uint64_t job = 0;
  absl::StatusOr<TreePlan> plan;
};

// The groups whose ranks 0..world_size-1 have all joined somewhere, in
// (group, job) order. A group still missing ranks gets no outcome.
std::vector<PlanOutcome> PlanTrees(const Topology& topology, const std::vector<SwitchView>& views);

// The IP of an endpoint "IP:PORT" or "[IPv6]:PORT" (the text before the
// port), or empty when it has no port.
std::string HostOfEndpoint(const std::string& endpoint);

}  // namespace inca::tree
