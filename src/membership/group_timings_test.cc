// What the hosts measured outlives the job (issue 46): the group manager
// keeps a dissolving group's timings under its shape for the next group of
// that shape, bounded. The rest of its tests: group_manager_test.cc.
#include <gtest/gtest.h>

#include "membership/group_manager.h"
#include "membership/group_manager_test_util.h"

namespace inca::membership {
namespace {

using namespace ::inca::membership::testing;  // NOLINT(build/namespaces)

// Issue 46: what one job measured is where the next job of the same shape
// (world size, member hosts) starts; another shape starts afresh; at most
// kTimingShapes shapes are kept, the least recently used given up first.
TEST_F(GroupManagerTest, TimingsOutliveTheirJobForTheNextJobOfTheSameShape) {
  auto report = [&](uint16_t rank, int host, uint32_t us) {
    MgmtMessage m;
    m.type = MgmtType::kReport;
    m.group_id = 0;
    m.rank = rank;
    m.report_bytes = 1 << 20;
    m.report_duration_us = us;
    m.report_path = wire::ReportPath::kSwitch;
    EXPECT_FALSE(gm_.Handle(m, Ep(host), ++now_).has_value());
  };
  const int bin = wire::SizeClass(1 << 20);
  Form(0, 2, 1);  // hosts 1 and 2
  report(0, 1, 800);
  EXPECT_EQ(gm_.timing_shapes(), 0u);  // kept when the job ends
  Simple(MgmtType::kLeave, 0, 0, Ep(1));
  EXPECT_EQ(gm_.timing_shapes(), 1u);
  // The next job on the same hosts (other ports) starts from it.
  Join(0, 0, 2, Ep(2, 2000), kAnyPort, 7, 5);
  Join(0, 1, 2, Ep(1, 2000), kAnyPort, 7, 5);
  ASSERT_TRUE(gm_.group(0)->formed);
  EXPECT_EQ(gm_.group(0)->timings[bin][0].samples, 1u);
  EXPECT_EQ(gm_.group(0)->timings[bin][0].mean_us, 800);
  EXPECT_EQ(gm_.timings_inherited(), 1u);
  Simple(MgmtType::kLeave, 0, 0, Ep(2, 2000));
  // Another shape: three ranks, or other hosts, start with nothing.
  Form(0, 3, 1);
  EXPECT_EQ(gm_.group(0)->timings[bin][0].samples, 0u);
  Simple(MgmtType::kLeave, 0, 0, Ep(1));
  Form(0, 2, 7);
  EXPECT_EQ(gm_.group(0)->timings[bin][0].samples, 0u);
  Simple(MgmtType::kLeave, 0, 0, Ep(7));
  EXPECT_EQ(gm_.timings_inherited(), 1u);
  // Bounded: kTimingShapes shapes of two hosts each, then one more; the
  // first shape (least recently used) is given up.
  for (size_t k = 0; k <= kTimingShapes; ++k) {
    const int host = 100 + 2 * static_cast<int>(k);
    Form(1, 2, host);
    MgmtMessage m;
    m.type = MgmtType::kReport;
    m.group_id = 1;
    m.rank = 0;
    m.report_bytes = 1 << 20;
    m.report_duration_us = 500;
    m.report_path = wire::ReportPath::kHost;
    gm_.Handle(m, Ep(host), ++now_);
    Simple(MgmtType::kLeave, 1, 0, Ep(host));
  }
  EXPECT_EQ(gm_.timing_shapes(), kTimingShapes);
  Form(0, 2, 1);  // hosts 1 and 2: given up
  EXPECT_EQ(gm_.group(0)->timings[bin][0].samples, 0u);
}

}  // namespace
}  // namespace inca::membership
