#include "inca/olaf/send_control.h"

#include <gtest/gtest.h>

#include <vector>

namespace inca::olaf {
namespace {

constexpr dp::TimeNs kMs = dp::kNsPerMs;

AckHeader Ack(double util, uint16_t active, uint32_t aom_us) {
  AckHeader a;
  a.queue_util = static_cast<uint32_t>(util * kQueueUtilOne + 0.5);
  a.active_clusters = active;
  a.aom_us = aom_us;
  return a;
}

SendControl Make(SendControlMode mode, bool extrapolate = true) {
  SendControlOptions o;
  o.mode = mode;
  o.delta_t_ns = 400 * kMs;
  o.extrapolate_aom = extrapolate;
  auto sc = SendControl::Create(o);
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

TEST(OlafSendControlTest, NoAckMeansAlwaysSend) {
  for (auto mode :
       {SendControlMode::kOff, SendControlMode::kPriority, SendControlMode::kFairness}) {
    SendControl sc = Make(mode);
    EXPECT_EQ(sc.Probability(0), 1.0);
    EXPECT_EQ(sc.Probability(10'000 * kMs), 1.0);
    EXPECT_TRUE(sc.ShouldSend(0, 0.999999));
    EXPECT_FALSE(sc.feedback().has_value());
  }
}

TEST(OlafSendControlTest, UncongestedQueueMeansAlwaysSend) {
  SendControl sc = Make(SendControlMode::kPriority);
  sc.OnAck(Ack(0.0, 9, 100'000), 0);
  EXPECT_EQ(sc.Probability(0), 1.0);
  // Any utilisation up to the fair share 1/N still gives 1.
  sc.OnAck(Ack(0.24, 4, 100'000), 0);
  EXPECT_DOUBLE_EQ(sc.Probability(0), 1.0);
  // No switch stamped the ACK (direct to the PS): util 0, active 0.
  sc.OnAck(Ack(0.0, 0, 100'000), 0);
  EXPECT_EQ(sc.Probability(0), 1.0);
}

TEST(OlafSendControlTest, FullQueueGivesTheFairShare) {
  SendControl sc = Make(SendControlMode::kPriority);
  for (uint16_t n : {uint16_t{1}, uint16_t{2}, uint16_t{4}, uint16_t{9}, uint16_t{100}}) {
    sc.OnAck(Ack(1.0, n, 100'000), 0);
    EXPECT_DOUBLE_EQ(sc.Probability(0), 1.0 / n) << n;
  }
  // Approaching full: base = (1 - util) + 1/N.
  sc.OnAck(Ack(0.9, 4, 100'000), 0);
  EXPECT_NEAR(sc.Probability(0), 0.35, 1e-6);
  // Monotone: more utilisation never raises P.
  double prev = 2;
  for (int i = 0; i <= 100; ++i) {
    sc.OnAck(Ack(i / 100.0, 8, 100'000), 0);
    const double p = sc.Probability(0);
    EXPECT_LE(p, prev + 1e-12);
    EXPECT_GE(p, 0.0);
    EXPECT_LE(p, 1.0);
    prev = p;
  }
  EXPECT_NEAR(prev, 1.0 / 8, 1e-6);
}

TEST(OlafSendControlTest, UrgencyIsZeroUpToDeltaT) {
  SendControl sc = Make(SendControlMode::kPriority, /*extrapolate=*/false);
  for (uint32_t aom_us : {0u, 1u, 200'000u, 399'999u, 400'000u}) {
    sc.OnAck(Ack(1.0, 4, aom_us), 0);
    EXPECT_DOUBLE_EQ(sc.Probability(0), 0.25) << aom_us;
  }
  // Unknown AoM (no update of the cluster applied yet): no urgency.
  sc.OnAck(Ack(1.0, 4, kAomUnknown), 0);
  EXPECT_DOUBLE_EQ(sc.Probability(0), 0.25);
  EXPECT_FALSE(sc.EstimatedAomNs(0).has_value());
}

TEST(OlafSendControlTest, PriorityUrgencyIsTheRelativeOvershoot) {
  SendControl sc = Make(SendControlMode::kPriority, /*extrapolate=*/false);
  sc.OnAck(Ack(1.0, 4, 500'000), 0);  // 100 ms over a 400 ms bound
  EXPECT_NEAR(sc.Probability(0), 0.25 + 0.25, 1e-9);
  sc.OnAck(Ack(1.0, 4, 600'000), 0);
  EXPECT_NEAR(sc.Probability(0), 0.25 + 0.5, 1e-9);
  sc.OnAck(Ack(1.0, 4, 700'000), 0);  // 0.25 + 0.75 = 1
  EXPECT_NEAR(sc.Probability(0), 1.0, 1e-9);
  sc.OnAck(Ack(1.0, 4, 5'000'000), 0);  // clamped
  EXPECT_EQ(sc.Probability(0), 1.0);
  EXPECT_NEAR(SendUrgencyTerm(sc.options(), 500 * kMs), 0.25, 1e-12);
}

TEST(OlafSendControlTest, FairnessUrgencyIsMuchStrongerForTheSameOvershoot) {
  SendControl prio = Make(SendControlMode::kPriority, false);
  SendControl fair = Make(SendControlMode::kFairness, false);
  // 1 µs over ΔT = 400 ms: priority f = 0.001/400 = 2.5e-6; fairness
  // f = (400 ms / 1 ms) * (0.001 ms / 1 ms) = 0.4.
  const AckHeader a = Ack(1.0, 4, 400'001);
  prio.OnAck(a, 0);
  fair.OnAck(a, 0);
  EXPECT_NEAR(prio.Probability(0), 0.25 + 2.5e-6, 1e-9);
  EXPECT_NEAR(fair.Probability(0), 0.25 + 0.4, 1e-9);
  const dp::TimeNs aom = 400 * kMs + 1000;
  EXPECT_NEAR(SendUrgencyTerm(fair.options(), aom) / SendUrgencyTerm(prio.options(), aom),
              400.0 * 400.0, 1e-3);
  // 10 µs over: fairness is at 1 already, priority barely moved.
  fair.OnAck(Ack(1.0, 4, 400'010), 0);
  prio.OnAck(Ack(1.0, 4, 400'010), 0);
  EXPECT_EQ(fair.Probability(0), 1.0);
  EXPECT_LT(prio.Probability(0), 0.2501);
  // Both are zero at or below ΔT.
  fair.OnAck(Ack(1.0, 4, 400'000), 0);
  EXPECT_DOUBLE_EQ(fair.Probability(0), 0.25);
}

TEST(OlafSendControlTest, FairnessDependsOnTheTimeUnit) {
  SendControlOptions o;
  o.mode = SendControlMode::kFairness;
  o.delta_t_ns = 400 * kMs;
  o.time_unit_ns = 1'000'000'000;  // seconds: f = 0.4 * overshoot_s
  EXPECT_NEAR(SendUrgencyTerm(o, 500 * kMs), 0.4 * 0.1, 1e-12);
  o.mode = SendControlMode::kPriority;  // unit-free
  EXPECT_NEAR(SendUrgencyTerm(o, 500 * kMs), 0.25, 1e-12);
}

TEST(OlafSendControlTest, AomIsExtrapolatedSinceTheAck) {
  SendControl sc = Make(SendControlMode::kPriority);
  sc.OnAck(Ack(1.0, 4, 350'000), 1000 * kMs);  // 350 ms old when the ACK arrived
  EXPECT_DOUBLE_EQ(sc.Probability(1000 * kMs), 0.25);
  EXPECT_DOUBLE_EQ(sc.Probability(1050 * kMs), 0.25);  // exactly ΔT
  EXPECT_NEAR(sc.Probability(1150 * kMs), 0.5, 1e-9);  // 500 ms
  EXPECT_EQ(*sc.EstimatedAomNs(1150 * kMs), 500 * kMs);
  EXPECT_EQ(sc.Probability(5000 * kMs), 1.0);  // no ACK for long: back to 1
  SendControl flat = Make(SendControlMode::kPriority, /*extrapolate=*/false);
  flat.OnAck(Ack(1.0, 4, 350'000), 1000 * kMs);
  EXPECT_DOUBLE_EQ(flat.Probability(5000 * kMs), 0.25);
}

TEST(OlafSendControlTest, OffAlwaysSends) {
  SendControl sc = Make(SendControlMode::kOff);
  sc.OnAck(Ack(1.0, 64, 0), 0);
  EXPECT_EQ(sc.Probability(0), 1.0);
  EXPECT_TRUE(sc.ShouldSend(0, 0.9999999));
  EXPECT_EQ(SendProbability(sc.options(), *sc.feedback(), 0), 1.0);
}

TEST(OlafSendControlTest, ShouldSendFollowsTheDraws) {
  SendControl sc = Make(SendControlMode::kPriority, false);
  sc.OnAck(Ack(1.0, 2, 100'000), 0);  // P = 0.5
  ASSERT_DOUBLE_EQ(sc.Probability(0), 0.5);
  const std::vector<double> draws = {0.0, 0.1, 0.4999, 0.5, 0.75, 0.999};
  std::vector<bool> got;
  for (double u : draws) got.push_back(sc.ShouldSend(0, u));
  EXPECT_EQ(got, (std::vector<bool>{true, true, true, false, false, false}));
  sc.Reset();
  EXPECT_TRUE(sc.ShouldSend(0, 0.999));
}

TEST(OlafSendControlTest, OptionsValidateAndModesParse) {
  SendControlOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.delta_t_ns = 0;
  EXPECT_FALSE(SendControl::Create(o).ok());
  o.delta_t_ns = 1;
  o.time_unit_ns = -1;
  EXPECT_FALSE(o.Validate().ok());
  for (auto m : {SendControlMode::kOff, SendControlMode::kPriority, SendControlMode::kFairness}) {
    EXPECT_EQ(ParseSendControlMode(ToString(m)), m);
  }
  EXPECT_FALSE(ParseSendControlMode("fast").has_value());
}

TEST(OlafSendControlTest, FeedbackFromAckIsNormalised) {
  AckHeader a = Ack(0, 7, 1234);
  a.queue_util = kQueueUtilOne;
  const SendFeedback f = SendFeedback::FromAck(a, 42);
  EXPECT_EQ(f.queue_util, 1.0);
  EXPECT_EQ(f.active_clusters, 7u);
  EXPECT_EQ(*f.aom_ns, 1'234'000);
  EXPECT_EQ(f.received_ns, 42);
  a.queue_util = 0xFFFFFFFF;  // out of the 24-bit range: clamped
  EXPECT_EQ(SendFeedback::FromAck(a, 0).queue_util, 1.0);
  EXPECT_NEAR(SendBaseTerm(f), 1.0 / 7, 1e-12);
}

}  // namespace
}  // namespace inca::olaf
