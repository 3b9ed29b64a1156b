// IEEE-754 binary16 / bfloat16 <-> binary32 conversions by bit manipulation.
//
// Portable (no _Float16, no intrinsics) and independent of the floating-point
// environment (no float arithmetic, so DAZ/FTZ and the rounding mode have no
// effect). The results are bit-for-bit those of x86 F16C:
//   * F16ToF32 is exact for every non-NaN input (subnormal halves become
//     normal floats). A NaN keeps its sign and payload and gets the quiet bit,
//     as VCVTPH2PS does.
//   * F32ToF16 rounds to nearest, ties to even; values >= 65520 in magnitude
//     become infinity; results below the smallest normal half are correctly
//     rounded subnormals (or signed zero). A NaN keeps its sign and the top
//     nine payload bits and gets the quiet bit, as VCVTPS2PH does.
//   * BF16ToF32 is a plain 16-bit shift (exact, NaN bits kept as they are).
//   * F32ToBF16 rounds to nearest, ties to even (overflow rounds to
//     infinity); a NaN keeps its sign and top payload bits and gets the quiet
//     bit.
#include "inca/util/half.h"

#include <bit>
#include <cstdint>

namespace inca {

namespace {

constexpr uint32_t kF32SignMask = 0x8000'0000u;
constexpr uint32_t kF32AbsMask = 0x7fff'ffffu;
constexpr uint32_t kF32ExpMask = 0x7f80'0000u;  // also the bits of +inf

}  // namespace

float F16ToF32(uint16_t h) noexcept {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exp = (uint32_t{h} >> 10) & 0x1fu;
  uint32_t mant = uint32_t{h} & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    // Infinity, or NaN made quiet (payload kept).
    bits = kF32ExpMask | (mant << 13) | (mant != 0 ? 0x0040'0000u : 0u);
  } else if (exp != 0) {
    // Normal: rebias the exponent from 15 to 127.
    bits = ((exp + (127u - 15u)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = 0;  // signed zero
  } else {
    // Subnormal half (mant * 2^-24): normalise so the leading one becomes
    // the implicit bit of a normal float.
    const int shift = std::countl_zero(mant) - 21;  // 1..10
    mant = (mant << shift) & 0x3ffu;
    const uint32_t fexp = static_cast<uint32_t>(127 - 14 - shift);
    bits = (fexp << 23) | (mant << 13);
  }
  return std::bit_cast<float>(sign | bits);
}

uint16_t F32ToF16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x & kF32SignMask) >> 16;
  const uint32_t ax = x & kF32AbsMask;
  uint32_t h;
  if (ax >= kF32ExpMask) {
    // Infinity, or NaN: quiet, top payload bits kept.
    h = ax == kF32ExpMask ? 0x7c00u : (0x7e00u | ((ax >> 13) & 0x3ffu));
  } else if (ax >= 0x477f'f000u) {
    // >= 65520 = 65504 + half an ulp, which ties to the even "65536": inf.
    h = 0x7c00u;
  } else if (ax >= 0x3880'0000u) {
    // Normal half (>= 2^-14): rebias, then round to nearest even on the 13
    // dropped bits. A carry out of the mantissa correctly bumps the exponent.
    const uint32_t rebiased = ax - ((127u - 15u) << 23);
    h = (rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13;
  } else {
    // Subnormal half or zero: the result is round(|f| * 2^24) ulps of 2^-24.
    const uint32_t exp = ax >> 23;
    if (exp < 102) {
      h = 0;  // |f| < 2^-25: rounds to zero (2^-25 itself ties to zero too)
    } else {
      // |f| = m * 2^(exp - 150), so |f| * 2^24 = m >> (126 - exp).
      const uint32_t m = (ax & 0x007f'ffffu) | 0x0080'0000u;
      const uint32_t shift = 126u - exp;  // 14..24
      const uint32_t q = m >> shift;
      const uint32_t rem = m & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1u);
      h = q + ((rem > halfway || (rem == halfway && (q & 1u) != 0)) ? 1u : 0u);
      // q + 1 == 0x400 is the smallest normal half: the encoding is right.
    }
  }
  return static_cast<uint16_t>(sign | h);
}

float BF16ToF32(uint16_t h) noexcept {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

uint16_t F32ToBF16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & kF32AbsMask) > kF32ExpMask) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  }
  // Round to nearest even on the low 16 bits; overflow carries into inf.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace inca
