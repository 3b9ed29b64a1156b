// inca-sim's fabrics (docs/sim.md, "Fabrics") as a graph of switches, with
// the routes every backend's packets take over it: what the network
// builders link, what the aggregation manager's topology names, and what
// the closed forms walk. Pure: built from the scenario alone.
//
// Two shapes:
// - a leaf-spine (racks > 0): leaf k holds rack k's hosts and links to each
//   of `spines` spines;
// - a three-tier k-ary fat-tree (fat_tree_k = k): pods of k/2 edge and k/2
//   aggregation switches, edge and aggregation fully linked in each pod,
//   aggregation switch a of every pod linked to cores
//   [a x k/2, (a+1) x k/2), k/2 hosts on each edge switch. Only the pods
//   that hold hosts are built (the hosts fill edge switches in order).
//
// Switch 0 is spine 0 or core 0, the root of tree plane 0; each switch
// lists every switch above it it links to (Switch::parents), so that the
// aggregation manager roots each group's tree at the spine or core of the
// tree plane whose switches carry the fewest groups. The ranks' links
// come first, rank r's to the edge switch of its host (HostOfRank) on the
// next free port, in rank order; then the links between switches, in
// links() order. Each node numbers its ports in the order its links are
// made, as Network::Connect does, so a builder that links in this order
// gets the ports the routes name.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "inca/sim/cais_scenario.h"
#include "sim/cais_nodes.h"

namespace inca::sim {

class Fabric {
 public:
  struct Switch {
    std::string name;
    // Every switch above it that it links to, in the order of the planes
    // (tree::SwitchSpec::parents): the spines, its pod's aggregation
    // switches, an aggregation switch's cores.
    std::vector<int> parents;
    int depth = 0;  // hops below the top (its first parents, up)
    bool edge = false;
    double uplink_bps = 0;  // each link toward `parents`
  };
  // What a switch's port leads to: rank `rank`, or port `peer_port` of
  // switch `peer`.
  struct Port {
    int rank = -1;
    int peer = -1;
    dp::PortId peer_port = 0;
  };

  // `s` must be a valid fabric scenario (racks > 0 or fat_tree_k > 0).
  explicit Fabric(const CaisSimScenario& s);

  const std::vector<Switch>& switches() const { return switches_; }
  const std::vector<Port>& ports(int sw) const { return ports_[static_cast<size_t>(sw)]; }
  int ranks() const { return static_cast<int>(edge_of_.size()); }
  int edge_of(int rank) const { return edge_of_[static_cast<size_t>(rank)]; }
  const std::vector<std::pair<int, int>>& links() const { return links_; }
  // Switch sw's routes toward every rank, by shortest paths (ECMP over the
  // equal ones), in port order.
  std::shared_ptr<const ForwarderRoutes> routes(int sw) const {
    return routes_[static_cast<size_t>(sw)];
  }
  // The most of `flows` (source rank, destination rank) that share one
  // link between switches in one direction, each walked hop by hop as the
  // forwarders route it.
  int MostFlowsOnALink(const std::vector<std::pair<int, int>>& flows) const;

 private:
  int AddSwitch(std::string name, bool edge);
  void LeafSpine(const CaisSimScenario& s);
  void FatTree(const CaisSimScenario& s);
  void Route();

  std::vector<Switch> switches_;
  std::vector<std::vector<Port>> ports_;
  std::vector<int> edge_of_;
  std::vector<dp::PortId> port_of_;  // each rank's port at its edge switch
  std::vector<std::pair<int, int>> links_;
  std::vector<std::shared_ptr<const ForwarderRoutes>> routes_;
};

}  // namespace inca::sim
