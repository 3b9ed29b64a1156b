// ActorCritic: an A2C learner for LunarLander on Eigen, shaped for a
// parameter server.
//
//  ActorCritic     two tanh MLPs, policy 8-H-H-4 (softmax) and value 8-H-H-1,
//                  whose weights live in one flat float vector (the "model"
//                  a PS broadcasts). ComputeGradients(trajectories) returns
//                  the flat gradient of the A2C loss (the "update" a worker
//                  sends); ApplyGradients(flat) takes one clipped Adam step
//                  (what the PS does per arriving update).
//  Trajectory      one environment's contiguous segment of a rollout.
//  A2cTrainer      single-process synchronous A2C over N environments: the
//                  baseline the distributed version is compared against.
//
// Flat layout: policy W1 (H x 8, column-major), b1, W2 (H x H), b2, W3
// (4 x H), b3, then value W1, b1, W2, b2, W3 (1 x H), b3.
// Not thread-safe; ComputeGradients is const and may run concurrently on
// copies.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/rl/lunar_lander.h"

namespace inca::rl {

struct ActorCriticOptions {
  int hidden = 64;
  double gamma = 0.99;
  double gae_lambda = 0.95;     // 1 = plain n-step returns
  double value_coef = 0.5;      // weight of 0.5 * (V - R)^2
  double entropy_coef = 0.01;   // weight of the entropy bonus
  double learning_rate = 7e-4;  // Adam
  double max_grad_norm = 0.5;   // global-norm clip in ApplyGradients; 0 = off
  // > 0: PPO clipped surrogate -min(r A, clip(r, 1-eps, 1+eps) A) with
  // r = pi(a|s) / exp(log_probs) instead of -A log pi(a|s). Needs
  // Trajectory::log_probs.
  double ppo_clip = 0;
  // Normalise the advantages of each ComputeGradients batch to mean 0, std 1.
  bool normalize_advantages = false;
  uint64_t seed = 1;  // weight initialisation

  absl::Status Validate() const;
};

// PPO as inca trains LunarLander (lunar-train, olaf-train): clip 0.2,
// normalised advantages, Adam 3e-4, gamma 0.999, lambda 0.98, entropy 0.01.
ActorCriticOptions PpoOptions();

struct Trajectory {
  std::vector<LunarObservation> observations;  // s_0 .. s_{T-1}
  std::vector<LunarAction> actions;            // a_t taken in s_t
  std::vector<float> rewards;                  // r_t
  bool terminal = false;                       // ended by termination: no bootstrap
  LunarObservation next_observation{};         // s_T, bootstrapped from when !terminal
  // Optional: log pi_old(a_t|s_t) of the acting policy (required for PPO).
  std::vector<float> log_probs;
  // Optional: precomputed advantages and value targets (FillAdvantages). When
  // set, ComputeGradients uses them as they are (then terminal and
  // next_observation are not used), so any subset of steps is a valid batch.
  std::vector<float> advantages, returns;
  size_t size() const { return actions.size(); }
};

class ActorCritic {
 public:
  static absl::StatusOr<std::unique_ptr<ActorCritic>> Create(const ActorCriticOptions& options);

  size_t num_parameters() const { return params_.size(); }
  std::span<const float> parameters() const { return params_; }
  // Replaces the model (e.g. with one received from the PS). Size must match.
  absl::Status SetParameters(std::span<const float> params);
  const ActorCriticOptions& options() const { return options_; }
  uint64_t steps_applied() const { return adam_t_; }
  void set_learning_rate(double lr) { options_.learning_rate = lr; }

  // Samples from pi(.|s); greedy=true takes the most probable action.
  // log_prob (optional) receives log pi(a|s) of the returned action.
  LunarAction Act(const LunarObservation& s, std::mt19937_64& rng, bool greedy = false,
                  float* log_prob = nullptr) const;
  std::array<float, kLunarActionCount> Probabilities(const LunarObservation& s) const;
  float Value(const LunarObservation& s) const;

  // Gradient of the mean A2C loss over all steps of all trajectories, in the
  // flat layout: -A * log pi(a|s) + value_coef * 0.5 * (V - R)^2 - entropy_coef
  // * H(pi), with A from GAE(gamma, lambda) and R = A + V (or the trajectory's
  // precomputed advantages/returns), A optionally normalised over the batch,
  // and the policy term replaced by the PPO clipped surrogate when
  // ppo_clip > 0. A and R are constants (no gradient). Empty input: zeros.
  std::vector<float> ComputeGradients(std::span<const Trajectory> trajectories) const;
  // Fills each trajectory's advantages/returns with GAE under the current
  // value function (done once per rollout before several PPO epochs).
  void FillAdvantages(std::span<Trajectory> trajectories) const;
  // One Adam step with the gradient clipped to max_grad_norm. Size must match.
  absl::Status ApplyGradients(std::span<const float> gradient);
  // One Adam step on parameters [offset, offset + gradient.size()) only: a
  // fragment of a gradient applied as a partial gradient (a PS behind OLAF
  // switches, docs/design/olaf-core.md "Fragments"). Adam's moments are
  // per element already; the bias correction uses a per-element step count,
  // and the clip is the slice's share of max_grad_norm (max_grad_norm ·
  // sqrt(len / num_parameters)). Out of range, empty or non-finite:
  // InvalidArgument, nothing changed.
  absl::Status ApplyGradientSlice(size_t offset, std::span<const float> gradient);

 private:
  explicit ActorCritic(const ActorCriticOptions& options);

  ActorCriticOptions options_;
  std::vector<float> params_;
  std::vector<float> adam_m_, adam_v_;
  uint64_t adam_t_ = 0;
  std::vector<uint64_t> slice_t_;  // per-element Adam steps (ApplyGradientSlice)
};

// Mean of the last 100 training episodes (Gymnasium's "solved" window).
class ReturnWindow {
 public:
  void Add(double episode_return);
  double mean() const;  // 0 before the first episode
  size_t size() const { return last_.size(); }
  uint64_t episodes() const { return episodes_; }

 private:
  std::deque<double> last_;
  double sum_ = 0;
  uint64_t episodes_ = 0;
};

// N LunarLander environments stepped together with a model's sampled
// actions: the rollout collection of TrainA2c and AsyncWorker.
class Rollouts {
 public:
  // Environment i starts from Reset(seed * 1000 + i).
  static absl::StatusOr<Rollouts> Create(int num_envs, uint64_t seed);
  // Steps every environment `steps` times with `model` (log-probs
  // recorded) and appends one Trajectory per contiguous segment to
  // `batch`: an episode's end closes a segment (truncation bootstraps,
  // termination does not). The returns of episodes that ended go to
  // `episode_returns`. Returns the steps taken.
  uint64_t Collect(const ActorCritic& model, int steps, std::mt19937_64& rng,
                   std::vector<Trajectory>* batch, std::vector<double>* episode_returns);

 private:
  std::vector<std::unique_ptr<LunarLander>> envs_;
  std::vector<LunarObservation> obs_;
  std::vector<double> episode_return_;
};

// One-step trajectories of `batch` (advantages and returns filled by
// FillAdvantages): any subset of them is a valid minibatch.
std::vector<Trajectory> SplitIntoSteps(std::span<const Trajectory> batch);

// Mean return of `model` (sampled actions) over `episodes` fresh episodes,
// seeded from `seed`; 0 for none.
double EvaluatePolicy(const ActorCritic& model, uint32_t episodes, uint64_t seed);

struct A2cTrainerOptions {
  ActorCriticOptions model;
  int num_envs = 16;
  int rollout_steps = 16;  // per env per update
  uint64_t seed = 1;       // environments and action sampling
  // > 0: PPO-style reuse of each rollout: advantages are computed once, then
  // ppo_epochs passes over the shuffled steps in minibatches of
  // minibatch_size, one ComputeGradients/ApplyGradients per minibatch
  // (set model.ppo_clip too). 0: one A2C update per rollout.
  int ppo_epochs = 0;
  int minibatch_size = 64;
  // Linearly anneal the learning rate to 0 over this many env steps (0: off).
  uint64_t anneal_steps = 0;
};

struct A2cProgress {
  uint64_t env_steps = 0;
  uint64_t episodes = 0;
  uint64_t updates = 0;
  double mean_return_last100 = 0;  // over the last min(100, episodes) episodes
  double wall_s = 0;
};

// Trains `model` (null: a fresh one from options.model) until
// `stop(progress)` returns true; stop is checked after every update.
absl::StatusOr<A2cProgress> TrainA2c(const A2cTrainerOptions& options,
                                     const std::function<bool(const A2cProgress&)>& stop,
                                     ActorCritic* model = nullptr);

}  // namespace inca::rl
