// The communicator's switch-or-host decision and the shard layout, as pure
// functions: every combination of what the communicator knows.
#include "client/op_route.h"

#include <gtest/gtest.h>

namespace inca::client {
namespace {

TEST(OpRouteTest, OnlyAFormedGroupThatWantsOffloadRunsOnTheSwitch) {
  for (int bits = 0; bits < 32; ++bits) {
    const RouteState s{.has_switch = (bits & 1) != 0,
                       .switch_mode = (bits & 2) != 0,
                       .want_offload = (bits & 4) != 0,
                       .formed = (bits & 8) != 0,
                       .require_switch = (bits & 16) != 0};
    const OpRoute r = RouteOf(s);
    SCOPED_TRACE(bits);
    if (!s.has_switch) {
      EXPECT_EQ(r, OpRoute::kHostNoSwitch);
    } else if (s.switch_mode && s.want_offload && s.formed) {
      EXPECT_EQ(r, OpRoute::kSwitch);
    } else if (s.want_offload && s.require_switch) {
      EXPECT_EQ(r, OpRoute::kRefused);  // never a silent fallback
    } else {
      EXPECT_EQ(r, OpRoute::kHostFallback);
    }
  }
}

TEST(OpRouteTest, OffloadOffIsTheHostPathEvenWhenTheSwitchIsRequired) {
  EXPECT_EQ(RouteOf({.has_switch = true,
                     .switch_mode = true,
                     .want_offload = false,
                     .formed = true,
                     .require_switch = true}),
            OpRoute::kHostFallback);
}

TEST(OpRouteTest, ASwitchPhaseEndsInOneOfFourWaysCompleteFirst) {
  SwitchPhaseResult r;
  EXPECT_EQ(OutcomeOf(r), SwitchOutcome::kLost);
  r.disagreed = true;
  EXPECT_EQ(OutcomeOf(r), SwitchOutcome::kDisagreed);
  r.declined = true;
  EXPECT_EQ(OutcomeOf(r), SwitchOutcome::kDeclined);
  r.complete = true;  // a complete result wins over a late notice
  EXPECT_EQ(OutcomeOf(r), SwitchOutcome::kComplete);
}

TEST(OpRouteTest, ShardPortsAreConsecutiveAroundTheOneThatAnswered) {
  EXPECT_EQ(ShardPorts(9410, 0, 0), std::vector<uint16_t>({9410}));
  EXPECT_EQ(ShardPorts(9410, 0, 1), std::vector<uint16_t>({9410}));
  EXPECT_EQ(ShardPorts(9412, 2, 4), std::vector<uint16_t>({9410, 9411, 9412, 9413}));
  EXPECT_EQ(ShardPorts(65535, 0, 2), std::nullopt);  // past the last port
  EXPECT_EQ(ShardPorts(65535, 1, 2), std::vector<uint16_t>({65534, 65535}));
  EXPECT_EQ(ShardPorts(9410, 4, 4), std::nullopt);  // index past the count
  EXPECT_EQ(ShardPorts(1, 2, 4), std::nullopt);     // below port 0
}

}  // namespace
}  // namespace inca::client
