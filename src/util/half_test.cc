#include "inca/util/half.h"

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define INCA_HALF_TEST_X86 1
#else
#define INCA_HALF_TEST_X86 0
#endif

namespace inca {
namespace {

float Bits(uint32_t b) {
  return std::bit_cast<float>(b);
}
uint32_t Bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

bool IsF16Nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
}
bool IsBF16Nan(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0;
}

// Reference narrowing of a float to a binary format with `ebits` exponent and
// `mbits` fraction bits, computed in double arithmetic (exact, since every
// float scaled by a power of two is a double) and rounded with nearbyint in
// the default round-to-nearest-even mode. NaN: quiet, sign and top payload
// bits kept (the documented contract).
uint16_t RefNarrow(float f, int ebits, int mbits) {
  const uint32_t fb = Bits(f);
  const uint32_t sign = (fb >> 31) << (ebits + mbits);
  const uint32_t inf = ((1u << ebits) - 1u) << mbits;
  if (std::isnan(f)) {
    const uint32_t payload = (fb & 0x7fffffu) >> (23 - mbits);
    return static_cast<uint16_t>(sign | inf | payload | (1u << (mbits - 1)));
  }
  if (std::isinf(f)) return static_cast<uint16_t>(sign | inf);
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  const double a = std::fabs(static_cast<double>(f));
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int ue = e - 1;
  if (a == 0.0 || ue < emin) ue = emin;
  const double q = std::nearbyint(a / std::ldexp(1.0, ue - mbits));
  // Normal: ((ue + bias) << mbits) + (q - 2^mbits); with ue == emin the same
  // formula gives the subnormal encoding q (and q == 2^mbits -> min normal).
  const double enc = std::ldexp(static_cast<double>(ue + bias), mbits) + q - std::ldexp(1.0, mbits);
  uint32_t bits = static_cast<uint32_t>(enc);
  if (bits >= inf) bits = inf;
  return static_cast<uint16_t>(sign | bits);
}
uint16_t RefF32ToF16(float f) {
  return RefNarrow(f, 5, 10);
}
uint16_t RefF32ToBF16(float f) {
  return RefNarrow(f, 8, 7);
}

// Exact value of a half as a double.
double RefF16Value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double s = (h & 0x8000u) != 0 ? -1.0 : 1.0;
  if (exp == 0x1f) {
    return mant == 0 ? s * std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::quiet_NaN();
  }
  if (exp == 0) return s * std::ldexp(mant, -24);
  return s * std::ldexp(1024 + mant, exp - 25);
}

// Floats that exercise rounding: every half, the exact midpoints between
// neighbouring halves and the floats either side of them, plus specials.
std::vector<float> EdgeFloats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    for (uint32_t s : {0u, 0x8000u}) {
      const float lo = F16ToF32(static_cast<uint16_t>(h | s));
      const float hi = F16ToF32(static_cast<uint16_t>((h + 1) | s));
      const float mid =
          static_cast<float>((static_cast<double>(lo) + static_cast<double>(hi)) / 2.0);
      v.push_back(lo);
      v.push_back(mid);
      v.push_back(std::nextafter(mid, 0.0f));
      v.push_back(std::nextafter(mid, 2.0f * mid));
    }
  }
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x33000000u,
                     0x33000001u, 0x32ffffffu, 0x337fffffu, 0x477fefffu, 0x477ff000u, 0x477fefffu,
                     0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xff800001u,
                     0x7fc00000u, 0xffc00000u, 0x7fa00000u, 0x7f812345u, 0x7fffffffu, 0xffffffffu,
                     0x7f802000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u}) {
    v.push_back(Bits(b));
  }
  return v;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v;
  v.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // Half the samples are any bit pattern; half lie in or near the half
    // range (exponent 100..145) where the interesting rounding happens.
    uint32_t b = static_cast<uint32_t>(rng());
    if ((i & 1) != 0) {
      const uint32_t exp = 100u + static_cast<uint32_t>(rng() % 46u);
      b = (b & 0x807fffffu) | (exp << 23);
    }
    v.push_back(Bits(b));
  }
  return v;
}

TEST(Half, F16ToF32IsExactForAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = F16ToF32(h);
    if (IsF16Nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      // Quiet, sign and payload kept (as VCVTPH2PS does).
      ASSERT_EQ(Bits(f), ((i & 0x8000u) << 16) | 0x7fc00000u | ((i & 0x3ffu) << 13))
          << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), RefF16Value(h)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (i & 0x8000u) != 0) << std::hex << i;
    }
  }
}

TEST(Half, F16RoundTripsAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const uint16_t back = F32ToF16(F16ToF32(h));
    if (IsF16Nan(h)) {
      ASSERT_TRUE(IsF16Nan(back)) << std::hex << i;
      ASSERT_EQ(back, h | 0x0200u) << std::hex << i;  // quieted, sign+payload kept
    } else {
      ASSERT_EQ(back, h) << std::hex << i;
    }
  }
}

TEST(Half, F16TiesToEven) {
  // Between 1.0 (0x3c00) and 1 + 2^-10 (0x3c01): the tie goes to even 0x3c00.
  EXPECT_EQ(F32ToF16(1.0f + 0x1p-11f), 0x3c00u);
  EXPECT_EQ(F32ToF16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01u);
  EXPECT_EQ(F32ToF16(std::nextafter(1.0f + 0x1p-11f, 0.0f)), 0x3c00u);
  // Between 0x3c01 and 0x3c02: tie goes up to even 0x3c02.
  EXPECT_EQ(F32ToF16(1.0f + 3 * 0x1p-11f), 0x3c02u);
  EXPECT_EQ(F32ToF16(-(1.0f + 3 * 0x1p-11f)), 0xbc02u);
  // A tie that carries into the exponent: 2 - 2^-11 -> 2.0.
  EXPECT_EQ(F32ToF16(2.0f - 0x1p-11f), 0x4000u);
  // Subnormal ties: 2^-25 (half the smallest subnormal) -> 0; 3 * 2^-25 -> 2.
  EXPECT_EQ(F32ToF16(0x1p-25f), 0x0000u);
  EXPECT_EQ(F32ToF16(-0x1p-25f), 0x8000u);
  EXPECT_EQ(F32ToF16(std::nextafter(0x1p-25f, 1.0f)), 0x0001u);
  EXPECT_EQ(F32ToF16(3 * 0x1p-25f), 0x0002u);
  EXPECT_EQ(F32ToF16(5 * 0x1p-25f), 0x0002u);
  // Largest subnormal + half an ulp ties to the even smallest normal.
  EXPECT_EQ(F32ToF16(1023.5f * 0x1p-24f), 0x0400u);
  EXPECT_EQ(F32ToF16(1022.5f * 0x1p-24f), 0x03feu);
}

TEST(Half, F16Overflow) {
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bffu);
  EXPECT_EQ(F32ToF16(-65504.0f), 0xfbffu);
  EXPECT_EQ(F32ToF16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00u);  // tie to even rounds up to inf
  EXPECT_EQ(F32ToF16(-65520.0f), 0xfc00u);
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00u);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::max()), 0x7c00u);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::max()), 0xfc00u);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xfc00u);
}

TEST(Half, F16Subnormals) {
  for (uint32_t m = 1; m < 1024; ++m) {
    const float f = std::ldexp(static_cast<float>(m), -24);
    EXPECT_EQ(F32ToF16(f), m);
    EXPECT_EQ(F32ToF16(-f), 0x8000u | m);
    EXPECT_EQ(F16ToF32(static_cast<uint16_t>(m)), f);
  }
  // Float subnormals and tiny normals flush to signed zero by rounding.
  EXPECT_EQ(F32ToF16(Bits(0x00000001u)), 0x0000u);
  EXPECT_EQ(F32ToF16(Bits(0x80000001u)), 0x8000u);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::min()), 0x0000u);
  EXPECT_EQ(F32ToF16(0.0f), 0x0000u);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000u);
  EXPECT_EQ(F32ToF16(0x1p-14f), 0x0400u);  // smallest normal
}

TEST(Half, F16Nan) {
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::quiet_NaN()), 0x7e00u);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::quiet_NaN()), 0xfe00u);
  // Signalling NaN whose payload lies only in the dropped low bits: still NaN.
  EXPECT_EQ(F32ToF16(Bits(0x7f800001u)), 0x7e00u);
  EXPECT_EQ(F32ToF16(Bits(0xff800001u)), 0xfe00u);
  EXPECT_EQ(F32ToF16(Bits(0x7fa00000u)), 0x7f00u);
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01u)));
  EXPECT_TRUE(std::isnan(F16ToF32(0xfe00u)));
  EXPECT_TRUE(std::signbit(F16ToF32(0xfe00u)));
}

TEST(Half, F32ToF16MatchesDoubleReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float f : EdgeFloats()) {
    ASSERT_EQ(F32ToF16(f), RefF32ToF16(f)) << std::hex << Bits(f);
  }
  for (float f : RandomFloats(1u << 20, 1234)) {
    ASSERT_EQ(F32ToF16(f), RefF32ToF16(f)) << std::hex << Bits(f);
  }
}

#if INCA_HALF_TEST_X86
// (Not _cvtss_sh: clang's macro for it uses a C99 compound literal, which
// -Wpedantic -Werror rejects.)
__attribute__((target("f16c"))) uint16_t HwF32ToF16(float f) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<uint16_t>(_mm_cvtsi128_si32(h) & 0xffff);
}
__attribute__((target("f16c"))) void HwF32ToF16x4(const float* in, uint16_t* out) {
  __m128 v;
  std::memcpy(&v, in, sizeof(v));
  const __m128i h = _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
  std::memcpy(out, &h, 4 * sizeof(uint16_t));
}
__attribute__((target("f16c"))) void HwF16ToF32x4(const uint16_t* in, float* out) {
  __m128i v = _mm_setzero_si128();
  std::memcpy(&v, in, 4 * sizeof(uint16_t));
  const __m128 f = _mm_cvtph_ps(v);
  std::memcpy(out, &f, sizeof(f));
}
bool HaveF16c() {
#if defined(__clang__) && __clang_major__ < 16
  // clang < 16 has no "f16c" for __builtin_cpu_supports: read CPUID (F16C
  // is VEX-encoded, so the OS must also have enabled AVX state).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0 &&
         __builtin_cpu_supports("avx") != 0;
#else
  return __builtin_cpu_supports("f16c") != 0;
#endif
}
#else
bool HaveF16c() {
  return false;
}
#endif

// Compares F32ToF16 with the hardware (F16C, round-to-nearest-even) on edge
// and random floats. Without F16C the comparison is with the independent
// double-arithmetic reference instead, so the test always checks something.
TEST(Half, F32ToF16MatchesF16cOrReference) {
  std::vector<float> in = EdgeFloats();
  const std::vector<float> rnd = RandomFloats(1u << 21, 99);
  in.insert(in.end(), rnd.begin(), rnd.end());
  while (in.size() % 4 != 0) in.push_back(0.0f);
  const bool hw = HaveF16c();
  if (!hw) std::fprintf(stderr, "note: no F16C; comparing with the double reference\n");
  for (size_t i = 0; i < in.size(); i += 4) {
    uint16_t expect[4];
#if INCA_HALF_TEST_X86
    if (hw) {
      HwF32ToF16x4(&in[i], expect);
      ASSERT_EQ(HwF32ToF16(in[i]), expect[0]);
    } else
#endif
    {
      for (size_t k = 0; k < 4; ++k) expect[k] = RefF32ToF16(in[i + k]);
    }
    for (size_t k = 0; k < 4; ++k) {
      ASSERT_EQ(F32ToF16(in[i + k]), expect[k]) << std::hex << Bits(in[i + k]);
    }
  }
}

// Same for widening: every half pattern, bitwise (NaN payloads included).
TEST(Half, F16ToF32MatchesF16cOrReference) {
  const bool hw = HaveF16c();
  for (uint32_t i = 0; i < 65536; i += 4) {
    uint16_t h[4];
    for (uint32_t k = 0; k < 4; ++k) h[k] = static_cast<uint16_t>(i + k);
    float expect[4];
#if INCA_HALF_TEST_X86
    if (hw) {
      HwF16ToF32x4(h, expect);
    } else
#endif
    {
      for (size_t k = 0; k < 4; ++k) {
        expect[k] = IsF16Nan(h[k])
                        ? Bits(((h[k] & 0x8000u) << 16) | 0x7fc00000u | ((h[k] & 0x3ffu) << 13))
                        : static_cast<float>(RefF16Value(h[k]));
      }
    }
    for (size_t k = 0; k < 4; ++k) {
      ASSERT_EQ(Bits(F16ToF32(h[k])), Bits(expect[k])) << std::hex << h[k];
    }
  }
}

TEST(Half, BF16RoundTripsAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = BF16ToF32(h);
    ASSERT_EQ(Bits(f), i << 16);
    const uint16_t back = F32ToBF16(f);
    if (IsBF16Nan(h)) {
      ASSERT_EQ(back, h | 0x0040u) << std::hex << i;
    } else {
      ASSERT_EQ(back, h) << std::hex << i;
    }
  }
}

TEST(Half, BF16RoundingOverflowNan) {
  // 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: ties to even 0x3f80.
  EXPECT_EQ(F32ToBF16(Bits(0x3f808000u)), 0x3f80u);
  EXPECT_EQ(F32ToBF16(Bits(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(F32ToBF16(Bits(0x3f807fffu)), 0x3f80u);
  EXPECT_EQ(F32ToBF16(Bits(0x3f818000u)), 0x3f82u);  // tie up to even
  EXPECT_EQ(F32ToBF16(Bits(0xbf818000u)), 0xbf82u);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds to inf
  EXPECT_EQ(F32ToBF16(Bits(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_EQ(F32ToBF16(-std::numeric_limits<float>::infinity()), 0xff80u);
  EXPECT_EQ(F32ToBF16(Bits(0x7f800001u)), 0x7fc0u);  // sNaN -> qNaN, not inf
  EXPECT_EQ(F32ToBF16(Bits(0xffffffffu)), 0xffffu);
  EXPECT_EQ(F32ToBF16(Bits(0x00000001u)), 0x0000u);  // float subnormal
  EXPECT_EQ(F32ToBF16(Bits(0x00008000u)), 0x0000u);  // tie to even zero
  EXPECT_EQ(F32ToBF16(Bits(0x00018000u)), 0x0002u);
  EXPECT_EQ(F32ToBF16(-0.0f), 0x8000u);
}

TEST(Half, F32ToBF16MatchesDoubleReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float f : EdgeFloats()) {
    ASSERT_EQ(F32ToBF16(f), RefF32ToBF16(f)) << std::hex << Bits(f);
  }
  for (float f : RandomFloats(1u << 20, 4321)) {
    ASSERT_EQ(F32ToBF16(f), RefF32ToBF16(f)) << std::hex << Bits(f);
  }
}

}  // namespace
}  // namespace inca
