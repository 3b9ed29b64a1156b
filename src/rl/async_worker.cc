#include "inca/rl/async_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::rl {

AsyncWorkerOptions DefaultAsyncWorkerOptions() {
  AsyncWorkerOptions o;
  o.model = PpoOptions();
  o.model.hidden = 24;
  o.num_envs = 2;
  o.rollout_steps = 128;
  o.epochs = 4;
  o.minibatch_size = 64;
  return o;
}

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
  auto rollouts = Rollouts::Create(options.num_envs, options.seed);
  if (!rollouts.ok()) return rollouts.status();
  return std::unique_ptr<AsyncWorker>(
      new AsyncWorker(options, std::move(model).value(), std::move(rollouts).value()));
}

AsyncWorker::AsyncWorker(const AsyncWorkerOptions& options, std::unique_ptr<ActorCritic> model,
                         Rollouts rollouts)
    : options_(options),
      model_(std::move(model)),
      rollouts_(std::move(rollouts)),
      rng_(options.seed) {}

absl::Status AsyncWorker::SetModel(std::span<const float> params) {
  return model_->SetParameters(params);
}

void AsyncWorker::CollectRollout(WorkerGradient& out) {
  std::vector<Trajectory> batch;
  out.env_steps =
      rollouts_.Collect(*model_, options_.rollout_steps, rng_, &batch, &out.episode_returns);
  env_steps_ += out.env_steps;
  episodes_ += out.episode_returns.size();
  model_->FillAdvantages(std::span(batch));
  steps_ = SplitIntoSteps(batch);
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

FragmentLearner::FragmentLearner(std::unique_ptr<ActorCritic> model, double anneal_s,
                                 uint32_t fragment_elements)
    : model_(std::move(model)),
      anneal_s_(anneal_s),
      lr0_(model_->options().learning_rate),
      frags_(static_cast<uint32_t>(
          (model_->num_parameters() + std::max<uint32_t>(fragment_elements, 1) - 1) /
          std::max<uint32_t>(fragment_elements, 1))) {}

bool FragmentLearner::Apply(size_t offset, std::span<const float> values, uint32_t model_version,
                            uint32_t new_version, uint32_t merged_count, double elapsed_s) {
  if (anneal_s_ > 0) {
    model_->set_learning_rate(lr0_ * std::max(0.02, 1.0 - elapsed_s / anneal_s_));
  }
  if (!model_->ApplyGradientSlice(offset, values).ok()) {
    ++rejected_;
    return false;
  }
  ++applied_;
  carried_ += merged_count;
  const int64_t lag = int64_t{new_version} - 1 - static_cast<int64_t>(model_version);
  if (lag >= 0) {
    const double updates = static_cast<double>(lag) / frags_;
    sum_ += updates;
    ++n_;
    window_sum_ += updates;
    ++window_n_;
  }
  return true;
}

double FragmentLearner::TakeWindowStaleness() {
  const double mean = window_n_ ? window_sum_ / static_cast<double>(window_n_) : 0;
  window_sum_ = 0;
  window_n_ = 0;
  return mean;
}

}  // namespace inca::rl
