#include "inca/rl/async_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::rl {

absl::Status AsyncWorkerOptions::Validate() const {
  if (absl::Status s = model.Validate(); !s.ok()) return s;
  // Environment seeds are seed * 1000 + i: distinct across workers up to 1000.
  if (num_envs < 1 || num_envs > 1000) {
    return absl::InvalidArgumentError("num_envs must be 1..1000");
  }
  if (rollout_steps < 1 || rollout_steps > 100000) {
    return absl::InvalidArgumentError("rollout_steps must be 1..100000");
  }
  if (epochs < 1 || epochs > 100) return absl::InvalidArgumentError("epochs must be 1..100");
  if (int64_t{num_envs} * rollout_steps > 1'000'000) {
    return absl::InvalidArgumentError("num_envs x rollout_steps must be <= 1e6");
  }
  if (minibatch_size < 1 || minibatch_size > num_envs * rollout_steps) {
    return absl::InvalidArgumentError("minibatch_size must be 1..num_envs x rollout_steps");
  }
  if (model.ppo_clip <= 0 && epochs > 1) {
    return absl::InvalidArgumentError(
        "epochs > 1 reuses a rollout off-policy: set model.ppo_clip > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AsyncWorker>> AsyncWorker::Create(
    const AsyncWorkerOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto model = ActorCritic::Create(options.model);
  if (!model.ok()) return model.status();
  auto w = std::unique_ptr<AsyncWorker>(new AsyncWorker(options, std::move(model).value()));
  for (int i = 0; i < options.num_envs; ++i) {
    auto env = LunarLander::Create({});
    if (!env.ok()) return env.status();
    w->envs_.push_back(std::move(env).value());
    w->obs_.push_back(w->envs_.back()->Reset(options.seed * 1000 + static_cast<uint64_t>(i)));
  }
  return w;
}

AsyncWorker::AsyncWorker(const AsyncWorkerOptions& options, std::unique_ptr<ActorCritic> model)
    : options_(options),
      model_(std::move(model)),
      episode_return_(static_cast<size_t>(options.num_envs), 0.0),
      rng_(options.seed) {}

absl::Status AsyncWorker::SetModel(std::span<const float> params) {
  return model_->SetParameters(params);
}

void AsyncWorker::CollectRollout(WorkerGradient& out) {
  std::vector<Trajectory> batch;
  for (size_t i = 0; i < envs_.size(); ++i) {
    Trajectory t;
    for (int k = 0; k < options_.rollout_steps; ++k) {
      float log_prob = 0;
      const LunarAction a = model_->Act(obs_[i], rng_, false, &log_prob);
      const LunarStep r = envs_[i]->Step(a);
      t.observations.push_back(obs_[i]);
      t.actions.push_back(a);
      t.log_probs.push_back(log_prob);
      t.rewards.push_back(static_cast<float>(r.reward));
      episode_return_[i] += r.reward;
      ++out.env_steps;
      obs_[i] = r.observation;
      if (r.terminated || r.truncated) {
        // Truncation bootstraps from the final state; termination does not.
        t.terminal = r.terminated;
        t.next_observation = r.observation;
        batch.push_back(std::move(t));
        t = Trajectory{};
        out.episode_returns.push_back(episode_return_[i]);
        ++episodes_;
        episode_return_[i] = 0;
        obs_[i] = envs_[i]->Reset();
      }
    }
    if (t.size() > 0) {
      t.terminal = false;
      t.next_observation = obs_[i];
      batch.push_back(std::move(t));
    }
  }
  env_steps_ += out.env_steps;
  model_->FillAdvantages(std::span(batch));
  steps_.clear();
  for (const Trajectory& t : batch) {
    for (size_t i = 0; i < t.size(); ++i) {
      Trajectory s;
      s.observations = {t.observations[i]};
      s.actions = {t.actions[i]};
      s.rewards = {t.rewards[i]};
      s.log_probs = {t.log_probs[i]};
      s.advantages = {t.advantages[i]};
      s.returns = {t.returns[i]};
      steps_.push_back(std::move(s));
    }
  }
  next_batch_ = 0;
  batches_total_ = static_cast<size_t>(options_.gradients_per_rollout());
}

absl::StatusOr<WorkerGradient> AsyncWorker::Next() {
  WorkerGradient out;
  if (rollout_pending()) CollectRollout(out);
  const size_t mb = static_cast<size_t>(options_.minibatch_size);
  const size_t per_epoch = (steps_.size() + mb - 1) / mb;
  const size_t b = next_batch_ % per_epoch;
  if (b == 0) std::shuffle(steps_.begin(), steps_.end(), rng_);  // a new epoch
  const size_t begin = b * mb, end = std::min(begin + mb, steps_.size());
  out.gradient = model_->ComputeGradients(std::span(steps_).subspan(begin, end - begin));
  ++next_batch_;
  ++gradients_;
  return out;
}

}  // namespace inca::rl
