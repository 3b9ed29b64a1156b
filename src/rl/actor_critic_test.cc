// ActorCritic: gradients against finite differences of the A2C loss, the
// flat-vector contract, and that a few updates move the policy the right way.
#include "inca/rl/actor_critic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "gtest/gtest.h"

namespace inca::rl {
namespace {

std::unique_ptr<ActorCritic> Make(ActorCriticOptions o = {}) {
  auto m = ActorCritic::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

Trajectory Rollout(uint64_t seed, int steps, const ActorCritic& model) {
  auto env = std::move(LunarLander::Create({})).value();
  std::mt19937_64 rng(seed);
  Trajectory t;
  LunarObservation s = env->Reset(seed);
  for (int k = 0; k < steps; ++k) {
    const LunarAction a = model.Act(s, rng);
    const LunarStep r = env->Step(a);
    t.observations.push_back(s);
    t.actions.push_back(a);
    t.rewards.push_back(static_cast<float>(r.reward));
    s = r.observation;
    if (r.terminated) {
      t.terminal = true;
      break;
    }
  }
  t.next_observation = s;
  return t;
}

// Compares 60 random entries of the gradient `g` (at parameters `w`) with
// central differences of `loss` (eps 1e-2), setting m's parameters for each;
// returns how many were compared.
int CheckAgainstFiniteDifferences(ActorCritic& m, const std::vector<float>& w,
                                  const std::vector<float>& g, std::mt19937_64& rng,
                                  const std::function<double()>& loss) {
  EXPECT_EQ(g.size(), w.size());
  if (g.size() != w.size() || w.empty()) return 0;
  std::uniform_int_distribution<size_t> pick(0, w.size() - 1);
  int checked = 0;
  for (int k = 0; k < 60; ++k) {
    const size_t i = pick(rng);
    const float eps = 1e-2f;
    std::vector<float> wp = w, wm = w;
    wp[i] += eps;
    wm[i] -= eps;
    if (!m.SetParameters(wp).ok()) return checked;
    const double lp = loss();
    if (!m.SetParameters(wm).ok()) return checked;
    const double lm = loss();
    const double fd = (lp - lm) / (2 * eps);
    EXPECT_NEAR(g[i], fd, 0.02 * std::abs(fd) + 2e-3) << "param " << i;
    ++checked;
  }
  return checked;
}

TEST(ActorCriticTest, Shapes) {
  auto m = Make({.hidden = 64});
  // policy 8*64+64+64*64+64+4*64+4, value the same with 1 output.
  EXPECT_EQ(m->num_parameters(),
            size_t{(512 + 64 + 4096 + 64 + 256 + 4) + (512 + 64 + 4096 + 64 + 64 + 1)});
  EXPECT_FALSE(m->SetParameters(std::vector<float>(3)).ok());
  EXPECT_FALSE(m->ApplyGradients(std::vector<float>(3)).ok());
  EXPECT_FALSE(ActorCritic::Create({.hidden = 0}).ok());
  const auto p = m->Probabilities(LunarObservation{});
  for (float x : p) EXPECT_NEAR(x, 0.25, 0.02);  // small last layer: near uniform
}

// Loss with advantages and returns frozen at theta0 (as A2C's stop-gradient).
double Loss(const ActorCritic& m, const Trajectory& t, const std::vector<double>& adv,
            const std::vector<double>& ret) {
  const auto& o = m.options();
  double loss = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const auto p = m.Probabilities(t.observations[i]);
    double h = 0;
    for (float x : p) h -= x * std::log(std::max(x, 1e-12f));
    const double v = m.Value(t.observations[i]);
    loss += -adv[i] * std::log(p[static_cast<int>(t.actions[i])]) +
            o.value_coef * 0.5 * (v - ret[i]) * (v - ret[i]) - o.entropy_coef * h;
  }
  return loss / static_cast<double>(t.size());
}

TEST(ActorCriticTest, GradientMatchesFiniteDifferences) {
  auto m = Make({.hidden = 8, .gae_lambda = 0.9, .entropy_coef = 0.05, .seed = 3});
  // Larger policy weights than the default init, so the policy term matters.
  std::vector<float> w(m->parameters().begin(), m->parameters().end());
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0, 0.3f);
  for (float& x : w) x += n(rng);
  ASSERT_TRUE(m->SetParameters(w).ok());
  const Trajectory t = Rollout(7, 40, *m);
  // GAE by hand at theta0.
  const auto& o = m->options();
  std::vector<double> adv(t.size()), ret(t.size());
  double next_v = t.terminal ? 0 : m->Value(t.next_observation), gae = 0;
  for (size_t i = t.size(); i-- > 0;) {
    const double v = m->Value(t.observations[i]);
    gae = t.rewards[i] + o.gamma * next_v - v + o.gamma * o.gae_lambda * gae;
    adv[i] = gae;
    ret[i] = gae + v;
    next_v = v;
  }
  const std::vector<float> g = m->ComputeGradients(std::span(&t, 1));
  ASSERT_EQ(g.size(), w.size());
  EXPECT_EQ(CheckAgainstFiniteDifferences(*m, w, g, rng, [&] { return Loss(*m, t, adv, ret); }),
            60);
}

// The PPO loss with normalised, precomputed advantages (what TrainA2c with
// ppo_epochs > 0 optimises): -min(r A, clip(r, 1-e, 1+e) A) + value + entropy.
TEST(ActorCriticTest, PpoGradientMatchesFiniteDifferences) {
  auto m = Make({.hidden = 8,
                 .gae_lambda = 0.9,
                 .entropy_coef = 0.05,
                 .ppo_clip = 0.2,
                 .normalize_advantages = true,
                 .seed = 4});
  std::vector<float> w(m->parameters().begin(), m->parameters().end());
  std::mt19937_64 rng(6);
  std::normal_distribution<float> n(0, 0.3f);
  for (float& x : w) x += n(rng);
  // Act with an older policy (w_old) so that some ratios fall outside the clip.
  std::vector<float> w_old = w;
  for (float& x : w_old) x += 0.5f * n(rng);
  ASSERT_TRUE(m->SetParameters(w_old).ok());
  Trajectory t = Rollout(8, 40, *m);
  for (size_t i = 0; i < t.size(); ++i) {
    t.log_probs.push_back(
        std::log(m->Probabilities(t.observations[i])[static_cast<int>(t.actions[i])]));
  }
  ASSERT_TRUE(m->SetParameters(w).ok());
  m->FillAdvantages(std::span(&t, 1));
  ASSERT_EQ(t.advantages.size(), t.size());
  double mean = 0, var = 0;
  for (float a : t.advantages) mean += a / static_cast<double>(t.size());
  for (float a : t.advantages) var += (a - mean) * (a - mean) / static_cast<double>(t.size());
  std::vector<double> adv(t.size());
  for (size_t i = 0; i < t.size(); ++i) adv[i] = (t.advantages[i] - mean) / std::sqrt(var);
  const auto& o = m->options();
  auto loss = [&] {
    double l = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto p = m->Probabilities(t.observations[i]);
      double h = 0;
      for (float x : p) h -= x * std::log(std::max(x, 1e-12f));
      const double r =
          std::exp(std::log(p[static_cast<int>(t.actions[i])]) - double{t.log_probs[i]});
      const double rc = std::clamp(r, 1 - o.ppo_clip, 1 + o.ppo_clip);
      const double v = m->Value(t.observations[i]);
      l += -std::min(r * adv[i], rc * adv[i]) +
           o.value_coef * 0.5 * (v - t.returns[i]) * (v - t.returns[i]) - o.entropy_coef * h;
    }
    return l / static_cast<double>(t.size());
  };
  int clipped = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double r = m->Probabilities(t.observations[i])[static_cast<int>(t.actions[i])] /
                     std::exp(double{t.log_probs[i]});
    clipped += (r > 1 + o.ppo_clip || r < 1 - o.ppo_clip);
  }
  EXPECT_GT(clipped, 0);  // the clip branch is exercised
  const std::vector<float> g = m->ComputeGradients(std::span(&t, 1));
  EXPECT_EQ(CheckAgainstFiniteDifferences(*m, w, g, rng, loss), 60);
}

TEST(ActorCriticTest, UpdatesRaiseProbabilityOfRewardedAction) {
  auto m = Make({.learning_rate = 1e-2, .max_grad_norm = 0});
  Trajectory t;
  for (int i = 0; i < 32; ++i) {
    t.observations.push_back(LunarObservation{0.1f, 0.5f});
    t.actions.push_back(LunarAction::kFireMain);
    t.rewards.push_back(1.0f);
  }
  t.terminal = true;
  const float before = m->Probabilities(LunarObservation{0.1f, 0.5f})[2];
  for (int k = 0; k < 20; ++k)
    ASSERT_TRUE(m->ApplyGradients(m->ComputeGradients(std::span(&t, 1))).ok());
  EXPECT_GT(m->Probabilities(LunarObservation{0.1f, 0.5f})[2], before + 0.1f);
  EXPECT_EQ(m->steps_applied(), 20u);
}

TEST(ActorCriticTest, TrainerRunsAndReportsProgress) {
  A2cTrainerOptions o;
  o.num_envs = 4;
  auto r = TrainA2c(o, [](const A2cProgress& p) { return p.updates >= 50; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->updates, 50u);
  EXPECT_EQ(r->env_steps, 50u * 4 * 16);
  EXPECT_GT(r->episodes, 0u);
  EXPECT_LT(r->mean_return_last100, 0.0);  // far from trained
}

TEST(ActorCriticTest, PpoTrainerAppliesOneStepPerMinibatch) {
  A2cTrainerOptions o;
  o.num_envs = 4;
  o.rollout_steps = 32;
  o.ppo_epochs = 3;
  o.minibatch_size = 32;
  o.model.ppo_clip = 0.2;
  o.model.normalize_advantages = true;
  auto model = ActorCritic::Create(o.model).value();
  auto r = TrainA2c(
      o, [](const A2cProgress& p) { return p.updates >= 5; }, model.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->env_steps, 5u * 4 * 32);
  EXPECT_EQ(model->steps_applied(), 5u * 3 * (4 * 32 / 32));
}

// A gradient applied fragment by fragment (the PS behind OLAF switches) is
// the same Adam step as the whole gradient when clipping is off, and a
// fragment touches only its own parameters.
TEST(ActorCriticTest, GradientSlicesComposeToTheWholeStep) {
  ActorCriticOptions o{.hidden = 16, .max_grad_norm = 0};
  auto whole = Make(o), sliced = Make(o);
  ASSERT_EQ(whole->num_parameters(), sliced->num_parameters());
  const size_t n = whole->num_parameters();
  for (int step = 0; step < 3; ++step) {
    const Trajectory t = Rollout(10 + static_cast<uint64_t>(step), 40, *whole);
    const std::vector<float> g = whole->ComputeGradients(std::span(&t, 1));
    ASSERT_TRUE(whole->ApplyGradients(g).ok());
    const size_t frag = 300;  // not a divisor of n: the last slice is short
    for (size_t off = 0; off < n; off += frag) {
      const size_t len = std::min(frag, n - off);
      ASSERT_TRUE(sliced->ApplyGradientSlice(off, std::span(g).subspan(off, len)).ok());
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(whole->parameters()[i], sliced->parameters()[i], 1e-5) << "step " << step;
    }
  }
  // One slice moves its parameters and nothing else.
  std::vector<float> before(sliced->parameters().begin(), sliced->parameters().end());
  std::vector<float> g(100, 1.0f);
  ASSERT_TRUE(sliced->ApplyGradientSlice(200, g).ok());
  for (size_t i = 0; i < n; ++i) {
    if (i >= 200 && i < 300) {
      EXPECT_LT(sliced->parameters()[i], before[i]) << i;
    } else {
      EXPECT_EQ(sliced->parameters()[i], before[i]) << i;
    }
  }
  // Bad slices are refused and change nothing.
  before.assign(sliced->parameters().begin(), sliced->parameters().end());
  EXPECT_FALSE(sliced->ApplyGradientSlice(n - 10, std::vector<float>(11, 1.0f)).ok());
  EXPECT_FALSE(sliced->ApplyGradientSlice(n + 1, std::vector<float>(1, 1.0f)).ok());
  EXPECT_FALSE(sliced->ApplyGradientSlice(0, {}).ok());
  EXPECT_FALSE(sliced->ApplyGradientSlice(0, std::vector<float>{1.0f, NAN}).ok());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), sliced->parameters().begin()));
}

// The slice clip is the slice's share of max_grad_norm: a huge fragment
// moves each parameter by about the learning rate, not more.
TEST(ActorCriticTest, GradientSliceIsClipped) {
  auto m = Make({.hidden = 16, .learning_rate = 1e-3, .max_grad_norm = 0.5});
  std::vector<float> before(m->parameters().begin(), m->parameters().end());
  ASSERT_TRUE(m->ApplyGradientSlice(0, std::vector<float>(50, 1e6f)).ok());
  for (size_t i = 0; i < 50; ++i) EXPECT_NEAR(before[i] - m->parameters()[i], 1e-3, 1e-5);
}

}  // namespace
}  // namespace inca::rl
