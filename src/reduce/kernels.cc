// Portable reduction kernels and the run-time ISA dispatch.
//
// The loops are plain C++ written so that g++/clang -O3 auto-vectorise them
// with the baseline ISA: wire elements and accumulators are read and written
// through memcpy (unaligned, aliasing-safe, little-endian on the wire), every
// per-element step is branch-free, and pointers are __restrict. The f16/bf16
// helpers below are bit-for-bit the conversions of inca/util/half.h (the test
// checks all 65536 patterns through LoadAcc/StoreAcc).
#include "reduce/kernels.h"

#include <atomic>
#include <bit>
#include <cstring>

#include "inca/util/half.h"
#include "reduce/kernels_internal.h"
#include "util/byte_order.h"

#if INCA_REDUCE_HAVE_AVX2
#if !(defined(__x86_64__) || defined(__i386__))
#error "INCA_REDUCE_HAVE_AVX2 needs an x86 target"
#endif
#include <cpuid.h>
#endif

namespace inca::reduce {

namespace internal {
namespace {

static_assert(static_cast<size_t>(ReduceOp::kSum) == 0);
static_assert(static_cast<size_t>(ReduceOp::kMax) == 1);
static_assert(static_cast<size_t>(ReduceOp::kMin) == 2);
static_assert(static_cast<size_t>(ReduceOp::kProduct) == 3);
static_assert(static_cast<size_t>(DType::kF32) == 0);
static_assert(static_cast<size_t>(DType::kF16) == 1);
static_assert(static_cast<size_t>(DType::kBF16) == 2);
static_assert(static_cast<size_t>(DType::kI32) == 3);
static_assert(kAccBytesPerElement == sizeof(float) && sizeof(float) == sizeof(uint32_t));

using util::kBigEndianHost;
using util::LoadLe16;
using util::LoadLe32;
using util::StoreLe16;
using util::StoreLe32;

// All-ones if c, else zero. Selects written with masks (rather than ?:)
// keep GCC from turning them into branches, which would stop vectorisation
// (it may not speculate the float subtraction below under -ftrapping-math).
inline uint32_t Mask(bool c) {
  return 0u - static_cast<uint32_t>(c);
}

// f16 -> f32 without branches, so that it vectorises; identical to
// inca::F16ToF32 for all inputs (NaN gets the quiet bit, like VCVTPH2PS).
inline float F16Widen(uint16_t h) {
  const uint32_t em = uint32_t{h} & 0x7fffu;
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t shifted = em << 13;
  const uint32_t is_infnan = Mask(em >= 0x7c00u);
  const uint32_t is_nan = Mask(em > 0x7c00u);
  const uint32_t is_sub = Mask(em < 0x0400u);
  // Normal: rebias the exponent by 127 - 15 = 112. Inf/NaN: by 224, taking
  // exponent field 31 to 255; NaN also gets the quiet bit.
  const uint32_t normal =
      (shifted + ((127u - 15u) << 23) + (is_infnan & (112u << 23))) | (is_nan & 0x0040'0000u);
  // Subnormal (or zero) m * 2^-24: give it exponent 2^-14 (1.m * 2^-14) and
  // subtract the implicit 2^-14. Exact, and the result is a normal float,
  // so neither rounding mode nor FTZ/DAZ can change it.
  const float sub = std::bit_cast<float>(shifted + (113u << 23)) - 0x1p-14f;
  const uint32_t mag = (std::bit_cast<uint32_t>(sub) & is_sub) | (normal & ~is_sub);
  return std::bit_cast<float>(mag | sign);
}

// f32 -> bf16, round to nearest even, NaN -> quiet NaN; = inca::F32ToBF16.
inline uint16_t BF16Narrow(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>((x & 0x7fff'ffffu) > 0x7f80'0000u ? nan : rounded);
}

// Wire element codecs: Acc is the accumulator type, kBytes the wire size.
struct F32 {
  using Acc = float;
  static constexpr size_t kBytes = 4;
  static float Widen(const uint8_t* p) { return std::bit_cast<float>(LoadLe32(p)); }
  static void Narrow(float a, uint8_t* p) { StoreLe32(p, std::bit_cast<uint32_t>(a)); }
};
struct F16 {
  using Acc = float;
  static constexpr size_t kBytes = 2;
  static float Widen(const uint8_t* p) { return F16Widen(LoadLe16(p)); }
  // Narrowing is only used by StoreAcc (once per result, not per reduction);
  // the shared, exhaustively tested scalar conversion is good enough here.
  static void Narrow(float a, uint8_t* p) { StoreLe16(p, F32ToF16(a)); }
};
struct BF16 {
  using Acc = float;
  static constexpr size_t kBytes = 2;
  static float Widen(const uint8_t* p) { return std::bit_cast<float>(uint32_t{LoadLe16(p)} << 16); }
  static void Narrow(float a, uint8_t* p) { StoreLe16(p, BF16Narrow(a)); }
};
struct I32 {
  using Acc = uint32_t;
  static constexpr size_t kBytes = 4;
  static uint32_t Widen(const uint8_t* p) { return LoadLe32(p); }
  static void Narrow(uint32_t a, uint8_t* p) { StoreLe32(p, a); }
};

// Operators. Float max/min propagate NaN: `a` if it is NaN, else `b` if it
// is NaN (a > b is false), else the larger/smaller; for equal values (such as
// +0 and -0) the second operand. I32 is two's complement wrapping modulo 2^32.
struct Sum {
  static float Apply(float a, float b) { return a + b; }
  static uint32_t Apply(uint32_t a, uint32_t b) { return a + b; }
};
struct Max {
  static float Apply(float a, float b) { return (a > b || a != a) ? a : b; }
  static uint32_t Apply(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a) > static_cast<int32_t>(b) ? a : b;
  }
};
struct Min {
  static float Apply(float a, float b) { return (a < b || a != a) ? a : b; }
  static uint32_t Apply(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(a) < static_cast<int32_t>(b) ? a : b;
  }
};
struct Product {
  static float Apply(float a, float b) { return a * b; }
  static uint32_t Apply(uint32_t a, uint32_t b) { return a * b; }
};

template <class E>
void LoadLoop(const uint8_t* __restrict src, size_t n, void* __restrict acc_v) noexcept {
  auto* __restrict acc = static_cast<uint8_t*>(acc_v);
  for (size_t i = 0; i < n; ++i) {
    const typename E::Acc v = E::Widen(src + i * E::kBytes);
    std::memcpy(acc + i * sizeof(v), &v, sizeof(v));
  }
}

template <class E, class Op>
void ReduceLoop(void* __restrict acc_v, const uint8_t* __restrict src, size_t n) noexcept {
  auto* __restrict acc = static_cast<uint8_t*>(acc_v);
  for (size_t i = 0; i < n; ++i) {
    typename E::Acc a;
    std::memcpy(&a, acc + i * sizeof(a), sizeof(a));
    a = Op::Apply(a, E::Widen(src + i * E::kBytes));
    std::memcpy(acc + i * sizeof(a), &a, sizeof(a));
  }
}

template <class E>
void StoreLoop(const void* __restrict acc_v, size_t n, uint8_t* __restrict dst) noexcept {
  const auto* __restrict acc = static_cast<const uint8_t*>(acc_v);
  for (size_t i = 0; i < n; ++i) {
    typename E::Acc a;
    std::memcpy(&a, acc + i * sizeof(a), sizeof(a));
    E::Narrow(a, dst + i * E::kBytes);
  }
}

}  // namespace

#define INCA_REDUCE_ROW(Op) \
  { &ReduceLoop<F32, Op>, &ReduceLoop<F16, Op>, &ReduceLoop<BF16, Op>, &ReduceLoop<I32, Op> }

constexpr KernelTable kPortableKernels = {
    {&LoadLoop<F32>, &LoadLoop<F16>, &LoadLoop<BF16>, &LoadLoop<I32>},
    {INCA_REDUCE_ROW(Sum), INCA_REDUCE_ROW(Max), INCA_REDUCE_ROW(Min), INCA_REDUCE_ROW(Product)},
    {&StoreLoop<F32>, &StoreLoop<F16>, &StoreLoop<BF16>, &StoreLoop<I32>},
};

#undef INCA_REDUCE_ROW

}  // namespace internal

namespace {

using internal::KernelTable;

#if INCA_REDUCE_HAVE_AVX2
bool CpuHasAvx2F16c() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();
    // __builtin_cpu_supports("avx2") also checks that the OS saves YMM state.
    if (__builtin_cpu_supports("avx2") == 0) return false;
#if defined(__clang__) && __clang_major__ < 16
    // clang < 16 does not know "f16c" here: CPUID.1:ECX bit 29 instead.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
    return __builtin_cpu_supports("f16c") != 0;
#endif
  }();
  return has;
}
#endif

const KernelTable* TableFor(Isa isa) noexcept {
  switch (isa) {
    case Isa::kPortable: return &internal::kPortableKernels;
    case Isa::kAvx2:
#if INCA_REDUCE_HAVE_AVX2
      return CpuHasAvx2F16c() ? &internal::kAvx2Kernels : nullptr;
#else
      return nullptr;
#endif
  }
  return nullptr;
}

// The table in use: chosen once, on first use, unless ForceIsa set it.
std::atomic<const KernelTable*> g_active{nullptr};

const KernelTable& Active() noexcept {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t != nullptr) [[likely]] {
    return *t;
  }
  const KernelTable* best = TableFor(Isa::kAvx2);
  if (best == nullptr) best = &internal::kPortableKernels;
  // Another thread (or ForceIsa) may have got there first: keep its choice.
  if (g_active.compare_exchange_strong(t, best, std::memory_order_acq_rel)) return *best;
  return *t;
}

}  // namespace

void LoadAcc(DType t, const uint8_t* src, size_t n, void* acc) noexcept {
  const auto ti = static_cast<size_t>(t);
  if (n == 0 || ti >= internal::kNumDTypes) return;
  Active().load[ti](src, n, acc);
}

void ReduceInto(ReduceOp op, DType t, void* acc, const uint8_t* src, size_t n) noexcept {
  const auto oi = static_cast<size_t>(op);
  const auto ti = static_cast<size_t>(t);
  if (n == 0 || oi >= internal::kNumOps || ti >= internal::kNumDTypes) return;
  Active().reduce[oi][ti](acc, src, n);
}

void StoreAcc(DType t, const void* acc, size_t n, uint8_t* dst) noexcept {
  const auto ti = static_cast<size_t>(t);
  if (n == 0 || ti >= internal::kNumDTypes) return;
  Active().store[ti](acc, n, dst);
}

Isa ActiveIsa() noexcept {
#if INCA_REDUCE_HAVE_AVX2
  if (&Active() == &internal::kAvx2Kernels) return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

bool IsaSupported(Isa isa) noexcept {
  return TableFor(isa) != nullptr;
}

bool ForceIsa(Isa isa) noexcept {
  const KernelTable* t = TableFor(isa);
  if (t == nullptr) return false;
  g_active.store(t, std::memory_order_release);
  return true;
}

}  // namespace inca::reduce
