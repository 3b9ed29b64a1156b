// PathState, the transport core's congestion control, alone: delay-based
// window, competitive mode and its drain probe, and the window trace
// (docs/design/cais-client.md). The core on a simulated star is
// transport_core_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include "client/transport_core.h"

namespace inca::client {
namespace {

// The same round trips, but the switch reports that all but 100 us of each
// was this rank's contribution waiting for slower ranks: no queue of its
// own, so no competitive mode, while delay control still slows it to their
// pace. Without the report (an older switch) the wait looks like a queue.
TEST(PathStateTest, WaitingInTheSwitchForSlowerRanksIsNotACompetitorsQueue) {
  auto run = [](int64_t wait) {
    TransportConfig c;
    c.min_window = 2;
    PathState p(c);
    int64_t t = 0;
    p.OnRtt(100'000, t, 0);
    for (int i = 0; i < 200; ++i) p.OnRtt(2'000'000, t += 500'000, wait);
    return p;
  };
  const PathState reported = run(1'900'000);
  EXPECT_EQ(reported.competitive_entries(), 0u);
  EXPECT_EQ(reported.window_chunks(), 2u);  // delay control: at the others' pace
  EXPECT_NEAR(static_cast<double>(reported.switch_wait_ns()), 1.9e6, 1e3);
  const PathState unreported = run(0);
  EXPECT_EQ(unreported.competitive_entries(), 1u);
}

TEST(PathStateTest, EntersCompetitiveModeOnlyWhenTheQueueIsNotItsOwn) {
  TransportConfig c;
  c.initial_window = 16;
  c.min_window = 2;
  c.max_window = 64;
  PathState p(c);
  int64_t t = 0;
  p.OnRtt(100'000, t);  // base 100 us, target 400 us
  // A queue of 2 ms that the window's cuts do not remove: the window falls
  // to the floor, then a whole epoch above the target at the floor.
  for (int i = 0; i < 200 && !p.competitive(); ++i) p.OnRtt(2'000'000, t += 500'000);
  EXPECT_TRUE(p.competitive());
  EXPECT_EQ(p.competitive_entries(), 1u);
  // Loss now halves the window (in delay mode it does not).
  for (int i = 0; i < 100; ++i) p.OnRtt(2'000'000, t += 100'000);
  const double w = p.window();
  p.OnLoss(t += 3'000'000);
  EXPECT_NEAR(p.window(), std::max(2.0, w / 2), 1e-9);
  // The drain probe: the window drops to the floor; the queue empties, so
  // it was this rank's own and delay control resumes.
  t += c.probe_interval_ns;
  p.OnRtt(2'000'000, t);
  EXPECT_TRUE(p.probing());
  EXPECT_EQ(p.window_chunks(), c.min_window);
  p.OnRtt(150'000, t += 2'000'000);
  p.OnRtt(150'000, t += 3'000'000);
  EXPECT_FALSE(p.probing());
  EXPECT_FALSE(p.competitive());
  // In delay mode a loss leaves the window alone.
  const double w2 = p.window();
  p.OnLoss(t += 10'000'000);
  EXPECT_EQ(p.window(), w2);
}

TEST(PathStateTest, ItsOwnQueueAfterARateStepDoesNotLookLikeACompetitor) {
  TransportConfig c;
  c.initial_window = 40;
  c.min_window = 2;
  c.max_window = 64;
  PathState p(c);
  int64_t t = 0;
  p.OnRtt(100'000, t);
  // The window's cuts shrink this rank's own queue: the delay falls back
  // towards the target as the window does.
  for (int i = 0; i < 400; ++i) {
    const double queue_ns = std::max(0.0, (p.window() - 8.0) * 100'000.0);
    p.OnRtt(100'000 + static_cast<int64_t>(queue_ns), t += 200'000);
  }
  EXPECT_FALSE(p.competitive());
  EXPECT_EQ(p.competitive_entries(), 0u);
  EXPECT_GT(p.window(), 4.0);
}

TEST(PathStateTest, GrowsBelowTargetShrinksAboveOncePerRoundTrip) {
  TransportConfig c;
  c.initial_window = 10;
  c.max_window = 100;
  PathState p(c);
  int64_t t = 0;
  p.OnRtt(100'000, t);  // base 100 us, target 400 us
  EXPECT_EQ(p.target_ns(), 400'000);
  for (int i = 0; i < 10; ++i) p.OnRtt(150'000, t += 1000);
  EXPECT_NEAR(p.window(), 11.0, 0.1);  // +1 per window of samples
  // One sample at twice the target is jitter, not a queue: the standing
  // round trip (the smallest of the last four here) stays low.
  p.OnRtt(800'000, t += 100'000);
  EXPECT_EQ(p.standing_rtt_ns(), 150'000);
  EXPECT_GE(p.window(), 11.0);
  // A queue raises every sample: on the fourth, the window shrinks.
  for (int i = 0; i < 3; ++i) p.OnRtt(800'000, t += 100'000);
  EXPECT_EQ(p.standing_rtt_ns(), 800'000);
  const double w = p.window();
  EXPECT_LT(w, 11.0 * 0.7);
  p.OnRtt(800'000, t += 1000);  // within the same round trip: no second cut
  EXPECT_EQ(p.window(), w);
  p.OnTimeout(t += 10'000'000);
  EXPECT_LT(p.window(), w);
  EXPECT_GT(p.rto_ns(), c.rto_min_ns);  // backed off
  p.OnRtt(150'000, t += 1000);
  EXPECT_EQ(p.rto_ns(), c.rto_min_ns);  // a valid sample resets the backoff
  EXPECT_GE(p.window_chunks(), c.min_window);
}

// The switch's window advice caps the window, its growth, and min_window
// too (a window the switch has no slots for only loses chunks); no advice
// (0) leaves max_window alone.
TEST(PathStateTest, TheSwitchsAdviceCapsTheWindow) {
  TransportConfig c;
  c.initial_window = 40;
  c.min_window = 8;
  c.max_window = 64;
  PathState p(c);
  EXPECT_EQ(p.window_chunks(), 40u);
  p.set_window_cap(16);
  EXPECT_EQ(p.max_window(), 16u);
  EXPECT_EQ(p.window_chunks(), 16u);
  int64_t t = 0;
  for (int i = 0; i < 200; ++i) p.OnRtt(100'000, t += 1000);  // far below target: grows
  EXPECT_LE(p.window(), 16.0);
  EXPECT_EQ(p.window_chunks(), 16u);
  p.set_window_cap(4);
  EXPECT_EQ(p.window_chunks(), 4u);  // below min_window
  p.set_window_cap(0);
  EXPECT_EQ(p.max_window(), 64u);
  for (int i = 0; i < 2000; ++i) p.OnRtt(100'000, t += 1000);
  EXPECT_GT(p.window_chunks(), 16u);
}

// Round trips of 1 ms over a base of 100 us: over a network that is 9
// bandwidth-delay products of queue and the window shrinks to its floor; to
// a switch on this host it is the ranks and the switch waiting for the
// cores, under the 2 ms floor, and the window grows to its cap.
TEST(PathStateTest, ASwitchOnThisHostToleratesSchedulingDelayANetworkDoesNot) {
  // A base of 100 us, then `n` round trips of `rtt`, one every `every`.
  auto run = [](bool on_host, int64_t rtt, int64_t every, int n) {
    TransportConfig c;
    c.min_window = 2;
    c.max_window = 64;
    c.competitive = false;
    c.switch_on_host = on_host;
    PathState p(c);
    int64_t t = 0;
    p.OnRtt(100'000, t);
    for (int i = 0; i < n; ++i) p.OnRtt(rtt, t += every, 0);
    return p;
  };
  const PathState network = run(false, 1'000'000, 100'000, 2000);
  EXPECT_EQ(network.target_ns(), 400'000);
  EXPECT_EQ(network.window_chunks(), 2u);
  EXPECT_FALSE(network.switch_on_host());
  const PathState local = run(true, 1'000'000, 100'000, 2000);
  EXPECT_EQ(local.target_ns(), 2'100'000);
  EXPECT_EQ(local.window_chunks(), 64u);
  EXPECT_TRUE(local.switch_on_host());
  // A queue beyond the slice still shrinks the window.
  EXPECT_EQ(run(true, 8'000'000, 1'000'000, 200).window_chunks(), 2u);
}

TEST(PathStateTest, TraceKeepsTheLastSamplesAtMostOnePerQuarterRoundTrip) {
  TransportConfig c;
  c.trace_capacity = 8;
  PathState p(c);
  int64_t t = 0;
  for (int i = 0; i < 200; ++i) p.OnRtt(100'000, t += 10'000);  // a sample every 10 us
  // srtt 100 us: one trace sample per 25 us of samples at most, 8 kept.
  EXPECT_LE(p.traced(), 200u * 10 / 25 + 1);
  EXPECT_GE(p.traced(), 200u * 10 / 30);
  ASSERT_EQ(p.trace().size(), 8u);
  for (size_t i = 1; i < p.trace().size(); ++i) {
    EXPECT_GE(p.trace()[i].at_ns - p.trace()[i - 1].at_ns, 25'000 - 1);
  }
  // A timeout is recorded at once, with the halved window.
  const uint64_t before = p.traced();
  p.OnTimeout(t += 1);
  EXPECT_EQ(p.traced(), before + 1);
  EXPECT_EQ(p.trace().back().at_ns, t);
  EXPECT_EQ(p.trace().back().window, p.window());
  // Off by default.
  PathState off{TransportConfig{}};
  off.OnRtt(100'000, 1);
  EXPECT_EQ(off.traced(), 0u);
  EXPECT_TRUE(off.trace().empty());
}

}  // namespace
}  // namespace inca::client
