// AsyncWorker: the rollout/minibatch schedule, determinism, and that a PS
// applying its gradients fragment by fragment (as behind an OLAF switch)
// learns LunarLander.
#include "inca/rl/async_worker.h"

#include <numeric>

#include "gtest/gtest.h"

namespace inca::rl {
namespace {

AsyncWorkerOptions Small(uint64_t seed = 1) {
  AsyncWorkerOptions o;
  o.model.hidden = 16;
  o.model.ppo_clip = 0.2;
  o.num_envs = 2;
  o.rollout_steps = 32;
  o.epochs = 2;
  o.minibatch_size = 24;  // 64 steps -> 3 minibatches (24, 24, 16) per epoch
  o.seed = seed;
  return o;
}

TEST(AsyncWorkerTest, RolloutThenMinibatches) {
  const AsyncWorkerOptions o = Small();
  EXPECT_EQ(o.gradients_per_rollout(), 6);
  auto w = AsyncWorker::Create(o).value();
  EXPECT_TRUE(w->rollout_pending());
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 6; ++k) {
      auto g = w->Next();
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->gradient.size(), w->num_parameters());
      EXPECT_EQ(g->env_steps, k == 0 ? 64u : 0u) << "round " << round << " gradient " << k;
      if (k > 0) {
        EXPECT_TRUE(g->episode_returns.empty());
      }
    }
    EXPECT_TRUE(w->rollout_pending());
  }
  EXPECT_EQ(w->env_steps(), 128u);
  EXPECT_EQ(w->gradients(), 12u);
}

TEST(AsyncWorkerTest, SameSeedSameGradients) {
  auto a = AsyncWorker::Create(Small(7)).value(), b = AsyncWorker::Create(Small(7)).value(),
       c = AsyncWorker::Create(Small(8)).value();
  auto model = ActorCritic::Create(Small().model).value();
  for (auto* w : {a.get(), b.get(), c.get()}) ASSERT_TRUE(w->SetModel(model->parameters()).ok());
  bool differs = false;
  for (int k = 0; k < 8; ++k) {
    const auto ga = a->Next().value(), gb = b->Next().value(), gc = c->Next().value();
    EXPECT_EQ(ga.gradient, gb.gradient) << k;
    differs = differs || ga.gradient != gc.gradient;
  }
  EXPECT_TRUE(differs);
}

TEST(AsyncWorkerTest, RejectsBadOptionsAndModels) {
  AsyncWorkerOptions o = Small();
  o.model.ppo_clip = 0;  // several epochs need the ratio clip
  EXPECT_FALSE(AsyncWorker::Create(o).ok());
  o = Small();
  o.minibatch_size = 0;
  EXPECT_FALSE(AsyncWorker::Create(o).ok());
  o = Small();
  o.num_envs = 0;
  EXPECT_FALSE(AsyncWorker::Create(o).ok());
  auto w = AsyncWorker::Create(Small()).value();
  EXPECT_FALSE(w->SetModel(std::vector<float>(5)).ok());
}

// Two asynchronous workers, one of them always a few PS steps behind, and a
// PS that applies each gradient as 9000-byte-frame fragments: the training
// return climbs well clear of a random policy's (about -200).
TEST(AsyncWorkerTest, FragmentedAsynchronousTrainingLearns) {
  AsyncWorkerOptions o;
  o.model = PpoOptions();
  o.model.hidden = 64;
  o.num_envs = 4;
  o.rollout_steps = 128;
  o.epochs = 4;
  o.minibatch_size = 64;
  auto ps = ActorCritic::Create(o.model).value();
  std::vector<std::unique_ptr<AsyncWorker>> workers;
  for (uint64_t s = 1; s <= 2; ++s) {
    o.seed = s;
    workers.push_back(AsyncWorker::Create(o).value());
    ASSERT_TRUE(workers.back()->SetModel(ps->parameters()).ok());
  }
  const size_t frag = 2233;  // f32 per 9000-byte UPDATE frame
  std::vector<double> returns;
  std::vector<float> stale;  // worker 1 syncs only every 4th step
  for (int step = 0; step < 2400; ++step) {
    AsyncWorker& w = *workers[static_cast<size_t>(step % 2)];
    auto g = w.Next();
    ASSERT_TRUE(g.ok());
    returns.insert(returns.end(), g->episode_returns.begin(), g->episode_returns.end());
    for (size_t off = 0; off < g->gradient.size(); off += frag) {
      const size_t len = std::min(frag, g->gradient.size() - off);
      ASSERT_TRUE(ps->ApplyGradientSlice(off, std::span(g->gradient).subspan(off, len)).ok());
    }
    if (step % 2 == 0 || step % 8 == 7) {
      ASSERT_TRUE(w.SetModel(ps->parameters()).ok());
    }
  }
  ASSERT_GE(returns.size(), 100u);
  const double first = std::accumulate(returns.begin(), returns.begin() + 30, 0.0) / 30;
  const double last = std::accumulate(returns.end() - 30, returns.end(), 0.0) / 30;
  std::printf("first 30 episodes %.1f, last 30 %.1f, %zu episodes\n", first, last, returns.size());
  EXPECT_GT(last, first + 60);
  EXPECT_GT(last, -120);
}

}  // namespace
}  // namespace inca::rl
