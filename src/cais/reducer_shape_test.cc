// The reducer and ranks that disagree about an operation (issue 46): a
// contribution whose shape differs from its slot's hands the chunk back at
// once, and a broadcast carried as an all-reduce tags its chunks with its
// root. The rest of the reducer's tests: reducer_test.cc.
#include <gtest/gtest.h>

#include <vector>

#include "cais/reducer_test_util.h"
#include "inca/cais/reducer.h"

namespace inca::cais {
namespace {

using namespace ::inca::cais::testing;  // NOLINT(build/namespaces)

// Ranks that disagree about an operation (here: sizes, reduce op, dtype, a
// broadcast's root carried in an AllReduce's `block`) must not wait out a
// timeout: the chunk is handed back to its contributors and to the sender,
// each with its own header, block = kFallbackShapeMismatch; later packets
// of the chunk find it closed.
TEST_F(ReducerTest, ShapeMismatchHandsTheChunkBackToEveryRankAtOnce) {
  struct Case {
    const char* what;
    CaisHeader other;
    std::vector<float> payload;
  };
  CaisHeader tagged = Hdr();
  tagged.block = wire::BroadcastTag(1);
  CaisHeader two_chunks = Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 2);
  const std::vector<Case> cases = {
      {"payload size", Hdr(), {1, 2}},
      {"reduce op", Hdr(CaisOp::kAllReduce, ReduceOp::kMax), {1}},
      {"dtype", Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kI32), {1}},
      {"total chunks", two_chunks, {1}},
      {"broadcast root (tag)", tagged, {1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Make();
    AddAllReduce({1, 2, 3});
    ASSERT_EQ(Send(1, Packet(Hdr(), F32Bytes({1}))).verdict, Verdict::kAggregated);
    EXPECT_TRUE(sink_.Take().empty());
    EXPECT_EQ(Send(2, Packet(c.other, F32Bytes(c.payload))).reason, DropReason::kShapeMismatch);
    auto out = sink_.Take();
    ASSERT_EQ(out.size(), 4u);  // ports 1, 2, 3 (the slot's header), then port 2 (its own)
    for (size_t k = 0; k < out.size(); ++k) {
      EXPECT_TRUE(out[k].header.has_flag(flags::kFallback));
      EXPECT_EQ(out[k].header.block, wire::kFallbackShapeMismatch);
      EXPECT_TRUE(out[k].payload.empty());
    }
    EXPECT_EQ(out[0].port, 1);
    EXPECT_EQ(out[2].port, 3);
    EXPECT_EQ(out[3].port, 2);
    EXPECT_EQ(out[3].header.total_chunks, c.other.total_chunks);
    EXPECT_EQ(out[3].header.reduce_op, c.other.reduce_op);
    EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
    EXPECT_EQ(reducer_->sram().cells_pending, 0u);
    EXPECT_EQ(reducer_->group(0).fallback_notices, 4u);
    EXPECT_EQ(reducer_->group(0).timeouts, 0u);
    // The third rank arrives: closed, answered, nothing reduced.
    EXPECT_EQ(Send(3, Packet(Hdr(), F32Bytes({3}))).reason, DropReason::kChunkClosed);
    out = sink_.Take();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].port, 3);
    EXPECT_EQ(reducer_->group(0).completed_chunks, 0u);
  }
}

// A broadcast carried as an AllReduce tags its chunks with the root: ranks
// that agree on it reduce as before, and a plain AllReduce (tag 0) is not
// mistaken for one.
TEST_F(ReducerTest, BroadcastTagsThatAgreeReduce) {
  Make();
  AddAllReduce({1, 2});
  CaisHeader h = Hdr();
  h.block = wire::BroadcastTag(0);
  ASSERT_EQ(Send(1, Packet(h, F32Bytes({5}))).verdict, Verdict::kAggregated);
  ASSERT_EQ(Send(2, Packet(h, F32Bytes({-0.0f}))).verdict, Verdict::kAggregated);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].header.has_flag(flags::kResult));
  EXPECT_FALSE(out[0].header.has_flag(flags::kFallback));
  EXPECT_NE(wire::BroadcastTag(0), 0);
  EXPECT_NE(wire::BroadcastTag(0), wire::BroadcastTag(1));
}

}  // namespace
}  // namespace inca::cais
