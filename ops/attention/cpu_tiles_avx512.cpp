// The AVX-512 paths. Avx512: the F32 tile kernels 16 lanes wide. Avx512Bf16: bf16 inputs
// stay bf16 and both products (Q K^T and P V) run on VDPBF16PS, which multiplies pairs of
// bf16 and adds both products to an f32 lane; the Bf16Pairs format of cpu_tiles.h puts
// each pair in one 32-bit word so one broadcast word of the left side meets 16 words (16
// keys, or 16 channels) of the right side. Exp and the conversions are vectorised.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/attention/cpu_tiles.h"
#include "ops/cpu/target.h"

namespace wick::attention::tiles {

namespace {

WICK_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

struct Simd {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int kScoreRows = 6, kScoreVecs = 4, kPvRows = 4, kPvVecs = 4;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  // exp(x) as in the AVX2 path (Taylor series to degree 7 on |r| <= ln2 / 2), with SCALEF
  // for the 2^n; 0 below -87.3, NaN for NaN.
  static V exp(V x) {
    const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), _mm512_scalef_ps(p, n));
  }
  static __m256 cvt8(const uint16_t* src, bool bf16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    if (!bf16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static void cvt_row(const uint16_t* src, float* dst, int n, bool bf16) {  // n % 8 == 0
    int i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      const __m512 f = bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
      _mm512_storeu_ps(dst + i, f);
    }
    for (; i < n; i += 8) _mm256_storeu_ps(dst + i, cvt8(src + i, bf16));
  }
  // f32 -> bf16 rounded to nearest even; NaN stays a (quiet) NaN.
  static __m256i to_bf16(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
  }
  static void store_row(const float* o, float factor, int d, bool bf16, uint16_t* dst) {
    const __m512 f = _mm512_set1_ps(factor);
    int c = 0;
    for (; c + 16 <= d; c += 16) {
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(o + c), f);
      const __m256i h = bf16 ? to_bf16(x) : _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c), h);
    }
    if (c < d) {  // 8 left
      const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(0xFF, o + c), f);
      const __m256i h = bf16 ? to_bf16(x) : _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), _mm256_castsi256_si128(h));
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

// ---- Bf16Pairs: VDPBF16PS ----------------------------------------------------------------

WICK_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

void pair_pack_q(const void* const* rows, int n, int d, int dp, bool, void* dst) {
  uint16_t* q = static_cast<uint16_t*>(dst);
  for (int r = 0; r < kBlockM; ++r) {
    uint16_t* row = q + static_cast<size_t>(r) * dp;
    int c = 0;
    if (r < n) std::memcpy(row, rows[r], sizeof(uint16_t) * d), c = d;
    for (; c < dp; ++c) row[c] = 0;
  }
}

// r[i] holds row i of a 16 x 16 block of 32-bit words; on return r[i] holds column i.
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Each 128-bit lane now holds a 4 x 4 block; move the lanes into place.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

void pair_pack_k(const void* const* rows, int n, int d, int dp, bool, void* dst) {
  // The 32-bit transpose: word j of key t goes to K[j][t], 16 x 16 words at a time.
  uint32_t* k = static_cast<uint32_t*>(dst);
  const int words = d / 2, dwords = dp / 2;
  for (int t0 = 0; t0 < kBlockN; t0 += 16) {
    for (int j0 = 0; j0 < dwords; j0 += 16) {
      const int m = std::min(16, words - j0);  // real words in this column block (may be <= 0)
      const __mmask16 cols = m <= 0 ? 0 : static_cast<__mmask16>((1u << m) - 1);
      __m512i r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = t0 + i < n ? _mm512_maskz_loadu_epi32(cols, static_cast<const uint32_t*>(rows[t0 + i]) + j0)
                          : _mm512_setzero_si512();
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(k + static_cast<size_t>(j0 + i) * kBlockN + t0, r[i]);
    }
  }
}

bool pair_pack_v(const void* const* rows, int n, int d, int dp, bool bf16, void* dst) {
  // Keys 2j and 2j+1 interleaved: word c of pair j = channel c of both.
  uint32_t* v = static_cast<uint32_t*>(dst);
  static const uint16_t zeros[512] = {};
  bool bad = false;
  for (int j = 0; j < kBlockN / 2; ++j) {
    const int t0 = 2 * j, t1 = 2 * j + 1;
    const auto* a = t0 < n ? static_cast<const uint16_t*>(rows[t0]) : zeros;
    const auto* b = t1 < n ? static_cast<const uint16_t*>(rows[t1]) : zeros;
    if (t0 < n) bad |= Simd::nonfinite(a, d, bf16);
    if (t1 < n) bad |= Simd::nonfinite(b, d, bf16);
    uint32_t* out = v + static_cast<size_t>(j) * dp;
    int c = 0;
    for (; c + 16 <= d; c += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + c)));
      const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + c)));
      _mm512_storeu_si512(out + c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
    for (; c < d; ++c) out[c] = static_cast<uint32_t>(a[c]) | (static_cast<uint32_t>(b[c]) << 16);
    for (; c < dp; ++c) out[c] = 0;
  }
  return bad;
}

// S rows [r0, r0 + R) x all kBlockN keys (4 vectors of 16).
template <int R>
inline void pair_scores_micro(const uint32_t* q, const uint32_t* k, float* s, int r0, int dwords, float scale) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int j = 0; j < dwords; ++j) {
    __m512i kv[4];
    for (int v = 0; v < 4; ++v) kv[v] = _mm512_loadu_si512(k + static_cast<size_t>(j) * kBlockN + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512i qw = _mm512_set1_epi32(static_cast<int>(q[static_cast<size_t>(r0 + r) * dwords + j]));
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], as_bh(qw), as_bh(kv[v]));
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v)
      _mm512_storeu_ps(s + static_cast<size_t>(r0 + r) * kBlockN + 16 * v, _mm512_mul_ps(acc[r][v], sc));
}

void pair_scores(const void* qp, const void* kp, float* s, int rows, int dp, float scale) {
  const auto* q = static_cast<const uint32_t*>(qp);
  const auto* k = static_cast<const uint32_t*>(kp);
  constexpr int R = 6;
  int r0 = 0;
  for (; r0 + R <= rows; r0 += R) pair_scores_micro<R>(q, k, s, r0, dp / 2, scale);
  switch (rows - r0) {  // the last rows in one pass
    case 5: pair_scores_micro<5>(q, k, s, r0, dp / 2, scale); break;
    case 4: pair_scores_micro<4>(q, k, s, r0, dp / 2, scale); break;
    case 3: pair_scores_micro<3>(q, k, s, r0, dp / 2, scale); break;
    case 2: pair_scores_micro<2>(q, k, s, r0, dp / 2, scale); break;
    case 1: pair_scores_micro<1>(q, k, s, r0, dp / 2, scale); break;
    default: break;
  }
}

void pair_softmax(const float* s, int rows, float* m, float* l, float* alpha, void* pp) {
  uint16_t* p = static_cast<uint16_t*>(pp);
  for (int r = 0; r < rows; ++r) {
    uint16_t* prow = p + static_cast<size_t>(r) * kBlockN;
    softmax_row(s + static_cast<size_t>(r) * kBlockN, m[r], l[r], alpha[r], [&](int t, __m512 v) {
      const __m256bh h = _mm512_cvtneps_pbh(v);
      std::memcpy(prow + t, &h, sizeof h);
    });
  }
}

// O rows [r0, r0 + R) x channels [c0, c0 + 16 NV).
template <int R, int NV>
inline void pair_pv_micro(const uint32_t* p, const uint32_t* v, float* o, int r0, int c0, int dp, const float* alpha) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r0 + r]);
    for (int j = 0; j < NV; ++j)
      acc[r][j] = _mm512_mul_ps(a, _mm512_loadu_ps(o + static_cast<size_t>(r0 + r) * dp + c0 + 16 * j));
  }
  for (int t2 = 0; t2 < kBlockN / 2; ++t2) {
    __m512i vv[NV];
    for (int j = 0; j < NV; ++j) vv[j] = _mm512_loadu_si512(v + static_cast<size_t>(t2) * dp + c0 + 16 * j);
    for (int r = 0; r < R; ++r) {
      const __m512i pw = _mm512_set1_epi32(static_cast<int>(p[static_cast<size_t>(r0 + r) * (kBlockN / 2) + t2]));
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], as_bh(pw), as_bh(vv[j]));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o + static_cast<size_t>(r0 + r) * dp + c0 + 16 * j, acc[r][j]);
}

template <int R>
inline void pair_pv_rows(const uint32_t* p, const uint32_t* v, float* o, int r0, int dp, const float* alpha) {
  int c0 = 0;
  for (; c0 + 64 <= dp; c0 += 64) pair_pv_micro<R, 4>(p, v, o, r0, c0, dp, alpha);
  for (; c0 < dp; c0 += 16) pair_pv_micro<R, 1>(p, v, o, r0, c0, dp, alpha);
}

void pair_pv(const void* pp, const void* vp, float* o, int rows, int dp, const float* alpha) {
  const auto* p = static_cast<const uint32_t*>(pp);
  const auto* v = static_cast<const uint32_t*>(vp);
  constexpr int R = 4;
  int r0 = 0;
  for (; r0 + R <= rows; r0 += R) pair_pv_rows<R>(p, v, o, r0, dp, alpha);
  switch (rows - r0) {
    case 3: pair_pv_rows<3>(p, v, o, r0, dp, alpha); break;
    case 2: pair_pv_rows<2>(p, v, o, r0, dp, alpha); break;
    case 1: pair_pv_rows<1>(p, v, o, r0, dp, alpha); break;
    default: break;
  }
}

void pair_store_row(const float* o, float factor, int d, bool, void* dst) {
  auto* out = static_cast<uint16_t*>(dst);
  const __m512 f = _mm512_set1_ps(factor);
  int c = 0;
  for (; c + 16 <= d; c += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(o + c), f));
    std::memcpy(out + c, &h, sizeof h);
  }
  if (c < d) {  // 8 left
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_maskz_loadu_ps(0xFF, o + c), f));
    std::memcpy(out + c, &h, 16);
  }
}

WICK_TARGET_END

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k = f32_kernels(cpu::Isa::Avx512);
  return k;
}

const Kernels& avx512_bf16_kernels() {
  static const Kernels k = [] {
    Kernels t{};
    t.isa = cpu::Isa::Avx512Bf16;
    t.format = Format::Bf16Pairs;
    t.pad_d = 32;  // AMX reads 32 channels per step; the same scratch serves both
    t.pack_q = pair_pack_q;
    t.pack_k = pair_pack_k;
    t.pack_v = pair_pack_v;
    t.scores = pair_scores;
    t.softmax = pair_softmax;
    t.pv = pair_pv;
    t.store_row = pair_store_row;
    return t;
  }();
  return k;
}

}  // namespace wick::attention::tiles
