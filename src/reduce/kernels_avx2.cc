// AVX2 + F16C reduction kernels. This file alone is compiled with
// -mavx2 -mf16c (see CMakeLists.txt) and is only called after the run-time
// CPU check in kernels.cc. It includes no project header with inline code
// (only kernels_internal.h) so no AVX2-compiled inline function can be
// picked by the linker for baseline code.
//
// Results are bitwise identical to the portable kernels: the same IEEE
// binary32 operations in the same order (no FMA, no reassociation), the same
// NaN-propagating select for max/min, VCVTPH2PS/VCVTPS2PH (RNE) which the
// half tests show equal inca::F16ToF32/F32ToF16, and integer RNE for bf16.
#include <immintrin.h>

#include <cstring>

#include "reduce/kernels_internal.h"

#if !INCA_REDUCE_HAVE_AVX2
#error "kernels_avx2.cc is only built when INCA_REDUCE_HAVE_AVX2 is set"
#endif

namespace inca::reduce::internal {
namespace {

// Unaligned access through the intrinsics' own unaligned (may_alias) types.
inline const float* AsF32(const uint8_t* p) {
  return static_cast<const float*>(static_cast<const void*>(p));
}
inline float* AsF32(uint8_t* p) {
  return static_cast<float*>(static_cast<void*>(p));
}
inline const __m128i* AsV128(const uint8_t* p) {
  return static_cast<const __m128i*>(static_cast<const void*>(p));
}
inline __m128i* AsV128(uint8_t* p) {
  return static_cast<__m128i*>(static_cast<void*>(p));
}
inline const __m256i* AsV256(const uint8_t* p) {
  return static_cast<const __m256i*>(static_cast<const void*>(p));
}
inline __m256i* AsV256(uint8_t* p) {
  return static_cast<__m256i*>(static_cast<void*>(p));
}

constexpr size_t kLanes = 8;
constexpr size_t kAccBytes = 4;

// Accumulators: eight float or eight uint32 lanes (32 bytes).
struct FloatAcc {
  using V = __m256;
  static V Load(const uint8_t* p) { return _mm256_loadu_ps(AsF32(p)); }
  static void Store(uint8_t* p, V v) { _mm256_storeu_ps(AsF32(p), v); }
};
struct IntAcc {
  using V = __m256i;
  static V Load(const uint8_t* p) { return _mm256_loadu_si256(AsV256(p)); }
  static void Store(uint8_t* p, V v) { _mm256_storeu_si256(AsV256(p), v); }
};

// Wire codecs: Widen reads 8 wire elements, Narrow writes 8, Narrow2 16.
// (f32 and i32 need only Widen: LoadAcc/StoreAcc are CopyLoad/CopyStore.)
struct F32 : FloatAcc {
  static constexpr size_t kBytes = 4;
  static V Widen(const uint8_t* p) { return _mm256_loadu_ps(AsF32(p)); }
};
struct F16 : FloatAcc {
  static constexpr size_t kBytes = 2;
  static V Widen(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(AsV128(p))); }
  static void Narrow(V v, uint8_t* p) {
    _mm_storeu_si128(AsV128(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void Narrow2(V v0, V v1, uint8_t* p) {
    Narrow(v0, p);
    Narrow(v1, p + kLanes * kBytes);
  }
};
struct BF16 : FloatAcc {
  static constexpr size_t kBytes = 2;
  static V Widen(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(AsV128(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // Eight bf16 values in the low 16 bits of each 32-bit lane: round to
  // nearest even on the dropped bits; NaN -> (x >> 16) | 0x40 (quiet).
  static __m256i Round(V v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    // NaN lanes add no rounding bias (so cannot carry into the sign bit) and
    // get the quiet bit instead.
    const __m256i bias = _mm256_andnot_si256(
        is_nan,
        _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    return _mm256_or_si256(rounded, _mm256_and_si256(is_nan, _mm256_set1_epi32(0x40)));
  }
  static void Narrow(V v, uint8_t* p) {
    const __m256i r = Round(v);
    // Every lane is <= 0xffff, so the unsigned-saturating pack is exact.
    _mm_storeu_si128(AsV128(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  }
  static void Narrow2(V v0, V v1, uint8_t* p) {
    // packus works per 128-bit half: [a0-3 b0-3 | a4-7 b4-7] -> reorder.
    const __m256i packed = _mm256_packus_epi32(Round(v0), Round(v1));
    _mm256_storeu_si256(AsV256(p), _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
};
struct I32 : IntAcc {
  static constexpr size_t kBytes = 4;
  static V Widen(const uint8_t* p) { return _mm256_loadu_si256(AsV256(p)); }
};

// Same semantics as the portable operators: max/min pick `a` if a > b (or
// a < b) or `a` is NaN, else `b`.
struct Sum {
  static __m256 Apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256i Apply(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
};
struct Max {
  static __m256 Apply(__m256 a, __m256 b) {
    const __m256 take_a =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take_a);
  }
  static __m256i Apply(__m256i a, __m256i b) { return _mm256_max_epi32(a, b); }
};
struct Min {
  static __m256 Apply(__m256 a, __m256 b) {
    const __m256 take_a =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take_a);
  }
  static __m256i Apply(__m256i a, __m256i b) { return _mm256_min_epi32(a, b); }
};
struct Product {
  static __m256 Apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256i Apply(__m256i a, __m256i b) { return _mm256_mullo_epi32(a, b); }
};

// The last n % 8 elements go through zero-padded stack buffers, so the tail
// runs the very same vector code as the body.
template <class E>
void LoadLoop(const uint8_t* src, size_t n, void* acc_v) noexcept {
  auto* acc = static_cast<uint8_t*>(acc_v);
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const typename E::V v0 = E::Widen(src + i * E::kBytes);
    const typename E::V v1 = E::Widen(src + (i + kLanes) * E::kBytes);
    E::Store(acc + i * kAccBytes, v0);
    E::Store(acc + (i + kLanes) * kAccBytes, v1);
  }
  for (; i + kLanes <= n; i += kLanes) {
    E::Store(acc + i * kAccBytes, E::Widen(src + i * E::kBytes));
  }
  if (i < n) {
    const size_t r = n - i;
    alignas(32) uint8_t sbuf[kLanes * 4] = {};
    alignas(32) uint8_t abuf[kLanes * kAccBytes];
    std::memcpy(sbuf, src + i * E::kBytes, r * E::kBytes);
    E::Store(abuf, E::Widen(sbuf));
    std::memcpy(acc + i * kAccBytes, abuf, r * kAccBytes);
  }
}

template <class E, class Op>
void ReduceLoop(void* acc_v, const uint8_t* src, size_t n) noexcept {
  auto* acc = static_cast<uint8_t*>(acc_v);
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    uint8_t* a = acc + i * kAccBytes;
    const uint8_t* s = src + i * E::kBytes;
    const typename E::V a0 = E::Load(a);
    const typename E::V a1 = E::Load(a + kLanes * kAccBytes);
    const typename E::V a2 = E::Load(a + 2 * kLanes * kAccBytes);
    const typename E::V a3 = E::Load(a + 3 * kLanes * kAccBytes);
    const typename E::V b0 = E::Widen(s);
    const typename E::V b1 = E::Widen(s + kLanes * E::kBytes);
    const typename E::V b2 = E::Widen(s + 2 * kLanes * E::kBytes);
    const typename E::V b3 = E::Widen(s + 3 * kLanes * E::kBytes);
    E::Store(a, Op::Apply(a0, b0));
    E::Store(a + kLanes * kAccBytes, Op::Apply(a1, b1));
    E::Store(a + 2 * kLanes * kAccBytes, Op::Apply(a2, b2));
    E::Store(a + 3 * kLanes * kAccBytes, Op::Apply(a3, b3));
  }
  for (; i + kLanes <= n; i += kLanes) {
    uint8_t* a = acc + i * kAccBytes;
    E::Store(a, Op::Apply(E::Load(a), E::Widen(src + i * E::kBytes)));
  }
  if (i < n) {
    const size_t r = n - i;
    alignas(32) uint8_t sbuf[kLanes * 4] = {};
    alignas(32) uint8_t abuf[kLanes * kAccBytes] = {};
    std::memcpy(sbuf, src + i * E::kBytes, r * E::kBytes);
    std::memcpy(abuf, acc + i * kAccBytes, r * kAccBytes);
    E::Store(abuf, Op::Apply(E::Load(abuf), E::Widen(sbuf)));
    std::memcpy(acc + i * kAccBytes, abuf, r * kAccBytes);
  }
}

template <class E>
void StoreLoop(const void* acc_v, size_t n, uint8_t* dst) noexcept {
  const auto* acc = static_cast<const uint8_t*>(acc_v);
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const typename E::V v0 = E::Load(acc + i * kAccBytes);
    const typename E::V v1 = E::Load(acc + (i + kLanes) * kAccBytes);
    E::Narrow2(v0, v1, dst + i * E::kBytes);
  }
  for (; i + kLanes <= n; i += kLanes) {
    E::Narrow(E::Load(acc + i * kAccBytes), dst + i * E::kBytes);
  }
  if (i < n) {
    const size_t r = n - i;
    alignas(32) uint8_t abuf[kLanes * kAccBytes] = {};
    alignas(32) uint8_t dbuf[kLanes * 4];
    std::memcpy(abuf, acc + i * kAccBytes, r * kAccBytes);
    E::Narrow(E::Load(abuf), dbuf);
    std::memcpy(dst + i * E::kBytes, dbuf, r * E::kBytes);
  }
}

// f32 and i32 payloads are the accumulator's bytes (x86 is little-endian):
// libc's memcpy beats a 32-byte load/store loop here.
void CopyLoad(const uint8_t* src, size_t n, void* acc) noexcept {
  std::memcpy(acc, src, n * kAccBytes);
}
void CopyStore(const void* acc, size_t n, uint8_t* dst) noexcept {
  std::memcpy(dst, acc, n * kAccBytes);
}

}  // namespace

#define INCA_REDUCE_ROW(Op) \
  { &ReduceLoop<F32, Op>, &ReduceLoop<F16, Op>, &ReduceLoop<BF16, Op>, &ReduceLoop<I32, Op> }

constexpr KernelTable kAvx2Kernels = {
    {&CopyLoad, &LoadLoop<F16>, &LoadLoop<BF16>, &CopyLoad},
    {INCA_REDUCE_ROW(Sum), INCA_REDUCE_ROW(Max), INCA_REDUCE_ROW(Min), INCA_REDUCE_ROW(Product)},
    {&CopyStore, &StoreLoop<F16>, &StoreLoop<BF16>, &CopyStore},
};

#undef INCA_REDUCE_ROW

}  // namespace inca::reduce::internal
