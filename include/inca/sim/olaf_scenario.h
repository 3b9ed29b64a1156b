// OLAF scenarios for inca-sim: a YAML description of DRL clusters, the
// switch topology (star, or the OLAF paper's two-switch tree of 4.3) and the
// queue policy, run deterministically on the simulator, with per-cluster AoM
// and loss at the parameter server. Keys: docs/sim.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/olaf/ps.h"
#include "inca/olaf/send_control.h"
#include "inca/olaf/update_queue.h"
#include "inca/olaf/worker.h"
#include "inca/sim/olaf_nodes.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

struct ClusterGroup {
  uint32_t count = 1;        // clusters in this group
  uint32_t workers = 28;     // workers per cluster
  double period_ms = 100;    // between a worker's updates
  bool exponential = false;  // exponential periods (mean period_ms)
  double jitter_us = 200;    // uniform per-update jitter
  bool synchronized = true;  // a cluster's workers share their phase
  uint32_t elements = 2233;  // f32 per update (2233 = one 9000-byte frame)
  bool behind_sw2 = false;   // tree: attached to the far switch
};

struct OlafScenario {
  std::string name = "scenario";
  uint64_t seed = 1;
  double duration_s = 10;
  double warmup_s = 1;
  std::string topology = "star";  // star | tree
  olaf::QueuePolicy policy = olaf::QueuePolicy::kOlaf;
  olaf::SendControlMode send_control = olaf::SendControlMode::kOff;
  uint32_t queue_depth = 8;
  double delta_t_ms = 400;
  double tau_ms = 100;
  double egress_gbps = 40;  // star: the switch; tree: SW1 -> PS
  double tree_ratio = 0.3;  // tree: SW1->PS rate / SW2->SW1 rate
  double worker_link_gbps = 100;
  double link_delay_us = 1;
  double sample_ms = 10;  // time-series resolution
  // true: every cluster starts its period at time 0 (a global training step
  // boundary), so clusters' bursts collide; false: each cluster gets a
  // random phase.
  bool aligned_clusters = false;
  // With aligned_clusters: cluster c starts c·stagger after the boundary
  // (clusters at different distances or speeds reach the switch in a
  // consistent order).
  double cluster_stagger_us = 0;
  // Offered load ρ: the workers' nominal offered rate (every worker sending
  // one update per period, frames as the switch's egress counts them) over
  // the PS link's rate. > 0: egress_gbps becomes offered / ρ, so a sweep of
  // `load` moves the bottleneck and keeps the workers (issue 20's load
  // sweep). 0: egress_gbps as given.
  double load = 0;
  // The PS sends its model to the cluster of every applied update (one
  // MODEL of the largest group's `elements`). Needed for the paper's own AoM
  // (model staleness) and by closed_loop.
  bool models = false;
  // Workers wait for a model newer than the one their last update used
  // before the next rollout (at most model_wait_ms; 0: delta_t_ms), then
  // roll out for period_ms. Implies models. false: a fixed send grid.
  bool closed_loop = false;
  double model_wait_ms = 0;
  // Clocks across hosts (docs/design/olaf-core.md): each worker's clock is
  // off the PS's by a uniform draw in ±clock_offset_ms and runs fast or
  // slow by one in ±clock_drift_ppm; the switches' clocks are off by
  // switch_clock_offset_ms. worker_clock: whose clock workers stamp
  // (`local`, or `ps`: estimated from MODELs, so it needs `models`).
  double clock_offset_ms = 0;
  double clock_drift_ppm = 0;
  double switch_clock_offset_ms = 0;
  olaf::WorkerClock worker_clock = olaf::WorkerClock::kLocal;
  // The run stops with an error after this many events (docs/sim.md).
  uint64_t max_events = kDefaultMaxEvents;
  // Optional sweep: the scenario runs once per value of this key.
  std::string sweep_key;
  std::vector<std::string> sweep_values;
  std::vector<ClusterGroup> clusters;
  absl::Status Validate() const;
};

// Parses YAML; unknown keys and bad values are InvalidArgument naming the key.
absl::StatusOr<OlafScenario> ParseOlafScenario(std::string_view yaml, std::string_view source);
// Sets one key ("egress_gbps=20", "policy=fifo"...) as the YAML would.
absl::Status ApplyOverride(std::string_view key_value, OlafScenario* s, bool validate = true);

// The time-average age at the PS split as Σ(D·Y + Y²/2)/T over the
// updates that make it younger: D the age such an update arrives with
// (queueing and transmission), Y the time to the next one. queueing_ms is
// ΣD·Y/T; period_ms the half period a cluster sending once per period with
// no loss would have (period_ms/2); gaps_ms the rest of ΣY²/2T: loss,
// closed-loop waits, bunching. The three sum to the age over the window.
struct AomParts {
  double queueing_ms = 0;
  double period_ms = 0;
  double gaps_ms = 0;
  double total() const { return queueing_ms + period_ms + gaps_ms; }
};

struct ClusterResult {
  uint16_t cluster_id = 0;
  double mean_aom_ms = 0;  // time-average AoM at the PS over [warmup, end]
  double peak_aom_ms = 0;  // largest peak in that window
  uint64_t generated = 0;  // worker updates generated in the window... (whole run)
  uint64_t sent = 0;       // worker updates sent (send control may suppress)
  uint64_t received = 0;   // updates applied at the PS
  uint64_t carried = 0;    // worker updates they carried (merged counts)
  double loss = 0;         // 1 - carried / sent
  AomParts aom_parts;      // after warm-up
  // The OLAF paper's AoM: over updates applied after warm-up, the time
  // between the PS's current model and the model the update was computed
  // on (both stamped when the PS made them). Needs `models`.
  double paper_aom_ms = 0;
  // Its age at the PS passed 10 periods after warm-up: the cluster went
  // without a single update for that long (FIFO's starvation).
  bool starved = false;
};

struct SamplePoint {
  double t_ms = 0;
  std::vector<double> aom_ms;   // per cluster, at the PS
  std::vector<uint64_t> queue;  // occupancy per switch
};

// At the PS over a whole run, in datagrams and UDP payload bytes: UPDATEs
// in, ACKs and MODEL fragments out (from PsCounters). The OLAF paper's cost
// of its feedback: ACK (and MODEL) bytes against update bytes.
struct PsTraffic {
  uint64_t update_datagrams = 0, update_bytes = 0;
  uint64_t ack_datagrams = 0, ack_bytes = 0;
  uint64_t model_datagrams = 0, model_bytes = 0;

  static PsTraffic Of(const olaf::PsCounters& c);
  std::string Json() const;  // {"update_datagrams":...,"model_bytes":...}
};

struct OlafResult {
  std::string name;
  std::vector<ClusterResult> clusters;
  double mean_aom_ms = 0;  // over clusters
  double loss = 0;         // over all workers
  uint64_t received = 0, carried = 0, sent = 0, generated = 0;
  double jain_aom = 0;                 // Jain's index of per-cluster mean AoM
  double egress_gbps = 0;              // the PS link's rate (from `load` if set)
  double offered_gbps = 0;             // nominal: every worker, every period
  double rho = 0;                      // measured: worker bytes after warm-up / link capacity then
  AomParts aom_parts;                  // mean over clusters
  double paper_aom_ms = 0;             // mean over clusters
  uint32_t max_merged = 0;             // most worker updates one applied update carried
  uint64_t model_waits_timed_out = 0;  // closed loop: rollouts on an old model
  uint32_t starved = 0;                // clusters with ClusterResult::starved
  PsTraffic ps_traffic;
  uint64_t events = 0;
  double wall_s = 0;
  std::vector<SamplePoint> series;
};

// Runs `s`. `progress` (optional) is called with the simulated fraction done.
// Every worker's configuration, by cluster, as RunOlafScenario builds them
// (phases, seeds, clocks drawn from the scenario's seed): what another
// simulator hosting the same workers (inca/ns3/olaf_ns3.h) starts from.
std::vector<std::vector<WorkerNodeConfig>> WorkerConfigs(const OlafScenario& s);

absl::StatusOr<OlafResult> RunOlafScenario(const OlafScenario& s,
                                           const std::function<void(double)>& progress = {});

std::string ResultJson(const OlafResult& r);
// One row per sample: t_ms, then aom_ms of each cluster, then queue of each switch.
std::string SeriesCsv(const OlafResult& r);

// Jain's fairness index (Σx)² / (n Σx²); 1 for an empty or all-zero input.
double JainIndex(const std::vector<double>& x);

}  // namespace inca::sim
