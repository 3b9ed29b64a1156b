#include "inca/cais/reducer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cais/reducer_test_util.h"

namespace inca::cais {
namespace {

using namespace ::inca::cais::testing;  // NOLINT(build/namespaces)

TEST_F(ReducerTest, SeedExampleAllReduceSumToEveryOutputPort) {
  Make();
  AddRule(Rule{RuleKey{0, 5, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}, CaisOp::kAllReduce});
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7};
  for (PortId p = 1; p <= 4; ++p) {
    std::vector<float> v = x;
    for (float& e : v) e *= static_cast<float>(p);
    const auto o = Send(p, Packet(Hdr(), F32Bytes(v)));
    EXPECT_EQ(o.verdict, Verdict::kAggregated);
    if (p < 4) {
      EXPECT_TRUE(sink_.got.empty());
    }
  }
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(out[k].port, k + 1);
    EXPECT_TRUE(out[k].header.has_flag(flags::kResult));
    EXPECT_FALSE(out[k].header.has_flag(flags::kFallback));
    EXPECT_EQ(out[k].header.layer_id, 5);
    const auto r = AsF32(out[k].payload);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(r[i], x[i] * 10) << i;
  }
  EXPECT_EQ(reducer_->totals().completed_chunks, 1u);
  EXPECT_EQ(reducer_->group(0).contributions, 4u);
  EXPECT_EQ(reducer_->group(0).reduced_bytes, 4u * 7 * 4);
  EXPECT_EQ(reducer_->counters().tx_packets, 4u);
  // The result stays retained, nothing pending.
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
  EXPECT_EQ(reducer_->sram().retained_chunks, 1u);
}

// Every op and type, every arrival order of 3 and 4 ports, both modes: the
// result equals the reference reduced in arrival order (non-deterministic
// mode) or in ascending port order (deterministic mode, bitwise for every
// permutation).
class ReducerOpTypeTest : public ReducerTest,
                          public ::testing::WithParamInterface<std::tuple<ReduceOp, DType, bool>> {
};

TEST_P(ReducerOpTypeTest, AllPermutationsMatchReference) {
  const auto [rop, t, deterministic] = GetParam();
  CaisConfig cfg;
  cfg.deterministic = deterministic;
  Make(cfg);
  std::mt19937 rng(42);
  uint32_t seq = 0;
  for (int nports : {3, 4}) {
    PortMask ports;
    // Ports in different words of the 1,024-bit mask.
    for (int p = 0; p < nports; ++p) ports.add(std::array<PortId, 4>{10, 70, 700, 1023}[p]);
    reducer_->rules().Clear();
    AddAllReduce(ports);
    std::vector<std::vector<uint8_t>> in;
    for (int p = 0; p < nports; ++p) in.push_back(RandomPayload(t, 37, rng));
    if (t != DType::kI32 && rop != ReduceOp::kSum && rop != ReduceOp::kProduct) {
      // Put a NaN and signed zeros into the mix for max/min.
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const uint16_t h16 = t == DType::kF16 ? F32ToF16(nan) : F32ToBF16(nan);
      if (t == DType::kF32) {
        std::memcpy(&in[1][0], &nan, 4);
      } else {
        std::memcpy(&in[1][0], &h16, 2);
      }
    }
    std::vector<int> order(static_cast<size_t>(nports));
    std::iota(order.begin(), order.end(), 0);
    std::vector<int> ascending = order;
    std::vector<uint8_t> first_result;
    do {
      ++seq;
      for (int k : order) {
        const auto o = Send(ports.nth(k), Packet(Hdr(CaisOp::kAllReduce, rop, t, 0, 1, seq),
                                                 in[static_cast<size_t>(k)]));
        ASSERT_EQ(o.verdict, Verdict::kAggregated) << dp::ToString(o.reason);
      }
      const auto out = sink_.Take();
      ASSERT_EQ(out.size(), static_cast<size_t>(nports));
      for (const auto& e : out) EXPECT_EQ(e.payload, out[0].payload);
      const auto expect = Reference(rop, t, in, deterministic ? ascending : order);
      EXPECT_TRUE(NanAwareEqual(t, out[0].payload, expect));
      if (deterministic) {
        if (first_result.empty()) first_result = out[0].payload;
        EXPECT_EQ(out[0].payload, first_result) << "deterministic mode depends on arrival order";
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReducerOpTypeTest,
                         ::testing::Combine(::testing::Values(ReduceOp::kSum, ReduceOp::kMax,
                                                              ReduceOp::kMin, ReduceOp::kProduct),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16, DType::kI32),
                                            ::testing::Bool()),
                         [](const auto& p) {
                           return std::string(wire::ToString(std::get<0>(p.param))) + "_" +
                                  std::string(wire::ToString(std::get<1>(p.param))) +
                                  (std::get<2>(p.param) ? "_deterministic" : "_arrival");
                         });

TEST_F(ReducerTest, NonDeterministicFloatSumDependsOnOrderButDeterministicModeDoesNot) {
  // 1e8 + 1 - 1e8 style cancellation: arrival order changes an f32 sum.
  const std::vector<std::vector<uint8_t>> in = {F32Bytes({1e8f}), F32Bytes({1.0f}),
                                                F32Bytes({-1e8f})};
  std::map<bool, std::set<float>> seen;
  for (bool det : {false, true}) {
    CaisConfig cfg;
    cfg.deterministic = det;
    Make(cfg);
    AddAllReduce({1, 2, 3});
    std::vector<int> order = {0, 1, 2};
    uint32_t seq = 0;
    do {
      ++seq;
      for (int k : order)
        Send(static_cast<PortId>(k + 1),
             Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, seq),
                    in[static_cast<size_t>(k)]));
      seen[det].insert(AsF32(sink_.Take().at(0).payload)[0]);
    } while (std::next_permutation(order.begin(), order.end()));
  }
  EXPECT_GT(seen[false].size(), 1u);
  EXPECT_EQ(seen[true].size(), 1u);
}

TEST_F(ReducerTest, I32WrapsOnOverflow) {
  Make();
  AddAllReduce({1, 2});
  const int32_t big = std::numeric_limits<int32_t>::max();
  std::vector<uint8_t> a(4), b(4);
  const int32_t one = 1;
  std::memcpy(a.data(), &big, 4);
  std::memcpy(b.data(), &one, 4);
  Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kI32), a));
  Send(2, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kI32), b));
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  int32_t r;
  std::memcpy(&r, out[0].payload.data(), 4);
  EXPECT_EQ(r, std::numeric_limits<int32_t>::min());
}

TEST_F(ReducerTest, DuplicateContributionIsNotCountedTwice) {
  Make();
  AddAllReduce({1, 2});
  const auto p1 = Packet(Hdr(), F32Bytes({1, 1}));
  EXPECT_EQ(Send(1, p1).verdict, Verdict::kAggregated);
  auto retx = Hdr();
  retx.flags = flags::kRetransmit;
  const auto o = Send(1, Packet(retx, F32Bytes({1, 1})));
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(o.reason, DropReason::kDuplicate);
  EXPECT_TRUE(sink_.got.empty());
  Send(2, Packet(Hdr(), F32Bytes({2, 2})));
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(AsF32(out[0].payload), (std::vector<float>{3, 3}));
  EXPECT_EQ(reducer_->group(0).drops_by_reason[static_cast<size_t>(DropReason::kDuplicate)], 1u);
}

TEST_F(ReducerTest, SlotHoldingTimesAreBucketedPerGroup) {
  Make();
  AddAllReduce({1, 2});
  // First contribution at 1 ms, the last at 4 ms: held 3,000 us, bucket 11
  // ([2048, 4096) us).
  Send(1, Packet(Hdr(), F32Bytes({1, 1})), 1'000'000);
  Send(2, Packet(Hdr(), F32Bytes({2, 2})), 4'000'000);
  const auto& g = reducer_->group(0).holding_us_log2;
  EXPECT_EQ(g[11], 1u);
  EXPECT_EQ(reducer_->totals().holding_us_log2[11], 1u);
  EXPECT_GE(HoldingQuantileUs(g, 0.5), 2048.0);
  EXPECT_LE(HoldingQuantileUs(g, 0.99), 4096.0);
  EXPECT_EQ(HoldingBucket(0), 0);
  EXPECT_EQ(HoldingBucket(999), 0);
  EXPECT_EQ(HoldingBucket(1'000), 0);
  EXPECT_EQ(HoldingBucket(2'000), 1);
  EXPECT_EQ(HoldingBucket(int64_t{1} << 62), kHoldingBuckets - 1);
  // Quantiles: 99 samples near 10 us and one near 5 ms; p50 stays in the
  // first bucket, p99 reaches into the top one only at 1.
  std::array<uint64_t, kHoldingBuckets> b{};
  b[3] = 99;  // [8, 16) us
  b[12] = 1;  // [4096, 8192) us
  EXPECT_NEAR(HoldingQuantileUs(b, 0.5), 8 + 8 * (50.0 / 99), 1e-9);
  EXPECT_LE(HoldingQuantileUs(b, 0.99), 16.0);
  EXPECT_GE(HoldingQuantileUs(b, 1.0), 4096.0);
  EXPECT_EQ(HoldingQuantileUs({}, 0.5), 0.0);
}

TEST_F(ReducerTest, RetransmissionAfterCompletionGetsResultOnThatPortOnly) {
  Make();
  AddAllReduce({1, 2, 3});
  for (PortId p = 1; p <= 3; ++p) Send(p, Packet(Hdr(), F32Bytes({float(p)})), 100);
  ASSERT_EQ(sink_.Take().size(), 3u);
  auto retx = Hdr();
  retx.flags = flags::kRetransmit;
  const auto o = Send(2, Packet(retx, F32Bytes({2})), 200);
  EXPECT_EQ(o.verdict, Verdict::kForwarded);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_TRUE(out[0].header.has_flag(flags::kResult));
  EXPECT_FALSE(out[0].header.has_flag(flags::kRetransmit));
  EXPECT_EQ(AsF32(out[0].payload), (std::vector<float>{6}));
  EXPECT_EQ(reducer_->totals().results_resent, 1u);
  // No double counting: still one completion, three contributions.
  EXPECT_EQ(reducer_->totals().completed_chunks, 1u);
  EXPECT_EQ(reducer_->totals().contributions, 3u);
}

TEST_F(ReducerTest, RetainedResultExpiresThenLatePacketGetsFallbackNotice) {
  CaisConfig cfg;
  cfg.result_hold_ns = 10 * dp::kNsPerMs;
  Make(cfg);
  AddAllReduce({1, 2});
  Send(1, Packet(Hdr(), F32Bytes({1})), 0);
  Send(2, Packet(Hdr(), F32Bytes({2})), 0);
  sink_.Take();
  reducer_->Advance(10 * dp::kNsPerMs, sink_);
  EXPECT_EQ(reducer_->sram().retained_chunks, 0u);
  EXPECT_EQ(reducer_->totals().evicted_results, 1u);
  const auto o = Send(1, Packet(Hdr(), F32Bytes({1})), 11 * dp::kNsPerMs);
  EXPECT_EQ(o.reason, DropReason::kChunkClosed);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 1);
  EXPECT_TRUE(out[0].header.has_flag(flags::kFallback));
  EXPECT_EQ(out[0].header.payload_len, 0u);
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);  // no new slot was opened
}

TEST_F(ReducerTest, TimeoutReleasesChunkAndNotifiesEveryInputPort) {
  CaisConfig cfg;
  cfg.timeout_ns = 50 * dp::kNsPerMs;
  Make(cfg);
  AddRule(
      Rule{RuleKey{0, std::nullopt, std::nullopt}, {1, 2, 3}, {1, 2, 3, 7}, CaisOp::kAllReduce});
  Send(1, Packet(Hdr(), F32Bytes({1})), 0);
  Send(3, Packet(Hdr(), F32Bytes({3})), 20 * dp::kNsPerMs);
  reducer_->Advance(49 * dp::kNsPerMs, sink_);
  EXPECT_TRUE(sink_.got.empty());
  EXPECT_EQ(reducer_->sram().pending_chunks, 1u);
  reducer_->Advance(50 * dp::kNsPerMs, sink_);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 3u);
  std::vector<PortId> ports;
  for (const auto& e : out) {
    ports.push_back(e.port);
    EXPECT_TRUE(e.header.has_flag(flags::kFallback));
    EXPECT_EQ(e.header.layer_id, 5);
    EXPECT_TRUE(e.payload.empty());
  }
  EXPECT_EQ(ports, (std::vector<PortId>{1, 2, 3}));
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
  EXPECT_EQ(reducer_->sram().cells_pending, 0u);
  EXPECT_EQ(reducer_->group(0).timeouts, 1u);
  EXPECT_EQ(reducer_->group(0).fallback_notices, 3u);
  // The straggler arrives late: it gets a notice too and no slot is opened.
  const auto o = Send(2, Packet(Hdr(), F32Bytes({2})), 60 * dp::kNsPerMs);
  EXPECT_EQ(o.reason, DropReason::kChunkClosed);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
}

TEST_F(ReducerTest, TimeoutIsAlsoCheckedWhenPacketsArrive) {
  CaisConfig cfg;
  cfg.timeout_ns = 5;
  Make(cfg);
  AddAllReduce({1, 2});
  Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 2), F32Bytes({1})), 0);
  Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 1, 2), F32Bytes({1})), 10);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);  // chunk 0 notices to ports 1 and 2
  EXPECT_EQ(out[0].header.chunk_id, 0);
  EXPECT_EQ(reducer_->sram().pending_chunks, 1u);
}

// Chunk c of a one-float sum on group 8 (the admission tests).
std::vector<uint8_t> OneFloatChunk(uint16_t c) {
  return Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 8), F32Bytes({1}));
}

TEST_F(ReducerTest, MaxPendingChunksBoundsAdmission) {
  CaisConfig cfg;
  cfg.max_pending_chunks = 2;
  Make(cfg);
  AddAllReduce({1, 2});
  EXPECT_EQ(Send(1, OneFloatChunk(0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, OneFloatChunk(1)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, OneFloatChunk(2)).reason, DropReason::kSlotsExhausted);
  EXPECT_EQ(reducer_->sram().pending_chunks, 2u);
  // Contributions to admitted chunks still flow; completing one frees room.
  EXPECT_EQ(Send(2, OneFloatChunk(0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, OneFloatChunk(2)).verdict, Verdict::kAggregated);
  EXPECT_EQ(reducer_->totals().drops_by_reason[static_cast<size_t>(DropReason::kSlotsExhausted)],
            1u);
}

TEST_F(ReducerTest, SramUsageLimitBoundsAdmissionAndIsReported) {
  CaisConfig cfg;
  cfg.max_payload_bytes = 1024;  // cells of 2048 bytes
  cfg.sram_bytes = 10 * 2048;    // 10 cells
  cfg.sram_usage_limit = 0.75;   // at most 7 cells pending
  cfg.deterministic = true;      // 3 cells per chunk with 3 input ports
  Make(cfg);
  AddAllReduce({1, 2, 3});
  auto chunk = [](uint16_t c) {
    return Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 8), F32Bytes({1, 2}));
  };
  EXPECT_EQ(Send(1, chunk(0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, chunk(1)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, chunk(2)).reason, DropReason::kSramLimit);
  const SramUsage u = reducer_->sram();
  EXPECT_EQ(u.cells_total, 10u);
  EXPECT_EQ(u.cell_bytes, 2048u);
  EXPECT_EQ(u.cells_pending, 6u);
  EXPECT_DOUBLE_EQ(u.pending_usage(), 0.6);
  // Completion keeps one cell as the retained result and frees the others.
  Send(2, chunk(0));
  Send(3, chunk(0));
  EXPECT_EQ(reducer_->sram().cells_pending, 3u);
  EXPECT_EQ(reducer_->sram().cells_retained, 1u);
  EXPECT_EQ(reducer_->group(0).sram_cells, 4u);
  EXPECT_EQ(Send(1, chunk(2)).verdict, Verdict::kAggregated);
  reducer_->Advance(1'000'000'000, sink_);  // everything times out or expires
  EXPECT_EQ(reducer_->group(0).sram_cells, 0u);
  EXPECT_EQ(reducer_->totals().sram_cells, 0u);
}

// Each result is emitted once per port from the slot, all its copies with
// one `share` of their own (so the switch's sink copies it once); a resend
// of a retained result shares nothing.
TEST_F(ReducerTest, AResultsCopiesShareOneKeyOfTheirOwn) {
  struct ShareSink final : dp::PacketSink {
    void Emit(PortId /*port*/, std::span<const uint8_t> /*bytes*/) override { shares.push_back(0); }
    void EmitGather(PortId /*port*/, std::span<const uint8_t> /*head*/,
                    std::span<const uint8_t> /*payload*/, uint64_t share) override {
      shares.push_back(share);
    }
    std::vector<uint64_t> shares;
  };
  Make();
  AddAllReduce({1, 2, 3, 4});
  ShareSink out;
  const auto pkt = [](uint16_t chunk, int v) {
    return Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, chunk, 2),
                  F32Bytes({float(v)}));
  };
  for (uint16_t c = 0; c < 2; ++c) {
    for (PortId p = 1; p <= 4; ++p) {
      ASSERT_EQ(reducer_->Process(pkt(c, p), p, 0, out).verdict, Verdict::kAggregated);
    }
  }
  ASSERT_EQ(out.shares.size(), 8u);
  EXPECT_NE(out.shares[0], 0u);
  EXPECT_NE(out.shares[4], 0u);
  EXPECT_NE(out.shares[0], out.shares[4]);
  for (size_t k = 0; k < 8; ++k) EXPECT_EQ(out.shares[k], out.shares[k / 4 * 4]) << k;
  out.shares.clear();
  EXPECT_EQ(reducer_->Process(pkt(0, 2), 2, 1, out).verdict, Verdict::kForwarded);  // a resend
  EXPECT_EQ(out.shares, std::vector<uint64_t>{0});
}

TEST_F(ReducerTest, RetainedResultsAreEvictedOldestFirstWhenCellsRunOut) {
  CaisConfig cfg;
  cfg.max_payload_bytes = 64;  // cells of 128 bytes
  cfg.sram_bytes = 3 * 128;
  cfg.sram_usage_limit = 1.0;
  cfg.result_hold_ns = 1'000'000'000;
  Make(cfg);
  AddAllReduce({1});
  for (uint16_t c = 0; c < 5; ++c) {
    const auto o = Send(
        1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 8), F32Bytes({float(c)})),
        c);
    ASSERT_EQ(o.verdict, Verdict::kAggregated);  // single port: completes at once
  }
  EXPECT_EQ(reducer_->sram().retained_chunks, 3u);
  EXPECT_EQ(reducer_->totals().evicted_results, 2u);
  sink_.Take();
  // Chunk 4 is still held; chunk 0 was evicted and is answered with a notice.
  EXPECT_EQ(
      Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 4, 8), F32Bytes({4})), 9)
          .verdict,
      Verdict::kForwarded);
  EXPECT_EQ(
      Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 8), F32Bytes({0})), 9)
          .reason,
      DropReason::kChunkClosed);
}

TEST_F(ReducerTest, LookupAndIngressFailuresAreNamed) {
  Make();
  AddRule(Rule{RuleKey{0, 5, std::nullopt}, {1, 2}, {1, 2}, CaisOp::kAllReduce});
  const auto p = Packet(Hdr(), F32Bytes({1}));
  EXPECT_EQ(Send(3, p).reason, DropReason::kPortNotInRule);
  EXPECT_EQ(Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 0, 0, 6),
                           F32Bytes({1})))
                .reason,
            DropReason::kNoRule);
  EXPECT_EQ(Send(1, Packet(Hdr(CaisOp::kAllGather), F32Bytes({1}))).reason,
            DropReason::kOpMismatch);
  EXPECT_EQ(Send(dp::kMaxPorts, p).reason, DropReason::kBadIngressPort);
  auto res = Hdr();
  res.flags = flags::kResult;
  EXPECT_EQ(Send(1, Packet(res, F32Bytes({1}))).reason, DropReason::kSwitchOriginated);
  EXPECT_EQ(Send(1, std::vector<uint8_t>{1, 2, 3}).reason, DropReason::kTooShort);
  auto bad = p;
  bad[16] = 9;  // version
  EXPECT_EQ(Send(1, bad).reason, DropReason::kBadVersion);
  bad = p;
  bad.pop_back();
  EXPECT_EQ(Send(1, bad).reason, DropReason::kPayloadLenMismatch);
  // Shape mismatch against the chunk's first contribution (its hand-back:
  // ShapeMismatchHandsTheChunkBackToEveryRankAtOnce).
  EXPECT_EQ(Send(1, p).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(2, Packet(Hdr(), F32Bytes({1, 2}))).reason, DropReason::kShapeMismatch);
  EXPECT_EQ(reducer_->counters().dropped, 9u);
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
}

TEST_F(ReducerTest, OversizedPayloadIsDropped) {
  CaisConfig cfg;
  cfg.max_payload_bytes = 16;
  Make(cfg);
  AddAllReduce({1, 2});
  EXPECT_EQ(Send(1, Packet(Hdr(), F32Bytes({1, 2, 3, 4, 5}))).reason, DropReason::kPayloadTooLarge);
  EXPECT_EQ(Send(1, Packet(Hdr(), F32Bytes({1, 2, 3, 4}))).verdict, Verdict::kAggregated);
}

TEST_F(ReducerTest, ResultRequestsForAllReduce) {
  Make();
  AddAllReduce({1, 2});
  auto req = Hdr();
  req.flags = flags::kRetransmit;
  // Not complete: answered PENDING (AResultRequestForAPendingChunk...).
  EXPECT_EQ(Send(1, Packet(req, {})).verdict, Verdict::kForwarded);  // nothing yet
  Send(1, Packet(Hdr(), F32Bytes({1})));
  EXPECT_EQ(Send(1, Packet(req, {})).verdict, Verdict::kForwarded);  // still pending
  for (const auto& e : sink_.Take()) EXPECT_TRUE(e.header.has_flag(flags::kPending));
  Send(2, Packet(Hdr(), F32Bytes({2})));
  sink_.Take();
  EXPECT_EQ(Send(2, Packet(req, {})).verdict, Verdict::kForwarded);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(AsF32(out[0].payload), (std::vector<float>{3}));
}

// Issue 18: 3,000 requests of 20 bytes drew 3,000 results of 8,972 bytes.
// A port's resends are bounded by its credit: resend_credit_max to start
// with, resend_credit_per_result more per result it is sent, never more
// than resend_credit_max; beyond it, resend_limit drops, counted.
TEST_F(ReducerTest, ResultResendsAreBoundedByThePortsCredit) {
  CaisConfig cfg;
  cfg.resend_credit_per_result = 2;
  cfg.resend_credit_max = 3;
  Make(cfg);
  AddAllReduce({1, 2});
  auto req = Hdr();
  req.flags = flags::kRetransmit;
  // Chunk 0 completes: each port earns 2, capped at 3 (it starts full).
  Send(1, Packet(Hdr(), F32Bytes({1})));
  Send(2, Packet(Hdr(), F32Bytes({2})));
  sink_.Take();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(Send(2, Packet(req, {})).verdict, Verdict::kForwarded);
  EXPECT_EQ(Send(2, Packet(req, {})).reason, DropReason::kResendLimit);
  EXPECT_EQ(Send(2, Packet(Hdr(), F32Bytes({2}))).reason, DropReason::kResendLimit);  // late copy
  EXPECT_EQ(sink_.Take().size(), 3u);
  // Port 1's credit is its own.
  EXPECT_EQ(Send(1, Packet(req, {})).verdict, Verdict::kForwarded);
  sink_.Take();
  // Two more completions earn port 2 two resends each, up to the cap of 3.
  for (uint16_t c = 1; c <= 2; ++c) {
    auto h = Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 3);
    Send(1, Packet(h, F32Bytes({1})));
    Send(2, Packet(h, F32Bytes({2})));
  }
  sink_.Take();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(Send(2, Packet(req, {})).verdict, Verdict::kForwarded);
  EXPECT_EQ(Send(2, Packet(req, {})).reason, DropReason::kResendLimit);
  EXPECT_EQ(reducer_->group(0).results_resent, 7u);
  EXPECT_EQ(reducer_->group(0).drops_by_reason[static_cast<size_t>(DropReason::kResendLimit)], 3u);
  EXPECT_TRUE(reducer_->counters().Conserved());
  // A lower cap applies at once; a bad one is refused.
  CaisConfig lower = reducer_->config();
  lower.resend_credit_max = 0;
  ASSERT_TRUE(reducer_->UpdateConfig(lower).ok());
  EXPECT_EQ(Send(1, Packet(req, {})).reason, DropReason::kResendLimit);
  lower.resend_credit_per_result = 65;
  EXPECT_FALSE(reducer_->UpdateConfig(lower).ok());
}

TEST_F(ReducerTest, HostPathRuleForALayerDeclinesItsOperationsOnly) {
  Make();
  AddAllReduce({1, 2});  // the group-wide rule, as JOIN installs it
  Rule pin{RuleKey{0, uint16_t{9}, std::nullopt}, {}, {}, std::nullopt};
  pin.host_path = true;
  AddRule(pin);
  // Layer 9: every packet (data or result request) gets a DECLINED notice on
  // its own port; no slot opens; the operation is counted once.
  for (uint16_t c = 0; c < 3; ++c) {
    for (PortId p : {PortId{1}, PortId{2}}) {
      EXPECT_EQ(Send(p, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 3, 7, 0, 9),
                               F32Bytes({1})))
                    .verdict,
                Verdict::kDropped);
      const auto out = sink_.Take();
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].port, p);
      EXPECT_TRUE(out[0].header.has_flag(wire::cais_flags::kDeclined));
      EXPECT_EQ(out[0].header.layer_id, 9);
    }
  }
  EXPECT_EQ(reducer_->sram().pending_chunks, 0u);
  EXPECT_EQ(reducer_->group(0).offload_declined_ops, 1u);
  EXPECT_EQ(
      reducer_->group(0).drops_by_reason[static_cast<size_t>(dp::DropReason::kOffloadDeclined)],
      6u);
  // Another layer of the same group reduces as before.
  Send(1,
       Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 8, 0, 3), F32Bytes({1})));
  Send(2,
       Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 8, 0, 3), F32Bytes({2})));
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(AsF32(out[0].payload)[0], 3.0f);
  EXPECT_EQ(reducer_->group(0).completed_chunks, 1u);
}

TEST_F(ReducerTest, GroupsAndOperationsAreIsolated) {
  Make();
  AddAllReduce({1, 2}, 0);
  AddAllReduce({1, 2}, 1);
  // Same layer/chunk, different group or seq: separate slots.
  Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 7, 0), F32Bytes({1})));
  Send(1, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 7, 1), F32Bytes({10})));
  Send(1,
       Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 8, 0), F32Bytes({100})));
  EXPECT_EQ(reducer_->sram().pending_chunks, 3u);
  Send(2, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, 0, 1, 7, 1), F32Bytes({20})));
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(AsF32(out[0].payload)[0], 30.0f);
  EXPECT_EQ(reducer_->group(1).completed_chunks, 1u);
  EXPECT_EQ(reducer_->group(0).completed_chunks, 0u);
  EXPECT_EQ(reducer_->group(0).contributions, 2u);
}

TEST_F(ReducerTest, ManyChunksOfALargeTensor) {
  // A 1 MiB f32 tensor in 8952-byte chunks across 4 ports.
  CaisConfig cfg;
  Make(cfg);
  AddAllReduce({0, 1, 2, 3});
  const size_t elems = (1 << 20) / 4, per = 8952 / 4;
  const auto total = static_cast<uint16_t>((elems + per - 1) / per);
  std::vector<float> result(elems, -1);
  for (uint16_t c = 0; c < total; ++c) {
    const size_t off = c * per, n = std::min(per, elems - off);
    for (PortId p = 0; p < 4; ++p) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((off + i) % 1000) + p;
      Send(p, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, total), F32Bytes(v)));
    }
    for (const auto& e : sink_.Take()) {
      if (e.port != 0) continue;
      const auto r = AsF32(e.payload);
      std::copy(r.begin(), r.end(), result.begin() + static_cast<long>(e.header.chunk_id * per));
    }
  }
  for (size_t i = 0; i < elems; ++i) {
    ASSERT_EQ(result[i], 4.0f * static_cast<float>(i % 1000) + 6.0f) << i;
  }
  EXPECT_EQ(reducer_->totals().completed_chunks, total);
}

TEST_F(ReducerTest, RatesAreMeasuredOverInjectedTimeWindows) {
  CaisConfig cfg;
  cfg.rate_window_ns = 100 * dp::kNsPerMs;
  Make(cfg);
  AddAllReduce({1, 2});
  // 10 chunks of 8 bytes from 2 ports in the first 100 ms.
  for (uint16_t c = 0; c < 10; ++c) {
    for (PortId p = 1; p <= 2; ++p) {
      Send(p, Packet(Hdr(CaisOp::kAllReduce, ReduceOp::kSum, DType::kF32, c, 10), F32Bytes({1, 2})),
           c * 10 * dp::kNsPerMs);
    }
  }
  EXPECT_EQ(reducer_->rates().reductions_per_s, 0.0);  // no full window yet
  reducer_->Advance(100 * dp::kNsPerMs, sink_);
  EXPECT_DOUBLE_EQ(reducer_->rates().reductions_per_s, 100.0);
  EXPECT_DOUBLE_EQ(reducer_->rates().reduced_bytes_per_s, 20 * 8 * 10.0);
  EXPECT_DOUBLE_EQ(reducer_->rates().packets_per_s, 200.0);
  // An idle window brings them back to zero.
  reducer_->Advance(250 * dp::kNsPerMs, sink_);
  EXPECT_EQ(reducer_->rates().reductions_per_s, 0.0);
  EXPECT_EQ(reducer_->rates().window_end_ns, 250 * dp::kNsPerMs);
}

TEST_F(ReducerTest, UpdateConfigChangesLimitsButNotMemory) {
  CaisConfig cfg;
  cfg.max_pending_chunks = 1;
  Make(cfg);
  AddAllReduce({1, 2});
  EXPECT_EQ(Send(1, OneFloatChunk(0)).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(1, OneFloatChunk(1)).reason, DropReason::kSlotsExhausted);
  cfg.max_pending_chunks = 2;
  ASSERT_TRUE(reducer_->UpdateConfig(cfg).ok());
  EXPECT_EQ(Send(1, OneFloatChunk(1)).verdict, Verdict::kAggregated);
  cfg.sram_bytes *= 2;
  const absl::Status s = reducer_->UpdateConfig(cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("sram_bytes"));
  cfg = reducer_->config();
  cfg.sram_usage_limit = 2;
  EXPECT_EQ(reducer_->UpdateConfig(cfg).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CaisConfigTest, InvalidConfigsAreRejectedWithFieldNames) {
  auto bad = [](auto mutate, std::string_view field) {
    CaisConfig c;
    mutate(c);
    auto r = CaisReducer::Create(c);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(field));
  };
  bad([](CaisConfig& c) { c.max_payload_bytes = 6; }, "max_payload_bytes");
  bad([](CaisConfig& c) { c.max_payload_bytes = 70000; }, "max_payload_bytes");
  bad([](CaisConfig& c) { c.sram_usage_limit = 0; }, "sram_usage_limit");
  bad([](CaisConfig& c) { c.sram_usage_limit = 1.5; }, "sram_usage_limit");
  bad([](CaisConfig& c) { c.sram_bytes = 100; }, "sram_bytes");
  bad([](CaisConfig& c) { c.max_pending_chunks = 0; }, "max_pending_chunks");
  bad([](CaisConfig& c) { c.timeout_ns = 0; }, "timeout_ns");
  bad([](CaisConfig& c) { c.result_hold_ns = -1; }, "result_hold_ns");
  bad([](CaisConfig& c) { c.rule_capacity = 0; }, "rule_capacity");
  bad([](CaisConfig& c) { c.rate_window_ns = 0; }, "rate_window_ns");
  EXPECT_TRUE(CaisReducer::Create(CaisConfig{}).ok());
}

}  // namespace
}  // namespace inca::cais
