// Ranks that reach an operation apart (issue 46), on the transport core's
// simulated star (star_test_util.h): the early ranks wait for a late one
// without resending, and loss is recovered as fast as without the wait.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "client/star_test_util.h"

namespace inca::client {
namespace {

using namespace ::inca::client::testing;  // NOLINT(build/namespaces)

// Ranks that reach an operation apart (issue 46): the early ranks' chunks
// wait at the switch for the last rank, which is not a loss. The early
// ranks' probes learn that the switch holds their chunks, and they resend
// nothing while they wait; the late rank's own chunks meet no wait. Before
// the probe's "held" answer restarted the timer, every early rank resent its
// window at each RTO (5 ms, then backed off) of a 30 ms wait.
TEST(TransportCoreSimTest, ARankThirtyMsLateCausesNoRetransmissionFromTheEarlyRanks) {
  Link link;
  Star star(4, 1 << 20, link);
  const int64_t on_time = star.Run(2).back();  // round trips measured
  star.SetLateness({0, 0, 0, 30'000'000});
  const std::vector<int64_t> d = star.Run(4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(star.retransmitted_by(r), 0u) << "rank " << r;
  // Once the late rank is there, the operation takes what it takes on time
  // (the early ranks' windows were not cut by the wait).
  for (int64_t t : d) {
    EXPECT_GE(t, 30'000'000);
    EXPECT_LE(static_cast<double>(t - 30'000'000), 1.05 * static_cast<double>(on_time));
  }
  // The early ranks asked, and waited: about a probe (two requests) per half
  // RTO (5 ms floor) of the wait, not one per round trip (about 60).
  uint64_t requests = 0;
  for (int r = 0; r < 3; ++r) requests += star.result(r).requests;
  EXPECT_GT(requests, 0u);
  EXPECT_LE(requests, 3u * 2 * 15);
}

// A round trip close to the RTO's 5 ms floor turns the tail probe off (it
// would come after the RTO); a rank waiting for a late one then learns from
// a probe sent at the RTO instead of resending its window there. Before,
// each early rank resent its 8 chunks at 5, 10 and 20 ms of a 30 ms wait.
TEST(TransportCoreSimTest, WithProbesOffTheRtoAsksBeforeItResends) {
  Link link;
  link.delay_ns = 1'400'000;  // a round trip of about 3 ms
  Star star(4, 16384, link);  // 64 KiB: 8 chunks a rank
  const int64_t on_time = star.Run(2).back();
  star.SetLateness({0, 0, 0, 30'000'000});
  const std::vector<int64_t> d = star.Run(3);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(star.retransmitted_by(r), 0u) << "rank " << r;
  // Past the wait an operation takes up to about three on-time ones: delay
  // control slows the early ranks' windows to the late rank's pace while
  // they wait (docs/design/cais-client.md, "Ranks that arrive apart").
  for (int64_t t : d) {
    EXPECT_GE(t, 30'000'000);
    EXPECT_LE(static_cast<double>(t - 30'000'000), 3.0 * static_cast<double>(on_time));
  }
}

// Lateness and loss together: every loss is still recovered, exactly, and
// the late operations take no longer past the wait than the loss alone does.
TEST(TransportCoreSimTest, LossIsRecoveredAsFastWhenARankIsLate) {
  auto run = [](int64_t late) {
    Link link;
    link.loss = 0.01;
    Star star(4, 1 << 20, link);
    star.Run(2);
    star.SetLateness({0, late, 0, 0});
    const std::vector<int64_t> d = star.Run(4);
    int64_t past = 0;
    for (int64_t t : d) past += t - late;
    return std::make_pair(past, star.retransmitted());
  };
  const auto [on_time, resent_on_time] = run(0);
  const auto [late, resent_late] = run(20'000'000);
  std::printf(
      "4 ops of 4 MiB, 1 %% loss: %.2f ms on time, %.2f ms past a 20 ms wait; "
      "%lu and %lu resent\n",
      static_cast<double>(on_time) / 1e6, static_cast<double>(late) / 1e6,
      static_cast<unsigned long>(resent_on_time), static_cast<unsigned long>(resent_late));
  EXPECT_GT(resent_late, 0u);
  EXPECT_LE(static_cast<double>(late), 1.5 * static_cast<double>(on_time));
}

}  // namespace
}  // namespace inca::client
