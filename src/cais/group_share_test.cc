// Per-group shares of the reducer's pending capacity (CaisConfig::
// group_share, issue 18 point 3): one group's member opening slots that
// never complete took every pending slot, and another group's operations
// were dropped as slots_exhausted and moved to the host path.
#include <map>

#include "cais/reducer_test_util.h"

namespace inca::cais::testing {
namespace {

class GroupShareTest : public ReducerTest {
 protected:
  // Chunk `chunk` of a 1000-chunk allreduce of `group`, one f32.
  std::vector<uint8_t> Chunk(uint8_t group, uint16_t chunk, uint32_t seq = 1) {
    return Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, chunk, 1000, seq, group),
                  F32Bytes({1.0f}));
  }
  // Sends chunks [from, from + n) of `group` from `port` only (its partner
  // never contributes: each chunk holds a slot until the timeout). Returns
  // how many were admitted; the others' reasons are counted into `drops`.
  int Open(uint8_t group, PortId port, uint16_t from, int n) {
    int admitted = 0;
    for (int k = 0; k < n; ++k) {
      const auto o = Send(port, Chunk(group, static_cast<uint16_t>(from + k)));
      if (o.verdict == Verdict::kAggregated) {
        ++admitted;
      } else {
        ++drops[o.reason];
      }
    }
    return admitted;
  }
  std::map<DropReason, int> drops;

  static CaisConfig Config(double share) {
    CaisConfig c;
    c.max_pending_chunks = 16;
    c.group_share = share;
    c.timeout_ns = 1'000'000'000;  // nothing times out within a test
    return c;
  }
};

TEST_F(GroupShareTest, AGroupUnderItsShareIsNeverStarvedByAnother) {
  Make(Config(0.5));  // 16 x 0.5 / 2 groups = 4 chunks reserved for each
  AddAllReduce({1, 2}, /*group=*/1);
  AddAllReduce({3, 4}, /*group=*/2);
  // Group 1 floods: its share (4) plus what nobody reserved (8).
  EXPECT_EQ(Open(1, 1, 0, 100), 12);
  EXPECT_EQ(drops[DropReason::kGroupShare], 88);
  EXPECT_EQ(reducer_->share(1).pending_chunks, 12u);
  EXPECT_EQ(reducer_->share(1).share_chunks, 4u);
  // Group 2 still gets its whole share, with no slots_exhausted.
  drops.clear();
  EXPECT_EQ(Open(2, 3, 0, 4), 4);
  EXPECT_TRUE(drops.empty());
  // Beyond its share it may not go: the pool is full.
  EXPECT_EQ(Open(2, 3, 4, 1), 0);
  EXPECT_EQ(
      reducer_->group(2).drops_by_reason[static_cast<size_t>(DropReason::kGroupShare)] +
          reducer_->group(2).drops_by_reason[static_cast<size_t>(DropReason::kSlotsExhausted)],
      1u);
  // Its chunks complete normally when the partner contributes.
  EXPECT_EQ(Send(4, Chunk(2, 0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(reducer_->group(2).completed_chunks, 1u);
  EXPECT_EQ(reducer_->share(2).pending_chunks, 3u);
}

TEST_F(GroupShareTest, WithoutSharesTheFloodTakesEverything) {
  Make(Config(0.0));  // the old behaviour, kept as an option
  AddAllReduce({1, 2}, /*group=*/1);
  AddAllReduce({3, 4}, /*group=*/2);
  EXPECT_EQ(Open(1, 1, 0, 100), 16);
  EXPECT_EQ(Open(2, 3, 0, 4), 0);
  EXPECT_EQ(drops[DropReason::kSlotsExhausted], 84 + 4);
}

TEST_F(GroupShareTest, ALoneGroupBorrowsWhatNobodyReservedAndGivesItBackAsItCompletes) {
  Make(Config(0.5));
  AddAllReduce({1, 2}, /*group=*/1);
  // Alone, group 1 has a share of 8 and may borrow the unreserved 8.
  EXPECT_EQ(Open(1, 1, 0, 16), 16);
  // Group 2 forms: its 8 are reserved from now on, but group 1's borrowed
  // chunks are not taken back mid-chunk.
  AddAllReduce({3, 4}, /*group=*/2);
  EXPECT_EQ(Open(1, 1, 16, 1), 0);  // shares recomputed: group 1 is over
  EXPECT_EQ(drops[DropReason::kSlotsExhausted], 1);
  EXPECT_EQ(reducer_->share(1).pending_chunks, 16u);
  EXPECT_EQ(reducer_->share(1).share_chunks, 4u);
  // As group 1's chunks complete, the capacity goes to group 2's reserve.
  for (uint16_t k = 0; k < 4; ++k) EXPECT_EQ(Send(2, Chunk(1, k)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Open(1, 1, 17, 1), 0);
  EXPECT_EQ(drops[DropReason::kGroupShare], 1);
  EXPECT_EQ(Open(2, 3, 0, 4), 4);
  // Group 2's rule goes away: group 1 may borrow everything again.
  ASSERT_TRUE(reducer_->rules().Delete({2, std::nullopt, std::nullopt}).ok());
  EXPECT_EQ(reducer_->share(2).share_chunks, 4u);  // until the next admission
  for (uint16_t k = 4; k < 16; ++k) EXPECT_EQ(Send(2, Chunk(1, k)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Open(1, 1, 18, 12), 12);
  EXPECT_FALSE(reducer_->share(2).claims);
  EXPECT_EQ(reducer_->share(1).share_chunks, 8u);
}

TEST_F(GroupShareTest, SramCellsAreSharedToo) {
  CaisConfig c = Config(1.0);
  c.max_pending_chunks = 1000;
  c.deterministic = true;  // one cell per contributor: 2 cells a chunk
  c.sram_bytes = 64 * c.cell_bytes();
  c.sram_usage_limit = 0.5;  // 32 cells pending at most: 16 per group
  Make(c);
  AddAllReduce({1, 2}, /*group=*/1);
  AddAllReduce({3, 4}, /*group=*/2);
  EXPECT_EQ(Open(1, 1, 0, 100), 8);  // 16 cells: its whole share
  EXPECT_EQ(drops[DropReason::kGroupShare], 92);
  EXPECT_EQ(Open(2, 3, 0, 8), 8);
  EXPECT_EQ(reducer_->share(2).pending_cells, 16u);
  EXPECT_EQ(reducer_->share(2).share_cells, 16u);
}

TEST_F(GroupShareTest, TheShareIsAValidatedRunTimeSetting) {
  Make(Config(0.5));
  AddAllReduce({1, 2}, /*group=*/1);
  AddAllReduce({3, 4}, /*group=*/2);
  CaisConfig c = reducer_->config();
  c.group_share = 1.5;
  EXPECT_THAT(reducer_->UpdateConfig(c).message(), HasSubstr("group_share"));
  c.group_share = 1.0;  // all 16 reserved: 8 each, nothing to borrow
  ASSERT_TRUE(reducer_->UpdateConfig(c).ok());
  EXPECT_EQ(Open(1, 1, 0, 100), 8);
  EXPECT_EQ(Open(2, 3, 0, 100), 8);
}

}  // namespace
}  // namespace inca::cais::testing
