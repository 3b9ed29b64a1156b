// A2C on Eigen (see include/inca/rl/actor_critic.h). Forward and backward
// passes run on a whole batch at once: columns are samples.
#include "inca/rl/actor_critic.h"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include "absl/strings/str_cat.h"

namespace inca::rl {
namespace {

using Matrix = Eigen::MatrixXf;
using MatMap = Eigen::Map<Matrix>;
using ConstMatMap = Eigen::Map<const Matrix>;
using VecMap = Eigen::Map<Eigen::VectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::VectorXf>;

constexpr int kIn = kLunarObservationSize;

// Offsets of one MLP in-H-H-out inside the flat vector.
struct MlpLayout {
  int in, hidden, out;
  size_t base;
  size_t w1() const { return base; }
  size_t b1() const { return w1() + size_t(hidden) * in; }
  size_t w2() const { return b1() + hidden; }
  size_t b2() const { return w2() + size_t(hidden) * hidden; }
  size_t w3() const { return b2() + hidden; }
  size_t b3() const { return w3() + size_t(out) * hidden; }
  size_t end() const { return b3() + out; }
};

MlpLayout PolicyLayout(int h) {
  return {kIn, h, kLunarActionCount, 0};
}
MlpLayout ValueLayout(int h) {
  return {kIn, h, 1, PolicyLayout(h).end()};
}

struct Activations {
  Matrix h1, h2, out;
};

Activations Forward(const MlpLayout& l, const float* p, const Matrix& x) {
  ConstMatMap w1(p + l.w1(), l.hidden, l.in), w2(p + l.w2(), l.hidden, l.hidden),
      w3(p + l.w3(), l.out, l.hidden);
  ConstVecMap b1(p + l.b1(), l.hidden), b2(p + l.b2(), l.hidden), b3(p + l.b3(), l.out);
  Activations a;
  a.h1 = ((w1 * x).colwise() + b1).array().tanh();
  a.h2 = ((w2 * a.h1).colwise() + b2).array().tanh();
  a.out = (w3 * a.h2).colwise() + b3;
  return a;
}

// Accumulates dLoss/dparams into g given dLoss/dout (out x N).
void Backward(const MlpLayout& l, const float* p, const Matrix& x, const Activations& a,
              const Matrix& d_out, float* g) {
  ConstMatMap w2(p + l.w2(), l.hidden, l.hidden), w3(p + l.w3(), l.out, l.hidden);
  MatMap(g + l.w3(), l.out, l.hidden) += d_out * a.h2.transpose();
  VecMap(g + l.b3(), l.out) += d_out.rowwise().sum();
  const Matrix d_z2 = ((w3.transpose() * d_out).array() * (1 - a.h2.array().square())).matrix();
  MatMap(g + l.w2(), l.hidden, l.hidden) += d_z2 * a.h1.transpose();
  VecMap(g + l.b2(), l.hidden) += d_z2.rowwise().sum();
  const Matrix d_z1 = ((w2.transpose() * d_z2).array() * (1 - a.h1.array().square())).matrix();
  MatMap(g + l.w1(), l.hidden, l.in) += d_z1 * x.transpose();
  VecMap(g + l.b1(), l.hidden) += d_z1.rowwise().sum();
}

// Column-wise softmax of logits (actions x N).
Matrix Softmax(const Matrix& logits) {
  Matrix p = (logits.rowwise() - logits.colwise().maxCoeff()).array().exp();
  p.array().rowwise() /= p.colwise().sum().array();
  return p;
}

Matrix ToColumns(std::span<const LunarObservation> obs) {
  Matrix x(kIn, static_cast<Eigen::Index>(obs.size()));
  for (size_t j = 0; j < obs.size(); ++j) {
    for (int i = 0; i < kIn; ++i) x(i, static_cast<Eigen::Index>(j)) = obs[j][i];
  }
  return x;
}

// Orthogonal-ish init: uniform(+-sqrt(6/(fan_in+fan_out))) * gain (Glorot),
// zero biases; the policy's last layer is scaled by 0.01 so pi starts uniform.
void InitMlp(const MlpLayout& l, float out_gain, std::mt19937_64& rng, float* p) {
  auto fill = [&](size_t off, int rows, int cols, float gain) {
    const float lim = gain * std::sqrt(6.0f / static_cast<float>(rows + cols));
    std::uniform_real_distribution<float> u(-lim, lim);
    for (size_t k = 0; k < size_t(rows) * cols; ++k) p[off + k] = u(rng);
  };
  fill(l.w1(), l.hidden, l.in, 1.0f);
  fill(l.w2(), l.hidden, l.hidden, 1.0f);
  fill(l.w3(), l.out, l.hidden, out_gain);
}

}  // namespace

ActorCriticOptions PpoOptions() {
  ActorCriticOptions o;
  o.ppo_clip = 0.2;
  o.normalize_advantages = true;
  o.learning_rate = 3e-4;
  o.gamma = 0.999;
  o.gae_lambda = 0.98;
  o.entropy_coef = 0.01;
  return o;
}

absl::Status ActorCriticOptions::Validate() const {
  if (hidden < 1 || hidden > 4096) return absl::InvalidArgumentError("hidden must be 1..4096");
  if (!(gamma > 0 && gamma <= 1)) return absl::InvalidArgumentError("gamma must be in (0, 1]");
  if (!(gae_lambda >= 0 && gae_lambda <= 1)) {
    return absl::InvalidArgumentError("gae_lambda must be in [0, 1]");
  }
  if (!(learning_rate > 0)) return absl::InvalidArgumentError("learning_rate must be > 0");
  if (value_coef < 0 || entropy_coef < 0 || max_grad_norm < 0 || ppo_clip < 0) {
    return absl::InvalidArgumentError("coefficients must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ActorCritic>> ActorCritic::Create(
    const ActorCriticOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<ActorCritic>(new ActorCritic(options));
}

ActorCritic::ActorCritic(const ActorCriticOptions& options) : options_(options) {
  const MlpLayout pl = PolicyLayout(options.hidden), vl = ValueLayout(options.hidden);
  params_.assign(vl.end(), 0.0f);
  std::mt19937_64 rng(options.seed);
  InitMlp(pl, 0.01f, rng, params_.data());
  InitMlp(vl, 1.0f, rng, params_.data());
  adam_m_.assign(params_.size(), 0.0f);
  adam_v_.assign(params_.size(), 0.0f);
}

absl::Status ActorCritic::SetParameters(std::span<const float> params) {
  if (params.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", params_.size(), " parameters, got ", params.size()));
  }
  std::copy(params.begin(), params.end(), params_.begin());
  return absl::OkStatus();
}

std::array<float, kLunarActionCount> ActorCritic::Probabilities(const LunarObservation& s) const {
  const Matrix x = ToColumns(std::span(&s, 1));
  const Matrix p = Softmax(Forward(PolicyLayout(options_.hidden), params_.data(), x).out);
  std::array<float, kLunarActionCount> out;
  for (int a = 0; a < kLunarActionCount; ++a) out[a] = p(a, 0);
  return out;
}

float ActorCritic::Value(const LunarObservation& s) const {
  const Matrix x = ToColumns(std::span(&s, 1));
  return Forward(ValueLayout(options_.hidden), params_.data(), x).out(0, 0);
}

LunarAction ActorCritic::Act(const LunarObservation& s, std::mt19937_64& rng, bool greedy,
                             float* log_prob) const {
  const auto p = Probabilities(s);
  int chosen = kLunarActionCount - 1;
  if (greedy) {
    chosen = static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin());
  } else {
    const float u = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
    float acc = 0;
    for (int a = 0; a < kLunarActionCount; ++a) {
      acc += p[a];
      if (u < acc) {
        chosen = a;
        break;
      }
    }
  }
  if (log_prob != nullptr) *log_prob = std::log(std::max(p[chosen], 1e-12f));
  return static_cast<LunarAction>(chosen);
}

void ActorCritic::FillAdvantages(std::span<Trajectory> trajectories) const {
  std::vector<LunarObservation> states;
  for (const Trajectory& t : trajectories) {
    states.insert(states.end(), t.observations.begin(), t.observations.begin() + t.size());
    states.push_back(t.next_observation);
  }
  if (states.empty()) return;
  const Matrix v = Forward(ValueLayout(options_.hidden), params_.data(), ToColumns(states)).out;
  const float gamma = static_cast<float>(options_.gamma);
  const float lambda = static_cast<float>(options_.gae_lambda);
  Eigen::Index off = 0;
  for (Trajectory& t : trajectories) {
    const auto n = static_cast<Eigen::Index>(t.size());
    t.advantages.assign(t.size(), 0.0f);
    t.returns.assign(t.size(), 0.0f);
    float next_v = t.terminal ? 0.0f : v(0, off + n);
    float gae = 0;
    for (size_t i = t.size(); i-- > 0;) {
      const float vi = v(0, off + static_cast<Eigen::Index>(i));
      gae = t.rewards[i] + gamma * next_v - vi + gamma * lambda * gae;
      t.advantages[i] = gae;
      t.returns[i] = gae + vi;
      next_v = vi;
    }
    off += n + 1;
  }
}

std::vector<float> ActorCritic::ComputeGradients(std::span<const Trajectory> trajectories) const {
  std::vector<float> grad(params_.size(), 0.0f);
  // All states, plus each trajectory's bootstrap state, in one batch.
  std::vector<LunarObservation> states;
  size_t n = 0;
  for (const Trajectory& t : trajectories) n += t.size();
  if (n == 0) return grad;
  states.reserve(n + trajectories.size());
  for (const Trajectory& t : trajectories) {
    states.insert(states.end(), t.observations.begin(), t.observations.begin() + t.size());
  }
  for (const Trajectory& t : trajectories) states.push_back(t.next_observation);
  const Matrix x_all = ToColumns(states);
  const MlpLayout pl = PolicyLayout(options_.hidden), vl = ValueLayout(options_.hidden);
  const Matrix x = x_all.leftCols(static_cast<Eigen::Index>(n));
  const Activations va = Forward(vl, params_.data(), x_all);

  // GAE per trajectory.
  Eigen::VectorXf adv(static_cast<Eigen::Index>(n)), ret(static_cast<Eigen::Index>(n));
  size_t off = 0;
  for (size_t k = 0; k < trajectories.size(); ++k) {
    const Trajectory& t = trajectories[k];
    if (t.advantages.size() == t.size() && t.returns.size() == t.size()) {
      for (size_t i = 0; i < t.size(); ++i) {
        adv(static_cast<Eigen::Index>(off + i)) = t.advantages[i];
        ret(static_cast<Eigen::Index>(off + i)) = t.returns[i];
      }
      off += t.size();
      continue;
    }
    const float gamma = static_cast<float>(options_.gamma);
    const float lambda = static_cast<float>(options_.gae_lambda);
    float next_v = t.terminal ? 0.0f : va.out(0, static_cast<Eigen::Index>(n + k));
    float gae = 0;
    for (size_t i = t.size(); i-- > 0;) {
      const auto col = static_cast<Eigen::Index>(off + i);
      const float v = va.out(0, col);
      const float delta = t.rewards[i] + gamma * next_v - v;
      gae = delta + gamma * lambda * gae;
      adv(col) = gae;
      ret(col) = gae + v;
      next_v = v;
    }
    off += t.size();
  }

  if (options_.normalize_advantages && n > 1) {
    const float mean = adv.mean();
    const float sd = std::sqrt((adv.array() - mean).square().mean());
    adv = ((adv.array() - mean) / (sd + 1e-8f)).matrix();
  }

  const float inv_n = 1.0f / static_cast<float>(n);
  // Value head: d/dV of value_coef * 0.5 * (V - R)^2, averaged.
  Activations vx{va.h1.leftCols(static_cast<Eigen::Index>(n)),
                 va.h2.leftCols(static_cast<Eigen::Index>(n)),
                 va.out.leftCols(static_cast<Eigen::Index>(n))};
  const Matrix d_v =
      (static_cast<float>(options_.value_coef) * inv_n) * (vx.out - ret.transpose()).eval();
  Backward(vl, params_.data(), x, vx, d_v, grad.data());

  // Policy head: d/dz of -A log pi(a) - beta H(pi); for PPO, of
  // -min(r A, clip(r) A) with r = pi(a) / pi_old(a): d/dz = -A r d log pi(a)
  // where the unclipped term is the minimum, 0 where the clipped one is.
  const Activations pa = Forward(pl, params_.data(), x);
  const Matrix p = Softmax(pa.out);
  const Matrix logp = p.array().max(1e-12f).log();
  const Eigen::RowVectorXf entropy = -(p.array() * logp.array()).colwise().sum();
  Matrix d_z = (static_cast<float>(options_.entropy_coef) * inv_n) *
               (p.array() * (logp.array().rowwise() + entropy.array())).matrix();
  const float eps = static_cast<float>(options_.ppo_clip);
  off = 0;
  for (const Trajectory& t : trajectories) {
    const bool ppo = eps > 0 && t.log_probs.size() == t.size();
    for (size_t i = 0; i < t.size(); ++i, ++off) {
      const auto col = static_cast<Eigen::Index>(off);
      const int a = static_cast<int>(t.actions[i]);
      float w = adv(col);
      if (ppo) {
        const float ratio = std::exp(logp(a, col) - t.log_probs[i]);
        const bool clipped = (w > 0 && ratio > 1 + eps) || (w < 0 && ratio < 1 - eps);
        w = clipped ? 0.0f : w * ratio;
      }
      if (w == 0) continue;
      Eigen::VectorXf one_hot = Eigen::VectorXf::Zero(kLunarActionCount);
      one_hot(a) = 1;
      d_z.col(col) += (w * inv_n) * (p.col(col) - one_hot);
    }
  }
  Backward(pl, params_.data(), x, pa, d_z, grad.data());
  return grad;
}

absl::Status ActorCritic::ApplyGradients(std::span<const float> gradient) {
  if (gradient.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", params_.size(), " gradient entries, got ", gradient.size()));
  }
  ConstVecMap g_raw(gradient.data(), static_cast<Eigen::Index>(gradient.size()));
  float scale = 1.0f;
  const float norm = g_raw.norm();
  if (!std::isfinite(norm)) return absl::InvalidArgumentError("non-finite gradient");
  if (options_.max_grad_norm > 0 && norm > options_.max_grad_norm) {
    scale = static_cast<float>(options_.max_grad_norm) / norm;
  }
  constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;
  ++adam_t_;
  const auto t = static_cast<float>(adam_t_);
  const float lr = static_cast<float>(options_.learning_rate) * std::sqrt(1 - std::pow(kBeta2, t)) /
                   (1 - std::pow(kBeta1, t));
  const auto size = static_cast<Eigen::Index>(params_.size());
  VecMap m(adam_m_.data(), size), v(adam_v_.data(), size), w(params_.data(), size);
  const Eigen::VectorXf g = scale * g_raw;
  m = kBeta1 * m + (1 - kBeta1) * g;
  v = kBeta2 * v + (1 - kBeta2) * g.cwiseProduct(g);
  w.array() -= lr * m.array() / (v.array().sqrt() + kEps);
  return absl::OkStatus();
}

absl::Status ActorCritic::ApplyGradientSlice(size_t offset, std::span<const float> gradient) {
  if (gradient.empty() || offset > params_.size() || gradient.size() > params_.size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat("gradient slice [", offset, ", +",
                                                   gradient.size(), ") outside the ",
                                                   params_.size(), " parameters"));
  }
  ConstVecMap g(gradient.data(), static_cast<Eigen::Index>(gradient.size()));
  // In double: a large but finite float gradient is clipped, not refused.
  const double norm = g.cast<double>().norm();
  if (!std::isfinite(norm)) return absl::InvalidArgumentError("non-finite gradient");
  float scale = 1.0f;
  const double limit = options_.max_grad_norm * std::sqrt(static_cast<double>(gradient.size()) /
                                                          static_cast<double>(params_.size()));
  if (options_.max_grad_norm > 0 && norm > limit) scale = static_cast<float>(limit / norm);
  if (slice_t_.empty()) slice_t_.assign(params_.size(), adam_t_);
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999;
  constexpr float kEps = 1e-8f;
  const auto lr0 = options_.learning_rate;
  // Elements of one fragment share their step count in practice; recompute
  // the correction only when it changes.
  uint64_t cached_t = 0;
  float lr = 0;
  for (size_t i = 0; i < gradient.size(); ++i) {
    const size_t k = offset + i;
    const uint64_t t = ++slice_t_[k];
    if (t != cached_t) {
      cached_t = t;
      const auto td = static_cast<double>(t);
      lr = static_cast<float>(lr0 * std::sqrt(1 - std::pow(kBeta2, td)) /
                              (1 - std::pow(kBeta1, td)));
    }
    const float gi = scale * gradient[i];
    adam_m_[k] = 0.9f * adam_m_[k] + 0.1f * gi;
    adam_v_[k] = 0.999f * adam_v_[k] + 0.001f * gi * gi;
    params_[k] -= lr * adam_m_[k] / (std::sqrt(adam_v_[k]) + kEps);
  }
  return absl::OkStatus();
}

void ReturnWindow::Add(double episode_return) {
  ++episodes_;
  last_.push_back(episode_return);
  sum_ += episode_return;
  if (last_.size() > 100) {
    sum_ -= last_.front();
    last_.pop_front();
  }
}

double ReturnWindow::mean() const {
  return last_.empty() ? 0.0 : sum_ / static_cast<double>(last_.size());
}

absl::StatusOr<Rollouts> Rollouts::Create(int num_envs, uint64_t seed) {
  Rollouts r;
  for (int i = 0; i < num_envs; ++i) {
    auto env = LunarLander::Create({});
    if (!env.ok()) return env.status();
    r.envs_.push_back(std::move(env).value());
    r.obs_.push_back(r.envs_.back()->Reset(seed * 1000 + static_cast<uint64_t>(i)));
  }
  r.episode_return_.assign(r.envs_.size(), 0.0);
  return r;
}

uint64_t Rollouts::Collect(const ActorCritic& model, int steps, std::mt19937_64& rng,
                           std::vector<Trajectory>* batch, std::vector<double>* episode_returns) {
  uint64_t taken = 0;
  for (size_t i = 0; i < envs_.size(); ++i) {
    Trajectory t;
    for (int k = 0; k < steps; ++k) {
      float log_prob = 0;
      const LunarAction a = model.Act(obs_[i], rng, false, &log_prob);
      const LunarStep r = envs_[i]->Step(a);
      t.observations.push_back(obs_[i]);
      t.actions.push_back(a);
      t.log_probs.push_back(log_prob);
      t.rewards.push_back(static_cast<float>(r.reward));
      episode_return_[i] += r.reward;
      ++taken;
      obs_[i] = r.observation;
      if (r.terminated || r.truncated) {
        // Truncation bootstraps from the final state; termination does not.
        t.terminal = r.terminated;
        t.next_observation = r.observation;
        batch->push_back(std::move(t));
        t = Trajectory{};
        episode_returns->push_back(episode_return_[i]);
        episode_return_[i] = 0;
        obs_[i] = envs_[i]->Reset();
      }
    }
    if (t.size() > 0) {
      t.terminal = false;
      t.next_observation = obs_[i];
      batch->push_back(std::move(t));
    }
  }
  return taken;
}

std::vector<Trajectory> SplitIntoSteps(std::span<const Trajectory> batch) {
  std::vector<Trajectory> steps;
  for (const Trajectory& t : batch) {
    for (size_t i = 0; i < t.size(); ++i) {
      Trajectory s;
      s.observations = {t.observations[i]};
      s.actions = {t.actions[i]};
      s.rewards = {t.rewards[i]};
      s.log_probs = {t.log_probs[i]};
      s.advantages = {t.advantages[i]};
      s.returns = {t.returns[i]};
      steps.push_back(std::move(s));
    }
  }
  return steps;
}

double EvaluatePolicy(const ActorCritic& model, uint32_t episodes, uint64_t seed) {
  if (episodes == 0) return 0;
  auto env = LunarLander::Create({});
  if (!env.ok()) return 0;
  std::mt19937_64 rng(seed + 424242);
  double total = 0;
  for (uint32_t e = 0; e < episodes; ++e) {
    LunarObservation s = (*env)->Reset(seed * 100000 + 7777 + e);
    while (true) {
      const LunarStep r = (*env)->Step(model.Act(s, rng));
      total += r.reward;
      s = r.observation;
      if (r.terminated || r.truncated) break;
    }
  }
  return total / episodes;
}

absl::StatusOr<A2cProgress> TrainA2c(const A2cTrainerOptions& options,
                                     const std::function<bool(const A2cProgress&)>& stop,
                                     ActorCritic* model) {
  if (options.num_envs < 1 || options.rollout_steps < 1) {
    return absl::InvalidArgumentError("num_envs and rollout_steps must be >= 1");
  }
  if (options.ppo_epochs < 0 || options.minibatch_size < 1) {
    return absl::InvalidArgumentError("ppo_epochs must be >= 0 and minibatch_size >= 1");
  }
  std::unique_ptr<ActorCritic> owned;
  if (model == nullptr) {
    auto created = ActorCritic::Create(options.model);
    if (!created.ok()) return created.status();
    owned = std::move(created).value();
    model = owned.get();
  }
  auto rollouts = Rollouts::Create(options.num_envs, options.seed);
  if (!rollouts.ok()) return rollouts.status();
  std::mt19937_64 rng(options.seed);
  ReturnWindow window;
  A2cProgress progress;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Trajectory> batch, steps;
  std::vector<double> returns;
  const double base_lr = model->options().learning_rate;
  while (true) {
    batch.clear();
    returns.clear();
    progress.env_steps += rollouts->Collect(*model, options.rollout_steps, rng, &batch, &returns);
    for (double r : returns) window.Add(r);
    progress.episodes = window.episodes();
    if (options.anneal_steps > 0) {
      const double frac =
          1.0 - static_cast<double>(progress.env_steps) / static_cast<double>(options.anneal_steps);
      model->set_learning_rate(base_lr * std::max(frac, 0.02));
    }
    if (options.ppo_epochs <= 0) {
      if (absl::Status s = model->ApplyGradients(model->ComputeGradients(batch)); !s.ok()) return s;
    } else {
      // One-step trajectories with fixed advantages/returns: any subset of
      // them is a minibatch.
      model->FillAdvantages(std::span(batch));
      steps = SplitIntoSteps(batch);
      const size_t mb = static_cast<size_t>(std::max(options.minibatch_size, 1));
      for (int epoch = 0; epoch < options.ppo_epochs; ++epoch) {
        std::shuffle(steps.begin(), steps.end(), rng);
        for (size_t b = 0; b < steps.size(); b += mb) {
          const size_t e = std::min(b + mb, steps.size());
          const auto g = model->ComputeGradients(std::span(steps).subspan(b, e - b));
          if (absl::Status s = model->ApplyGradients(g); !s.ok()) return s;
        }
      }
    }
    ++progress.updates;
    progress.mean_return_last100 = window.mean();
    progress.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (stop(progress)) return progress;
  }
}

}  // namespace inca::rl
