#include "client/recovery_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace inca::client {
namespace {

using wire::CaisOp;

SwitchOp AllReduce(std::vector<float>& v) {
  SwitchOp s;
  s.op = CaisOp::kAllReduce;
  s.data = reinterpret_cast<uint8_t*>(v.data());
  s.count = v.size();
  return s;
}

std::vector<float> Floats(std::span<const uint8_t> b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TEST(RecoveryCacheTest, KeepsAnAllReducesResultAndHoldsOnlyThatOperation) {
  RecoveryCache c(1 << 20, 4);
  EXPECT_FALSE(c.Holds(0));
  std::vector<float> v = {1, 2, 3};
  c.Keep(7, AllReduce(v));
  v[0] = 99;  // kept: a copy
  EXPECT_TRUE(c.Holds(7));
  EXPECT_FALSE(c.Holds(6));
  EXPECT_FALSE(c.reduce_scatter());
  EXPECT_EQ(Floats(c.bytes()), (std::vector<float>{1, 2, 3}));
  c.Invalidate();
  EXPECT_FALSE(c.Holds(7));
}

TEST(RecoveryCacheTest, TheMirrorIsForAllReducesWithinTheLimit) {
  RecoveryCache c(12, 2);
  std::vector<float> three = {1, 2, 3}, four = {1, 2, 3, 4};
  SwitchOp s = AllReduce(three);
  uint8_t* m = c.Mirror(s);
  ASSERT_NE(m, nullptr);
  const float r[3] = {5, 6, 7};  // the switch path writes results here
  std::memcpy(m, r, sizeof(r));
  c.Keep(1, s, /*mirrored=*/true);
  EXPECT_EQ(Floats(c.bytes()), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(c.Mirror(AllReduce(four)), nullptr);  // 16 bytes: over the limit
  SwitchOp g = s;
  g.op = CaisOp::kAllGather;
  EXPECT_EQ(c.Mirror(g), nullptr);
}

TEST(RecoveryCacheTest, OverTheLimitNothingIsKeptAndPeersAreNotServed) {
  RecoveryCache c(8, 2);
  std::vector<float> v = {1, 2, 3};
  c.Keep(3, AllReduce(v));
  EXPECT_FALSE(c.Holds(3));
  EXPECT_TRUE(c.bytes().empty());
}

TEST(RecoveryCacheTest, AReduceScattersInputIsKeptPackedAndAnAllGathersBlocks) {
  RecoveryCache c(1 << 20, 2);
  // Input blocks 2 elements each, 16 bytes apart (a stride past the block).
  std::vector<float> in = {1, 2, 0, 0, 3, 4, 0, 0};
  SwitchOp rs;
  rs.op = CaisOp::kReduceScatter;
  rs.in = reinterpret_cast<const uint8_t*>(in.data());
  rs.count = 2;
  rs.block_stride_bytes = 16;
  c.Keep(2, rs);
  EXPECT_TRUE(c.reduce_scatter());
  EXPECT_EQ(Floats(c.bytes()), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(PackedInput(rs, 2), std::vector<uint8_t>(c.bytes().begin(), c.bytes().end()));

  std::vector<float> out = {5, 6, 0, 0, 7, 8, 0, 0};
  SwitchOp ag;
  ag.op = CaisOp::kAllGather;
  ag.out = reinterpret_cast<uint8_t*>(out.data());
  ag.count = 2;
  ag.block_stride_bytes = 16;
  c.Keep(3, ag);
  EXPECT_FALSE(c.reduce_scatter());
  EXPECT_EQ(Floats(c.bytes()), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(ResultBytes(ag, 2), 16u);
}

TEST(RecoveryCacheTest, AnOperationOfNoElementsKeepsItsCompletion) {
  RecoveryCache c(1 << 20, 2);
  SwitchOp s;
  s.op = CaisOp::kReduceScatter;
  c.Keep(5, s);
  EXPECT_TRUE(c.Holds(5));
  EXPECT_TRUE(c.reduce_scatter());
  EXPECT_TRUE(c.bytes().empty());
}

}  // namespace
}  // namespace inca::client
