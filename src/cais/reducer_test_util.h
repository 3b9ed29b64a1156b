// Test scaffolding shared by the CAIS reducer's tests: packet builders, a
// capturing sink, a scalar reference of the documented reduction semantics
// and the ReducerTest fixture (which checks conservation after every test).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "inca/cais/reducer.h"
#include "inca/util/half.h"

namespace inca::cais::testing {

using dp::DropReason;
using dp::PortId;
using dp::TimeNs;
using dp::Verdict;
using ::testing::HasSubstr;
using wire::CaisHeader;
using wire::CaisOp;
using wire::DType;
using wire::ReduceOp;
namespace flags = wire::cais_flags;

struct Emitted {
  PortId port;
  CaisHeader header;
  std::vector<uint8_t> payload;
};

struct CaptureSink final : dp::PacketSink {
  std::vector<Emitted> got;
  void Emit(PortId port, std::span<const uint8_t> bytes) override {
    wire::CaisPacketView v;
    ASSERT_EQ(wire::ParseCais(bytes, &v), wire::CaisParseError::kOk);
    got.push_back({port, v.header, std::vector<uint8_t>(v.payload.begin(), v.payload.end())});
  }
  std::vector<Emitted> Take() { return std::exchange(got, {}); }
};

inline std::vector<uint8_t> Packet(const CaisHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> p(wire::kCaisHeaderBytes + payload.size());
  CaisHeader hh = h;
  hh.payload_len = static_cast<uint32_t>(payload.size());
  wire::SerializeCaisHeader(hh, p);
  std::copy(payload.begin(), payload.end(), p.begin() + wire::kCaisHeaderBytes);
  return p;
}

inline CaisHeader Hdr(CaisOp op = CaisOp::kAllReduce, ReduceOp rop = ReduceOp::kSum,
                      DType t = DType::kF32, uint16_t chunk = 0, uint16_t total = 1,
                      uint32_t seq = 0, uint8_t group = 0, uint16_t layer = 5) {
  CaisHeader h;
  h.op = op;
  h.reduce_op = rop;
  h.dtype = t;
  h.chunk_id = chunk;
  h.total_chunks = total;
  h.seq_num = seq;
  h.group_id = group;
  h.layer_id = layer;
  return h;
}

// (An empty vector's data() may be null, which memcpy must not get.)
inline std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<float> AsF32(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// --- scalar reference of the documented semantics --------------------------
inline float Widen(DType t, const uint8_t* p) {
  uint16_t h;
  uint32_t u;
  switch (t) {
    case DType::kF16: std::memcpy(&h, p, 2); return F16ToF32(h);
    case DType::kBF16: std::memcpy(&h, p, 2); return BF16ToF32(h);
    default: std::memcpy(&u, p, 4); return std::bit_cast<float>(u);
  }
}
inline float FOp(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMax:
      return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<float>::quiet_NaN()
                                              : (a > b ? a : b);
    case ReduceOp::kMin:
      return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<float>::quiet_NaN()
                                              : (a < b ? a : b);
  }
  return 0;
}
inline uint32_t IOp(ReduceOp op, uint32_t a, uint32_t b) {
  const auto sa = static_cast<int32_t>(a), sb = static_cast<int32_t>(b);
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMax: return static_cast<uint32_t>(std::max(sa, sb));
    case ReduceOp::kMin: return static_cast<uint32_t>(std::min(sa, sb));
  }
  return 0;
}
// Reduces `inputs` in the given order, returns the wire bytes of the result.
inline std::vector<uint8_t> Reference(ReduceOp op, DType t,
                                      const std::vector<std::vector<uint8_t>>& in,
                                      const std::vector<int>& order) {
  const size_t esz = wire::ElementBytes(t);
  const size_t n = in[0].size() / esz;
  std::vector<uint8_t> out(in[0].size());
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::kI32) {
      uint32_t acc;
      std::memcpy(&acc, &in[static_cast<size_t>(order[0])][i * 4], 4);
      for (size_t k = 1; k < order.size(); ++k) {
        uint32_t x;
        std::memcpy(&x, &in[static_cast<size_t>(order[k])][i * 4], 4);
        acc = IOp(op, acc, x);
      }
      std::memcpy(&out[i * 4], &acc, 4);
    } else {
      float acc = Widen(t, &in[static_cast<size_t>(order[0])][i * esz]);
      for (size_t k = 1; k < order.size(); ++k) {
        acc = FOp(op, acc, Widen(t, &in[static_cast<size_t>(order[k])][i * esz]));
      }
      if (t == DType::kF32) {
        std::memcpy(&out[i * 4], &acc, 4);
      } else {
        const uint16_t h = t == DType::kF16 ? F32ToF16(acc) : F32ToBF16(acc);
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
  }
  return out;
}

inline std::vector<uint8_t> RandomPayload(DType t, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> fd(-4.0f, 4.0f);
  std::uniform_int_distribution<int32_t> id(std::numeric_limits<int32_t>::min(),
                                            std::numeric_limits<int32_t>::max());
  std::vector<uint8_t> b(n * wire::ElementBytes(t));
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::kI32) {
      const int32_t v = id(rng);
      std::memcpy(&b[i * 4], &v, 4);
    } else if (t == DType::kF32) {
      const float v = fd(rng);
      std::memcpy(&b[i * 4], &v, 4);
    } else {
      const float f = fd(rng);
      const uint16_t h = t == DType::kF16 ? F32ToF16(f) : F32ToBF16(f);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

inline bool NanAwareEqual(DType t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return false;
  const size_t esz = wire::ElementBytes(t);
  for (size_t i = 0; i < a.size() / esz; ++i) {
    if (t != DType::kI32) {
      const float x = Widen(t, &a[i * esz]), y = Widen(t, &b[i * esz]);
      if (std::isnan(x) && std::isnan(y)) continue;
    }
    if (std::memcmp(&a[i * esz], &b[i * esz], esz) != 0) return false;
  }
  return true;
}

class ReducerTest : public ::testing::Test {
 protected:
  void Make(CaisConfig cfg = {}) {
    auto r = CaisReducer::Create(cfg);
    ASSERT_TRUE(r.ok()) << r.status();
    reducer_ = std::move(*r);
  }
  void AddRule(Rule rule) { ASSERT_TRUE(reducer_->rules().Add(rule).ok()); }
  void AddAllReduce(PortMask ports, uint8_t group = 0, CaisOp op = CaisOp::kAllReduce) {
    AddRule(Rule{RuleKey{group, std::nullopt, std::nullopt}, ports, ports, op});
  }
  dp::Outcome Send(PortId port, const std::vector<uint8_t>& pkt, TimeNs t = 0) {
    return reducer_->Process(pkt, port, t, sink_);
  }
  void TearDown() override {
    if (reducer_) {
      EXPECT_TRUE(reducer_->counters().Conserved());
      const auto& c = reducer_->counters();
      EXPECT_EQ(reducer_->totals().dropped, c.dropped);
      for (size_t r = 0; r < dp::kDropReasonCount; ++r) {
        EXPECT_EQ(reducer_->totals().drops_by_reason[r], c.drops_by_reason[r]) << r;
      }
    }
  }
  uint64_t Drops(DropReason r) const {
    return reducer_->counters().drops_by_reason[static_cast<size_t>(r)];
  }

  std::unique_ptr<CaisReducer> reducer_;
  CaptureSink sink_;
};

}  // namespace inca::cais::testing
