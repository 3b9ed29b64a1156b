// Co-simulated asynchronous DRL through an OLAF or FIFO switch: the OLAF
// paper's training experiment (arXiv 2507.05876 §4.2, LunarLander-v3) on
// inca-sim.
//
// Every worker is a real rl::AsyncWorker (LunarLander on Box2D, PPO-style
// minibatch gradients) inside a simulated WorkerCore; the PS is a real
// ActorCritic behind a PsCore that applies each UPDATE fragment as a
// partial gradient (ApplyGradientSlice) and answers the last fragment of a
// cluster's update with the model, multicast to that cluster. The switch
// is the same OlafSwitch as inca-switchd. Only time is simulated: each
// gradient costs `gradient_ms` of simulated compute, each environment step
// of a rollout `env_step_us`, both times the cluster's `slowdown`; the
// network is the seed's 40 Gbit/s links with the switch's egress toward the
// PS paced at `egress_mbps`, below the offered load, so that the switch
// queue is the bottleneck. Same config = same run, bit for bit (one thread,
// seeded everything).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/olaf/send_control.h"
#include "inca/olaf/update_queue.h"
#include "inca/rl/async_worker.h"
#include "inca/sim/olaf_scenario.h"

namespace inca::sim {

struct DrlClusterSpec {
  uint32_t count = 1;    // clusters like this
  uint32_t workers = 4;  // workers per cluster
  double slowdown = 1;   // compute-time multiplier (heterogeneous clusters)
};

struct DrlTrainingConfig {
  std::string name = "drl";
  uint64_t seed = 1;
  double duration_s = 300;  // simulated
  olaf::QueuePolicy policy = olaf::QueuePolicy::kOlaf;
  olaf::SendControlMode send_control = olaf::SendControlMode::kOff;
  uint32_t queue_depth = 8;  // entries (fragments), the seed's 8
  double delta_t_ms = 400;
  double tau_ms = 100;
  // The switch's paced egress toward the PS: about 40% of what the default
  // 36 workers offer (~40 Mbit/s), so the queue is the bottleneck.
  double egress_mbps = 16;
  double link_gbps = 40;  // every link
  double link_delay_us = 1;
  // Simulated compute per gradient and per rollout step (times slowdown).
  double gradient_ms = 20;
  double env_step_us = 500;
  // Workers' learner settings; seed and model.seed are derived per run.
  rl::AsyncWorkerOptions worker = rl::DefaultAsyncWorkerOptions();
  // > 0: the PS anneals its learning rate linearly to 2 % of
  // worker.model.learning_rate over this many (simulated) seconds, PPO's
  // usual schedule, which keeps late training from collapsing. In time, not
  // in updates, so that every queue policy gets the same schedule.
  double lr_anneal_s = 300;
  double threshold = 100;  // training return (mean of the last 100 episodes) to reach
  bool stop_at_threshold = false;
  double sample_s = 1;
  uint32_t eval_episodes = 20;  // the PS's final model, fresh episodes
  std::vector<DrlClusterSpec> clusters = DefaultClusters();

  absl::Status Validate() const;
  // The seed's 9 clusters, heterogeneous: 3 at full speed, 6 three times slower.
  static std::vector<DrlClusterSpec> DefaultClusters();
};

// Sets one key ("policy=fifo", "egress_mbps=80", "seed=3", "hidden=32",
// "clusters=3x4x1,6x4x3" as count x workers x slowdown ...); unknown keys
// and bad values are InvalidArgument naming the key.
absl::Status SetDrlKey(std::string_view key, std::string_view value, DrlTrainingConfig* c);

struct DrlSample {
  double t_s = 0;
  double ps_updates = 0;             // fragments applied / fragments per update
  uint64_t worker_updates_sent = 0;  // over all workers so far
  uint64_t episodes = 0;
  uint64_t env_steps = 0;
  double mean_return = 0;  // last min(100, episodes) training episodes
  double mean_aom_ms = 0;  // instantaneous AoM at the PS, mean over clusters seen
  double staleness = 0;    // mean over fragments applied since the last sample, in updates
  uint64_t queue = 0;      // switch occupancy
};

struct DrlTrainingResult {
  std::string name;
  std::vector<DrlSample> series;
  bool reached = false;  // the threshold
  double time_to_threshold_s = 0;
  double updates_to_threshold = 0;  // PS updates applied by then
  uint64_t env_steps_to_threshold = 0;
  double final_return = 0;    // last 100 training episodes at the end
  double eval_return = 0;     // the PS's final model over eval_episodes
  double mean_aom_ms = 0;     // time-average AoM at the PS, mean over clusters
  double jain_aom = 1;        // of the per-cluster time-averages
  double mean_staleness = 0;  // updates, over every applied fragment
  double loss = 0;            // 1 - worker updates carried / sent (per fragment)
  uint64_t generated = 0, sent = 0;
  double ps_updates = 0;
  uint64_t fragments_applied = 0;
  uint64_t episodes = 0, env_steps = 0;
  size_t num_parameters = 0;
  uint32_t fragments_per_update = 0;
  PsTraffic ps_traffic;  // UPDATE, ACK and MODEL bytes at the PS
  uint64_t events = 0;
  double sim_s = 0;  // simulated time run
  double wall_s = 0;
};

absl::StatusOr<DrlTrainingResult> RunDrlTraining(
    const DrlTrainingConfig& config, const std::function<void(const DrlSample&)>& on_sample = {});

std::string DrlResultJson(const DrlTrainingResult& r);
// One row per sample (header: the DrlSample fields).
std::string DrlSeriesCsv(const DrlTrainingResult& r);

}  // namespace inca::sim
