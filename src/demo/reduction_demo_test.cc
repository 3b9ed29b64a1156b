#include "demo/reduction_demo.h"

#include <gtest/gtest.h>

#include <sstream>

namespace inca::demo {
namespace {

TEST(ReductionDemoTest, SmallRunIsCorrectAndConserved) {
  ReductionDemoOptions o;
  o.ranks = 5;
  o.tensor_bytes = 200 * 1024;
  o.chunk_bytes = 4096;
  o.loss = 0.05;
  auto r = RunReductionDemo(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->wrong_elements, 0u);
  EXPECT_TRUE(r->conserved);
  EXPECT_EQ(r->chunks, 50u);
  EXPECT_GT(r->lost, 0u);
  EXPECT_EQ(r->fallback_chunks, 1u);  // the chunk left to time out
  EXPECT_EQ(r->totals.timeouts, 1u);
  EXPECT_EQ(r->totals.completed_chunks, 49u);
  std::ostringstream os;
  PrintReport(o, *r, os);
  EXPECT_NE(os.str().find("0 wrong elements -- OK"), std::string::npos) << os.str();
}

TEST(ReductionDemoTest, DeterministicModeGivesSameAnswer) {
  ReductionDemoOptions o;
  o.ranks = 3;
  o.tensor_bytes = 64 * 1024;
  o.deterministic = true;
  o.timeout_demo = false;
  auto r = RunReductionDemo(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->wrong_elements, 0u);
  EXPECT_EQ(r->fallback_chunks, 0u);
}

TEST(ReductionDemoTest, BadOptionsAreRejected) {
  ReductionDemoOptions o;
  o.ranks = 0;
  EXPECT_FALSE(RunReductionDemo(o).ok());
  o = {};
  o.chunk_bytes = 7;
  EXPECT_FALSE(RunReductionDemo(o).ok());
  o = {};
  o.chunk_bytes = 65536;
  EXPECT_FALSE(RunReductionDemo(o).ok());
  o = {};
  o.loss = 1.0;
  EXPECT_FALSE(RunReductionDemo(o).ok());
  o = {};
  o.tensor_bytes = 4 * 65536 * 8952ull;
  EXPECT_FALSE(RunReductionDemo(o).ok());
}

}  // namespace
}  // namespace inca::demo
