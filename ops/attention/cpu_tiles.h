// The inner loops of the CPU flash-attention forward (ops/attention/cpu.cpp): one tile of
// kBlockM query rows against one block of kBlockN keys, written once per CPU code path
// (ops/cpu/isa.h) and picked at run time. cpu.cpp owns the algorithm (which keys a tile
// sees, the mask, the online-softmax state, where rows live); these functions only pack
// rows into scratch and do the arithmetic.
//
// Two scratch formats, by how the path multiplies (dp = head size rounded up to pad_d; rows
// and keys past the real ones are zeros, so they add nothing to a dot product):
//   F32 (f16 inputs on every path, bf16 inputs below AVX512-BF16):
//     Q f32 [kBlockM][dp]    K f32 [dp][kBlockN] (transposed)    V f32 [kBlockN][dp]
//     P f32 [kBlockM][kBlockN]
//   Bf16Pairs (bf16 inputs with VDPBF16PS or AMX): the hardware multiplies bf16 pairs
//   (elements 2j and 2j+1 of the reduced dim) and accumulates the two products in f32, so
//   the right-hand operand keeps each pair in one 32-bit word:
//     Q bf16 [kBlockM][dp]   K u32 [dp/2][kBlockN] (word j of key t = its channels 2j, 2j+1)
//     V u32 [kBlockN/2][dp]  (word c of pair j = channel c of keys 2j and 2j+1)
//     P bf16 [kBlockM][kBlockN]
// S (the logits) and O (the unnormalised output) are f32 in both: S [kBlockM][kBlockN],
// O [kBlockM][dp].
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/cpu/isa.h"

namespace wick::attention::tiles {

constexpr int kBlockM = 64;  // query rows per tile (one GPU thread block's rows)
constexpr int kBlockN = 64;  // keys per block

enum class Format { F32, Bf16Pairs };

struct Kernels {
  cpu::Isa isa;
  Format format;
  int pad_d;  // dp = head size rounded up to a multiple of this

  // Packs n <= kBlockM (q) or n <= kBlockN (k, v) source rows of d elements (bf16 when
  // `bf16`, else f16; rows[i] points at row i's first element) into the format above,
  // zero-filling rows n.. and channels d..dp. pack_v returns true when some element is not
  // finite (inf or NaN), so the caller can keep masked keys from spreading it.
  void (*pack_q)(const void* const* rows, int n, int d, int dp, bool bf16, void* dst);
  void (*pack_k)(const void* const* rows, int n, int d, int dp, bool bf16, void* dst);
  bool (*pack_v)(const void* const* rows, int n, int d, int dp, bool bf16, void* dst);

  // S[r][t] = scale * (q_r . k_t) for r < rows, every t < kBlockN.
  void (*scores)(const void* q, const void* k, float* s, int rows, int dp, float scale);

  // The online-softmax step for rows r < rows: with the row's running max m[r] and sum
  // l[r], m_new = max(m, max_t S[r][t]) (a row that has seen nothing keeps -inf and
  // subtracts 0 instead), alpha[r] = exp(m - m_new), P[r][t] = exp(S[r][t] - m_new) (0 where
  // S is -inf), l = alpha l + sum_t P[r][t], m = m_new. NaN and +inf logits make l NaN.
  void (*softmax)(const float* s, int rows, float* m, float* l, float* alpha, void* p);

  // O[r] = alpha[r] O[r] + sum_t P[r][t] V[t] for r < rows.
  void (*pv)(const void* p, const void* v, float* o, int rows, int dp, const float* alpha);

  // dst[c] = o[c] * factor for c < d, rounded to bf16 (or f16) to nearest even.
  void (*store_row)(const float* o, float factor, int d, bool bf16, void* dst);

  // Per-thread set-up and tear-down (AMX: the tile configuration); may be null.
  void (*thread_begin)();
  void (*thread_end)();
};

// The kernels for a path and input type; `isa` must be supported by the CPU. A path
// without kernels of its own for the input falls back to the best lower one (Avx512Bf16
// and Amx take f16 through the Avx512 F32 kernels).
const Kernels& kernels_for(cpu::Isa isa, bool bf16);

// Scratch bytes of each format's buffers, for dp channels.
inline size_t q_bytes(Format f, int dp) { return size_t(kBlockM) * dp * (f == Format::F32 ? 4 : 2); }
inline size_t kv_bytes(Format f, int dp) { return size_t(kBlockN) * dp * (f == Format::F32 ? 4 : 2); }
inline size_t p_bytes(Format f) { return size_t(kBlockM) * kBlockN * (f == Format::F32 ? 4 : 2); }

// Per-path kernel tables (one translation unit each, compiled for that path).
const Kernels& generic_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();
const Kernels& avx512_bf16_kernels();
const Kernels& amx_kernels();

}  // namespace wick::attention::tiles
