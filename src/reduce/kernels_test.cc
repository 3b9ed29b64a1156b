#include "reduce/kernels.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inca/util/half.h"
#include "util/byte_order.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace inca::reduce {
namespace {

// What the dispatcher picked on its own, before any test forced an ISA
// (g_active is constant-initialised, so this is safe during static init).
const Isa kInitialIsa = ActiveIsa();

using wire::kDTypes;
constexpr auto& kOps = wire::kReduceOps;
constexpr size_t kLengths[] = {0, 1, 7, 8, 9, 31, 33, 1000, 2238, 4477};
constexpr uint8_t kCanary = 0xa5;

const char* Name(Isa isa) {
  return isa == Isa::kAvx2 ? "avx2" : "portable";
}
std::string Name(ReduceOp op) {
  return std::string(wire::ToString(op));
}
std::string Name(DType t) {
  return std::string(wire::ToString(t));
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> v = {Isa::kPortable};
  if (IsaSupported(Isa::kAvx2)) v.push_back(Isa::kAvx2);
  return v;
}

// Restores automatic selection's result after a test forces an ISA.
class ReduceKernelsTest : public ::testing::Test {
 protected:
  void TearDown() override { ForceIsa(kInitialIsa); }
};

float F(uint32_t b) {
  return std::bit_cast<float>(b);
}
uint32_t U(float f) {
  return std::bit_cast<uint32_t>(f);
}

using util::LoadLe16;
using util::LoadLe32;
using util::StoreLe16;
using util::StoreLe32;

bool IsNanBits(DType t, uint32_t wire) {
  switch (t) {
    case DType::kF32: return (wire & 0x7fffffffu) > 0x7f800000u;
    case DType::kF16: return (wire & 0x7fffu) > 0x7c00u;
    case DType::kBF16: return (wire & 0x7fffu) > 0x7f80u;
    case DType::kI32: return false;
  }
  return false;
}

// ---- Straightforward scalar reference -------------------------------------

uint32_t RefWiden(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kF32: return LoadLe32(p);
    case DType::kF16: return U(F16ToF32(LoadLe16(p)));
    case DType::kBF16: return U(BF16ToF32(LoadLe16(p)));
    case DType::kI32: return LoadLe32(p);
  }
  return 0;
}

// Returns the new accumulator bits. Sets *ambiguous when both operands of a
// float sum/product are NaN: IEEE-754 leaves open which payload survives (and
// compilers may commute the operands), so only NaN-ness is compared then.
uint32_t RefApply(ReduceOp op, DType t, uint32_t a, uint32_t b, bool* ambiguous) {
  if (t == DType::kI32) {
    const auto sa = static_cast<int32_t>(a);
    const auto sb = static_cast<int32_t>(b);
    switch (op) {
      case ReduceOp::kSum: return static_cast<uint32_t>(int64_t{sa} + int64_t{sb});
      case ReduceOp::kMax: return sa > sb ? a : b;
      case ReduceOp::kMin: return sa < sb ? a : b;
      case ReduceOp::kProduct: return static_cast<uint32_t>(uint64_t{a} * uint64_t{b});
    }
    return 0;
  }
  const float fa = F(a);
  const float fb = F(b);
  switch (op) {
    case ReduceOp::kSum:
      if (std::isnan(fa) && std::isnan(fb)) *ambiguous = true;
      return U(fa + fb);
    case ReduceOp::kProduct:
      if (std::isnan(fa) && std::isnan(fb)) *ambiguous = true;
      return U(fa * fb);
    case ReduceOp::kMax:
      if (std::isnan(fa)) return a;
      if (std::isnan(fb)) return b;
      return fa > fb ? a : b;
    case ReduceOp::kMin:
      if (std::isnan(fa)) return a;
      if (std::isnan(fb)) return b;
      return fa < fb ? a : b;
  }
  return 0;
}

uint32_t RefNarrow(DType t, uint32_t acc) {
  switch (t) {
    case DType::kF32: return acc;
    case DType::kF16: return F32ToF16(F(acc));
    case DType::kBF16: return F32ToBF16(F(acc));
    case DType::kI32: return acc;
  }
  return 0;
}

// ---- Test data -------------------------------------------------------------

uint32_t RandomF32Bits(std::mt19937& rng) {
  static constexpr uint32_t kSpecials[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
      0x7f800001u, 0x7fa12345u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu,
      0x3f800000u, 0xbf800000u, 0x477ff000u, 0x3f808000u, 0x33000000u, 0x38800000u};
  const uint32_t kind = static_cast<uint32_t>(rng() % 10);
  if (kind == 0) return kSpecials[rng() % std::size(kSpecials)];
  if (kind <= 2) return static_cast<uint32_t>(rng());  // any bit pattern
  // A "typical" value: random sign/mantissa, exponent near 1 (so products
  // and sums stay in range and rounding matters).
  const uint32_t exp = 120u + static_cast<uint32_t>(rng() % 16u);
  return (static_cast<uint32_t>(rng()) & 0x807fffffu) | (exp << 23);
}

// n random wire elements of type t.
std::vector<uint8_t> RandomWire(DType t, size_t n, std::mt19937& rng) {
  const size_t eb = wire::ElementBytes(t);
  std::vector<uint8_t> v(n * eb);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = v.data() + i * eb;
    switch (t) {
      case DType::kF32: StoreLe32(p, RandomF32Bits(rng)); break;
      case DType::kF16:
        if (rng() % 4 == 0) {
          StoreLe16(p, static_cast<uint16_t>(rng()));  // any pattern, NaNs included
        } else {
          StoreLe16(p, F32ToF16(F(RandomF32Bits(rng))));
        }
        break;
      case DType::kBF16: StoreLe16(p, static_cast<uint16_t>(RandomF32Bits(rng) >> 16)); break;
      case DType::kI32: {
        uint32_t x = static_cast<uint32_t>(rng());
        // Plenty of values near the limits so sums/products overflow.
        if (rng() % 4 == 0)
          x = (rng() % 2 == 0) ? 0x7fffffffu - (x & 0xff) : 0x80000000u + (x & 0xff);
        StoreLe32(p, x);
        break;
      }
    }
  }
  return v;
}

// A buffer whose payload starts `offset` bytes past a canary prefix and is
// followed by canary bytes, to catch misalignment bugs and overruns.
struct Guarded {
  std::vector<uint8_t> storage;
  size_t offset;
  size_t size;
  Guarded(size_t n, size_t off) : storage(n + off + 64, kCanary), offset(off), size(n) {}
  uint8_t* data() { return storage.data() + offset; }
  bool CanariesIntact() const {
    for (size_t i = 0; i < storage.size(); ++i) {
      if ((i < offset || i >= offset + size) && storage[i] != kCanary) return false;
    }
    return true;
  }
};

// Accumulator storage: 4-byte aligned but (with offset_elems 1..7) not
// 32-byte aligned, with canaries after the end.
struct GuardedAcc {
  std::vector<uint32_t> storage;
  size_t offset;
  size_t n;
  GuardedAcc(size_t count, size_t offset_elems)
      : storage(count + offset_elems + 16, 0xa5a5a5a5u), offset(offset_elems), n(count) {}
  void* data() { return storage.data() + offset; }
  uint32_t at(size_t i) const { return storage[offset + i]; }
  bool CanariesIntact() const {
    for (size_t i = 0; i < storage.size(); ++i) {
      if ((i < offset || i >= offset + n) && storage[i] != 0xa5a5a5a5u) return false;
    }
    return true;
  }
};

// Runs LoadAcc, three ReduceInto calls and StoreAcc with the active ISA and
// checks each step against the reference.
void CheckAgainstReference(ReduceOp op, DType t, size_t n, size_t src_off, size_t dst_off,
                           uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t eb = wire::ElementBytes(t);
  const std::string what = std::string(Name(ActiveIsa())) + " " + Name(op) + " " + Name(t) +
                           " n=" + std::to_string(n) + " src_off=" + std::to_string(src_off) +
                           " dst_off=" + std::to_string(dst_off);
  GuardedAcc acc(n, 1 + src_off);
  std::vector<uint32_t> ref(n);
  std::vector<bool> fuzzy(n, false);

  for (int step = 0; step < 4; ++step) {
    const std::vector<uint8_t> data = RandomWire(t, n, rng);
    Guarded src(n * eb, src_off);
    if (n != 0) std::memcpy(src.data(), data.data(), data.size());
    if (step == 0) {
      LoadAcc(t, src.data(), n, acc.data());
      for (size_t i = 0; i < n; ++i) ref[i] = RefWiden(t, data.data() + i * eb);
    } else {
      ReduceInto(op, t, acc.data(), src.data(), n);
      for (size_t i = 0; i < n; ++i) {
        bool amb = false;
        ref[i] = RefApply(op, t, ref[i], RefWiden(t, data.data() + i * eb), &amb);
        if (amb) fuzzy[i] = true;
      }
    }
    EXPECT_TRUE(src.CanariesIntact()) << what;
    EXPECT_TRUE(acc.CanariesIntact()) << what << " step " << step;
    for (size_t i = 0; i < n; ++i) {
      if (fuzzy[i]) {
        ASSERT_TRUE(std::isnan(F(acc.at(i))) && std::isnan(F(ref[i])))
            << what << " step " << step << " i=" << i;
      } else {
        ASSERT_EQ(acc.at(i), ref[i]) << what << " step " << step << " i=" << i << std::hex
                                     << " got 0x" << acc.at(i) << " want 0x" << ref[i];
      }
    }
  }

  Guarded dst(n * eb, dst_off);
  StoreAcc(t, acc.data(), n, dst.data());
  EXPECT_TRUE(dst.CanariesIntact()) << what;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = dst.data() + i * eb;
    const uint32_t got = eb == 4 ? LoadLe32(p) : LoadLe16(p);
    const uint32_t want = RefNarrow(t, ref[i]);
    if (fuzzy[i]) {
      EXPECT_TRUE(IsNanBits(t, got) && IsNanBits(t, want)) << what << " store i=" << i;
    } else {
      ASSERT_EQ(got, want) << what << " store i=" << i << std::hex << " acc 0x" << ref[i];
    }
  }
}

// ---- Tests -----------------------------------------------------------------

TEST_F(ReduceKernelsTest, DispatchAndForceIsa) {
  EXPECT_TRUE(IsaSupported(Isa::kPortable));
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool cpu_avx2 = __builtin_cpu_supports("avx2") != 0 && f16c;
  EXPECT_EQ(IsaSupported(Isa::kAvx2), cpu_avx2);
#else
  EXPECT_FALSE(IsaSupported(Isa::kAvx2));
#endif
  // Left alone, the dispatcher picks the best supported ISA.
  EXPECT_EQ(kInitialIsa, IsaSupported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kPortable);

  ASSERT_TRUE(ForceIsa(Isa::kPortable));
  EXPECT_EQ(ActiveIsa(), Isa::kPortable);
  if (IsaSupported(Isa::kAvx2)) {
    ASSERT_TRUE(ForceIsa(Isa::kAvx2));
    EXPECT_EQ(ActiveIsa(), Isa::kAvx2);
  } else {
    EXPECT_FALSE(ForceIsa(Isa::kAvx2));
    EXPECT_EQ(ActiveIsa(), Isa::kPortable);  // unchanged
  }
  const Isa before = ActiveIsa();
  EXPECT_FALSE(ForceIsa(static_cast<Isa>(7)));
  EXPECT_EQ(ActiveIsa(), before);
}

TEST_F(ReduceKernelsTest, MatchesScalarReference) {
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    uint32_t seed = 1;
    for (ReduceOp op : kOps) {
      for (DType t : kDTypes) {
        for (size_t n : kLengths) {
          for (size_t off = 0; off < 4; ++off) {
            CheckAgainstReference(op, t, n, off, (off + 1) % 4, seed++);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST_F(ReduceKernelsTest, PortableAndAvx2AreBitwiseIdentical) {
  if (!IsaSupported(Isa::kAvx2)) {
    // Nothing to compare with; the portable path is still pinned down by
    // MatchesScalarReference. Check the refusal is clean.
    EXPECT_FALSE(ForceIsa(Isa::kAvx2));
    EXPECT_EQ(ActiveIsa(), Isa::kPortable);
    return;
  }
  for (ReduceOp op : kOps) {
    for (DType t : kDTypes) {
      for (size_t n : kLengths) {
        const uint32_t seed = 1000u + static_cast<uint32_t>(n) * 16u +
                              static_cast<uint32_t>(op) * 4u + static_cast<uint32_t>(t);
        // Each run applies the same data (same seed) under one ISA.
        auto run = [&](Isa isa) {
          EXPECT_TRUE(ForceIsa(isa));
          std::mt19937 rng(seed);
          std::vector<uint32_t> acc(n + 1);
          std::vector<uint8_t> src = RandomWire(t, n, rng);
          LoadAcc(t, src.data(), n, acc.data() + 1);
          for (int step = 0; step < 3; ++step) {
            src = RandomWire(t, n, rng);
            // No NaN meets NaN in sum/product: then IEEE fixes the result bits.
            if (op == ReduceOp::kSum || op == ReduceOp::kProduct) {
              const size_t eb = wire::ElementBytes(t);
              for (size_t i = 0; i < n; ++i) {
                uint8_t* p = src.data() + i * eb;
                if (IsNanBits(t, eb == 4 ? LoadLe32(p) : LoadLe16(p)) &&
                    std::isnan(F(acc[i + 1]))) {
                  std::memset(p, 0, eb);
                }
              }
            }
            ReduceInto(op, t, acc.data() + 1, src.data(), n);
          }
          std::vector<uint8_t> out(n * wire::ElementBytes(t) + 3);
          StoreAcc(t, acc.data() + 1, n, out.data() + 3);
          acc.insert(acc.end(), out.begin(), out.end());  // compare both at once
          return acc;
        };
        const std::vector<uint32_t> portable = run(Isa::kPortable);
        const std::vector<uint32_t> avx2 = run(Isa::kAvx2);
        ASSERT_EQ(portable, avx2) << Name(op) << " " << Name(t) << " n=" << n;
      }
    }
  }
}

// Special float values for max/min, in every float dtype, at positions that
// hit both the vector body and the tail.
TEST_F(ReduceKernelsTest, MaxMinNanInfSignedZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    float a, b;  // accumulator, incoming
    float max, min;
  };
  const Case cases[] = {
      {1.0f, nan, nan, nan},       {nan, 1.0f, nan, nan},        {-nan, 2.0f, -nan, -nan},
      {nan, nan, nan, nan},        {inf, nan, nan, nan},         {nan, -inf, nan, nan},
      {-inf, 5.0f, 5.0f, -inf},    {inf, -inf, inf, -inf},       {-inf, inf, inf, -inf},
      {0.0f, -0.0f, -0.0f, -0.0f}, {-0.0f, 0.0f, 0.0f, 0.0f},    {-0.0f, -0.0f, -0.0f, -0.0f},
      {1.0f, 2.0f, 2.0f, 1.0f},    {-1.0f, -2.0f, -1.0f, -2.0f}, {inf, inf, inf, inf},
      {-3.0f, 0.0f, 0.0f, -3.0f},
  };
  constexpr size_t kN = 37;  // 32 in the body, 5 in the tail
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      const size_t eb = wire::ElementBytes(t);
      auto encode = [&](float f, uint8_t* p) {
        if (t == DType::kF32) StoreLe32(p, U(f));
        if (t == DType::kF16) StoreLe16(p, F32ToF16(f));
        if (t == DType::kBF16) StoreLe16(p, F32ToBF16(f));
      };
      auto decode = [&](const uint8_t* p) {
        return t == DType::kF32   ? F(LoadLe32(p))
               : t == DType::kF16 ? F16ToF32(LoadLe16(p))
                                  : BF16ToF32(LoadLe16(p));
      };
      for (size_t shift = 0; shift < std::size(cases); ++shift) {
        std::vector<uint8_t> a_wire(kN * eb), b_wire(kN * eb + 1);
        for (size_t i = 0; i < kN; ++i) {
          const Case& c = cases[(i + shift) % std::size(cases)];
          encode(c.a, a_wire.data() + i * eb);
          encode(c.b, b_wire.data() + 1 + i * eb);
        }
        for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
          std::vector<float> acc(kN);
          LoadAcc(t, a_wire.data(), kN, acc.data());
          ReduceInto(op, t, acc.data(), b_wire.data() + 1, kN);
          std::vector<uint8_t> out(kN * eb);
          StoreAcc(t, acc.data(), kN, out.data());
          for (size_t i = 0; i < kN; ++i) {
            const Case& c = cases[(i + shift) % std::size(cases)];
            const float want = op == ReduceOp::kMax ? c.max : c.min;
            const float got = decode(out.data() + i * eb);
            const std::string what = std::string(Name(isa)) + " " + Name(op) + " " + Name(t) +
                                     " a=" + std::to_string(c.a) + " b=" + std::to_string(c.b);
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(got)) << what;
              ASSERT_EQ(std::signbit(got), std::signbit(want)) << what;
            } else {
              ASSERT_EQ(U(got), U(want)) << what << " got " << got;
            }
          }
        }
      }
    }
  }
}

TEST_F(ReduceKernelsTest, I32WrapsAndComparesSigned) {
  struct Case {
    uint32_t a, b, sum, max, min, product;
  };
  const Case cases[] = {
      {0x7fffffffu, 1u, 0x80000000u, 0x7fffffffu, 1u, 0x7fffffffu},
      {0x80000000u, 0xffffffffu, 0x7fffffffu, 0xffffffffu, 0x80000000u, 0x80000000u},
      {0x00010000u, 0x00010000u, 0x00020000u, 0x00010000u, 0x00010000u, 0u},
      {0x7fffffffu, 2u, 0x80000001u, 0x7fffffffu, 2u, 0xfffffffeu},
      {0xffffffffu, 1u, 0u, 1u, 0xffffffffu, 0xffffffffu},
      {0x80000000u, 0x80000000u, 0u, 0x80000000u, 0x80000000u, 0u},
      {0x12345678u, 0x9abcdef0u, 0xacf13568u, 0x12345678u, 0x9abcdef0u, 0x242d2080u},
  };
  constexpr size_t kN = 45;
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    for (ReduceOp op : kOps) {
      std::vector<uint8_t> a_wire(kN * 4), b_wire(kN * 4 + 3);
      for (size_t i = 0; i < kN; ++i) {
        StoreLe32(a_wire.data() + 4 * i, cases[i % std::size(cases)].a);
        StoreLe32(b_wire.data() + 3 + 4 * i, cases[i % std::size(cases)].b);
      }
      std::vector<uint32_t> acc(kN);
      LoadAcc(DType::kI32, a_wire.data(), kN, acc.data());
      ReduceInto(op, DType::kI32, acc.data(), b_wire.data() + 3, kN);
      for (size_t i = 0; i < kN; ++i) {
        const Case& c = cases[i % std::size(cases)];
        const uint32_t want = op == ReduceOp::kSum   ? c.sum
                              : op == ReduceOp::kMax ? c.max
                              : op == ReduceOp::kMin ? c.min
                                                     : c.product;
        ASSERT_EQ(acc[i], want) << Name(isa) << " " << Name(op) << std::hex << " a=" << c.a
                                << " b=" << c.b;
      }
    }
  }
}

// Exhaustive widening of every f16/bf16 pattern, and RNE narrowing of
// edge (halfway) and random floats, against inca/util/half.h.
TEST_F(ReduceKernelsTest, HalfConversionsMatchHalfLibrary) {
  std::vector<uint8_t> all(65536 * 2 + 1);
  for (uint32_t i = 0; i < 65536; ++i) StoreLe16(all.data() + 1 + 2 * i, static_cast<uint16_t>(i));

  std::vector<float> floats;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (uint32_t s : {0u, 0x8000u}) {
      const double lo = F16ToF32(static_cast<uint16_t>(h | s));
      const double hi = F16ToF32(static_cast<uint16_t>((h + 1) | s));
      const auto mid = static_cast<float>((lo + hi) / 2);
      floats.insert(floats.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid)});
    }
  }
  for (uint32_t b = 0; b < 65536; ++b) {
    floats.push_back(F((b << 16) | 0x8000u));  // bf16 ties
    floats.push_back(F((b << 16) | 0x8001u));
    floats.push_back(F((b << 16) | 0x7fffu));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) floats.push_back(F(RandomF32Bits(rng)));

  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    for (DType t : {DType::kF16, DType::kBF16}) {
      std::vector<uint32_t> acc(65536);
      LoadAcc(t, all.data() + 1, 65536, acc.data());
      for (uint32_t i = 0; i < 65536; ++i) {
        const auto h = static_cast<uint16_t>(i);
        const float want = t == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
        ASSERT_EQ(acc[i], U(want)) << Name(isa) << " " << Name(t) << std::hex << " 0x" << i;
      }
      std::vector<uint8_t> out(floats.size() * 2 + 2);
      StoreAcc(t, floats.data(), floats.size(), out.data() + 2);
      for (size_t i = 0; i < floats.size(); ++i) {
        const uint16_t want = t == DType::kF16 ? F32ToF16(floats[i]) : F32ToBF16(floats[i]);
        ASSERT_EQ(LoadLe16(out.data() + 2 + 2 * i), want)
            << Name(isa) << " " << Name(t) << std::hex << " f=0x" << U(floats[i]);
      }
    }
  }
}

TEST_F(ReduceKernelsTest, StoreRoundsToNearestEven) {
  // Accumulated f16 sums land between representable values and must round
  // to even: 1 + 2^-11 -> 1.0; 1 + 3*2^-11 -> 1 + 2^-9; 65520 -> inf.
  const float acc_vals[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f,          65519.0f,
                            0x1p-25f,        3 * 0x1p-25f,        -(2.0f - 0x1p-11f)};
  const uint16_t f16_want[] = {0x3c00, 0x3c02, 0x7c00, 0x7bff, 0x0000, 0x0002, 0xc000};
  // bf16: 1 + 2^-8 -> 1.0; 1 + 3*2^-8 -> 1 + 2^-6; FLT_MAX -> inf.
  const float bf_vals[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, std::numeric_limits<float>::max(),
                           -(1.0f + 0x1p-8f + 0x1p-20f)};
  const uint16_t bf16_want[] = {0x3f80, 0x3f82, 0x7f80, 0xbf81};
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    // Repeat so the values are in both the vector body and the tail.
    for (size_t reps : {1u, 5u}) {
      std::vector<float> acc;
      std::vector<uint16_t> want;
      for (size_t r = 0; r < reps; ++r) {
        acc.insert(acc.end(), std::begin(acc_vals), std::end(acc_vals));
        want.insert(want.end(), std::begin(f16_want), std::end(f16_want));
      }
      std::vector<uint8_t> out(acc.size() * 2);
      StoreAcc(DType::kF16, acc.data(), acc.size(), out.data());
      for (size_t i = 0; i < acc.size(); ++i) {
        EXPECT_EQ(LoadLe16(out.data() + 2 * i), want[i]) << Name(isa) << " f16 " << acc[i];
      }
      acc.clear();
      want.clear();
      for (size_t r = 0; r < reps; ++r) {
        acc.insert(acc.end(), std::begin(bf_vals), std::end(bf_vals));
        want.insert(want.end(), std::begin(bf16_want), std::end(bf16_want));
      }
      out.assign(acc.size() * 2, 0);
      StoreAcc(DType::kBF16, acc.data(), acc.size(), out.data());
      for (size_t i = 0; i < acc.size(); ++i) {
        EXPECT_EQ(LoadLe16(out.data() + 2 * i), want[i]) << Name(isa) << " bf16 " << acc[i];
      }
    }
  }
}

TEST_F(ReduceKernelsTest, F16SumAccumulatesInF32) {
  // 2048 + 1 + 1 is 2050 in f32 but 2048 if rounded to f16 at each step.
  const uint16_t big = F32ToF16(2048.0f);
  const uint16_t one = F32ToF16(1.0f);
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    std::vector<uint8_t> a(2 * 11), b(2 * 11);
    for (size_t i = 0; i < 11; ++i) {
      StoreLe16(a.data() + 2 * i, big);
      StoreLe16(b.data() + 2 * i, one);
    }
    std::vector<float> acc(11);
    LoadAcc(DType::kF16, a.data(), 11, acc.data());
    ReduceInto(ReduceOp::kSum, DType::kF16, acc.data(), b.data(), 11);
    ReduceInto(ReduceOp::kSum, DType::kF16, acc.data(), b.data(), 11);
    std::vector<uint8_t> out(2 * 11);
    StoreAcc(DType::kF16, acc.data(), 11, out.data());
    for (size_t i = 0; i < 11; ++i) {
      EXPECT_EQ(acc[i], 2050.0f) << Name(isa);
      EXPECT_EQ(LoadLe16(out.data() + 2 * i), F32ToF16(2050.0f)) << Name(isa);
    }
  }
}

TEST_F(ReduceKernelsTest, InvalidEnumsAndEmptyAreNoOps) {
  for (Isa isa : SupportedIsas()) {
    ASSERT_TRUE(ForceIsa(isa));
    uint32_t acc[4] = {1, 2, 3, 4};
    uint8_t src[16] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    ReduceInto(static_cast<ReduceOp>(9), DType::kI32, acc, src, 4);
    ReduceInto(ReduceOp::kSum, static_cast<DType>(9), acc, src, 4);
    LoadAcc(static_cast<DType>(9), src, 4, acc);
    ReduceInto(ReduceOp::kSum, DType::kI32, acc, src, 0);
    EXPECT_EQ(acc[0], 1u);
    EXPECT_EQ(acc[3], 4u);
    StoreAcc(static_cast<DType>(9), acc, 4, src);
    StoreAcc(DType::kI32, acc, 0, src);
    EXPECT_EQ(src[0], 9);
    // Null pointers are fine when there is nothing to do.
    LoadAcc(DType::kF32, nullptr, 0, nullptr);
    ReduceInto(ReduceOp::kSum, DType::kF32, nullptr, nullptr, 0);
    StoreAcc(DType::kF32, nullptr, 0, nullptr);
  }
}

}  // namespace
}  // namespace inca::reduce
