// The offload controller's prior for sizes it has not measured on both
// paths, and the budget of its first look at the host path (issue 46). The
// rest of its tests: offload_controller_test.cc.
#include <gtest/gtest.h>

#include <cstdint>

#include "control/offload_test_util.h"
#include "inca/control/offload_controller.h"

namespace inca::control {
namespace {

// Issue 46: a short job on a fresh switch is not slowed by a look at the
// host path. The first explore away from the switch waits until the class
// has run 1 / explore_budget operations there (50 at 2 %); an explore toward
// the switch does not wait.
TEST(OffloadControllerTest, TheFirstLookAtTheHostPathWaitsForTheExploreBudget) {
  const uint64_t bit = uint64_t{1} << 22;
  OffloadControllerConfig cfg;  // explore_budget 0.02
  for (uint32_t n : {1u, 6u, 49u}) {
    const GroupOffload p = OffloadController{cfg}.Plan(Measured(22, 34e3, -1, 0, 0, 0, n), 0);
    EXPECT_EQ(p.explore_bins, 0u) << n;
    EXPECT_EQ(p.offload_bins, bit) << n;  // on the switch, where it was measured
  }
  EXPECT_EQ(OffloadController{cfg}.Plan(Measured(22, 34e3, -1, 0, 0, 0, 50), 0).explore_bins, bit);
  // Measured on the host path only: the switch is explored at once.
  EXPECT_EQ(OffloadController{cfg}.Plan(Measured(22, -1, 51e3, 0, 0, 1), 0).explore_bins, bit);
  cfg.explore_budget = 0.25;  // 4 operations
  EXPECT_EQ(OffloadController{cfg}.Plan(Measured(22, 34e3, -1, 0, 0, 0, 3), 0).explore_bins, 0u);
  EXPECT_EQ(OffloadController{cfg}.Plan(Measured(22, 34e3, -1, 0, 0, 0, 4), 0).explore_bins, bit);
}

// Under SRAM pressure (the threshold raised above its base) the model's
// range decides classes never seen again, as in the write-up.
TEST(OffloadControllerTest, UnderSramPressureTheModelDecidesClassesNeverSeen) {
  OffloadControllerConfig cfg;
  cfg.sustain = 1;
  OffloadController c{cfg};
  GroupInfo g = Measured(24, 140e3, 210e3);
  c.Observe(Sram(0.9), 0);
  ASSERT_GT(c.threshold(), cfg.base_threshold);
  const GroupOffload p = c.Plan(g, 0);
  const OffloadRange r = c.Range(4);
  EXPECT_EQ(p.min_bytes, r.min_bytes);
  EXPECT_EQ(p.max_bytes, r.max_bytes);
}

}  // namespace
}  // namespace inca::control
