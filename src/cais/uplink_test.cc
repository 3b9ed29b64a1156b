// One switch of a tree (Rule::uplink) on its own: what goes up, what comes
// down, and what a leaf refuses or absorbs. The whole tree with the ranks'
// transports: src/tree/tree_aggregation_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cais/reducer_test_util.h"

namespace inca::cais {
namespace {

using namespace ::inca::cais::testing;  // NOLINT(build/namespaces)

constexpr PortId kUp = 9;

class UplinkTest : public ReducerTest {
 protected:
  void SetUp() override {
    CaisConfig c;
    c.deterministic = true;
    MakeLeaf(c);
  }
  // A switch with `c` whose group 0 has inputs 1, 2 and the uplink kUp.
  void MakeLeaf(const CaisConfig& c) {
    Make(c);
    Rule r{RuleKey{0, std::nullopt, std::nullopt}, {1, 2}, {1, 2}, std::nullopt};
    r.uplink = kUp;
    AddRule(r);
  }
  // The parent's answer for the chunk of `h`.
  std::vector<uint8_t> FromParent(CaisHeader h, uint8_t flags, uint8_t block,
                                  const std::vector<float>& v) {
    h.flags = flags;
    h.block = block;
    return Packet(h, F32Bytes(v));
  }
  std::vector<Emitted> Take() { return sink_.Take(); }
};

TEST_F(UplinkTest, ThePartialGoesUpAndTheParentsResultComesDownWithBothWaits) {
  const CaisHeader h = Hdr();
  EXPECT_EQ(Send(1, Packet(h, F32Bytes({1.5f, 2})), 0).verdict, Verdict::kAggregated);
  EXPECT_TRUE(Take().empty());
  Send(2, Packet(h, F32Bytes({0.25f, 3})), 4'000'000);
  auto up = Take();
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].port, kUp);
  EXPECT_EQ(up[0].header.flags, 0);
  EXPECT_EQ(AsF32(up[0].payload), (std::vector<float>{1.75f, 5}));
  EXPECT_EQ(reducer_->group(0).uplink_partials, 1u);
  EXPECT_EQ(reducer_->sram().pending_chunks, 1u);  // held until the parent answers
  EXPECT_EQ(reducer_->group(0).sram_cells, 1u);    // the partial only

  // 50 ms on the uplink; the parent says the partial waited there 2 ms.
  const dp::TimeNs parent_wait = 2'000'000;
  EXPECT_EQ(
      Send(kUp, FromParent(h, flags::kResult, wire::EncodeWait(parent_wait), {9, 10}), 54'000'000)
          .verdict,
      Verdict::kForwarded);
  auto down = Take();
  ASSERT_EQ(down.size(), 2u);
  for (const Emitted& e : down) {
    EXPECT_EQ(AsF32(e.payload), (std::vector<float>{9, 10}));
    // Port 1 waited 4 ms here, port 2 none: plus the parent's, never the
    // uplink's 50 ms.
    const int64_t want =
        (e.port == 1 ? 4'000'000 : 0) + wire::DecodeWait(wire::EncodeWait(parent_wait));
    EXPECT_EQ(e.header.block, wire::EncodeWait(want)) << "port " << e.port;
  }
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
  EXPECT_EQ(reducer_->group(0).parent_results, 1u);
  // A duplicate from the parent is absorbed with its reason; a host that
  // lost the result gets it from here.
  EXPECT_EQ(Send(kUp, FromParent(h, flags::kResult, 0, {9, 10}), 55'000'000).reason,
            DropReason::kParentStale);
  CaisHeader again = h;
  again.flags = flags::kRetransmit;
  Send(1, Packet(again, {}), 56'000'000);
  auto resent = Take();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(AsF32(resent[0].payload), (std::vector<float>{9, 10}));
}

TEST_F(UplinkTest, AnInputAskingAgainMakesOneRequestUpAndThePartialIsResentIfTheParentLacksIt) {
  const CaisHeader h = Hdr();
  Send(1, Packet(h, F32Bytes({1})), 0);
  Send(2, Packet(h, F32Bytes({2})), 0);
  Take();
  CaisHeader probe = h;
  probe.flags = flags::kRetransmit;
  Send(1, Packet(probe, {}), 5'000'000);
  Send(2, Packet(probe, {}), 5'000'100);  // within uplink_probe_ns: no second request
  auto got = Take();
  int requests = 0;
  for (const Emitted& e : got) {
    if (e.port == kUp) {
      ++requests;
      EXPECT_EQ(e.header.flags, flags::kRetransmit);
      EXPECT_TRUE(e.payload.empty());
    } else {
      EXPECT_EQ(e.header.flags, flags::kResult | flags::kPending);
      EXPECT_EQ(e.header.block, 1) << "the leaf holds the host's contribution";
    }
  }
  EXPECT_EQ(requests, 1);
  // The parent lacks the partial (PENDING, block 0): it goes up again.
  EXPECT_EQ(Send(kUp, FromParent(h, flags::kResult | flags::kPending, 0, {}), 6'000'000).verdict,
            Verdict::kForwarded);
  got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].port, kUp);
  EXPECT_EQ(AsF32(got[0].payload), (std::vector<float>{3}));
  EXPECT_EQ(reducer_->group(0).uplink_resent, 1u);
  // It has it (block 1): nothing to do.
  EXPECT_EQ(Send(kUp, FromParent(h, flags::kResult | flags::kPending, 1, {}), 7'000'000).verdict,
            Verdict::kAggregated);
  EXPECT_TRUE(Take().empty());
}

// The leaf's own timer (CaisConfig::uplink_rto_ns, 2 ms): a partial its
// parent has not answered makes a request up, 2, 4, 8 ms apart, until the
// answer; a lost partial goes up again without any input asking.
TEST_F(UplinkTest, AnUnansweredPartialIsAskedAboutOnItsOwnTimerBackingOff) {
  const CaisHeader h = Hdr();
  Send(1, Packet(h, F32Bytes({1})), 0);
  Send(2, Packet(h, F32Bytes({2})), 1'000'000);  // the partial goes up at 1 ms
  Take();
  const auto requests_at = [&](dp::TimeNs t) {
    reducer_->Advance(t, sink_);
    int n = 0;
    for (const Emitted& e : Take()) {
      EXPECT_EQ(e.port, kUp);
      EXPECT_EQ(e.header.flags, flags::kRetransmit);
      EXPECT_TRUE(e.payload.empty()) << "a request: the header alone";
      ++n;
    }
    return n;
  };
  EXPECT_EQ(requests_at(2'999'999), 0);
  EXPECT_EQ(requests_at(3'000'000), 1);
  // The parent lacks it (the partial was lost): it goes up again at once.
  Send(kUp, FromParent(h, flags::kResult | flags::kPending, 0, {}), 3'500'000);
  auto got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(AsF32(got[0].payload), (std::vector<float>{3}));
  EXPECT_EQ(requests_at(6'999'999), 0);  // backed off: 4 ms after the first ask
  EXPECT_EQ(requests_at(7'000'000), 1);
  EXPECT_EQ(requests_at(14'999'999), 0);
  EXPECT_EQ(requests_at(15'000'000), 1);
  EXPECT_EQ(reducer_->group(0).uplink_requests, 3u);
  // The result comes: no more asking.
  Send(kUp, FromParent(h, flags::kResult, 0, {3}), 16'000'000);
  EXPECT_EQ(Take().size(), 2u);
  EXPECT_EQ(requests_at(100'000'000), 0);
  EXPECT_EQ(reducer_->group(0).uplink_requests, 3u);
}

TEST_F(UplinkTest, WithoutItsTimerOnlyTheInputsAsk) {
  CaisConfig c;
  c.uplink_rto_ns = 0;
  MakeLeaf(c);
  const CaisHeader h = Hdr();
  Send(1, Packet(h, F32Bytes({1})), 0);
  Send(2, Packet(h, F32Bytes({2})), 0);
  Take();
  reducer_->Advance(400'000'000, sink_);  // below the 500 ms chunk timeout
  EXPECT_TRUE(Take().empty());
  c.uplink_rto_ns = -1;
  EXPECT_FALSE(CaisReducer::Create(c).ok());
}

TEST_F(UplinkTest, TheParentsFallbackAndDeclineReachEveryInputWithItsReason) {
  CaisHeader a = Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 2, /*seq=*/1);
  Send(1, Packet(a, F32Bytes({1})), 0);  // only one input yet: nothing went up
  Send(kUp, FromParent(a, flags::kResult | flags::kFallback, wire::kFallbackShapeMismatch, {}), 1);
  auto got = Take();
  ASSERT_EQ(got.size(), 2u);
  for (const Emitted& e : got) {
    EXPECT_EQ(e.header.flags, flags::kResult | flags::kFallback);
    EXPECT_EQ(e.header.block, wire::kFallbackShapeMismatch);
  }
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);

  CaisHeader b = Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 2, /*seq=*/2);
  Send(1, Packet(b, F32Bytes({1})), 10);
  Send(2, Packet(b, F32Bytes({1})), 10);
  Take();
  const auto held = static_cast<uint8_t>(wire::DeclineReason::kHeld);
  Send(kUp, FromParent(b, flags::kResult | flags::kFallback | flags::kDeclined, held, {}), 20);
  got = Take();
  ASSERT_EQ(got.size(), 2u);
  for (const Emitted& e : got) EXPECT_EQ(e.header.block, held);
  // The operation's next chunk is declined here, without going up.
  CaisHeader b1 = b;
  b1.chunk_id = 1;
  EXPECT_EQ(Send(2, Packet(b1, F32Bytes({1})), 30).reason, DropReason::kOffloadDeclined);
  got = Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].port, 2);
  EXPECT_EQ(got[0].header.block, held);
}

TEST_F(UplinkTest, OnlyTheRootDecidesOffloadNotTheLeafsOwnPolicy) {
  // This leaf's own offload controller would send nothing to the switch
  // (and explore): ignored for a group with an uplink, whose partial still
  // goes up; the root's decline alone declines the operation here.
  reducer_->SetOffloadRange(0, 1, 0);
  reducer_->SetOffloadBins(0, ~uint64_t{0}, 0, ~uint64_t{0});
  const CaisHeader h = Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, /*seq=*/3);
  EXPECT_EQ(Send(1, Packet(h, F32Bytes({1})), 0).verdict, Verdict::kAggregated);
  Send(2, Packet(h, F32Bytes({2})), 1);
  auto up = Take();
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].port, kUp);
  EXPECT_EQ(reducer_->group(0).offload_declined_ops, 0u);
  EXPECT_EQ(reducer_->group(0).offload_accepted_ops, 1u);
}

TEST_F(UplinkTest, OnlyAllReducesGoUpATreeAndOnlyTheParentMaySendResults) {
  for (CaisOp op : {CaisOp::kReduceScatter, CaisOp::kAllGather, CaisOp::kBroadcast}) {
    EXPECT_EQ(Send(1, Packet(Hdr(op), F32Bytes({1})), 0).reason, DropReason::kOffloadDeclined);
    auto got = Take();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].header.block, static_cast<uint8_t>(wire::DeclineReason::kTree));
  }
  CaisHeader r = Hdr();
  r.flags = flags::kResult;
  EXPECT_EQ(Send(1, Packet(r, F32Bytes({1})), 0).reason, DropReason::kSwitchOriginated);
  EXPECT_EQ(Send(kUp, Packet(r, F32Bytes({1})), 0).reason, DropReason::kParentStale);
  // Data on the uplink is no contribution here.
  EXPECT_EQ(Send(kUp, Packet(Hdr(), F32Bytes({1})), 0).reason, DropReason::kPortNotInRule);
}

// A half-precision partial is rounded once at each switch, to nearest
// even: the switch sums its inputs in f32 and sends the parent the f16 (or
// bf16) of that sum, as a flat switch sends its hosts (docs/design/tree.md,
// "Numerics").
TEST_F(UplinkTest, HalfPrecisionPartialsAreTheirSwitchsF32SumRoundedOnce) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    const auto narrow = [t](float f) { return t == DType::kF16 ? F32ToF16(f) : F32ToBF16(f); };
    const auto widen = [t](uint16_t h) { return t == DType::kF16 ? F16ToF32(h) : BF16ToF32(h); };
    // 1 + 2^-11 + 2^-11 is exact in f32 and not in f16: rounded once it is
    // 1 + 2^-10; rounding after each add would give 1.
    const std::vector<float> in = {1.0f, 0x1p-11f, 0x1p-11f};
    CaisHeader h =
        Hdr(CaisOp::kAllReduce, ReduceOp::kSum, t, 0, 1, /*seq=*/static_cast<uint32_t>(t));
    Rule r{RuleKey{1, std::nullopt, std::nullopt}, {1, 2, 3}, {1, 2, 3}, std::nullopt};
    r.uplink = kUp;
    if (t == DType::kF16) AddRule(r);
    h.group_id = 1;
    for (PortId p = 1; p <= 3; ++p) {
      const uint16_t v = narrow(in[p - 1u]);
      Send(p,
           Packet(h, std::vector<uint8_t>{static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8)}));
    }
    auto up = Take();
    ASSERT_EQ(up.size(), 1u);
    ASSERT_EQ(up[0].payload.size(), 2u);
    const uint16_t partial = static_cast<uint16_t>(up[0].payload[0] | up[0].payload[1] << 8);
    const float f32_sum = widen(narrow(in[0])) + widen(narrow(in[1])) + widen(narrow(in[2]));
    EXPECT_EQ(partial, narrow(f32_sum)) << wire::ToString(t);
  }
}

TEST(UplinkRuleTest, AnUplinkIsNoneOfTheRulesPortsAndNoHostPathRuleHasOne) {
  Rule r{RuleKey{0, std::nullopt, std::nullopt}, {1, 2}, {1, 2}, std::nullopt};
  r.uplink = 2;
  EXPECT_THAT(RuleTable::Validate(r).message(), HasSubstr("uplink port 2"));
  r.uplink = 3;
  EXPECT_TRUE(RuleTable::Validate(r).ok());
  r.host_path = true;
  EXPECT_THAT(RuleTable::Validate(r).message(), HasSubstr("cannot have an uplink"));
}

}  // namespace
}  // namespace inca::cais
