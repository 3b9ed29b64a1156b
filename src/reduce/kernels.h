// Vectorised element-wise reduction kernels used by the CAIS reducer (and
// later the host paths). Pure functions over caller-owned memory.
//
// Accumulator representation: float (binary32) for kF32, kF16 and kBF16
// payloads; uint32_t for kI32 (two's-complement arithmetic that wraps modulo
// 2^32, as NCCL and Gloo do in practice). Wire payloads are little-endian and
// may be unaligned.
//
// Float semantics: sum and product are plain IEEE-754 binary32 ops in the
// order the calls are made; max/min propagate NaN (if either input is NaN the
// result is NaN), otherwise the larger/smaller value.
//
// Dispatch: an AVX2+F16C implementation is selected at run time when the CPU
// has it, otherwise portable code; both give bitwise-identical results.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "inca/wire/cais.h"

namespace inca::reduce {

using wire::DType;
using wire::ReduceOp;

// op(a, b) in double: the reference the tests and cais-perf's result check
// compute with (exact for the integers and the rounded values they use).
inline double Fold(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMax: return a > b ? a : b;
    case ReduceOp::kMin: return a < b ? a : b;
  }
  return 0;
}

// Bytes of accumulator per element (4 for every dtype).
inline constexpr size_t kAccBytesPerElement = 4;

// acc[i] = widen(src[i]) for i < n. `acc` must hold n accumulator elements
// (4-byte aligned); `src` holds n wire elements of type `t`.
void LoadAcc(DType t, const uint8_t* src, size_t n, void* acc) noexcept;

// acc[i] = op(acc[i], widen(src[i])) for i < n.
void ReduceInto(ReduceOp op, DType t, void* acc, const uint8_t* src, size_t n) noexcept;

// dst[i] = narrow(acc[i]) as wire elements of type `t` (RNE for f16/bf16).
void StoreAcc(DType t, const void* acc, size_t n, uint8_t* dst) noexcept;

// True when `t`'s accumulator holds its wire bytes unchanged (f32 and i32 on
// a little-endian host): LoadAcc and StoreAcc are then copies.
constexpr bool AccIsWire(DType t) noexcept {
  return (t == DType::kF32 || t == DType::kI32) && std::endian::native == std::endian::little;
}

// Instruction set in use; tests force each to compare them.
enum class Isa : uint8_t { kPortable, kAvx2 };
Isa ActiveIsa() noexcept;
bool IsaSupported(Isa isa) noexcept;
// Returns false (and changes nothing) if `isa` is not supported here.
bool ForceIsa(Isa isa) noexcept;

}  // namespace inca::reduce
