#include "hostpath/host_group.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hostpath/tcp_store.h"
#include "inca/util/half.h"

namespace inca::hostpath {
namespace {

using std::chrono::milliseconds;
using wire::DType;
using wire::ReduceOp;

using wire::kDTypes;
constexpr auto& kOps = wire::kReduceOps;

std::string Name(auto value) {
  return std::string(wire::ToString(value));
}

// Runs body(group) on `world` ranks, each in its own thread with its own
// store client and HostGroup, over a fresh store server on an ephemeral
// port. A rank whose body fails early makes the others fail by timeout.
void RunRanks(int world, const std::function<void(HostGroup&)>& body,
              milliseconds timeout = milliseconds(10000)) {
  auto server = TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  static std::atomic<int> next_group{0};
  const std::string prefix = absl::StrCat("group", next_group++);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto store = TcpStore::Connect(address, milliseconds(5000));
      ASSERT_TRUE(store.ok()) << store.status();
      HostGroupOptions options;
      options.rank = r;
      options.world_size = world;
      options.store_prefix = prefix;
      options.timeout = timeout;
      auto group = HostGroup::Create(options, *store);
      ASSERT_TRUE(group.ok()) << "rank " << r << ": " << group.status();
      EXPECT_EQ((*group)->rank(), r);
      EXPECT_EQ((*group)->world_size(), world);
      body(**group);
    });
  }
  for (auto& t : threads) t.join();
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t H(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return Mix(Mix(Mix(Mix(a) ^ b) ^ c) ^ d);
}
// Uniform in [0, 1).
double Unit(uint64_t h) {
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

size_t ElemBytes(DType t) {
  return wire::ElementBytes(t);
}

// Rank r's input element i for (type, op), as wire bytes.
//  - f32 sum: multiples of 1/64 in [-64, 64]; product: +-(8+m)/8 * 2^e, so
//    every order of reduction is exact and f32 results compare exactly.
//  - f16/bf16: arbitrary values of the type in [-8, 8] (sum/max/min) or
//    +-[0.5, 2] (product).
//  - i32: arbitrary 32-bit values (sum/product wrap).
void Input(DType t, ReduceOp op, int rank, size_t i, uint8_t* out) {
  const uint64_t h =
      H(static_cast<uint64_t>(t), static_cast<uint64_t>(op), static_cast<uint64_t>(rank), i);
  const bool negative = (h & 1) != 0;
  switch (t) {
    case DType::kF32: {
      float f = 0;
      if (op == ReduceOp::kProduct) {
        const int m = static_cast<int>((h >> 8) % 8);
        const int e = static_cast<int>((h >> 16) % 7) - 3;
        f = std::ldexp(static_cast<float>(8 + m) / 8.0f, e) * (negative ? -1.0f : 1.0f);
      } else {
        f = static_cast<float>(static_cast<int>((h >> 8) % 8193) - 4096) / 64.0f;
      }
      std::memcpy(out, &f, 4);
      return;
    }
    case DType::kF16:
    case DType::kBF16: {
      float f = 0;
      if (op == ReduceOp::kProduct) {
        f = static_cast<float>(0.5 + 1.5 * Unit(h)) * (negative ? -1.0f : 1.0f);
      } else {
        f = static_cast<float>(16.0 * Unit(h) - 8.0);
      }
      const uint16_t bits = t == DType::kF16 ? F32ToF16(f) : F32ToBF16(f);
      std::memcpy(out, &bits, 2);
      return;
    }
    case DType::kI32: {
      const auto v = static_cast<uint32_t>(h >> 32);
      std::memcpy(out, &v, 4);
      return;
    }
  }
}

float Widen(DType t, const uint8_t* p) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return t == DType::kF16 ? F16ToF32(b) : BF16ToF32(b);
}

float ApplyF(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMax:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
      return std::max(a, b);
    case ReduceOp::kMin:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
      return std::min(a, b);
  }
  return 0;
}

uint32_t ApplyI(ReduceOp op, uint32_t a, uint32_t b) {
  const auto sa = std::bit_cast<int32_t>(a);
  const auto sb = std::bit_cast<int32_t>(b);
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMax: return std::bit_cast<uint32_t>(std::max(sa, sb));
    case ReduceOp::kMin: return std::bit_cast<uint32_t>(std::min(sa, sb));
  }
  return 0;
}

// Reference: widen, reduce in rank order (f32 or wrapping u32), narrow once.
void Reference(DType t, ReduceOp op, const std::vector<std::vector<uint8_t>>& inputs, size_t i,
               uint8_t* out) {
  const size_t eb = ElemBytes(t);
  if (t == DType::kI32) {
    uint32_t acc;
    std::memcpy(&acc, inputs[0].data() + i * eb, 4);
    for (size_t r = 1; r < inputs.size(); ++r) {
      uint32_t v;
      std::memcpy(&v, inputs[r].data() + i * eb, 4);
      acc = ApplyI(op, acc, v);
    }
    std::memcpy(out, &acc, 4);
    return;
  }
  float acc = Widen(t, inputs[0].data() + i * eb);
  for (size_t r = 1; r < inputs.size(); ++r)
    acc = ApplyF(op, acc, Widen(t, inputs[r].data() + i * eb));
  if (t == DType::kF32) {
    std::memcpy(out, &acc, 4);
  } else {
    const uint16_t b = t == DType::kF16 ? F32ToF16(acc) : F32ToBF16(acc);
    std::memcpy(out, &b, 2);
  }
}

// Sign-magnitude bits -> integers ordered like the values (for ulp distance).
int64_t Ordered(uint32_t bits, int width) {
  const uint32_t sign = 1u << (width - 1);
  const int64_t mag = bits & (sign - 1);
  return (bits & sign) ? -mag : mag;
}

// Compares one element. Exact for i32, f32 (exact-by-construction data) and
// max/min; within one ulp of the narrow type for f16/bf16 sum/product, where
// the f32 reduction order may differ from the reference's.
::testing::AssertionResult Matches(DType t, ReduceOp op, const uint8_t* got, const uint8_t* want) {
  const size_t eb = ElemBytes(t);
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
    const float g = Widen(t, got);
    const float w = Widen(t, want);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) && std::isnan(g)) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "got " << g << " want " << w;
    }
  }
  if (std::memcmp(got, want, eb) == 0) return ::testing::AssertionSuccess();
  const bool narrow_arith =
      (t == DType::kF16 || t == DType::kBF16) && (op == ReduceOp::kSum || op == ReduceOp::kProduct);
  if (narrow_arith) {
    uint16_t g, w;
    std::memcpy(&g, got, 2);
    std::memcpy(&w, want, 2);
    const int64_t d = Ordered(g, 16) - Ordered(w, 16);
    if (d >= -1 && d <= 1) return ::testing::AssertionSuccess();
  }
  if (t == DType::kI32) {
    int32_t g, w;
    std::memcpy(&g, got, 4);
    std::memcpy(&w, want, 4);
    return ::testing::AssertionFailure() << "got " << g << " want " << w;
  }
  return ::testing::AssertionFailure() << "got " << Widen(t, got) << " want " << Widen(t, want);
}

class HostGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(HostGroupTest, AllReduceEveryOpAndDType) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    for (DType t : kDTypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : {size_t{1}, size_t{3}, size_t{1001}}) {
          SCOPED_TRACE(absl::StrCat(Name(t), " ", Name(op), " count ", count, " rank ", g.rank()));
          const size_t eb = ElemBytes(t);
          std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(world),
                                                   std::vector<uint8_t>(count * eb));
          for (int r = 0; r < world; ++r) {
            for (size_t i = 0; i < count; ++i) {
              Input(t, op, r, i, inputs[static_cast<size_t>(r)].data() + i * eb);
            }
          }
          std::vector<uint8_t> data = inputs[static_cast<size_t>(g.rank())];
          ASSERT_TRUE(g.AllReduce(data.data(), count, t, op).ok());
          std::vector<uint8_t> want(eb);
          size_t bad = 0;
          for (size_t i = 0; i < count; ++i) {
            Reference(t, op, inputs, i, want.data());
            auto m = Matches(t, op, data.data() + i * eb, want.data());
            if (!m && ++bad <= 5) ADD_FAILURE() << "element " << i << ": " << m.message();
          }
          EXPECT_EQ(bad, 0u);
          // Every rank holds the same bits.
          std::vector<uint8_t> all(data.size() * static_cast<size_t>(world));
          ASSERT_TRUE(g.AllGather(data.data(), all.data(), data.size()).ok());
          for (int r = 0; r < world; ++r) {
            EXPECT_EQ(std::memcmp(all.data() + static_cast<size_t>(r) * data.size(), data.data(),
                                  data.size()),
                      0)
                << "rank " << r << " differs";
          }
        }
      }
    }
  });
}

TEST_P(HostGroupTest, AllReduceMaxMinPropagateNaNAndInf) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
        SCOPED_TRACE(absl::StrCat(Name(t), " ", Name(op)));
        // [0]: NaN on the last rank only. [1]: +inf on rank 0. [2]: -inf on
        // rank 1. [3]: rank-dependent finite values.
        const float vals[4] = {g.rank() == world - 1 ? nan : 1.0f, g.rank() == 0 ? inf : 2.0f,
                               g.rank() == 1 ? -inf : 3.0f, static_cast<float>(g.rank()) - 1.5f};
        const size_t eb = ElemBytes(t);
        std::vector<uint8_t> data(4 * eb);
        for (size_t i = 0; i < 4; ++i) {
          if (t == DType::kF32) {
            std::memcpy(data.data() + i * eb, &vals[i], 4);
          } else {
            const uint16_t b = t == DType::kF16 ? F32ToF16(vals[i]) : F32ToBF16(vals[i]);
            std::memcpy(data.data() + i * eb, &b, 2);
          }
        }
        ASSERT_TRUE(g.AllReduce(data.data(), 4, t, op).ok());
        EXPECT_TRUE(std::isnan(Widen(t, data.data())));
        const bool is_max = op == ReduceOp::kMax;
        EXPECT_EQ(Widen(t, data.data() + eb), is_max ? inf : 2.0f);
        EXPECT_EQ(Widen(t, data.data() + 2 * eb), is_max ? 3.0f : -inf);
        EXPECT_EQ(Widen(t, data.data() + 3 * eb),
                  is_max ? static_cast<float>(world - 1) - 1.5f : -1.5f);
      }
    }
  });
}

TEST_P(HostGroupTest, AllReduceI32Wraparound) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
    constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
    std::vector<int32_t> sum = {kMax, kMin, -1};
    ASSERT_TRUE(g.AllReduce(sum.data(), sum.size(), DType::kI32, ReduceOp::kSum).ok());
    const auto w = static_cast<uint32_t>(world);
    EXPECT_EQ(sum[0], std::bit_cast<int32_t>(static_cast<uint32_t>(kMax) * w));
    EXPECT_EQ(sum[1], std::bit_cast<int32_t>(static_cast<uint32_t>(kMin) * w));
    EXPECT_EQ(sum[2], -world);
    std::vector<int32_t> prod = {65536, -65536, kMin};
    ASSERT_TRUE(g.AllReduce(prod.data(), prod.size(), DType::kI32, ReduceOp::kProduct).ok());
    EXPECT_EQ(prod[0], 0);  // 2^(16 * world) mod 2^32, world >= 2
    EXPECT_EQ(prod[1], 0);
    EXPECT_EQ(prod[2], 0);  // (-2^31)^world mod 2^32
    std::vector<int32_t> mx = {g.rank() == 0 ? kMin : -1, g.rank() == 1 ? kMax : 0};
    ASSERT_TRUE(g.AllReduce(mx.data(), mx.size(), DType::kI32, ReduceOp::kMax).ok());
    EXPECT_EQ(mx[0], -1);
    EXPECT_EQ(mx[1], kMax);
    std::vector<int32_t> mn = {g.rank() == 0 ? kMin : -1, g.rank() == 1 ? kMax : 0};
    ASSERT_TRUE(g.AllReduce(mn.data(), mn.size(), DType::kI32, ReduceOp::kMin).ok());
    EXPECT_EQ(mn[0], kMin);
    EXPECT_EQ(mn[1], 0);
  });
}

TEST_P(HostGroupTest, AllReduceUnalignedBuffers) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    for (DType t : kDTypes) {
      SCOPED_TRACE(Name(t));
      constexpr size_t kCount = 333;
      const size_t eb = ElemBytes(t);
      std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(world),
                                               std::vector<uint8_t>(kCount * eb));
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < kCount; ++i) {
          Input(t, ReduceOp::kSum, r, i, inputs[static_cast<size_t>(r)].data() + i * eb);
        }
      }
      std::vector<uint8_t> storage(kCount * eb + 1);
      uint8_t* data = storage.data() + 1;  // odd address
      std::memcpy(data, inputs[static_cast<size_t>(g.rank())].data(), kCount * eb);
      ASSERT_TRUE(g.AllReduce(data, kCount, t, ReduceOp::kSum).ok());
      std::vector<uint8_t> want(eb);
      for (size_t i = 0; i < kCount; ++i) {
        Reference(t, ReduceOp::kSum, inputs, i, want.data());
        ASSERT_TRUE(Matches(t, ReduceOp::kSum, data + i * eb, want.data())) << "element " << i;
      }
    }
  });
}

std::vector<uint8_t> Pattern(int who, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    v[i] = static_cast<uint8_t>(H(7, static_cast<uint64_t>(who), i, bytes) & 0xff);
  }
  return v;
}

TEST_P(HostGroupTest, BroadcastFromEachRoot) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    for (size_t bytes : {size_t{1}, size_t{4097}, size_t{(1u << 20) + 3}}) {
      for (int root = 0; root < world; ++root) {
        SCOPED_TRACE(absl::StrCat("bytes ", bytes, " root ", root));
        std::vector<uint8_t> buf = Pattern(g.rank(), bytes);
        ASSERT_TRUE(g.Broadcast(buf.data(), bytes, root).ok());
        EXPECT_TRUE(buf == Pattern(root, bytes));
      }
    }
    std::vector<uint8_t> buf(4);
    EXPECT_EQ(g.Broadcast(buf.data(), 4, world).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(g.Broadcast(buf.data(), 4, -1).code(), absl::StatusCode::kInvalidArgument);
  });
}

TEST_P(HostGroupTest, AllGatherInPlaceAndSeparate) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    const auto w = static_cast<size_t>(world);
    for (size_t bytes : {size_t{1}, size_t{7}, size_t{100003}}) {
      SCOPED_TRACE(absl::StrCat("bytes ", bytes));
      // `in` aliases this rank's slot of `out`.
      std::vector<uint8_t> out(bytes * w, 0xee);
      const std::vector<uint8_t> mine = Pattern(g.rank(), bytes);
      uint8_t* slot = out.data() + static_cast<size_t>(g.rank()) * bytes;
      std::memcpy(slot, mine.data(), bytes);
      ASSERT_TRUE(g.AllGather(slot, out.data(), bytes).ok());
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(
            std::equal(out.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * bytes),
                       out.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r + 1) * bytes),
                       Pattern(r, bytes).begin()))
            << "slot " << r;
      }
      // Separate input buffer.
      std::vector<uint8_t> out2(bytes * w, 0x11);
      ASSERT_TRUE(g.AllGather(mine.data(), out2.data(), bytes).ok());
      EXPECT_TRUE(out2 == out);
    }
  });
}

TEST_P(HostGroupTest, CountZeroIsANoOp) {
  const int world = GetParam();
  RunRanks(world, [](HostGroup& g) {
    for (DType t : kDTypes) {
      EXPECT_TRUE(g.AllReduce(nullptr, 0, t, ReduceOp::kSum).ok());
    }
    EXPECT_TRUE(g.Broadcast(nullptr, 0, 0).ok());
    EXPECT_TRUE(g.AllGather(nullptr, nullptr, 0).ok());
    // The group still works afterwards (tags stayed in step).
    float x = 1.5f;
    ASSERT_TRUE(g.AllReduce(&x, 1, DType::kF32, ReduceOp::kSum).ok());
    EXPECT_EQ(x, 1.5f * static_cast<float>(g.world_size()));
    // Invalid arguments are refused without breaking the group.
    EXPECT_EQ(g.AllReduce(&x, 1, static_cast<DType>(9), ReduceOp::kSum).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(g.AllReduce(&x, 1, DType::kF32, static_cast<ReduceOp>(9)).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(g.AllReduce(nullptr, 1, DType::kF32, ReduceOp::kSum).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(g.AllReduce(&x, 1, DType::kF32, ReduceOp::kMax).ok());
  });
}

TEST_P(HostGroupTest, LargeF32AllReduce16MiB) {
  const int world = GetParam();
  RunRanks(world, [world](HostGroup& g) {
    constexpr size_t kCount = (16u << 20) / sizeof(float);
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      data[i] = static_cast<float>((i % 4096) + static_cast<size_t>(g.rank())) / 4.0f;
    }
    ASSERT_TRUE(g.AllReduce(data.data(), kCount, DType::kF32, ReduceOp::kSum).ok());
    size_t bad = 0;
    const auto w = static_cast<size_t>(world);
    for (size_t i = 0; i < kCount; ++i) {
      // sum over r of ((i % 4096) + r) / 4, exact in f32.
      const float want = static_cast<float>((i % 4096) * w + w * (w - 1) / 2) / 4.0f;
      if (data[i] != want && ++bad <= 5) ADD_FAILURE() << i << ": " << data[i] << " vs " << want;
    }
    EXPECT_EQ(bad, 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostGroupTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return absl::StrCat(param_info.param, "ranks");
                         });

TEST(HostGroupSingleRankTest, WorldSizeOneNeedsNoStore) {
  HostGroupOptions options;  // rank 0 of 1
  auto g = HostGroup::Create(options, nullptr);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<float> x = {1.0f, -2.0f};
  ASSERT_TRUE((*g)->AllReduce(x.data(), 2, DType::kF32, ReduceOp::kProduct).ok());
  EXPECT_EQ(x, (std::vector<float>{1.0f, -2.0f}));
  std::vector<uint8_t> b = {1, 2, 3};
  ASSERT_TRUE((*g)->Broadcast(b.data(), 3, 0).ok());
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 2, 3}));
  std::vector<uint8_t> out(3);
  ASSERT_TRUE((*g)->AllGather(b.data(), out.data(), 3).ok());
  EXPECT_EQ(out, b);
}

TEST(HostGroupErrorsTest, InvalidOptions) {
  HostGroupOptions options;
  options.world_size = 2;
  options.rank = 2;
  EXPECT_EQ(HostGroup::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.rank = 1;
  EXPECT_EQ(HostGroup::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs a store
  options.world_size = 0;
  options.rank = 0;
  EXPECT_EQ(HostGroup::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostGroupErrorsTest, MissingPeerTimesOutWithStatus) {
  auto server = TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok());
  auto store = TcpStore::Connect(absl::StrCat("127.0.0.1:", (*server)->port()), milliseconds(5000));
  ASSERT_TRUE(store.ok());
  HostGroupOptions options;
  options.rank = 0;
  options.world_size = 2;  // rank 1 never comes
  options.store_prefix = "lonely";
  options.timeout = milliseconds(300);
  auto g = HostGroup::Create(options, *store);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
  EXPECT_NE(g.status().message().find("create"), std::string::npos) << g.status();
}

TEST(HostGroupErrorsTest, PeerGoneMidwayGivesStatusNotCrash) {
  auto server = TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  absl::Status first = absl::UnknownError("not run");
  absl::Status second = absl::UnknownError("not run");
  std::thread survivor([&] {
    auto store = TcpStore::Connect(address, milliseconds(5000));
    ASSERT_TRUE(store.ok());
    HostGroupOptions options;
    options.rank = 0;
    options.world_size = 2;
    options.store_prefix = "midway";
    options.timeout = milliseconds(1000);
    auto g = HostGroup::Create(options, *store);
    ASSERT_TRUE(g.ok()) << g.status();
    // Create can return on one rank before the other has finished its side
    // of the handshake; rank 1 leaves only once both are connected.
    ASSERT_TRUE((*store)->Set("rank0-ready", "1").ok());
    ASSERT_TRUE((*store)->Get("rank1-gone", milliseconds(5000)).ok());
    std::vector<float> x(1000, 1.0f);
    first = (*g)->AllReduce(x.data(), x.size(), DType::kF32, ReduceOp::kSum);
    second = (*g)->AllReduce(x.data(), x.size(), DType::kF32, ReduceOp::kSum);
  });
  {
    auto store = TcpStore::Connect(address, milliseconds(5000));
    ASSERT_TRUE(store.ok());
    HostGroupOptions options;
    options.rank = 1;
    options.world_size = 2;
    options.store_prefix = "midway";
    options.timeout = milliseconds(1000);
    auto g = HostGroup::Create(options, *store);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE((*store)->Get("rank0-ready", milliseconds(5000)).ok());
    g->reset();
    ASSERT_TRUE((*store)->Set("rank1-gone", "1").ok());
  }
  survivor.join();
  EXPECT_FALSE(first.ok());
  EXPECT_TRUE(first.code() == absl::StatusCode::kUnavailable ||
              first.code() == absl::StatusCode::kInternal)
      << first;
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
}

}  // namespace
}  // namespace inca::hostpath
