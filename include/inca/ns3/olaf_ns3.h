// inca's OLAF on ns-3 (docs/ns3.md): the constant-rate star of
// inca/sim/cbr_star.h and the OLAF evaluation's scenarios
// (inca/sim/olaf_scenario.h) built from ns-3's point-to-point links, IPv4
// routing and UDP sockets, with inca's OlafQueueDisc at the switches and
// OlafWorkerApp / OlafPsApp at the hosts. The same scenario files and
// worker configurations as inca-sim, so the two simulators can be compared
// run for run.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/sim/cbr_star.h"
#include "inca/sim/olaf_scenario.h"

namespace inca {

// The star on ns-3: plain = ns-3's drop-tail device queue of `queue`
// packets and no queue disc (UdpClient sources), fifo/olaf = OlafQueueDisc
// on the router's bottleneck device, OlafWorkerApp sources (sim::CbrWorker).
absl::StatusOr<sim::CbrStarResult> RunCbrStarOnNs3(const sim::CbrStarConfig& c);

struct Ns3ClusterResult {
  uint16_t cluster_id = 0;
  uint64_t sent = 0;       // updates the cluster's workers sent
  uint64_t received = 0;   // updates the PS applied
  uint64_t carried = 0;    // worker updates those carried (merges counted)
  double mean_aom_ms = 0;  // at the PS, over the window after warm-up
};

struct Ns3OlafResult {
  std::vector<Ns3ClusterResult> clusters;
  double mean_aom_ms = 0;  // the clusters' mean
  uint64_t events = 0;
  double wall_s = 0;
};

// Star and two-switch tree scenarios, timing as inca-sim's (every link's
// framing is ns-3's: UDP 8 + IPv4 20 + PPP 2). InvalidArgument for a
// scenario the adapter does not model (a load or clock skew of the switch).
absl::StatusOr<Ns3OlafResult> RunOlafScenarioOnNs3(const sim::OlafScenario& s);

}  // namespace inca
