#include "inca/olaf/aom_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inca::olaf {
namespace {

using ::testing::ElementsAre;

TEST(AomTrackerTest, UndefinedBeforeFirstDelivery) {
  AomTracker t;
  EXPECT_FALSE(t.Aom(1, 100).has_value());
  EXPECT_FALSE(t.Stats(1, 100).has_value());
  EXPECT_FALSE(t.FreshestGen(1).has_value());
}

// Hand-computed sawtooth: deliveries (D, gen) = (10, 0), (30, 20), (35, 5),
// (60, 50). Δ: 10 at t=10 rising to 30 at t=30 (peak 30), drops to 10; the
// delivery at 35 is obsolete (gen 5 < 20), so Δ keeps rising to 40 at t=60
// (peak 40), drops to 10; at t=70, Δ = 20.
// Area: [10,30] (10+30)/2·20 = 400; [30,60] (10+40)/2·30 = 750;
// [60,70] (10+20)/2·10 = 150. Total 1300 over 60 ns -> 21.666...
TEST(AomTrackerTest, HandComputedSawtooth) {
  AomTracker t;
  ASSERT_TRUE(t.OnDelivery(7, 0, 10));
  EXPECT_EQ(t.Aom(7, 10), 10);
  auto s = t.Stats(7, 10);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->average_ns, 10.0);  // empty window: Δ(now)
  EXPECT_EQ(s->peaks, 0u);

  ASSERT_TRUE(t.OnDelivery(7, 20, 30));
  ASSERT_TRUE(t.OnDelivery(7, 5, 35));
  ASSERT_TRUE(t.OnDelivery(7, 50, 60));
  s = t.Stats(7, 70);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->deliveries, 4u);
  EXPECT_EQ(s->refreshes, 3u);
  EXPECT_EQ(s->peaks, 2u);
  EXPECT_EQ(s->peak_last_ns, 40);
  EXPECT_EQ(s->peak_max_ns, 40);
  EXPECT_DOUBLE_EQ(s->peak_mean_ns, 35.0);
  EXPECT_EQ(s->current_ns, 20);
  EXPECT_EQ(s->freshest_gen_ns, 50);
  EXPECT_EQ(s->last_delivery_ns, 60);
  EXPECT_EQ(s->window_start_ns, 10);
  EXPECT_DOUBLE_EQ(s->average_ns, 1300.0 / 60.0);
  EXPECT_EQ(t.Aom(7, 70), 20);
}

TEST(AomTrackerTest, FutureGenTimeIsClampedToDelivery) {
  AomTracker t;
  ASSERT_TRUE(t.OnDelivery(1, 500, 100));  // sender clock ahead
  EXPECT_EQ(t.FreshestGen(1), 100);
  EXPECT_EQ(t.Aom(1, 150), 50);
}

TEST(AomTrackerTest, ResetWindowKeepsAgeButRestartsAverages) {
  AomTracker t;
  ASSERT_TRUE(t.OnDelivery(2, 0, 100));
  ASSERT_TRUE(t.OnDelivery(2, 100, 300));  // peak 300
  t.ResetWindow(400);                      // Δ(400) = 300
  auto s = t.Stats(2, 400);
  EXPECT_EQ(s->deliveries, 0u);
  EXPECT_EQ(s->peaks, 0u);
  EXPECT_EQ(s->average_ns, 300.0);
  // [400, 500]: Δ from 300 to 400 -> average 350.
  s = t.Stats(2, 500);
  EXPECT_DOUBLE_EQ(s->average_ns, 350.0);
  EXPECT_EQ(s->current_ns, 400);
}

TEST(AomTrackerTest, BoundedNumberOfClusters) {
  AomTracker t(2);
  EXPECT_TRUE(t.OnDelivery(5, 0, 1));
  EXPECT_TRUE(t.OnDelivery(3, 0, 1));
  EXPECT_FALSE(t.OnDelivery(9, 0, 1));
  EXPECT_TRUE(t.OnDelivery(5, 1, 2));  // known clusters still recorded
  EXPECT_THAT(t.Clusters(), ElementsAre(3, 5));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_FALSE(t.Aom(9, 5).has_value());
}

TEST(AomTrackerTest, ClustersAreIndependent) {
  AomTracker t;
  ASSERT_TRUE(t.OnDelivery(1, 0, 10));
  ASSERT_TRUE(t.OnDelivery(2, 8, 10));
  EXPECT_EQ(t.Aom(1, 20), 20);
  EXPECT_EQ(t.Aom(2, 20), 12);
}

}  // namespace
}  // namespace inca::olaf
