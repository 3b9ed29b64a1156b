// Striping an operation over several switches (StripeOp, MergeStripes):
// every chunk in exactly one stripe, at chunk boundaries, every block cut
// alike; the stripes' results numbered back as the whole operation's core
// numbers its chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "client/op_split.h"
#include "client/transport_core.h"

namespace inca::client {
namespace {

SwitchOp AllReduce(std::vector<float>* data) {
  SwitchOp op;
  op.data = reinterpret_cast<uint8_t*>(data->data());
  op.count = data->size();
  return op;
}

TEST(StripeTest, AnAllReduceIsCutAtChunkBoundariesIntoContiguousStripes) {
  std::vector<float> data(1000);
  const SwitchOp op = AllReduce(&data);
  // 64-byte chunks: 16 elements, 63 chunks (the last of 8).
  const std::vector<Stripe> s = StripeOp(op, 64, 4);
  ASSERT_EQ(s.size(), 4u);
  size_t next = 0;
  for (const Stripe& st : s) {
    EXPECT_EQ(st.op.data, op.data + next * sizeof(float));
    EXPECT_EQ(st.first * 16u, next);
    EXPECT_EQ(st.op.op, op.op);
    next += st.op.count;
  }
  EXPECT_EQ(next, 1000u);
  EXPECT_EQ(s[0].first, 0u);
  EXPECT_EQ(s[1].first, 15u);
  EXPECT_EQ(s[3].op.count, 1000u - 47 * 16);
  // One switch: the operation as it is.
  const std::vector<Stripe> one = StripeOp(op, 64, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].op.count, 1000u);
  EXPECT_EQ(one[0].op.data, op.data);
  // More switches than chunks: no empty stripe.
  std::vector<float> small(20);
  EXPECT_EQ(StripeOp(AllReduce(&small), 64, 4).size(), 2u);
}

// A reduce-scatter on 3 ranks of blocks of 100 f32 (with 64-byte chunks:
// 7 chunks per block).
SwitchOp ReduceScatter(std::vector<float>* in, std::vector<float>* out) {
  SwitchOp op;
  op.op = wire::CaisOp::kReduceScatter;
  op.in = reinterpret_cast<const uint8_t*>(in->data());
  op.out = reinterpret_cast<uint8_t*>(out->data());
  op.block_stride_bytes = 100 * sizeof(float);
  op.count = 100;
  return op;
}

TEST(StripeTest, AReduceScatterCutsEveryBlockAlike) {
  std::vector<float> in(300), out(100);
  const SwitchOp op = ReduceScatter(&in, &out);
  const std::vector<Stripe> s = StripeOp(op, 64, 3);
  ASSERT_EQ(s.size(), 3u);
  const size_t want_first[] = {0, 2, 4}, want_count[] = {32, 32, 36};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].first, want_first[i]);
    EXPECT_EQ(s[i].op.count, want_count[i]);
    EXPECT_EQ(s[i].op.in, op.in + want_first[i] * 16 * sizeof(float));
    EXPECT_EQ(s[i].op.out, op.out + want_first[i] * 16 * sizeof(float));
    EXPECT_EQ(s[i].op.block_stride_bytes, op.block_stride_bytes);
    EXPECT_EQ(ChunkCount(s[i].op, 64, 3), 3 * ((want_count[i] + 15) / 16));
  }
}

TEST(StripeTest, ResultsAreNumberedAsTheWholeOperationsChunks) {
  std::vector<float> in(300), out(100);
  const SwitchOp op = ReduceScatter(&in, &out);
  const std::vector<Stripe> s = StripeOp(op, 64, 3);
  std::vector<SwitchPhaseResult> r(3);
  for (size_t i = 0; i < 3; ++i) {
    r[i].complete = true;
    r[i].total_chunks = static_cast<uint32_t>(ChunkCount(s[i].op, 64, 3));
    r[i].have.assign(r[i].total_chunks, 0);
    r[i].sent = 10 * (i + 1);
    r[i].retransmitted = i;
  }
  // Stripe 1 (chunks 2-3 of each block): its chunk 3 is block 1's chunk 1,
  // so the operation's chunk 7 + 2 + 1 = 10.
  r[1].have[3] = 1;
  // Stripe 2 (chunks 4-6): its chunk 8 is block 2's chunk 2: 14 + 4 + 2 = 20.
  r[2].have[8] = 1;
  SwitchPhaseResult m = MergeStripes(op, 64, 3, s, r);
  EXPECT_EQ(m.total_chunks, 21u);
  ASSERT_EQ(m.have.size(), 21u);
  std::vector<uint8_t> want(21, 0);
  want[10] = want[20] = 1;
  EXPECT_EQ(m.have, want);
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.sent, 60u);
  EXPECT_EQ(m.retransmitted, 3u);
  EXPECT_FALSE(m.declined);
  // One stripe declined or incomplete: so is the operation.
  r[0].declined = true;
  r[2].complete = false;
  m = MergeStripes(op, 64, 3, s, r);
  EXPECT_TRUE(m.declined);
  EXPECT_FALSE(m.complete);
  // Every chunk of every stripe, back on every chunk of the operation.
  for (auto& x : r) x.have.assign(x.have.size(), 1);
  m = MergeStripes(op, 64, 3, s, r);
  EXPECT_EQ(m.have, std::vector<uint8_t>(21, 1));
}

}  // namespace
}  // namespace inca::client
