#include "inca/control/offload_controller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "control/offload_test_util.h"
#include "inca/control/offload_loop.h"

namespace inca::control {
namespace {

constexpr dp::TimeNs kPeriod = 100 * dp::kNsPerMs;

OffloadControllerConfig NoLatency() {
  OffloadControllerConfig c;
  c.host_latency_s = 0;
  return c;
}

bool InRange(const OffloadRange& r, uint64_t b) {
  return r.min_bytes <= b && b <= r.max_bytes;
}

// Range() must agree with Decide() at every size: checked on a dense
// logarithmic grid from 1 B to 1 TiB.
void ExpectRangeMatchesDecide(const OffloadController& c, int participants) {
  const OffloadRange r = c.Range(participants);
  for (double x = 1; x < 1.1e12; x *= 1.07) {
    const auto b = static_cast<uint64_t>(x);
    EXPECT_EQ(c.Decide({b, participants}).offload, InRange(r, b))
        << b << " bytes, " << participants << " ranks, range [" << r.min_bytes << ", "
        << r.max_bytes << "]";
  }
}

TEST(OffloadControllerTest, ScoreFollowsTheWriteUpsTradeOff) {
  OffloadController c(NoLatency());
  c.Observe(Sram(0.1), 0);
  // 8 ranks, 64 MiB: the switch is 4x faster and saves 7/8 of the traffic.
  OffloadDecision d = c.Decide({64 << 20, 8});
  EXPECT_TRUE(d.offload);
  EXPECT_NEAR(d.score, 0.75 * 0.875, 1e-9);
  // Two ranks save half the traffic; still above 0.2.
  EXPECT_TRUE(c.Decide({64 << 20, 2}).offload);
  // A single participant saves nothing.
  EXPECT_FALSE(c.Decide({64 << 20, 1}).offload);
  EXPECT_TRUE(c.Range(1).empty());
}

TEST(OffloadControllerTest, QueueDelayMakesSmallOperationsStayOnHosts) {
  OffloadController c(NoLatency());
  c.Observe(Sram(0.1, /*delay_us=*/50), 0);
  EXPECT_NEAR(c.queue_delay_s(), 50e-6, 1e-12);
  EXPECT_FALSE(c.Decide({4096, 8}).offload);      // 50 us of queueing dwarfs 0.3 us
  EXPECT_TRUE(c.Decide({256 << 20, 8}).offload);  // negligible for 256 MiB
  const OffloadRange r = c.Range(8);
  EXPECT_GT(r.min_bytes, 4096u);
  EXPECT_LT(r.min_bytes, uint64_t{256} << 20);
  EXPECT_EQ(r.max_bytes, UINT64_MAX);
  ExpectRangeMatchesDecide(c, 8);
}

TEST(OffloadControllerTest, TheQueueDelayIsMeasuredPerPeriod) {
  OffloadController c(NoLatency());
  Stats s = Sram(0.1, 10);  // 1,000 samples, 10 us each
  c.Observe(s, 0);
  EXPECT_NEAR(c.queue_delay_s(), 10e-6, 1e-12);
  // 1,000 more samples totalling 100 ms: the new period's mean is 100 us.
  s.counters.ingress_delay_samples += 1000;
  s.counters.ingress_delay_ns_total += 100'000'000;
  c.Observe(s, kPeriod);
  EXPECT_NEAR(c.queue_delay_s(), 100e-6, 1e-12);
  // No new samples: the last figure stands.
  c.Observe(s, 2 * kPeriod);
  EXPECT_NEAR(c.queue_delay_s(), 100e-6, 1e-12);
}

TEST(OffloadControllerTest, HostLatencyFavoursSmallOperationsWhenTheSwitchIsSlow) {
  OffloadControllerConfig cfg;
  cfg.host_latency_s = 1e-3;          // a slow host collective
  cfg.switch_rate_bps = 1e9 / 8;      // a slow switch: 1 Gbit/s
  cfg.host_bandwidth_bps = 10e9 / 8;  // hosts at 10 Gbit/s
  OffloadController c(cfg);
  c.Observe(Sram(0.1, 10), 0);
  EXPECT_TRUE(c.Decide({4096, 4}).offload);       // latency-bound: the switch wins
  EXPECT_FALSE(c.Decide({64 << 20, 4}).offload);  // bandwidth-bound: hosts win
  const OffloadRange r = c.Range(4);
  EXPECT_EQ(r.min_bytes, 1u);
  EXPECT_LT(r.max_bytes, uint64_t{64} << 20);
  ExpectRangeMatchesDecide(c, 4);
}

TEST(OffloadControllerTest, RangeAgreesWithDecideAcrossStates) {
  for (double latency : {0.0, 20e-6, 1e-3}) {
    for (double delay_us : {0.0, 5.0, 500.0}) {
      for (double switch_gbps : {10.0, 100.0, 400.0}) {
        OffloadControllerConfig cfg;
        cfg.host_latency_s = latency;
        cfg.switch_rate_bps = switch_gbps * 1e9 / 8;
        OffloadController c(cfg);
        c.Observe(Sram(0.1, delay_us), 0);
        for (int n : {2, 3, 8}) ExpectRangeMatchesDecide(c, n);
      }
    }
  }
}

TEST(OffloadControllerTest, PortUtilisationSlowsTheSwitchDown) {
  OffloadController idle(NoLatency()), busy(NoLatency());
  Stats s = Sram(0.1);
  idle.Observe(s, 0);
  s.reduced_bytes_per_s = 0.9 * 400e9 / 8;  // 90% of the switch's rate
  busy.Observe(s, 0);
  EXPECT_NEAR(busy.port_utilisation(), 0.9, 1e-12);
  EXPECT_GT(idle.Decide({64 << 20, 8}).score, busy.Decide({64 << 20, 8}).score);
  EXPECT_FALSE(busy.Decide({64 << 20, 8}).offload);  // 2.5x slower than hosts now
}

TEST(OffloadControllerTest, ThresholdRisesUnderSustainedSramPressureAndRecovers) {
  OffloadController c(NoLatency());
  dp::TimeNs t = 0;
  const OffloadOp op{64 << 20, 8};  // score 0.656
  for (int i = 0; i < 2; ++i, t += kPeriod) c.Observe(Sram(0.9), t);
  EXPECT_DOUBLE_EQ(c.threshold(), 0.2);  // not sustained yet
  for (int i = 0; i < 6; ++i, t += kPeriod) c.Observe(Sram(0.9), t);
  EXPECT_GT(c.threshold(), 0.656);
  EXPECT_FALSE(c.Decide(op).offload);  // offload off under pressure
  EXPECT_FALSE(InRange(c.Range(8), op.bytes));
  const double before = c.threshold();
  EXPECT_TRUE(c.Observe(Sram(0.7), t));  // between healthy and high: hold
  EXPECT_DOUBLE_EQ(c.threshold(), before);
  for (int i = 0; i < 10; ++i) c.Observe(Sram(0.3), t += kPeriod);
  EXPECT_DOUBLE_EQ(c.threshold(), 0.2);  // back to the configured base
  EXPECT_TRUE(c.Decide(op).offload);
  EXPECT_TRUE(InRange(c.Range(8), op.bytes));
}

TEST(OffloadControllerTest, AtTheMaximumThresholdNothingIsOffloaded) {
  OffloadControllerConfig cfg = NoLatency();
  cfg.base_threshold = 1.0;
  OffloadController c(cfg);
  c.Observe(Sram(0.1), 0);
  EXPECT_TRUE(c.Range(2).empty());
  EXPECT_TRUE(c.Range(64).empty());
}

TEST(OffloadControllerTest, BaseThresholdChangesKeepThePressureRaise) {
  OffloadController c(NoLatency());
  dp::TimeNs t = 0;
  for (int i = 0; i < 3; ++i, t += kPeriod) c.Observe(Sram(0.9), t);
  EXPECT_NEAR(c.threshold(), 0.3, 1e-12);
  c.set_base_threshold(0.5);
  EXPECT_NEAR(c.threshold(), 0.6, 1e-12);
}

TEST(OffloadControllerTest, ReevaluatesAtMostOncePerPeriod) {
  OffloadController c({});
  EXPECT_TRUE(c.Observe(Sram(0.9), 0));
  EXPECT_FALSE(c.Observe(Sram(0.9), kPeriod / 2));
  EXPECT_TRUE(c.Observe(Sram(0.9), kPeriod));
}

// Cumulative chunk outcomes, switch-wide and for `group` alone.
Stats Outcomes(uint64_t completed, uint64_t timeouts, uint64_t closed = 0, uint8_t group = 3) {
  Stats s = Sram(0.1);
  s.counters.cais.completed_chunks = completed;
  s.counters.cais.timeouts = timeouts;
  if (closed > 0) s.drops["chunk_closed"] = closed;
  GroupStats g;
  g.group_id = group;
  g.counters.completed_chunks = completed;
  g.counters.timeouts = timeouts;
  s.groups.push_back(g);
  return s;
}

constexpr dp::TimeNs kSecond = 1000 * dp::kNsPerMs;

TEST(WindowedRatioTest, CountsOnlyWhatHappenedInTheWindow) {
  WindowedRatio w(10 * kSecond);
  EXPECT_EQ(w.ratio(), 0.0);
  w.Add(0, 0, 1'000'000);  // a million clean chunks before the window
  for (int i = 1; i <= 10; ++i) w.Add(i * kSecond, 100 * i, 1'000'000 + 200 * i);
  EXPECT_DOUBLE_EQ(w.ratio(), 0.5);  // 1,000 of 2,000 in the last 10 s
  EXPECT_EQ(w.denominator(), 2000u);
  EXPECT_EQ(w.ratio(2001), 0.0);  // too few decided to count
  // Clean for 11 s more: the bad seconds leave the window.
  for (int i = 11; i <= 21; ++i) w.Add(i * kSecond, 1000, 1'002'000 + 500 * (i - 10));
  EXPECT_DOUBLE_EQ(w.ratio(), 0.0);
  // Samples every 100 ms keep the deque short.
  for (int i = 0; i < 1000; ++i) w.Add(21 * kSecond + i * kPeriod, 1000, 1'010'000);
  EXPECT_LE(w.samples(), 20u);
  // A counter going backwards (the switch restarted) starts afresh.
  w.Add(130 * kSecond, 5, 10);
  EXPECT_EQ(w.denominator(), 0u);
  w.Add(131 * kSecond, 6, 20);
  EXPECT_DOUBLE_EQ(w.ratio(), 0.1);
}

// The write-up's alarm (4.4) over the last 10 s, not since start: after a
// million clean chunks a burst of timeouts still raises it.
TEST(OffloadControllerTest, FallbackAlarmAboveTenPercentOverTheWindowNotSinceStart) {
  OffloadController c({});
  c.Observe(Outcomes(1'000'000, 0), 0);
  EXPECT_FALSE(c.fallback_alarm());
  c.Observe(Outcomes(1'000'095, 5, 5), kSecond);  // 10 of 100: not above 10 %
  EXPECT_FALSE(c.fallback_alarm());
  EXPECT_NEAR(c.fallback_ratio(), 0.1, 1e-9);
  c.Observe(Outcomes(1'000'180, 20, 5), 2 * kSecond);  // 25 of 200
  EXPECT_TRUE(c.fallback_alarm());
  EXPECT_NEAR(c.fallback_ratio(), 0.125, 1e-9);
  // Since start that is 25 in a million: the old alarm never fired.
  // Fewer than fallback_min_chunks decided in the window count as none.
  OffloadController few({});
  few.Observe(Outcomes(0, 0), 0);
  few.Observe(Outcomes(10, 10), kSecond);
  EXPECT_FALSE(few.fallback_alarm());
}

TEST(OffloadControllerTest, ConfigIsValidated) {
  OffloadControllerConfig cfg;
  EXPECT_TRUE(cfg.Validate().ok());
  cfg.base_threshold = -1;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.healthy_sram = 0.9;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.host_latency_s = -1;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.explore_interval_ns = 0;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.fallback_window_ns = 0;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = {};
  cfg.fallback_alarm = 1.5;
  EXPECT_FALSE(cfg.Validate().ok());
}

TEST(OffloadControllerTest, MeasuredTimesDecideWhereBothPathsWereSeen) {
  OffloadController c{OffloadControllerConfig{}};
  const uint64_t bit = uint64_t{1} << 24;
  // 16 MiB: the switch path took 140 ms and the host path 210 ms (gain 1/3 >
  // 0.2), although the model, assuming 100 Gbit/s hosts and a 400 Gbit/s
  // switch, would call any queueing a loss.
  GroupOffload p = c.Plan(Measured(24, 140e3, 210e3), 0);
  EXPECT_EQ(p.group_id, 5);
  EXPECT_EQ(p.participants, 4);
  EXPECT_EQ(p.measured_bins, bit);
  EXPECT_EQ(p.offload_bins, bit);
  EXPECT_EQ(p.explore_bins, 0u);  // the host path's sample is fresh
  // The bar at 4 ranks is a fifth of the best possible gain (1/3): 6.7 %.
  EXPECT_NEAR(MaxBandwidthGain(4), 1.0 / 3, 1e-12);
  EXPECT_NEAR(MaxBandwidthGain(8), 3.0 / 7, 1e-12);
  EXPECT_EQ(MaxBandwidthGain(2), 0.0);
  EXPECT_EQ(c.Plan(Measured(24, 190e3, 210e3), 0).offload_bins, bit);  // 9.5 % faster
  EXPECT_EQ(c.Plan(Measured(24, 200e3, 210e3), 0).offload_bins, 0u);   // 4.8 %: not enough
  // A slower switch loses.
  EXPECT_EQ(c.Plan(Measured(24, 600e3, 200e3), 0).offload_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(24, 600e3, 200e3), 0).measured_bins, bit);
  // Classes never seen go to the switch (issue 46: the model's assumed
  // rates declined 1 MiB on 4 x 1 Gbit/s, where the switch runs at its
  // bound); measurements move them to the host path where it is faster.
  EXPECT_EQ(p.min_bytes, 1u);
  EXPECT_EQ(p.max_bytes, UINT64_MAX);
}

// The alarm acts (docs/control.md, "Fallback hold"): a group whose chunks
// fall back is held on the host path, then planned as before once the bad
// chunks have left the window.
TEST(OffloadControllerTest, AGroupWhoseChunksFallBackIsHeldOnTheHostPathUntilTheyLeaveTheWindow) {
  OffloadController c({});
  GroupInfo g = Measured(24, 140e3, 210e3);
  g.group_id = 3;
  c.Observe(Outcomes(1'000'000, 0), 0);
  GroupOffload p = c.Plan(g, 0);
  EXPECT_FALSE(p.fallback_hold);
  EXPECT_NE(p.offload_bins, 0u);  // measured: the switch is faster
  // Lossy links: 100 of 400 chunks time out in a second.
  c.Observe(Outcomes(1'000'300, 100), kSecond);
  p = c.Plan(g, kSecond);
  EXPECT_TRUE(p.fallback_hold);
  EXPECT_NEAR(p.fallback_ratio, 0.25, 1e-9);
  EXPECT_GT(p.min_bytes, p.max_bytes);  // no size goes to the switch
  EXPECT_EQ(p.measured_bins, 0u);
  EXPECT_EQ(p.offload_bins, 0u);
  EXPECT_EQ(p.explore_bins, 0u);
  // Another group on clean links is not held.
  GroupInfo other = Measured(24, 140e3, 210e3);
  other.group_id = 4;
  EXPECT_FALSE(c.Plan(other, kSecond).fallback_hold);
  // Held: the group sends nothing to the switch, its counts stand still.
  for (int s = 2; s <= 10; ++s) {
    c.Observe(Outcomes(1'000'300, 100), s * kSecond);
    EXPECT_TRUE(c.Plan(g, s * kSecond).fallback_hold) << s;
  }
  // 10 s after the timeouts they have left the window: back on the switch.
  c.Observe(Outcomes(1'000'300, 100), 11 * kSecond);
  p = c.Plan(g, 11 * kSecond);
  EXPECT_FALSE(p.fallback_hold);
  EXPECT_NE(p.offload_bins, 0u);
}

TEST(OffloadControllerTest, TheUnmeasuredPathIsExploredOncePerInterval) {
  OffloadControllerConfig cfg;
  cfg.explore_interval_ns = 1000 * dp::kNsPerMs;
  cfg.explore_budget = 1;  // the interval alone (see ReExploringALongOperationKeepsToTheBudget)
  OffloadController c{cfg};
  const uint64_t bit = uint64_t{1} << 24;
  // Only the switch path seen, and the model sends 16 MiB to the switch:
  // explore the host path, once.
  ASSERT_TRUE(InRange(c.Range(4), uint64_t{1} << 24));
  GroupOffload p = c.Plan(Measured(24, 140e3, -1), 0);
  EXPECT_EQ(p.measured_bins, bit);  // it stays on the path it was measured on
  EXPECT_EQ(p.offload_bins, bit);
  EXPECT_EQ(p.explore_bins, bit);
  EXPECT_EQ(c.Plan(Measured(24, 140e3, -1), 500 * dp::kNsPerMs).explore_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(24, 140e3, -1), 1000 * dp::kNsPerMs).explore_bins, bit);  // lost?
  // Both seen, the switch wins: the host path is measured again once its
  // sample is older than the interval.
  EXPECT_EQ(c.Plan(Measured(24, 140e3, 210e3, 0, 999), 5000 * dp::kNsPerMs).explore_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(24, 140e3, 210e3, 0, 1000), 5000 * dp::kNsPerMs).explore_bins, bit);
  // The host path wins: the switch path is the one measured again.
  EXPECT_EQ(c.Plan(Measured(20, 900, 300, 1000, 0), 0).explore_bins, uint64_t{1} << 20);
  EXPECT_EQ(c.Plan(Measured(20, 900, 300, 0, 1000), 0).explore_bins, 0u);
  // Only the path the model does not choose was seen: the class stays on it
  // (not on the model's moving range), and the other path is explored.
  p = OffloadController{cfg}.Plan(Measured(24, -1, 210e3), 0);
  EXPECT_EQ(p.measured_bins, bit);
  EXPECT_EQ(p.offload_bins, 0u);
  EXPECT_EQ(p.explore_bins, bit);
  // A re-formed group (new seq_base) starts afresh.
  GroupInfo again = Measured(24, 140e3, -1);
  again.seq_base = 78;
  EXPECT_EQ(c.Plan(again, 1001 * dp::kNsPerMs).explore_bins, bit);
}

// A 64 MiB host-path all-reduce of 1.9 s, re-explored every 10 s, would
// cost 7 % of the time; with the 2 % budget it is measured again after 95 s.
// While another job's traffic shares the group's hosts, nothing is explored
// (an explore would be measured against that job, and slow it down); the
// decision stands on what was measured without it, or on the model.
TEST(OffloadControllerTest, NothingIsExploredWhileAnotherJobSharesTheHosts) {
  OffloadController c{OffloadControllerConfig{}};
  const uint64_t bit = uint64_t{1} << 24;
  GroupInfo shared = Measured(24, 140e3, -1);
  shared.contended = true;
  GroupOffload p = c.Plan(shared, 0);
  EXPECT_EQ(p.explore_bins, 0u);
  EXPECT_TRUE(InRange({p.min_bytes, p.max_bytes}, bit));  // the model: the switch
  shared.contended = false;  // the neighbour went quiet: explore as usual
  EXPECT_EQ(c.Plan(shared, 1).explore_bins, bit);
  GroupInfo measured = Measured(24, 140e3, 210e3, 0, 20'000);  // stale host sample
  measured.contended = true;
  p = c.Plan(measured, 2);
  EXPECT_EQ(p.explore_bins, 0u);
  EXPECT_EQ(p.offload_bins, bit);  // decided from the samples taken alone
}

TEST(OffloadControllerTest, ReExploringALongOperationKeepsToTheBudget) {
  OffloadControllerConfig cfg;  // interval 10 s, budget 0.02
  OffloadController c{cfg};
  const uint64_t bit = uint64_t{1} << 26;
  EXPECT_EQ(c.Plan(Measured(26, 1.2e6, 1.9e6, 0, 10'000), 0).explore_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(26, 1.2e6, 1.9e6, 0, 94'999), 0).explore_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(26, 1.2e6, 1.9e6, 0, 95'000), 0).explore_bins, bit);
  // A short operation keeps the interval: 1 ms / 0.02 = 50 ms < 10 s.
  OffloadController d{cfg};
  EXPECT_EQ(d.Plan(Measured(20, 700, 1000, 0, 9'999), 0).explore_bins, 0u);
  EXPECT_EQ(d.Plan(Measured(20, 700, 1000, 0, 10'000), 0).explore_bins, uint64_t{1} << 20);
  cfg.explore_budget = 0;
  EXPECT_FALSE(cfg.Validate().ok());
}

TEST(OffloadControllerTest, OneSampleDoesNotDecideAndIsTakenAgainSoon) {
  OffloadControllerConfig cfg;  // min_samples 2, explore_retry 1 s
  OffloadController c{cfg};
  const uint64_t bit = uint64_t{1} << 24;
  // One host sample that looks far better (taken beside another job's
  // traffic, say): the switch, measured enough, stands, and the host path
  // is explored again once explore_retry_ns has passed, not before.
  GroupOffload p = c.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 0);
  EXPECT_EQ(p.measured_bins, bit);
  EXPECT_EQ(p.offload_bins, bit);
  EXPECT_EQ(p.explore_bins, bit);
  // That explore is still under way at 1 s (no new sample): not repeated.
  EXPECT_EQ(c.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 1000 * dp::kNsPerMs).explore_bins, 0u);
  // Its sample came (one of the two needed): the next explore follows once
  // the retry gap has passed since the last one, not before.
  OffloadController d{cfg};
  ASSERT_EQ(d.Plan(Measured(24, 540e3, -1), 0).explore_bins, bit);
  EXPECT_EQ(d.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 500 * dp::kNsPerMs).explore_bins, 0u);
  EXPECT_EQ(d.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 1000 * dp::kNsPerMs).explore_bins, bit);
  // An explore whose sample never arrives is sent again after the interval.
  EXPECT_EQ(c.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 9999 * dp::kNsPerMs).explore_bins, 0u);
  EXPECT_EQ(c.Plan(Measured(24, 540e3, 270e3, 0, 0, 1), 10000 * dp::kNsPerMs).explore_bins, bit);
  // Two samples: they decide (here for the host path).
  p = c.Plan(Measured(24, 540e3, 270e3, 0, 0, 2), 1100 * dp::kNsPerMs);
  EXPECT_EQ(p.measured_bins, bit);
  EXPECT_EQ(p.offload_bins, 0u);
  // The best recent sample decides, not the average that still remembers a
  // slow start: here the switch's best is 280 ms against the host's 380 ms.
  GroupInfo g = Measured(24, 540e3, 270e3, 0, 0, 2);
  g.timings[0].switch_path.best_us_per_byte = 280e3 / std::ldexp(1.0, 24);
  g.timings[0].host_path.best_us_per_byte = 380e3 / std::ldexp(1.0, 24);
  p = c.Plan(g, 1200 * dp::kNsPerMs);
  EXPECT_EQ(p.measured_bins, bit);
  EXPECT_EQ(p.offload_bins, bit);
  cfg.min_samples = 0;
  EXPECT_FALSE(cfg.Validate().ok());
}

// A sweep or a job with many bucket sizes explores the host path once per
// regime, not once per size: a size measured on one path takes the
// comparison of a nearby size measured on both when its time per byte on
// that path matches (both bandwidth-bound), and is explored as before when
// it does not (latency-bound), when the lender is too far or its sample on
// the other path is stale, or with borrowing off. Their samples pool.
TEST(OffloadControllerTest, ASizeMeasuredOnOnePathBorrowsANearbyComparisonInTheSameRegime) {
  const auto add = [](GroupInfo& g, int bin, double switch_us, double host_us) {
    OffloadTiming t;
    t.bin = bin;
    const double bytes = std::ldexp(1.0, bin);
    if (switch_us >= 0) t.switch_path = {64, switch_us, bytes, 0};  // past the budget
    if (host_us >= 0) t.host_path = {1, host_us, bytes, 0};
    g.timings.push_back(t);
  };
  const auto bit = [](int b) { return uint64_t{1} << b; };
  // 1 MiB on both paths (the switch 1.5x faster, as on 4 x 1 Gbit/s).
  GroupInfo g = Measured(20, 8.4e3, 12.7e3);
  add(g, 22, 33.8e3, -1);  // 4 MiB, switch only, the same time per byte
  add(g, 24, 148e3, -1);   // 16 MiB, 4 classes away, 10 % slower per byte
  add(g, 25, 270e3, -1);   // 32 MiB: 5 classes away, too far
  add(g, 17, 2e3, -1);     // 128 KiB, latency-bound: 1.9x the time per byte
  add(g, 21, -1, 25.4e3);  // 2 MiB, host path only, its time per byte as 1 MiB's
  OffloadController c{OffloadControllerConfig{}};
  GroupOffload p = c.Plan(g, 0);
  EXPECT_EQ(p.borrowed_bins, bit(21) | bit(22) | bit(24));
  // 128 KiB and 32 MiB stay on the switch, where they were measured.
  EXPECT_EQ(p.measured_bins, bit(20) | p.borrowed_bins | bit(17) | bit(25));
  EXPECT_EQ(p.offload_bins, p.measured_bins);  // the lender's switch wins
  EXPECT_EQ(p.explore_bins, bit(17) | bit(25));
  // The lender's host path wins: so does the borrower's.
  GroupInfo h = Measured(20, 12.7e3, 8.4e3);
  add(h, 22, 50.8e3, -1);
  p = OffloadController{OffloadControllerConfig{}}.Plan(h, 0);
  EXPECT_EQ(p.borrowed_bins, bit(22));
  EXPECT_EQ(p.offload_bins, 0u);
  EXPECT_EQ(p.explore_bins, 0u);
  // The lender's host sample is stale: nothing to borrow, both explored.
  GroupInfo stale = Measured(20, 8.4e3, 12.7e3, 0, 20'000);
  add(stale, 22, 33.8e3, -1);
  p = OffloadController{OffloadControllerConfig{}}.Plan(stale, 0);
  EXPECT_EQ(p.borrowed_bins, 0u);
  EXPECT_EQ(p.explore_bins, bit(20) | bit(22));
  // Samples pool: 16 MiB has one host sample (one explore landed) and
  // 64 MiB, the same time per byte on the switch, none. Together they have
  // one: 64 MiB is explored once, and with its sample the two decide.
  GroupInfo sweep = Measured(24, 140e3, 210e3, 0, 0, 1);
  add(sweep, 26, 560e3, -1);
  p = OffloadController{OffloadControllerConfig{}}.Plan(sweep, 0);
  EXPECT_EQ(p.borrowed_bins, 0u);
  EXPECT_EQ(p.explore_bins & bit(26), bit(26));
  sweep.timings[1].host_path = {1, 840e3, std::ldexp(1.0, 26), 0};
  p = OffloadController{OffloadControllerConfig{}}.Plan(sweep, 0);
  EXPECT_EQ(p.borrowed_bins, bit(24) | bit(26));
  EXPECT_EQ(p.offload_bins, bit(24) | bit(26));
  EXPECT_EQ(p.explore_bins, 0u);
  // The best of the pooled samples decides: 64 MiB's host sample was fast.
  sweep.timings[1].host_path.mean_us = 580e3;
  EXPECT_EQ(OffloadController{OffloadControllerConfig{}}.Plan(sweep, 0).offload_bins, 0u);
  // Borrowing off: every size explores on its own.
  OffloadControllerConfig off;
  off.borrow_span = 0;
  p = OffloadController{off}.Plan(g, 0);
  EXPECT_EQ(p.borrowed_bins, 0u);
  EXPECT_EQ(p.explore_bins, bit(17) | bit(21) | bit(22) | bit(24) | bit(25));
  off.borrow_span = 64;
  EXPECT_FALSE(off.Validate().ok());
  off.borrow_span = 4;
  off.borrow_tolerance = 1;
  EXPECT_FALSE(off.Validate().ok());
}

TEST(OffloadControllerTest, SramPressureAndTheModelOnlyModeStillApply) {
  OffloadControllerConfig cfg;
  cfg.max_threshold = 1.0;
  OffloadController c{cfg};
  // At the maximum threshold even a measured win is declined.
  for (int i = 0; i < 20; ++i) c.Observe(Sram(0.95), i * kPeriod);
  EXPECT_EQ(c.threshold(), 1.0);
  EXPECT_EQ(c.Plan(Measured(24, 100e3, 210e3), 20 * kPeriod).offload_bins, 0u);
  cfg.use_measurements = false;
  OffloadController model{cfg};
  const GroupOffload p = model.Plan(Measured(24, 100e3, 210e3), 0);
  EXPECT_EQ(p.measured_bins | p.offload_bins | p.explore_bins, 0u);
}

// A switch as the loop sees it: synthetic stats, two groups, a recorded policy.
class ScriptedSwitch final : public ControlPlane, public CaisControlPlane {
 public:
  std::string program() const override { return "cais"; }
  CaisControlPlane* cais() override { return this; }
  Stats stats;
  std::map<std::string, std::string> config{{"offload_threshold", "0.2"}};
  OffloadPolicy applied;
  int sets = 0;

  absl::Status AddRule(const cais::Rule&) override { return absl::OkStatus(); }
  absl::Status DeleteRule(const cais::RuleKey&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override { return std::vector<cais::Rule>{}; }
  absl::StatusOr<std::vector<PortInfo>> ListPorts() override { return std::vector<PortInfo>{}; }
  absl::Status RegisterPort(uint16_t, const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<GroupInfo> CreateGroup(uint8_t, const std::vector<uint16_t>&) override {
    return absl::UnimplementedError("scripted");
  }
  absl::Status DestroyGroup(uint8_t) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<GroupInfo>> ListGroups() override {
    GroupInfo a, b, forming;
    a.group_id = 1;
    a.world_size = 2;
    a.formed = true;
    b.group_id = 2;
    b.world_size = 8;
    b.formed = true;
    forming.group_id = 3;
    forming.world_size = 4;
    return std::vector<GroupInfo>{a, b, forming};
  }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override { return config; }
  absl::Status SetConfig(const std::map<std::string, std::string>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<Stats> GetStats() override { return stats; }
  absl::Status Health() override { return absl::OkStatus(); }
  absl::Status SetOffloadPolicy(const OffloadPolicy& p) override {
    applied = p;
    ++sets;
    return absl::OkStatus();
  }
  absl::StatusOr<OffloadPolicy> GetOffloadPolicy() override { return applied; }
};

// A plane without the CAIS facet (an OLAF switch's).
class NoCaisPlane final : public ControlPlane {
 public:
  std::string program() const override { return "olaf"; }
  absl::StatusOr<std::vector<PortInfo>> ListPorts() override { return std::vector<PortInfo>{}; }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override {
    return std::map<std::string, std::string>{};
  }
  absl::Status SetConfig(const std::map<std::string, std::string>&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<Stats> GetStats() override { return Stats{}; }
  absl::Status Health() override { return absl::OkStatus(); }
};

TEST(OffloadLoopTest, APlaneWithoutTheCaisFacetIsAFailedPreconditionNotACrash) {
  NoCaisPlane plane;
  OffloadLoop loop(&plane, OffloadLoopOptions{});
  const auto p = loop.Tick(0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("runs the olaf program"), std::string::npos) << p.status();
}

TEST(OffloadLoopTest, PushesOneRangePerFormedGroupOncePerPeriod) {
  ScriptedSwitch sw;
  sw.stats = Sram(0.1, 5);
  OffloadLoopOptions o;
  o.name = "test-controller";
  OffloadLoop loop(&sw, o);
  auto p = loop.Tick(0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(sw.sets, 1);
  EXPECT_EQ(sw.applied.controller, "test-controller");
  ASSERT_EQ(sw.applied.groups.size(), 2u);  // the forming group is left alone
  EXPECT_EQ(sw.applied.groups[0].group_id, 1);
  EXPECT_EQ(sw.applied.groups[0].participants, 2);
  EXPECT_EQ(sw.applied.groups[1].participants, 8);
  EXPECT_NEAR(sw.applied.queue_delay_us, 5, 1e-9);
  // Measured mode, no SRAM pressure: classes never seen go to the switch.
  EXPECT_EQ(sw.applied.groups[0].min_bytes, 1u);
  EXPECT_EQ(sw.applied.groups[0].max_bytes, UINT64_MAX);
  ASSERT_TRUE(loop.Tick(kPeriod / 2).ok());
  EXPECT_EQ(sw.sets, 1);  // within the period: nothing new
  ASSERT_TRUE(loop.Tick(kPeriod).ok());
  EXPECT_EQ(sw.sets, 2);
}

TEST(OffloadLoopTest, SramPressureTurnsEveryGroupOffAndRecoveryBackOn) {
  ScriptedSwitch sw;
  OffloadLoop loop(&sw, {});
  dp::TimeNs t = 0;
  sw.stats = Sram(0.95, 5);
  for (int i = 0; i < 20; ++i, t += kPeriod) ASSERT_TRUE(loop.Tick(t).ok());
  for (const auto& g : sw.applied.groups) EXPECT_GT(g.min_bytes, g.max_bytes) << int{g.group_id};
  EXPECT_DOUBLE_EQ(sw.applied.threshold, 1.0);
  sw.stats = Sram(0.1, 5);
  for (int i = 0; i < 20; ++i, t += kPeriod) ASSERT_TRUE(loop.Tick(t).ok());
  for (const auto& g : sw.applied.groups) {
    EXPECT_LE(g.min_bytes, uint64_t{1} << 20) << int{g.group_id};
    EXPECT_EQ(g.max_bytes, UINT64_MAX);
  }
  EXPECT_DOUBLE_EQ(sw.applied.threshold, 0.2);
}

// The loop pushes the hold: group 2's chunks time out, it alone goes to the
// host path with its ratio in the policy, and comes back once they age out.
TEST(OffloadLoopTest, AGroupWhoseChunksFallBackIsPushedToTheHostPath) {
  ScriptedSwitch sw;
  OffloadLoop loop(&sw, {});
  const auto with = [](uint64_t completed, uint64_t timeouts) {
    return Outcomes(completed, timeouts, 0, /*group=*/2);
  };
  const auto group = [&](uint8_t id) {
    for (const GroupOffload& g : sw.applied.groups) {
      if (g.group_id == id) return g;
    }
    ADD_FAILURE() << "group " << int{id} << " not in the policy";
    return GroupOffload{};
  };
  sw.stats = with(100'000, 0);
  ASSERT_TRUE(loop.Tick(0).ok());
  EXPECT_FALSE(group(2).fallback_hold);
  sw.stats = with(100'500, 500);  // half of the last 1,000 chunks timed out
  ASSERT_TRUE(loop.Tick(kSecond).ok());
  EXPECT_TRUE(group(2).fallback_hold);
  EXPECT_GT(group(2).min_bytes, group(2).max_bytes);
  EXPECT_NEAR(group(2).fallback_ratio, 0.5, 1e-9);
  EXPECT_FALSE(group(1).fallback_hold);
  EXPECT_TRUE(sw.applied.fallback_alarm);
  EXPECT_NEAR(sw.applied.fallback_ratio, 0.5, 1e-9);
  ASSERT_TRUE(loop.Tick(12 * kSecond).ok());  // nothing new: the window has moved on
  EXPECT_FALSE(group(2).fallback_hold);
  EXPECT_LE(group(2).min_bytes, group(2).max_bytes);
  EXPECT_FALSE(sw.applied.fallback_alarm);
}

TEST(OffloadLoopTest, FollowsTheSwitchsOffloadThresholdKey) {
  ScriptedSwitch sw;
  sw.stats = Sram(0.1);
  OffloadLoop loop(&sw, {});
  ASSERT_TRUE(loop.Tick(0).ok());
  EXPECT_DOUBLE_EQ(sw.applied.threshold, 0.2);
  sw.config["offload_threshold"] = "0.45";
  ASSERT_TRUE(loop.Tick(kPeriod).ok());
  EXPECT_DOUBLE_EQ(sw.applied.threshold, 0.45);
}

}  // namespace
}  // namespace inca::control
