// Co-simulated DRL through OLAF/FIFO (issue 9): deterministic, every
// gradient and model accounted for, congestion loses updates under FIFO and
// not under OLAF, and bad configurations are refused.
#include "inca/sim/drl_training.h"

#include <cmath>

#include "gtest/gtest.h"

namespace inca::sim {
namespace {

DrlTrainingConfig Tiny(olaf::QueuePolicy policy) {
  DrlTrainingConfig c;
  c.policy = policy;
  c.duration_s = 2;
  c.sample_s = 0.5;
  c.eval_episodes = 2;
  c.worker.model.hidden = 8;
  c.worker.num_envs = 1;
  c.worker.rollout_steps = 64;
  c.worker.epochs = 2;
  c.worker.minibatch_size = 32;
  c.clusters = {{.count = 2, .workers = 3, .slowdown = 1},
                {.count = 2, .workers = 3, .slowdown = 3}};
  return c;
}

TEST(DrlTrainingTest, SameConfigSameRun) {
  const DrlTrainingConfig c = Tiny(olaf::QueuePolicy::kOlaf);
  auto a = RunDrlTraining(c), b = RunDrlTraining(c);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  a->wall_s = b->wall_s = 0;
  EXPECT_EQ(DrlResultJson(*a), DrlResultJson(*b));
  EXPECT_EQ(DrlSeriesCsv(*a), DrlSeriesCsv(*b));
  DrlTrainingConfig other = c;
  other.seed = 2;
  auto d = RunDrlTraining(other);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(DrlSeriesCsv(*a), DrlSeriesCsv(*d));
}

TEST(DrlTrainingTest, UpdatesAndModelsFlowWithoutCongestion) {
  DrlTrainingConfig c = Tiny(olaf::QueuePolicy::kFifo);
  c.egress_mbps = 10000;  // far above the offered load
  auto r = RunDrlTraining(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fragments_per_update, 1u);  // 8 hidden units: one frame
  EXPECT_GT(r->sent, 100u);
  EXPECT_EQ(r->sent, r->generated);  // no send control
  // Every sent gradient reaches the PS (those still in flight at the end aside).
  EXPECT_NEAR(r->ps_updates, static_cast<double>(r->sent), 12);
  EXPECT_LT(r->loss, 0.05);
  // Models come back: a gradient is as old as the updates the other 11
  // workers land while it is computed (~300/s x 25-75 ms), not the whole
  // run's (without models it would average ps_updates / 2).
  EXPECT_GT(r->mean_staleness, 1);
  EXPECT_LT(r->mean_staleness, 40);
  EXPECT_GT(r->ps_updates, 400);
  EXPECT_GT(r->episodes, 0u);
  EXPECT_GT(r->env_steps, 1000u);
  ASSERT_EQ(r->series.size(), 5u);  // t = 0, 0.5, ..., 2
  EXPECT_EQ(r->series.back().t_s, 2);
  EXPECT_EQ(r->series.back().env_steps, r->env_steps);
}

TEST(DrlTrainingTest, CongestionCostsFifoUpdatesNotOlaf) {
  DrlTrainingConfig fifo = Tiny(olaf::QueuePolicy::kFifo), olaf = Tiny(olaf::QueuePolicy::kOlaf);
  // 12 workers offer ~3 Mbit/s of 1.3 kB updates; the egress takes a third.
  fifo.egress_mbps = olaf.egress_mbps = 1;
  auto f = RunDrlTraining(fifo), o = RunDrlTraining(olaf);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(o.ok()) << o.status();
  std::printf(
      "FIFO: loss %.3f, staleness %.1f, AoM %.1f ms; OLAF: loss %.3f, staleness %.1f, "
      "AoM %.1f ms\n",
      f->loss, f->mean_staleness, f->mean_aom_ms, o->loss, o->mean_staleness, o->mean_aom_ms);
  EXPECT_GT(f->loss, 0.4);  // tail drops
  EXPECT_LT(o->loss, 0.1);  // merged into queued updates instead
  // Same bottleneck: the PS applies about as many updates either way.
  EXPECT_NEAR(o->ps_updates / f->ps_updates, 1.0, 0.2);
}

TEST(DrlTrainingTest, ThresholdIsWhenTheLast100EpisodesFirstAverageAboveIt) {
  DrlTrainingConfig c = Tiny(olaf::QueuePolicy::kOlaf);
  c.duration_s = 6;
  c.eval_episodes = 0;
  c.threshold = -1e9;  // any 100 episodes do: reached at the 100th
  auto r = RunDrlTraining(c);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->reached);
  ASSERT_GT(r->episodes, 100u);
  for (const DrlSample& p : r->series) {
    if (p.t_s < r->time_to_threshold_s) {
      EXPECT_LT(p.episodes, 100u) << p.t_s;
    } else if (p.t_s > r->time_to_threshold_s) {
      EXPECT_GE(p.episodes, 100u) << p.t_s;
    }
  }
  EXPECT_GT(r->updates_to_threshold, 0);
  EXPECT_LE(r->updates_to_threshold, r->ps_updates);
  // Stopping there: the same run up to the threshold, then no further.
  c.stop_at_threshold = true;
  auto s = RunDrlTraining(c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->time_to_threshold_s, r->time_to_threshold_s);
  EXPECT_LE(s->sim_s, r->time_to_threshold_s + c.sample_s);
  EXPECT_LT(s->sim_s, c.duration_s);
  // Out of reach: not reached, and says so.
  c.stop_at_threshold = false;
  c.duration_s = 1;
  c.threshold = 1e9;
  auto n = RunDrlTraining(c);
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->reached);
  EXPECT_EQ(n->time_to_threshold_s, 0);
}

TEST(DrlTrainingTest, RejectsBadConfigs) {
  DrlTrainingConfig c = Tiny(olaf::QueuePolicy::kOlaf);
  c.clusters.clear();
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.egress_mbps = 0;
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.worker.epochs = 0;
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.sample_s = 1e-12;  // would reschedule itself forever
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.egress_mbps = INFINITY;
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.gradient_ms = NAN;
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.threshold = NAN;
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.name = "../elsewhere";  // a file name, not a path
  EXPECT_FALSE(RunDrlTraining(c).ok());
  c = Tiny(olaf::QueuePolicy::kOlaf);
  c.worker.model.hidden = 4096;  // 36 copies of a 34M-parameter model
  c.clusters = {{.count = 9, .workers = 4, .slowdown = 1}};
  EXPECT_FALSE(RunDrlTraining(c).ok());

  DrlTrainingConfig k;
  EXPECT_TRUE(SetDrlKey("policy", "fifo", &k).ok());
  EXPECT_EQ(k.policy, olaf::QueuePolicy::kFifo);
  EXPECT_TRUE(SetDrlKey("send_control", "fairness", &k).ok());
  EXPECT_EQ(k.send_control, olaf::SendControlMode::kFairness);
  EXPECT_TRUE(SetDrlKey("clusters", "1x2x1,3x4x2.5", &k).ok());
  ASSERT_EQ(k.clusters.size(), 2u);
  EXPECT_EQ(k.clusters[1].count, 3u);
  EXPECT_EQ(k.clusters[1].workers, 4u);
  EXPECT_EQ(k.clusters[1].slowdown, 2.5);
  EXPECT_TRUE(SetDrlKey("egress_mbps", "12.5", &k).ok());
  EXPECT_EQ(k.egress_mbps, 12.5);
  EXPECT_FALSE(SetDrlKey("policy", "lifo", &k).ok());
  EXPECT_FALSE(SetDrlKey("clusters", "3x4", &k).ok());
  EXPECT_FALSE(SetDrlKey("egress_mbps", "fast", &k).ok());
  EXPECT_FALSE(SetDrlKey("no_such_key", "1", &k).ok());
  EXPECT_EQ(k.clusters.size(), 2u);  // a refused value changes nothing
}

}  // namespace
}  // namespace inca::sim
