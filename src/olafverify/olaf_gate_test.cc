// The verifier's gate on run-time OLAF changes (olaf_gate.h).
#include "olafverify/olaf_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inca::olafverify {
namespace {

using ::testing::HasSubstr;

// The OLAF paper's example (section 3.2) as a switch would observe it:
// clusters updating every 100 and 300 ms behind a paced 40 Gbit/s egress.
OlafObserved PaperClusters() {
  OlafObserved o;
  o.cluster_periods_ms = {{7, 300.0}, {3, 100.0}};
  o.mean_update_bytes = 9000 - 28;
  o.egress_rate_bps = 40'000'000'000;
  o.egress_overhead_bytes = 28;
  return o;
}

TEST(OlafGateTest, ModelTakesObservedPeriodsAndLinkCapacity) {
  OlafProposal p;
  p.delta_t_ms = 250;
  p.depth = 16;
  p.epsilon = 0.2;
  absl::StatusOr<olafverify::FairnessConfig> cfg = FairnessConfigFor(p, PaperClusters());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->aom_threshold_ms, 250);
  EXPECT_EQ(cfg->queue_size, 16);
  EXPECT_EQ(cfg->epsilon, 0.2);
  // 40 Gbit/s / (9000 bytes × 8) = 555.6 updates per ms.
  EXPECT_NEAR(cfg->capacity_updates_per_ms, 40e6 / (9000 * 8), 1e-6);
  ASSERT_EQ(cfg->clusters.size(), 2u);
  EXPECT_EQ(cfg->clusters[0].name, "c3");  // fastest first
  EXPECT_EQ(cfg->clusters[0].update_period_ms, 100);
  EXPECT_EQ(cfg->clusters[1].name, "c7");
  EXPECT_TRUE(olafverify::Validate(*cfg).ok());
}

TEST(OlafGateTest, NothingToVerifyIsSaidNotRefused) {
  OlafObserved one = PaperClusters();
  one.cluster_periods_ms.resize(1);
  OlafGateVerdict v = VerifyOlafChange({}, one);
  EXPECT_FALSE(v.verified);
  EXPECT_TRUE(v.fair);
  EXPECT_THAT(v.reason, HasSubstr("1 cluster(s) with an observed update period"));
  OlafObserved unpaced = PaperClusters();
  unpaced.egress_rate_bps = 0;
  v = VerifyOlafChange({}, unpaced);
  EXPECT_FALSE(v.verified);
  EXPECT_THAT(v.reason, HasSubstr("unpaced"));
}

TEST(OlafGateTest, EqualPeriodsAreAcceptedThePapersUnequalOnesRefused) {
  OlafObserved equal = PaperClusters();
  equal.cluster_periods_ms = {{3, 100.0}, {7, 100.0}};
  OlafProposal p;
  p.delta_t_ms = 150;
  OlafGateVerdict v = VerifyOlafChange(p, equal);
  EXPECT_TRUE(v.verified) << v.reason;
  EXPECT_TRUE(v.fair) << v.reason;
  // 100 and 300 ms behind a link that never congests: c3 could only match
  // c7's AoM by holding its updates ~200 ms, which ΔT 150 forbids (and the
  // queue, which never holds an update back while the link is free, would
  // not do at any ΔT).
  v = VerifyOlafChange(p, PaperClusters());
  EXPECT_TRUE(v.verified) << v.reason;
  EXPECT_FALSE(v.fair);
  EXPECT_THAT(v.reason, HasSubstr("cannot be fair"));
  EXPECT_THAT(v.reason, HasSubstr("fairness(c3,c7)"));
}

TEST(OlafGateTest, ManyClustersAreCutToTheBusiestTheModelEncodes) {
  OlafObserved o = PaperClusters();
  o.cluster_periods_ms.clear();
  for (uint16_t c = 0; c < 40; ++c) o.cluster_periods_ms.emplace_back(c, 400.0 - c * 5.0);
  absl::StatusOr<olafverify::FairnessConfig> cfg = FairnessConfigFor({}, o);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->clusters.size(), olafverify::kMaxClusters);
  EXPECT_EQ(cfg->clusters[0].name, "c39");  // 205 ms, the busiest
  EXPECT_GE(cfg->horizon, 1);
  // Periods 10^4 apart cannot be encoded at any horizon: said, not refused.
  o.cluster_periods_ms = {{0, 0.1}, {1, 1000.0}};
  const OlafGateVerdict v = VerifyOlafChange({}, o);
  EXPECT_FALSE(v.verified);
  EXPECT_TRUE(v.fair);
  EXPECT_THAT(v.reason, HasSubstr("not verified"));
}

}  // namespace
}  // namespace inca::olafverify
