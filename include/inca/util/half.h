// IEEE-754 binary16 (f16) and bfloat16 (bf16) <-> binary32 conversions.
// Widening is exact. Narrowing rounds to nearest, ties to even, keeps
// infinities, turns NaN into a quiet NaN, and produces subnormals/zero
// exactly as IEEE-754 (and x86 F16C's VCVTPS2PH with RNE) does.
#pragma once

#include <cstdint>

namespace inca {

float F16ToF32(uint16_t h) noexcept;
uint16_t F32ToF16(float f) noexcept;
float BF16ToF32(uint16_t h) noexcept;
uint16_t F32ToBF16(float f) noexcept;

}  // namespace inca
