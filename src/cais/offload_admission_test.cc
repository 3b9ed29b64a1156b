// Offload admission in the reducer: per-group minimum operation size, one
// decision per operation, DECLINED notices.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "cais/reducer_test_util.h"
#include "inca/cais/reducer.h"
#include "inca/wire/mgmt.h"

namespace inca::cais {
namespace {

using namespace ::inca::cais::testing;  // NOLINT(build/namespaces)

class OffloadAdmissionTest : public ReducerTest {
 protected:
  // Chunk `chunk` of a `total`-chunk allreduce carrying `floats` f32 values.
  std::vector<uint8_t> Chunk(uint16_t chunk, uint16_t total, uint32_t seq, size_t floats,
                             uint8_t group = 0) {
    return Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, chunk, total, seq, group),
                  F32Bytes(std::vector<float>(floats, 1.0f)));
  }
  // Group 0 on ports 1 and 2, remembering `capacity` decisions, its range
  // declining every operation.
  void MakeDecliningAll(size_t capacity) {
    CaisConfig cfg;
    cfg.offload_decision_capacity = capacity;
    Make(cfg);
    AddAllReduce({1, 2});
    reducer_->SetOffloadRange(0, 1, 0);
  }
};

TEST_F(OffloadAdmissionTest, WithoutAPolicyEveryOperationIsAccepted) {
  Make();
  AddAllReduce({1, 2});
  EXPECT_EQ(Send(1, Chunk(0, 1, 0, 1)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(2, Chunk(0, 1, 0, 1)).verdict, Verdict::kAggregated);
  // Counted once per operation, at its first chunk (issue 18: the dashboard
  // showed "0 / 0" operations for a group that was reducing).
  EXPECT_EQ(reducer_->totals().offload_accepted_ops, 1u);
  EXPECT_EQ(reducer_->totals().offload_declined_ops, 0u);
  EXPECT_EQ(reducer_->min_offload_bytes(0), 0u);
  EXPECT_EQ(reducer_->max_offload_bytes(0), UINT64_MAX);
}

// Issue 46: a DECLINED notice says why in `block` (wire::DeclineReason), so
// that a user can see why an operation ran on the host path.
TEST_F(OffloadAdmissionTest, ADeclinedNoticeSaysWhy) {
  using wire::DeclineReason;
  const auto why = [&](uint32_t seq, size_t floats) {
    EXPECT_EQ(Send(1, Chunk(0, 1, seq, floats)).reason, DropReason::kOffloadDeclined) << seq;
    const auto out = sink_.Take();
    EXPECT_EQ(out.size(), 1u);
    EXPECT_TRUE(!out.empty() && out[0].header.has_flag(flags::kDeclined));
    return out.empty() ? DeclineReason::kUnknown : static_cast<DeclineReason>(out[0].header.block);
  };
  Make();
  AddAllReduce({1, 2});
  const uint64_t bit = uint64_t{1} << wire::SizeClass(4000);  // 1,000 floats
  reducer_->SetOffloadRange(0, 1, 0);                         // the model declines every size
  EXPECT_EQ(why(1, 1000), DeclineReason::kModel);
  reducer_->SetOffloadHold(0, true);
  EXPECT_EQ(why(2, 1000), DeclineReason::kHeld);
  reducer_->SetOffloadHold(0, false);
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  reducer_->SetOffloadBins(0, bit, 0, 0);  // measured: the host path is faster
  EXPECT_EQ(why(3, 1000), DeclineReason::kMeasured);
  reducer_->SetOffloadBins(0, bit, bit, bit);  // measured for the switch, one explore
  EXPECT_EQ(why(4, 1000), DeclineReason::kExplore);
  EXPECT_EQ(Send(1, Chunk(0, 1, 5, 1000)).verdict, Verdict::kAggregated);  // explored once
  EXPECT_EQ(wire::ToString(DeclineReason::kExplore), "explore");
}

TEST_F(OffloadAdmissionTest, SmallOperationsAreDeclinedWithANoticeOnTheSendersPort) {
  Make();
  AddAllReduce({1, 2});
  reducer_->SetOffloadRange(0, 4 * 1024, 16 * 1024);
  // 2 chunks x 1,024 floats = 8 KiB: accepted.
  EXPECT_EQ(Send(1, Chunk(0, 2, 7, 1024)).verdict, Verdict::kAggregated);
  // 4 chunks x 256 floats = 4 KiB - exactly the minimum: accepted.
  EXPECT_EQ(Send(1, Chunk(0, 4, 8, 256)).verdict, Verdict::kAggregated);
  // 8 chunks x 1,024 floats = 32 KiB: above the maximum, declined.
  EXPECT_EQ(Send(1, Chunk(0, 8, 20, 1024)).reason, DropReason::kOffloadDeclined);
  sink_.Take();
  // 1 chunk x 1,000 floats = 4,000 B: declined.
  const auto o = Send(2, Chunk(0, 1, 9, 1000));
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(o.reason, DropReason::kOffloadDeclined);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(out[0].header.flags, flags::kFallback | flags::kResult | flags::kDeclined);
  EXPECT_EQ(out[0].header.seq_num, 9u);
  EXPECT_EQ(out[0].header.payload_len, 0u);
  EXPECT_EQ(reducer_->totals().offload_accepted_ops, 2u);
  EXPECT_EQ(reducer_->totals().offload_declined_ops, 2u);
  EXPECT_EQ(reducer_->group(0).declined_notices, 2u);
  EXPECT_EQ(reducer_->sram().pending_chunks, 2u);  // the declined op holds nothing
}

TEST_F(OffloadAdmissionTest, TheDecisionHoldsForTheWholeOperationWhenThePolicyChanges) {
  Make();
  AddAllReduce({1, 2});
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  ASSERT_EQ(Send(1, Chunk(0, 3, 1, 16)).verdict, Verdict::kAggregated);
  // The controller now declines everything; op 1 was accepted, so its other
  // chunks (from either rank) still open slots and complete.
  reducer_->SetOffloadRange(0, 1, 0);
  EXPECT_EQ(Send(2, Chunk(0, 3, 1, 16)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(2, Chunk(2, 3, 1, 16)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, Chunk(2, 3, 1, 16)).verdict, Verdict::kAggregated);
  EXPECT_EQ(reducer_->totals().completed_chunks, 2u);
  // A new operation is declined, and stays declined for every chunk and rank
  // after the policy relaxes again.
  EXPECT_EQ(Send(1, Chunk(0, 3, 2, 16)).reason, DropReason::kOffloadDeclined);
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  EXPECT_EQ(Send(2, Chunk(1, 3, 2, 16)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(Send(2, Chunk(0, 3, 2, 16)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(Send(1, Chunk(0, 3, 3, 16)).verdict, Verdict::kAggregated);  // op 3 is new
  EXPECT_EQ(reducer_->totals().offload_declined_ops, 1u);
  EXPECT_EQ(reducer_->totals().offload_accepted_ops, 2u);
  EXPECT_EQ(reducer_->totals().declined_notices, 3u);
}

TEST_F(OffloadAdmissionTest, GroupsHaveTheirOwnPolicy) {
  Make();
  AddAllReduce({1, 2}, 0);
  AddAllReduce({1, 2}, 1);
  reducer_->SetOffloadRange(1, 1 << 20, UINT64_MAX);
  EXPECT_EQ(Send(1, Chunk(0, 1, 0, 4, 0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, Chunk(0, 1, 0, 4, 1)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(reducer_->group(1).offload_declined_ops, 1u);
  EXPECT_EQ(reducer_->group(0).offload_declined_ops, 0u);
}

TEST_F(OffloadAdmissionTest, ForgottenDecisionsAreTakenAgainUnderTheCurrentPolicy) {
  MakeDecliningAll(2);
  EXPECT_EQ(Send(1, Chunk(0, 1, 10, 4)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(Send(1, Chunk(0, 1, 11, 4)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(Send(1, Chunk(0, 1, 12, 4)).reason, DropReason::kOffloadDeclined);  // evicts op 10
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  EXPECT_EQ(Send(2, Chunk(0, 1, 11, 4)).reason, DropReason::kOffloadDeclined);  // remembered
  EXPECT_EQ(Send(2, Chunk(0, 1, 10, 4)).verdict, Verdict::kAggregated);         // decided afresh
}

// The last decision is kept aside for the operation's next chunk; once the
// map forgets that operation, so does the shortcut.
TEST_F(OffloadAdmissionTest, TheLastDecisionIsForgottenWithTheOthers) {
  MakeDecliningAll(1);
  EXPECT_EQ(Send(1, Chunk(0, 2, 10, 4)).reason, DropReason::kOffloadDeclined);
  EXPECT_EQ(Send(1, Chunk(1, 2, 10, 4)).reason, DropReason::kOffloadDeclined);  // remembered
  EXPECT_EQ(Send(1, Chunk(0, 2, 11, 4)).reason, DropReason::kOffloadDeclined);  // evicts op 10
  EXPECT_EQ(Send(1, Chunk(0, 2, 11, 4)).reason, DropReason::kOffloadDeclined);
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  EXPECT_EQ(Send(2, Chunk(0, 2, 10, 4)).verdict, Verdict::kAggregated);  // decided afresh
  EXPECT_EQ(Send(2, Chunk(1, 2, 11, 4)).verdict, Verdict::kAggregated);  // op 10 evicted op 11
  EXPECT_EQ(reducer_->group(0).offload_declined_ops, 2u);
  EXPECT_EQ(reducer_->group(0).offload_accepted_ops, 2u);
  sink_.Take();
}

TEST_F(OffloadAdmissionTest, MeasuredSizeClassesOverrideTheRangeAndExploreOnce) {
  Make();
  AddAllReduce({1, 2});
  // The range accepts everything; measurements say sizes in [4 KiB, 8 KiB)
  // belong on the host path and [16 KiB, 32 KiB) on the switch.
  constexpr uint64_t k4K = uint64_t{1} << 12, k16K = uint64_t{1} << 14;
  reducer_->SetOffloadRange(0, 0, UINT64_MAX);
  reducer_->SetOffloadBins(0, k4K | k16K, k16K, 0);
  EXPECT_EQ(Send(1, Chunk(0, 1, 1, 1024)).reason, DropReason::kOffloadDeclined);  // 4 KiB
  EXPECT_EQ(Send(1, Chunk(0, 2, 2, 1536)).verdict, Verdict::kAggregated);  // 12 KiB: by range
  EXPECT_EQ(Send(1, Chunk(0, 4, 3, 1024)).verdict, Verdict::kAggregated);  // 16 KiB: measured
  // The range declining everything does not touch measured classes.
  reducer_->SetOffloadRange(0, 1, 0);
  EXPECT_EQ(Send(1, Chunk(0, 4, 4, 1024)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, Chunk(0, 2, 5, 1536)).reason, DropReason::kOffloadDeclined);
  // Exploring both measured classes: the next operation of each goes the
  // other way, once; asking again while pending changes nothing.
  reducer_->SetOffloadBins(0, k4K | k16K, k16K, k4K | k16K);
  reducer_->SetOffloadBins(0, k4K | k16K, k16K, k4K);
  EXPECT_EQ(Send(1, Chunk(0, 1, 6, 1024)).verdict, Verdict::kAggregated);         // 4 KiB
  EXPECT_EQ(Send(1, Chunk(0, 1, 7, 1024)).reason, DropReason::kOffloadDeclined);  // back
  EXPECT_EQ(Send(1, Chunk(0, 4, 8, 1024)).reason, DropReason::kOffloadDeclined);  // 16 KiB
  EXPECT_EQ(Send(2, Chunk(1, 4, 8, 1024)).reason, DropReason::kOffloadDeclined);  // same op
  EXPECT_EQ(Send(1, Chunk(0, 4, 9, 1024)).verdict, Verdict::kAggregated);
  EXPECT_EQ(reducer_->group(0).offload_explored_ops, 2u);
  sink_.Take();
}

TEST_F(OffloadAdmissionTest, HostsCannotSendDeclinedNotices) {
  Make();
  AddAllReduce({1, 2});
  auto h = Hdr();
  h.flags = flags::kDeclined;
  EXPECT_EQ(Send(1, Packet(h, F32Bytes({1}))).reason, DropReason::kSwitchOriginated);
}

TEST(OffloadAdmissionConfig, CapacityIsBoundedAndFixedAtCreation) {
  CaisConfig c;
  c.offload_decision_capacity = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.offload_decision_capacity = 1;
  auto r = CaisReducer::Create(c);
  ASSERT_TRUE(r.ok());
  CaisConfig d = c;
  d.offload_decision_capacity = 8;
  const absl::Status s = (*r)->UpdateConfig(d);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("offload_decision_capacity"), std::string::npos);
}

}  // namespace
}  // namespace inca::cais
