// The OLAF load sweep's pieces (issue 20): `load` sets the PS link from the
// offered rate, closed-loop workers wait for models, the age decomposition
// adds up, and the sweep's smallest configuration keeps its finding: FIFO
// starves a phase-locked cluster at ρ = 2.26 and OLAF does not. And ages
// across hosts whose clocks are offset and drift.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "inca/sim/olaf_scenario.h"

namespace inca::sim {
namespace {

using ::testing::HasSubstr;

// 9 clusters × 8 workers stepping together every 20 ms, random cluster
// phases, depth 8: the load sweep's scenario (a), scaled down.
constexpr char kSweep[] = R"(
name: load
duration_s: 2
warmup_s: 0.5
queue_depth: 8
aligned_clusters: false
models: true
load: 2.26
clusters:
  - {count: 9, workers: 8, period_ms: 20, jitter_us: 100}
)";

OlafScenario Sweep(const std::vector<std::string>& sets = {}) {
  auto s = ParseOlafScenario(kSweep, "sweep");
  EXPECT_TRUE(s.ok()) << s.status();
  for (const std::string& kv : sets) EXPECT_TRUE(ApplyOverride(kv, &*s).ok()) << kv;
  return *s;
}

OlafResult RunIt(const OlafScenario& s) {
  auto r = RunOlafScenario(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : OlafResult{};
}

TEST(OlafLoadTest, LoadSetsThePsLinkFromTheOfferedRate) {
  const OlafResult r = RunIt(Sweep({"policy=olaf"}));
  // 72 workers × (2,233 f32 + a 40-byte header + 66 bytes a frame) every 20 ms.
  const double offered = 72 * (8932 + 40 + 66) * 8 / 0.020 / 1e9;
  EXPECT_NEAR(r.offered_gbps, offered, 1e-9);
  EXPECT_NEAR(r.egress_gbps, r.offered_gbps / 2.26, 1e-9);
  EXPECT_NEAR(r.rho, 2.26, 0.02);  // open loop: every worker sends every period
  const OlafResult fixed = RunIt(Sweep({"policy=olaf", "load=0", "egress_gbps=5"}));
  EXPECT_DOUBLE_EQ(fixed.egress_gbps, 5);
}

TEST(OlafLoadTest, TheAgeSplitsIntoPartsThatAddUpToTheMeasuredAge) {
  for (const char* policy : {"policy=fifo", "policy=olaf"}) {
    const OlafResult r = RunIt(Sweep({policy, "seed=1"}));
    for (const ClusterResult& c : r.clusters) {
      EXPECT_NEAR(c.aom_parts.total(), c.mean_aom_ms, 0.01 * c.mean_aom_ms)
          << policy << " cluster " << c.cluster_id;
      EXPECT_GE(c.aom_parts.queueing_ms, 0);
      EXPECT_DOUBLE_EQ(c.aom_parts.period_ms, 10);  // half of 20 ms
    }
    EXPECT_NEAR(r.aom_parts.total(), r.mean_aom_ms, 0.01 * r.mean_aom_ms) << policy;
  }
}

// The sweep's finding at its smallest: with seed 1 one cluster's burst
// always meets a queue full of another's, and under FIFO it never gets an
// update through; OLAF merges it into its queued entry instead.
TEST(OlafLoadTest, FifoStarvesAPhaseLockedClusterAndOlafDoesNot) {
  const OlafResult fifo = RunIt(Sweep({"policy=fifo", "seed=1"}));
  const OlafResult olaf = RunIt(Sweep({"policy=olaf", "seed=1"}));
  EXPECT_GE(fifo.starved, 1u);
  EXPECT_EQ(olaf.starved, 0u);
  EXPECT_LT(olaf.mean_aom_ms, 0.5 * fifo.mean_aom_ms);
  // The starvation is all in the gaps; queueing stays milliseconds.
  EXPECT_GT(fifo.aom_parts.gaps_ms, 10 * fifo.aom_parts.queueing_ms);
  EXPECT_LT(olaf.aom_parts.queueing_ms, fifo.aom_parts.queueing_ms);
  EXPECT_EQ(olaf.max_merged, 8u);  // a whole cluster's step in one update
  EXPECT_EQ(fifo.max_merged, 1u);
  EXPECT_LT(olaf.received, fifo.received);
  // On a fixed grid a worker's model is about one period old when its
  // update is applied (the paper's AoM).
  EXPECT_GT(olaf.paper_aom_ms, 10);
  EXPECT_LT(olaf.paper_aom_ms, 25);
}

TEST(OlafLoadTest, ClosedLoopWorkersWaitForANewerModel) {
  const OlafResult open = RunIt(Sweep({"policy=olaf", "load=0.5"}));
  const OlafResult closed = RunIt(Sweep({"policy=olaf", "load=0.5", "closed_loop=true"}));
  // Each round adds the wait for a model to the period, so closed-loop
  // workers offer less than the nominal load and send fewer updates.
  EXPECT_LT(closed.rho, 0.99 * open.rho);
  EXPECT_LT(closed.sent, open.sent);
  EXPECT_EQ(closed.model_waits_timed_out, 0u);  // every model came back
  // With the PS link at a hundredth of the offered rate models come back
  // too late, and workers roll out on the model they have after delta_t.
  const OlafResult starved =
      RunIt(Sweep({"policy=fifo", "load=100", "closed_loop=true", "delta_t_ms=30", "tau_ms=10"}));
  EXPECT_GT(starved.model_waits_timed_out, 0u);
  const OlafResult waits =
      RunIt(Sweep({"policy=fifo", "load=100", "closed_loop=true", "model_wait_ms=1000"}));
  EXPECT_LT(waits.sent, starved.sent);
}

// Clocks across hosts, in the simulator: workers' clocks seconds off the
// PS's and drifting 200 ppm, the switch's 2 s behind. Stamped on the PS's
// clock (estimated from MODELs), ages come out as with one clock, less
// than one MODEL's one-way delay off; on their own clocks the queueing
// part of the age vanishes (future stamps count as "now").
TEST(OlafLoadTest, AgesAreRightWithClocksOffsetAndDriftingAcrossHosts) {
  const std::vector<std::string> skewed = {"clock_offset_ms=3000", "clock_drift_ppm=200",
                                           "switch_clock_offset_ms=-2000"};
  for (const char* policy : {"policy=fifo", "policy=olaf"}) {
    std::vector<std::string> base = {policy, "load=1", "seed=2"};
    const OlafResult truth = RunIt(Sweep(base));
    base.push_back("worker_clock=ps");
    std::vector<std::string> ps = base;
    ps.insert(ps.end(), skewed.begin(), skewed.end());
    const OlafResult synced = RunIt(Sweep(ps));
    EXPECT_EQ(synced.received, truth.received) << policy;
    EXPECT_NEAR(synced.mean_aom_ms, truth.mean_aom_ms, 0.05 * truth.mean_aom_ms) << policy;
    // The estimate is short by a MODEL's one-way delay (about 0.3 ms here:
    // a 9 kB MODEL over the slow PS link), so ages read at most that high.
    EXPECT_GE(synced.aom_parts.queueing_ms, truth.aom_parts.queueing_ms) << policy;
    EXPECT_LT(synced.aom_parts.queueing_ms, truth.aom_parts.queueing_ms + 0.5) << policy;
    std::vector<std::string> local = {policy, "load=1", "seed=2"};
    local.insert(local.end(), skewed.begin(), skewed.end());
    const OlafResult wrong = RunIt(Sweep(local));
    EXPECT_LT(wrong.aom_parts.queueing_ms, 0.1 * truth.aom_parts.queueing_ms) << policy;
  }
}

TEST(OlafLoadTest, BadLoadKeysNameTheKey) {
  auto e = [](const char* y) { return std::string(ParseOlafScenario(y, "t").status().message()); };
  EXPECT_THAT(e("load: -1\nclusters: [{count: 1}]"), HasSubstr("load must be"));
  EXPECT_THAT(e("load: fast\nclusters: [{count: 1}]"), HasSubstr("load"));
  EXPECT_THAT(e("model_wait_ms: -5\nclusters: [{count: 1}]"), HasSubstr("model_wait_ms"));
  EXPECT_THAT(e("closed_loop: maybe\nclusters: [{count: 1}]"), HasSubstr("closed_loop"));
  EXPECT_THAT(e("lode: 2\nclusters: [{count: 1}]"), HasSubstr("load, models, closed_loop"));
  EXPECT_THAT(e("worker_clock: gps\nclusters: [{count: 1}]"), HasSubstr("use local or ps"));
  EXPECT_THAT(e("clock_drift_ppm: -1\nclusters: [{count: 1}]"), HasSubstr("clock_drift_ppm"));
}

}  // namespace
}  // namespace inca::sim
