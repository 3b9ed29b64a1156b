// AsyncWorker: the worker side of asynchronous actor-critic training with a
// parameter server (the OLAF paper's DRL workers, arXiv 2507.05876 §4.2).
//
// A worker owns its environments and a local copy of the model. It collects
// a rollout with the newest model it has, then turns that rollout into a
// stream of minibatch gradients, one per Next() call (PPO-style reuse:
// `epochs` passes over the shuffled steps). Between calls the caller may
// hand it a newer model (SetModel): the next gradient is taken at the new
// parameters on the same data, which the PPO ratio clip keeps sound, and the
// next rollout is collected with it. What leaves the worker is only the
// flat gradient; the PS applies it (ActorCritic::ApplyGradients, or
// ApplyGradientSlice per fragment).
//
// Pure: no clock, no I/O; seeded, so the same calls give the same gradients.
// The simulator charges compute time per call from rollout_pending() and
// the steps collected; real workers just run it.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/rl/actor_critic.h"
#include "inca/rl/lunar_lander.h"

namespace inca::rl {

struct AsyncWorkerOptions {
  // The model's architecture and loss. Must match the PS's (hidden); the
  // initial weights are replaced by the first SetModel.
  ActorCriticOptions model;
  int num_envs = 2;
  int rollout_steps = 128;  // per environment
  int epochs = 4;           // passes over each rollout
  int minibatch_size = 64;  // steps per gradient
  uint64_t seed = 1;        // environments, actions, shuffling

  absl::Status Validate() const;
  // Gradients produced from one rollout.
  int64_t gradients_per_rollout() const {
    const int64_t steps = int64_t{num_envs} * rollout_steps;
    return minibatch_size < 1 ? 0 : epochs * ((steps + minibatch_size - 1) / minibatch_size);
  }
};

// The settings the OLAF training experiments use (olaf-train sim and run):
// PPO clip 0.2, normalised advantages, Adam 3e-4, gamma 0.999, lambda 0.98,
// 2 environments x 128 steps, 4 epochs of 64-step minibatches, and 24
// hidden units, i.e. 1,757 parameters: one 9000-byte UPDATE frame, as the
// seed's switch expects ("one update per jumbo frame").
AsyncWorkerOptions DefaultAsyncWorkerOptions();

struct WorkerGradient {
  std::vector<float> gradient;          // flat, ActorCritic layout
  uint64_t env_steps = 0;               // steps collected during this call (a rollout, or 0)
  std::vector<double> episode_returns;  // episodes that ended during this call
};

class AsyncWorker {
 public:
  static absl::StatusOr<std::unique_ptr<AsyncWorker>> Create(const AsyncWorkerOptions& options);

  // Adopts the PS's parameters (size must match num_parameters()).
  absl::Status SetModel(std::span<const float> params);
  // The next minibatch gradient; collects a rollout first when the previous
  // one is used up (rollout_pending()).
  absl::StatusOr<WorkerGradient> Next();
  bool rollout_pending() const { return next_batch_ >= batches_total_; }

  size_t num_parameters() const { return model_->num_parameters(); }
  const ActorCritic& model() const { return *model_; }
  uint64_t env_steps() const { return env_steps_; }
  uint64_t episodes() const { return episodes_; }
  uint64_t gradients() const { return gradients_; }
  const AsyncWorkerOptions& options() const { return options_; }

 private:
  AsyncWorker(const AsyncWorkerOptions& options, std::unique_ptr<ActorCritic> model,
              Rollouts rollouts);
  void CollectRollout(WorkerGradient& out);

  AsyncWorkerOptions options_;
  std::unique_ptr<ActorCritic> model_;
  Rollouts rollouts_;
  std::mt19937_64 rng_;
  std::vector<Trajectory> steps_;              // one-step trajectories with advantages
  size_t next_batch_ = 0, batches_total_ = 0;  // minibatches of this rollout
  uint64_t env_steps_ = 0, episodes_ = 0, gradients_ = 0;
};

// The PS side: an ActorCritic that takes each gradient fragment as a
// partial Adam step (ApplyGradientSlice), anneals its learning rate linearly
// to 2 % over `anneal_s` seconds of training (0: constant), and measures
// staleness: how many updates the PS applied between the model a gradient
// was computed on and its application. Versions count applied fragments
// (PsCore's kFragment granularity); figures are in whole updates.
class FragmentLearner {
 public:
  FragmentLearner(std::unique_ptr<ActorCritic> model, double anneal_s, uint32_t fragment_elements);

  // A fragment computed on PS version `model_version` and applied as
  // version `new_version`, `elapsed_s` into training. False: refused by the
  // model (counted in rejected()). A model_version the PS has not reached
  // (a foreign sender) is applied but left out of the staleness figures.
  bool Apply(size_t offset, std::span<const float> values, uint32_t model_version,
             uint32_t new_version, uint32_t merged_count, double elapsed_s);

  const ActorCritic& model() const { return *model_; }
  std::span<const float> parameters() const { return model_->parameters(); }
  uint32_t fragments_per_update() const { return frags_; }
  uint64_t fragments_applied() const { return applied_; }
  uint64_t rejected() const { return rejected_; }
  double updates() const { return static_cast<double>(applied_) / frags_; }
  uint64_t worker_fragments_carried() const { return carried_; }  // Σ merged_count
  double carried_updates() const { return static_cast<double>(carried_) / frags_; }
  double mean_staleness() const { return n_ ? sum_ / static_cast<double>(n_) : 0; }
  // Mean staleness since the previous call (0 when nothing was applied).
  double TakeWindowStaleness();

 private:
  std::unique_ptr<ActorCritic> model_;
  double anneal_s_, lr0_;
  uint32_t frags_;
  uint64_t applied_ = 0, carried_ = 0, rejected_ = 0, n_ = 0, window_n_ = 0;
  double sum_ = 0, window_sum_ = 0;
};

}  // namespace inca::rl
