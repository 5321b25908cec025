// The AMX path: both products of a tile (Q K^T and P V) on the AMX tile unit, which
// multiplies a 16 x 32 bf16 tile by a 32 x 16 bf16 tile (stored as 16 rows of 16 pairs:
// the Bf16Pairs format of cpu_tiles.h) into a 16 x 16 f32 tile in one instruction
// (TDPBF16PS). Packing, the softmax step and the output rounding are the AVX512-BF16 path's.
// Every tile register is configured as 16 rows x 64 bytes; each product walks the block as
// 2 x 2 tiles of 16 x 16 results (tiles 0-3), with two left tiles (4, 5) and two right
// tiles (6, 7) loaded per 32-element step of the reduced dimension.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/attention/cpu_tiles.h"
#include "ops/cpu/target.h"

namespace wick::attention::tiles {

namespace {

WICK_TARGET_BEGIN("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

// The 64-byte tile configuration: palette 1, then bytes per row of each tile (16 x u16 from
// byte 16) and rows of each tile (16 x u8 from byte 48).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void amx_begin() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  WICK_LOAD_TILE_CONFIG(&cfg);
}

void amx_end() { _tile_release(); }

void amx_scores(const void* qp, const void* kp, float* s, int rows, int dp, float scale) {
  const auto* q = static_cast<const uint16_t*>(qp);  // bf16 [kBlockM][dp]
  const auto* k = static_cast<const uint32_t*>(kp);  // pairs [dp/2][kBlockN]
  const long q_stride = 2L * dp, k_stride = 4L * kBlockN, s_stride = 4L * kBlockN;
  for (int mi = 0; mi < rows; mi += 32) {
    for (int ni = 0; ni < kBlockN; ni += 32) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int kk = 0; kk < dp; kk += 32) {
        _tile_loadd(4, q + static_cast<size_t>(mi) * dp + kk, q_stride);
        _tile_loadd(5, q + static_cast<size_t>(mi + 16) * dp + kk, q_stride);
        _tile_loadd(6, k + static_cast<size_t>(kk / 2) * kBlockN + ni, k_stride);
        _tile_loadd(7, k + static_cast<size_t>(kk / 2) * kBlockN + ni + 16, k_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, s + static_cast<size_t>(mi) * kBlockN + ni, s_stride);
      _tile_stored(1, s + static_cast<size_t>(mi) * kBlockN + ni + 16, s_stride);
      _tile_stored(2, s + static_cast<size_t>(mi + 16) * kBlockN + ni, s_stride);
      _tile_stored(3, s + static_cast<size_t>(mi + 16) * kBlockN + ni + 16, s_stride);
    }
  }
  if (scale != 1.0f) {
    const __m512 sc = _mm512_set1_ps(scale);
    for (size_t i = 0; i < static_cast<size_t>(rows) * kBlockN; i += 16)
      _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), sc));
  }
}

void amx_pv(const void* pp, const void* vp, float* o, int rows, int dp, const float* alpha) {
  const auto* p = static_cast<const uint16_t*>(pp);  // bf16 [kBlockM][kBlockN]
  const auto* v = static_cast<const uint32_t*>(vp);  // pairs [kBlockN/2][dp]
  for (int r = 0; r < rows; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
    float* row = o + static_cast<size_t>(r) * dp;
    for (int c = 0; c < dp; c += 16) _mm512_storeu_ps(row + c, _mm512_mul_ps(a, _mm512_loadu_ps(row + c)));
  }
  // The tile loads are asm statements that do not tell the compiler they read memory: keep
  // the rescaled O stores above them.
  __asm__ volatile("" ::: "memory");
  const long o_stride = 4L * dp, p_stride = 2L * kBlockN, v_stride = 4L * dp;
  for (int mi = 0; mi < rows; mi += 32) {
    float* o0 = o + static_cast<size_t>(mi) * dp;
    float* o1 = o + static_cast<size_t>(mi + 16) * dp;
    for (int nj = 0; nj < dp; nj += 32) {
      _tile_loadd(0, o0 + nj, o_stride);
      _tile_loadd(1, o0 + nj + 16, o_stride);
      _tile_loadd(2, o1 + nj, o_stride);
      _tile_loadd(3, o1 + nj + 16, o_stride);
      for (int kk = 0; kk < kBlockN; kk += 32) {
        _tile_loadd(4, p + static_cast<size_t>(mi) * kBlockN + kk, p_stride);
        _tile_loadd(5, p + static_cast<size_t>(mi + 16) * kBlockN + kk, p_stride);
        _tile_loadd(6, v + static_cast<size_t>(kk / 2) * dp + nj, v_stride);
        _tile_loadd(7, v + static_cast<size_t>(kk / 2) * dp + nj + 16, v_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, o0 + nj, o_stride);
      _tile_stored(1, o0 + nj + 16, o_stride);
      _tile_stored(2, o1 + nj, o_stride);
      _tile_stored(3, o1 + nj + 16, o_stride);
    }
  }
}

WICK_TARGET_END

}  // namespace

const Kernels& amx_kernels() {
  static const Kernels k = [] {
    Kernels t = avx512_bf16_kernels();
    t.isa = cpu::Isa::Amx;
    t.scores = amx_scores;
    t.pv = amx_pv;
    t.thread_begin = amx_begin;
    t.thread_end = amx_end;
    return t;
  }();
  return k;
}

}  // namespace wick::attention::tiles
