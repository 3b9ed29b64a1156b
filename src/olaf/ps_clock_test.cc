// The PS's clock seen from elsewhere: the one-way estimate from MODELs, and
// a switch that ages PS_CLOCK updates on it (docs/design/olaf-core.md,
// "Clocks across hosts").
#include "inca/olaf/ps_clock.h"

#include <gtest/gtest.h>

#include <vector>

#include "inca/olaf/olaf_switch.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {
namespace {

using dp::TimeNs;
constexpr TimeNs kSec = 1'000'000'000;

TEST(PsClockEstimateTest, TheFastestSampleOfTheWindowNeverAboveTheTrueOffset) {
  PsClockEstimate e;
  EXPECT_FALSE(e.offset().has_value());
  EXPECT_EQ(e.ToPs(100), 100u);    // unknown: identity
  const TimeNs offset = 5 * kSec;  // PS clock = local + 5 s
  // Each MODEL made at PS time p arrives `delay` later on the local clock.
  const std::vector<TimeNs> delays = {900, 400, 2000, 650};
  TimeNs local = 10 * kSec;
  for (TimeNs d : delays) {
    const TimeNs p = local + offset;  // made now, on the PS's clock
    e.OnPsTime(static_cast<uint64_t>(p), local + d);
    ASSERT_TRUE(e.offset().has_value());
    EXPECT_LE(*e.offset(), offset);
    local += 1'000'000;
  }
  EXPECT_EQ(*e.offset(), offset - 400);  // the fastest sample's delay short
  EXPECT_EQ(e.samples(), 4u);
  EXPECT_EQ(e.ToPs(kSec), static_cast<uint64_t>(kSec + offset - 400));
  EXPECT_EQ(e.ToLocal(static_cast<uint64_t>(kSec + offset - 400)), kSec);
  // Not a time: ignored.
  e.OnPsTime(kGenTimeUnknown, local);
  EXPECT_EQ(e.samples(), 4u);
}

TEST(PsClockEstimateTest, OldSamplesLeaveTheWindowSoDriftIsFollowed) {
  PsClockEstimate e;
  // The local clock runs 1,000 ppm slow: the offset grows 1 µs per ms.
  for (int i = 0; i < 100; ++i) {
    const TimeNs local = i * 1'000'000;
    const TimeNs offset = 3 * kSec + i * 1000;
    e.OnPsTime(static_cast<uint64_t>(local + offset), local + 500);
  }
  // The estimate follows the last kWindow samples, all 500 ns late.
  EXPECT_EQ(*e.offset(), 3 * kSec + 99 * 1000 - 500);
}

// A switch whose clock is 5 s behind the PS's learns the offset from a
// MODEL and ages PS_CLOCK updates on it: one generated 2 µs ago (on the
// PS's clock) is stale at ΔT = 1 µs; unflagged, the same stamp would be 5 s
// in the switch's future and pass as fresh.
TEST(PsClockEstimateTest, ASwitchAgesPsClockUpdatesOnTheOffsetItLearned) {
  OlafSwitchConfig c;
  c.delta_t_ns = 1000;
  c.egress_rate_bps = 0;
  c.ps_port = 0;
  auto sw = OlafSwitch::Create(c);
  ASSERT_TRUE(sw.ok());
  struct Sink : dp::PacketSink {
    void Emit(dp::PortId, std::span<const uint8_t>) override { ++n; }
    int n = 0;
  } sink;
  auto update = [](uint64_t gen, uint8_t flags) {
    UpdateHeader h;
    h.cluster_id = 1;
    h.worker_id = 7;
    h.gen_time_ns = gen;
    h.flags = flags;
    std::vector<uint8_t> payload(16, 0);
    return BuildUpdate(h, payload);
  };
  const TimeNs ps_ahead = 5 * kSec;
  TimeNs now = 10'000;
  // Before any MODEL the switch cannot relate the PS's clock: a flagged
  // update counts as generated on arrival.
  EXPECT_EQ((*sw)->Process(update(now + ps_ahead - 2000, kUpdateFlagPsClock), 1, now, sink).reason,
            dp::DropReason::kNone);
  ModelHeader m;
  m.cluster_id = 1;
  m.gen_time_ns = static_cast<uint64_t>(now + ps_ahead - 100);  // made 100 ns before it arrives
  std::vector<uint8_t> one(4, 0);
  (*sw)->Process(BuildModel(m, one), 0, now, sink);
  ASSERT_TRUE((*sw)->ps_clock().offset().has_value());
  EXPECT_EQ(*(*sw)->ps_clock().offset(), ps_ahead - 100);
  now += 50'000;
  EXPECT_EQ((*sw)->Process(update(now + ps_ahead - 2000, kUpdateFlagPsClock), 1, now, sink).reason,
            dp::DropReason::kStaleOnArrival);
  EXPECT_EQ((*sw)->Process(update(now + ps_ahead - 2000, 0), 1, now, sink).reason,
            dp::DropReason::kNone);
  // Generated 500 ns ago on the PS's clock: 600 ns old on the estimate, fresh.
  EXPECT_EQ((*sw)->Process(update(now + ps_ahead - 500, kUpdateFlagPsClock), 1, now, sink).reason,
            dp::DropReason::kNone);
  EXPECT_TRUE((*sw)->counters().Conserved());
}

}  // namespace
}  // namespace inca::olaf
