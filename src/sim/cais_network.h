// How a CAIS scenario's network is built on inca-sim (cais_scenario.cc
// runs it): per switch (plane) the backend's switch and rank nodes, each
// rank on its host's CPU, background traffic, and the CPU bound of the host
// model. Internal to the simulator.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inca/control/control_plane.h"
#include "inca/sim/cais_scenario.h"
#include "inca/sim/simulator.h"
#include "inca/tree/manager.h"
#include "inca/wire/cais.h"
#include "sim/cais_nodes.h"
#include "sim/fabric.h"

namespace inca::sim {

// allreduce, reduce_scatter, all_gather (CaisSimScenario::collective).
wire::CaisOp CollectiveOp(const std::string& c);

// One switch of a run (a plane: striping has several) with its rank
// nodes, one per host (on the host's CPU, which the planes share), and
// what a run needs of them.
struct Plane {
  // Every switch of the plane: the star's one, or a fabric's spine 0 first.
  std::vector<PipelinedSwitch*> switches;
  std::vector<Node*> ranks;
  std::vector<BackgroundNode*> background;  // none without load
  // Starts rank r on its stripe `data` (all blocks; nullptr in timing mode
  // for the host baselines) of `count` elements, and `block`, its own block
  // (inca: a reduce-scatter's output, an all-gather's input).
  std::function<void(int rank, std::vector<float>* data, std::vector<float>* block, size_t count)>
      begin;
  std::function<uint64_t()> retransmitted = [] { return uint64_t{0}; };
  // Runs `go` once every rank is ready for its first operation (inca with
  // form_groups: joined); at once otherwise.
  std::function<void(std::function<void()> go)> when_ready = [](std::function<void()> go) { go(); };
  // Whether rank r's switch path produced chunk c (the host baselines: always).
  std::function<bool(int r, size_t c)> has = [](int, size_t) { return true; };
  TimeNs formed_at = 0;
};

struct Job {
  Simulator sim;
  std::unique_ptr<Network> net;
  std::vector<Plane> planes;  // sized before any is built: lambdas point into it
  // A fabric's: each switch's control API and the aggregation manager over
  // them (destroyed before the network), and the manager's next round.
  std::vector<std::unique_ptr<control::ControlPlane>> controls;
  std::unique_ptr<tree::AggregationManager> manager;
  std::function<void()> manager_tick;
};

// Builds plane `plane` of `backend` (inca, ring or tree) for operations
// of `bytes` (the plane's stripe), into j->planes[plane] (sized already).
// A configuration the nodes refuse is InvalidArgument.
absl::Status BuildPlane(const CaisSimScenario& s, const std::string& backend, uint64_t bytes,
                        int plane, Job* j, const RankDone& done);

// Other traffic: on a star, through the plane's switch's last port on a
// link that carries all of it (so only the ranks' downlinks are shared); on
// a fabric, one source per edge switch on such a link, sending its hosts'
// share to ranks anywhere (so uplinks carry what crosses racks). None
// without load.
absl::StatusOr<std::vector<BackgroundNode*>> AddBackground(const CaisSimScenario& s, int plane,
                                                           Job* j);

// The CPU time one rank's packets cost (host model), over its cores: what
// each backend sends and receives per rank for an operation of `bytes`,
// headers included. 0 without a host model, and for the tree.
double HostSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes);

// The aggregation manager's topology of a fabric: what inca-controller
// --topology would read for it, every switch with all the switches it links
// to above it (tree::SwitchSpec::parents: a plane per spine or core).
tree::Topology FabricTopology(const Fabric& f);

// On a fabric, a lower bound for `backend`'s operation of `bytes` from the
// busiest link between switches alone (cais_fabric.cc, walking
// sim::Fabric's routes): the tree the manager builds moves the tensor once
// each way over each of its links; the ring its per-edge share once per
// crossing (RingCrossings); NCCL's double binary tree half the tensor each
// way per tree edge crossing it. The closed form on a fabric is the star's
// or this, whichever is longer.
double UplinkSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes);

}  // namespace inca::sim
