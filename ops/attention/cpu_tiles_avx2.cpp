// The AVX2 path: the F32 tile kernels 8 lanes wide (AVX2, FMA, F16C), with a vectorised exp
// and vectorised bf16/f16 <-> f32 conversions.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/attention/cpu_tiles.h"
#include "ops/cpu/target.h"

namespace wick::attention::tiles {

namespace {

WICK_TARGET_BEGIN("avx2,fma,f16c")

struct Simd {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int kScoreRows = 4, kScoreVecs = 2, kPvRows = 2, kPvVecs = 4;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float hmax(V v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  static float hsum(V v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  // exp(x): x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to degree 7
  // (relative error ~1e-8, below f32 rounding), times 2^n built in the exponent bits.
  // Below -87.3 the result is 0 (so exp(-inf) is exactly 0); NaN stays NaN (MAXPS/MINPS
  // return their second operand when one is NaN, and x is passed second).
  static V exp(V x) {
    const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }
  static __m256 cvt8(const uint16_t* src, bool bf16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    if (!bf16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static void cvt_row(const uint16_t* src, float* dst, int n, bool bf16) {  // n % 8 == 0
    for (int i = 0; i < n; i += 8) _mm256_storeu_ps(dst + i, cvt8(src + i, bf16));
  }
  // f32 -> bf16, rounded to nearest even; NaN stays a (quiet) NaN.
  static __m128i to_bf16(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  static void store_row(const float* o, float factor, int d, bool bf16, uint16_t* dst) {
    const __m256 f = _mm256_set1_ps(factor);
    for (int c = 0; c < d; c += 8) {
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(o + c), f);
      const __m128i h = bf16 ? to_bf16(x) : _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), h);
    }
  }
  static bool nonfinite(const uint16_t* src, int n, bool bf16) {
    const __m128i e = _mm_set1_epi16(static_cast<short>(bf16 ? 0x7F80 : 0x7C00));
    __m128i any = _mm_setzero_si128();
    for (int i = 0; i < n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      any = _mm_or_si128(any, _mm_cmpeq_epi16(_mm_and_si128(h, e), e));
    }
    return !_mm_testz_si128(any, any);
  }
};

#include "ops/attention/cpu_tiles_f32.inc"

WICK_TARGET_END

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k = f32_kernels(cpu::Isa::Avx2);
  return k;
}

}  // namespace wick::attention::tiles
