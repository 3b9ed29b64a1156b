#include "inca/control/offload_controller.h"

#include <gtest/gtest.h>

namespace inca::control {
namespace {

constexpr dp::TimeNs kPeriod = 100 * dp::kNsPerMs;

Stats Sram(double usage, double delay_us = 0, double fallback = 0) {
  Stats s;
  s.sram_usage = usage;
  s.avg_queue_delay_us = delay_us;
  s.fallback_ratio = fallback;
  return s;
}

TEST(OffloadControllerTest, ScoreFollowsTheWriteUpsTradeOff) {
  OffloadController c({});
  c.Observe(Sram(0.1), 0);
  // 8 ranks, 64 MiB: the switch is 4x faster and saves 7/8 of the traffic.
  OffloadDecision d = c.Decide({64 << 20, 8});
  EXPECT_TRUE(d.offload);
  EXPECT_NEAR(d.score, 0.75 * 0.875, 1e-9);
  // Two ranks save half the traffic; still above 0.2.
  EXPECT_TRUE(c.Decide({64 << 20, 2}).offload);
  // A single participant saves nothing.
  EXPECT_FALSE(c.Decide({64 << 20, 1}).offload);
}

TEST(OffloadControllerTest, QueueDelayMakesSmallOperationsStayOnHosts) {
  OffloadController c({});
  c.Observe(Sram(0.1, /*delay_us=*/50), 0);
  EXPECT_FALSE(c.Decide({4096, 8}).offload);      // 50 us of queueing dwarfs 0.3 us
  EXPECT_TRUE(c.Decide({256 << 20, 8}).offload);  // negligible for 256 MiB
}

TEST(OffloadControllerTest, ThresholdRisesUnderSustainedSramPressureAndRecovers) {
  OffloadController c({});
  dp::TimeNs t = 0;
  const OffloadOp op{64 << 20, 8};  // score 0.656
  for (int i = 0; i < 2; ++i, t += kPeriod) c.Observe(Sram(0.9), t);
  EXPECT_DOUBLE_EQ(c.threshold(), 0.2);  // not sustained yet
  for (int i = 0; i < 6; ++i, t += kPeriod) c.Observe(Sram(0.9), t);
  EXPECT_GT(c.threshold(), 0.656);
  EXPECT_FALSE(c.Decide(op).offload);  // offload off under pressure
  const double before = c.threshold();
  EXPECT_TRUE(c.Observe(Sram(0.7), t));  // between healthy and high: hold
  EXPECT_DOUBLE_EQ(c.threshold(), before);
  for (int i = 0; i < 10; ++i) c.Observe(Sram(0.3), t += kPeriod);
  EXPECT_DOUBLE_EQ(c.threshold(), 0.2);  // back to the configured base
  EXPECT_TRUE(c.Decide(op).offload);
}

TEST(OffloadControllerTest, ReevaluatesAtMostOncePerPeriod) {
  OffloadController c({});
  EXPECT_TRUE(c.Observe(Sram(0.9), 0));
  EXPECT_FALSE(c.Observe(Sram(0.9), kPeriod / 2));
  EXPECT_TRUE(c.Observe(Sram(0.9), kPeriod));
}

TEST(OffloadControllerTest, FallbackAlarmAboveTenPercent) {
  OffloadController c({});
  c.Observe(Sram(0.1, 0, 0.05), 0);
  EXPECT_FALSE(c.fallback_alarm());
  c.Observe(Sram(0.1, 0, 0.12), kPeriod);
  EXPECT_TRUE(c.fallback_alarm());
}

TEST(OffloadControllerTest, ConfigIsValidated) {
  OffloadControllerConfig cfg;
  EXPECT_TRUE(cfg.Validate().ok());
  cfg.base_threshold = -1;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.healthy_sram = 0.9;
  EXPECT_FALSE(cfg.Validate().ok());
}

}  // namespace
}  // namespace inca::control
