// CaisReducer: the collectives besides all-reduce (all-gather, broadcast,
// reduce-scatter) on the same fixture as reducer_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "cais/reducer_test_util.h"
#include "inca/cais/reducer.h"

namespace inca::cais {
namespace {

using namespace ::inca::cais::testing;  // NOLINT(build/namespaces)

TEST_F(ReducerTest, AllGatherChunksHaveOneOwnerAndAreRetained) {
  Make();
  AddRule(Rule{RuleKey{2, std::nullopt, std::nullopt}, {4, 6, 9}, {4, 6, 9}, std::nullopt});
  // 3 blocks of 2 chunks: chunk c belongs to input port index c * 3 / 6.
  auto h = [](uint16_t c) {
    return Hdr(CaisOp::kAllGather, ReduceOp::kSum, DType::kF32, c, 6, 0, 2);
  };
  EXPECT_EQ(Send(6, Packet(h(2), F32Bytes({6, 6}))).verdict, Verdict::kAggregated);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 3u);  // every output, the owner too (its acknowledgement)
  EXPECT_EQ(out[0].port, 4);
  EXPECT_EQ(out[1].port, 6);
  EXPECT_EQ(out[2].port, 9);
  for (const auto& e : out) {
    EXPECT_EQ(e.header.block, 1);  // port 6 is the second input port
    EXPECT_EQ(e.header.chunk_id, 2);
    EXPECT_TRUE(e.header.has_flag(flags::kResult));
    EXPECT_EQ(AsF32(e.payload), (std::vector<float>{6, 6}));
  }
  // Only the owner may send data for a chunk.
  EXPECT_EQ(Send(4, Packet(h(3), F32Bytes({4, 4}))).reason, DropReason::kNotContributor);
  // A receiver that lost chunk 2 asks for it with an empty RETRANSMIT.
  auto req = h(2);
  req.flags = flags::kRetransmit;
  EXPECT_EQ(Send(9, Packet(req, {})).verdict, Verdict::kForwarded);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 9);
  EXPECT_EQ(AsF32(out[0].payload), (std::vector<float>{6, 6}));
  // Asking for a chunk the owner has not sent yet.
  auto early = h(5);
  early.flags = flags::kRetransmit;
  EXPECT_EQ(Send(4, Packet(early, {})).reason, DropReason::kNotReady);
  // The owner's resend after completion is answered on its port only.
  EXPECT_EQ(Send(6, Packet(h(2), F32Bytes({6, 6}))).verdict, Verdict::kForwarded);
  EXPECT_EQ(sink_.Take().size(), 1u);
  EXPECT_EQ(reducer_->group(2).replicated, 1u);
  EXPECT_EQ(reducer_->group(2).completed_chunks, 1u);
}

TEST_F(ReducerTest, BroadcastFromTheNamedRootReachesEveryOutput) {
  Make();
  AddRule(Rule{RuleKey{1, 3, std::nullopt}, {1, 2, 3, 4}, {1, 2, 3, 4}, CaisOp::kBroadcast});
  auto h = Hdr(CaisOp::kBroadcast, ReduceOp::kSum, DType::kBF16, 0, 1, 0, 1, 3);
  h.block = 1;  // root = second input port = port 2
  EXPECT_EQ(Send(2, Packet(h, std::vector<uint8_t>{1, 2, 3, 4})).verdict, Verdict::kAggregated);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(out[k].port, k + 1);
    EXPECT_EQ(out[k].payload, (std::vector<uint8_t>{1, 2, 3, 4}));  // bytes untouched
  }
  auto other = h;
  other.chunk_id = 0;
  other.seq_num = 1;
  EXPECT_EQ(Send(3, Packet(other, std::vector<uint8_t>{1, 2})).reason, DropReason::kNotContributor);
  other.block = 7;  // no such input port
  EXPECT_EQ(Send(2, Packet(other, std::vector<uint8_t>{1, 2})).reason, DropReason::kNotContributor);
}

TEST_F(ReducerTest, ReduceScatterSendsEachChunkToItsOwnerOnlyAndAcksTheRest) {
  Make();
  AddAllReduce({1, 2, 3, 4}, 0, CaisOp::kReduceScatter);
  std::vector<PortId> owners;
  for (uint16_t c = 0; c < 8; ++c) {
    for (PortId p = 1; p <= 4; ++p) {
      Send(p, Packet(Hdr(CaisOp::kReduceScatter, ReduceOp::kSum, DType::kF32, c, 8),
                     F32Bytes({float(p)})));
    }
    const auto out = sink_.Take();
    ASSERT_EQ(out.size(), 4u);  // one result, three ACKs
    int results = 0;
    std::vector<PortId> acked;
    for (const auto& e : out) {
      if (e.header.has_flag(wire::cais_flags::kAck)) {
        EXPECT_TRUE(e.payload.empty());
        EXPECT_TRUE(e.header.has_flag(wire::cais_flags::kResult));
        acked.push_back(e.port);
      } else {
        ++results;
        EXPECT_EQ(AsF32(e.payload)[0], 10.0f);
        owners.push_back(e.port);
      }
    }
    EXPECT_EQ(results, 1);
    EXPECT_EQ(acked.size(), 3u);
    EXPECT_EQ(std::count(acked.begin(), acked.end(), owners.back()), 0);
  }
  EXPECT_EQ(owners, (std::vector<PortId>{1, 1, 2, 2, 3, 3, 4, 4}));
  // A resend after completion: the owner gets the result again, any other
  // contributor an ACK.
  wire::CaisHeader again = Hdr(CaisOp::kReduceScatter, ReduceOp::kSum, DType::kF32, 0, 8);
  again.flags = wire::cais_flags::kRetransmit;
  Send(1, Packet(again, F32Bytes({1})));
  Send(3, Packet(again, F32Bytes({3})));
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].port, 1);
  EXPECT_EQ(AsF32(out[0].payload)[0], 10.0f);
  EXPECT_EQ(out[1].port, 3);
  EXPECT_TRUE(out[1].header.has_flag(wire::cais_flags::kAck));
}

// Each port's copy of a result says how long that port's contribution
// waited for the others (wire::EncodeWait in `block`); a resent result,
// which is not a round-trip sample, says nothing.
TEST_F(ReducerTest, EachResultCarriesHowLongItsPortsContributionWaited) {
  for (CaisOp op : {CaisOp::kAllReduce, CaisOp::kReduceScatter}) {
    Make();
    AddAllReduce({1, 2, 3}, 0, op);
    const uint16_t total = op == CaisOp::kReduceScatter ? 3 : 1;
    Send(1, Packet(Hdr(op, ReduceOp::kSum, DType::kF32, 0, total), F32Bytes({1})), 1'000'000);
    Send(2, Packet(Hdr(op, ReduceOp::kSum, DType::kF32, 0, total), F32Bytes({2})), 1'300'000);
    Send(3, Packet(Hdr(op, ReduceOp::kSum, DType::kF32, 0, total), F32Bytes({3})), 5'000'000);
    const auto out = sink_.Take();
    ASSERT_EQ(out.size(), 3u) << wire::ToString(op);
    for (const auto& e : out) {
      const int64_t want = e.port == 1 ? 4'000'000 : e.port == 2 ? 3'700'000 : 0;
      EXPECT_EQ(e.header.block, wire::EncodeWait(want)) << wire::ToString(op) << " port " << e.port;
    }
    EXPECT_NEAR(static_cast<double>(wire::DecodeWait(out[0].header.block)), 4e6, 4e6 * 0.045);
    wire::CaisHeader again = Hdr(op, ReduceOp::kSum, DType::kF32, 0, total);
    again.flags = wire::cais_flags::kRetransmit;
    Send(1, Packet(again, F32Bytes({1})), 6'000'000);
    const auto resent = sink_.Take();
    ASSERT_EQ(resent.size(), 1u);
    EXPECT_EQ(resent[0].header.block, 0);
  }
  // AllGather keeps `block` for the owner's index.
  Make();
  AddAllReduce({1, 2}, 0, CaisOp::kAllGather);
  Send(2, Packet(Hdr(CaisOp::kAllGather, ReduceOp::kSum, DType::kF32, 1, 2), F32Bytes({7})),
       9'000'000);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& e : out) EXPECT_EQ(e.header.block, 1);
}

// A result request for a chunk that is not complete (a client's tail
// probe) is answered on the asking port: PENDING, block 1 if the switch
// holds that port's contribution, 0 if not; no slot at all is "not held".
// A port outside the rule still gets nothing.
TEST_F(ReducerTest, AResultRequestForAPendingChunkSaysWhetherTheAskersPartIsHere) {
  Make();
  AddAllReduce({1, 2, 3});
  wire::CaisHeader ask = Hdr();
  ask.flags = wire::cais_flags::kRetransmit;
  // No slot yet.
  EXPECT_EQ(Send(2, Packet(ask, {}), 100).verdict, Verdict::kForwarded);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(out[0].header.flags, wire::cais_flags::kResult | wire::cais_flags::kPending);
  EXPECT_EQ(out[0].header.block, 0);
  EXPECT_TRUE(out[0].payload.empty());
  // Port 1 contributed, port 2 did not.
  Send(1, Packet(Hdr(), F32Bytes({1})), 200);
  Send(1, Packet(ask, {}), 300);
  Send(2, Packet(ask, {}), 300);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].port, 1);
  EXPECT_EQ(out[0].header.block, 1);
  EXPECT_EQ(out[1].port, 2);
  EXPECT_EQ(out[1].header.block, 0);
  EXPECT_EQ(reducer_->totals().pending_answers, 3u);
  // Not in the rule: dropped as before.
  EXPECT_EQ(Send(9, Packet(ask, {}), 300).verdict, Verdict::kDropped);
  EXPECT_TRUE(sink_.Take().empty());
  // Once complete, a request gets the result.
  Send(2, Packet(Hdr(), F32Bytes({2})), 400);
  Send(3, Packet(Hdr(), F32Bytes({3})), 400);
  ASSERT_EQ(sink_.Take().size(), 3u);
  Send(2, Packet(ask, {}), 500);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(AsF32(out[0].payload), (std::vector<float>{6}));
  EXPECT_EQ(reducer_->totals().pending_answers, 3u);
}

}  // namespace
}  // namespace inca::cais
