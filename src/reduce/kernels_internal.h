// Private to the reduce library: the per-ISA kernel tables behind the
// dispatching entry points of kernels.h. Deliberately free of other project
// headers so that the AVX2 translation unit (compiled with -mavx2 -mf16c)
// instantiates no inline function that non-AVX2 code could end up sharing.
#pragma once

#include <cstddef>
#include <cstdint>

#ifndef INCA_REDUCE_HAVE_AVX2
#define INCA_REDUCE_HAVE_AVX2 0
#endif

namespace inca::reduce::internal {

// Indices are the numeric values of wire::ReduceOp and wire::DType
// (checked by static_asserts in kernels.cc).
inline constexpr size_t kNumOps = 4;     // sum, max, min, product
inline constexpr size_t kNumDTypes = 4;  // f32, f16, bf16, i32

using LoadFn = void (*)(const uint8_t* src, size_t n, void* acc) noexcept;
using ReduceFn = void (*)(void* acc, const uint8_t* src, size_t n) noexcept;
using StoreFn = void (*)(const void* acc, size_t n, uint8_t* dst) noexcept;

struct KernelTable {
  LoadFn load[kNumDTypes];
  ReduceFn reduce[kNumOps][kNumDTypes];
  StoreFn store[kNumDTypes];
};

// Plain C++ loops written for the auto-vectoriser (kernels.cc).
extern const KernelTable kPortableKernels;
#if INCA_REDUCE_HAVE_AVX2
// AVX2 + F16C intrinsics (kernels_avx2.cc); only call where the CPU has both.
extern const KernelTable kAvx2Kernels;
#endif

}  // namespace inca::reduce::internal
