// The tensor-core backward (mma.sync m16n8k16, f32 accumulation) in two forms:
//   the fused form (the default): the key-tile kernel alone, which also adds dQ into an f32
//     buffer with atomics; five matrix products per tile;
//   the deterministic form (the op's `deterministic`): the key-tile kernel without dQ, then
//     the q kernel for dQ, each owning its outputs, so no result depends on the order of
//     atomic adds; seven products per tile (both kernels recompute S and dP).
// The math is the host backward's (ops/attention/backward.cpp) and the scalar kernels':
//   P = exp(logit - lse)   dP = dO V^T   dS = P * (dP - D) [* (1 - tanh^2) with softcap]
//   dV = P^T dO            dK = scale * dS^T Q            dQ = scale * dS K
//
// key-tile kernel (end of this file): one CTA per (key tile, kv head, sequence[, output
//   column chunk]); warp w owns keys 16w..16w+15 of the tile, with their dK and dV rows in
//   registers for the whole CTA. It walks every query head of the kv head's group and every
//   query tile whose window reaches the key tile (contract: window_rows); its products keep
//   the key rows as the mma rows, so P^T and dS^T go from accumulators to A fragments
//   without shared memory.
// q kernel: one CTA per (query tile of kBlockM rows, head, sequence[, column chunk]); warp w
//   owns rows 16w..16w+15 and their dQ in registers; it walks the key tiles the rows can see
//   (contract: visible_keys_of_rows): S = Q K^T, P, dP = dO V^T, dS, dQ += dS K, the
//   forward's structure. dQ is stored once.
//
// Fragment patterns (flash_mma.cuh has the layouts), for a tile X in shared memory, row
// stride kStride elements:
//   rows of X as the A operand (16 rows x 16 k):        ldmatrix_x4 at a_lane(X)
//   X as B for a product with X^T (X is n x k):          ldmatrix_x4 at bt_lane(X)
//   X as B for a product with X (X is k x n):            ldmatrix_x4_trans at b_lane(X)
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash_bwd/flash_bwd_mma.h"
#include "kernels/flash_bwd/flash_bwd_params.h"
#include "kernels/smem_limit.h"
#include "tensor/cuda_check.h"

namespace wick::kernels::flash_bwd_mma {

using namespace wick::kernels::flash;

constexpr int kWarps = 4, kThreads = kWarps * 32;

// Lane base addresses of the three ldmatrix patterns for a tile whose row 0 is at `tile`.
template <int kStride, class Elem>
__device__ __forceinline__ uint32_t a_lane(const Elem* tile, int lane) {
  return smem_addr(tile + ((lane % 8) + 8 * ((lane / 8) % 2)) * kStride + 8 * (lane / 16));
}
template <int kStride, class Elem>
__device__ __forceinline__ uint32_t bt_lane(const Elem* tile, int lane) {
  return smem_addr(tile + ((lane % 8) + 8 * (lane / 16)) * kStride + 8 * ((lane / 8) % 2));
}
template <int kStride, class Elem>
__device__ __forceinline__ uint32_t b_lane(const Elem* tile, int lane) {
  return smem_addr(tile + ((lane % 8) + 8 * ((lane / 8) % 2)) * kStride + 8 * (lane / 16));
}
// Byte offset of element (row, col) from a lane base.
template <int kStride>
__device__ __forceinline__ uint32_t at(int row, int col) {
  return 2 * (row * kStride + col);
}

// Copies kRows rows of kD channels into a padded shared tile: row r from global element
// offset row_offset(r) (channels past head_size, and rows with valid(r) false, read as zero).
template <int kRows, int kD, int kStride, int kCtaThreads = kThreads, class Elem, class Offset, class Valid>
__device__ __forceinline__ void load_rows(Elem* dst, const Elem* base, Offset row_offset, Valid valid, int head_size) {
  constexpr int kChunks = kD / 8, kTotal = kRows * kChunks;
#pragma unroll
  for (int k = 0; k < (kTotal + kCtaThreads - 1) / kCtaThreads; ++k) {
    const int c = threadIdx.x + k * kCtaThreads;
    if (kTotal % kCtaThreads != 0 && c >= kTotal) break;
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool ok = col < head_size && valid(r);
    cp_async_16(smem_addr(dst + r * kStride + col), ok ? base + row_offset(r) + col : base, ok);
  }
}

// A CTA's K and V rows [t0, t0 + kRows) of kv head hk (rows past the sequence read as zero).
template <int kRows, int kD, int kStride, int kCtaThreads = kThreads, class Elem>
__device__ __forceinline__ void load_kv_rows(Elem* sK, Elem* sV, const FlashFwdParams& p, int b, const SeqBounds& s,
                                             int t0, int hk) {
  load_rows<kRows, kD, kStride, kCtaThreads>(sK, static_cast<const Elem*>(p.k),
                                             [&](int r) { return k_offset(p, b, s, t0 + r, hk); },
                                             [&](int r) { return t0 + r < s.sk; }, p.head_size);
  load_rows<kRows, kD, kStride, kCtaThreads>(sV, static_cast<const Elem*>(p.v),
                                             [&](int r) { return v_offset(p, b, s, t0 + r, hk); },
                                             [&](int r) { return t0 + r < s.sk; }, p.head_size);
}

// Query rows [i0, i0 + kRows) of head h from q and dO (rows past the sequence read as zero).
template <int kRows, int kD, int kStride, int kCtaThreads = kThreads, class Elem>
__device__ __forceinline__ void load_q_do_rows(Elem* sQ, Elem* sdO, const FlashBwdParams& bp, int b,
                                               const SeqBounds& s, int i0, int h) {
  const FlashFwdParams& p = bp.fwd;
  load_rows<kRows, kD, kStride, kCtaThreads>(sQ, static_cast<const Elem*>(p.q),
                                             [&](int r) { return q_offset(p, b, s, i0 + r, h); },
                                             [&](int r) { return i0 + r < s.sq; }, p.head_size);
  load_rows<kRows, kD, kStride, kCtaThreads>(
      sdO, static_cast<const Elem*>(bp.dout),
      [&](int r) { return do_offset(bp, b, s, i0 + r, h); },
      [&](int r) { return i0 + r < s.sq; }, p.head_size);
}

// The key tile [t0, t0 + kBlockN) of a kv-side CTA: the query rows [i_lo, i_hi) whose window
// reaches one of its keys (with mm-prefix ranges, all rows), and this thread's two key rows
// (g and g + 8 of its warp's 16) with the query rows each sees through its window.
struct KeyTile {
  int off;             // key position of query row 0
  const int32_t* mm;   // the sequence's mm-prefix ranges, or null
  int i_lo, i_hi;
  int key[2], q_lo[2], q_hi[2];

  // Does query row i see this thread's key row rr (both inside the sequence)?
  __device__ __forceinline__ bool sees(const FlashFwdParams& p, const SeqBounds& s, int i, int rr) const {
    const int t = key[rr];
    return t < s.sk && i < s.sq &&
           ((i >= q_lo[rr] && i < q_hi[rr]) ||
            (mm && in_shared_range<int>(mm, p.mm_range_stride, p.mm_max_ranges, i + off, t)));
  }
};

template <int kBlockN>
__device__ __forceinline__ KeyTile key_tile(const FlashFwdParams& p, int b, const SeqBounds& s, int t0, int warp,
                                            int g) {
  KeyTile kt;
  kt.off = static_cast<int>(key_position(s, 0));
  kt.mm = mm_ranges_of(p, b);
  kt.i_lo = 0, kt.i_hi = s.sq;
  if (!kt.mm) {
    const Range<int> pos = window_rows<int>(p, t0, min(s.sk, t0 + kBlockN) - 1, kt.off, kt.off + s.sq);
    kt.i_lo = pos.begin - kt.off, kt.i_hi = pos.end - kt.off;
  }
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    kt.key[rr] = t0 + warp * 16 + g + 8 * rr;
    const Range<int> pos = window_rows<int>(p, kt.key[rr], kt.key[rr], kt.off, kt.off + s.sq);
    kt.q_lo[rr] = pos.begin - kt.off, kt.q_hi[rr] = pos.end - kt.off;
  }
  return kt;
}

// The walk of a kv-side CTA (key tile `tile` of kv head hk): the query rows whose window
// reaches a key of the tile, in whole query tiles of kBlockM rows, times the heads of the
// group. Step n (0 <= n < steps) is query head head(n), rows row0(n) ..; key tiles start
// their walk at different query tiles, so the CTAs of one head do not all add into the same
// dQ rows at once.
template <int kBlockM>
struct StepWalk {
  int first_tile, n_tiles, hk, group, tile, steps;
  __device__ __forceinline__ StepWalk(const FlashFwdParams& p, const KeyTile& kt, int hk_, int tile_)
      : first_tile(kt.i_lo / kBlockM),
        n_tiles(kt.i_hi > kt.i_lo ? (kt.i_hi - 1) / kBlockM - first_tile + 1 : 0),
        hk(hk_),
        group(group_size(p)),
        tile(tile_),
        steps(group * n_tiles) {}
  __device__ __forceinline__ int head(int n) const { return hk * group + n / n_tiles; }
  __device__ __forceinline__ int row0(int n) const { return (first_tile + (n + tile) % n_tiles) * kBlockM; }
};

// A step's lse and D (dsum) of query rows i0 .. i0 + kBlockM - 1, head h, by cp.async into
// rows[0, kBlockM) and rows[kBlockM, 2 kBlockM) (zeros past the sequence's rows); thread t of
// kThreads copies every kThreads-th value.
template <int kBlockM, int kThreads>
__device__ __forceinline__ void load_lse_dsum(float* rows, const FlashBwdParams& bp, int b, const SeqBounds& s, int i0,
                                              int h, int t) {
  const FlashFwdParams& p = bp.fwd;
  for (int x = t; x < 2 * kBlockM; x += kThreads) {
    const int i = i0 + x % kBlockM;
    const bool ok = i < s.sq;
    const float* src = x < kBlockM ? p.lse + (ok ? lse_offset(p, b, s, i, h) : 0)
                                   : bp.dsum + (ok ? dsum_index(p, s.q_row0 + i, h) : 0);
    cp_async_4(smem_addr(rows + x), src, ok);
  }
}

// dq_accum-style buffers: at[0..1] += (x, y), one vector atomic where the GPU has it.
__device__ __forceinline__ void atomic_add2(float* at, float x, float y) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(x, y));
#else
  atomicAdd(at, x);
  atomicAdd(at + 1, y);
#endif
}

// A kv-side CTA's dK (times softmax_scale) and dV rows: this thread's key rows kt.key,
// channels col0 + ..., into dk, dv in the output dtype (bp.kv_direct), else added into the f32
// buffers (onto zero, unless two sequences share a paged block).
template <int kDV, class Elem>
__device__ __forceinline__ void store_dk_dv(const FlashBwdParams& bp, int b, const SeqBounds& s, int hk, int col0,
                                            const KeyTile& kt, const float (&dk)[kDV / 8][4],
                                            const float (&dv)[kDV / 8][4]) {
  const FlashFwdParams& p = bp.fwd;
  const int tq = threadIdx.x % 4, hs = p.head_size;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int t = kt.key[rr];
    if (t >= s.sk) continue;
    const int64_t row = (kv_row(p, b, s, t) * p.num_heads_k + hk) * hs;
#pragma unroll
    for (int d8 = 0; d8 < kDV / 8; ++d8) {
      const int c = col0 + d8 * 8 + 2 * tq;
      if (c >= hs) continue;
      const float k0 = p.softmax_scale * dk[d8][2 * rr], k1 = p.softmax_scale * dk[d8][2 * rr + 1];
      if (bp.kv_direct) {
        *reinterpret_cast<uint32_t*>(static_cast<Elem*>(bp.dk) + row + c) = pack2<Elem>(k0, k1);
        *reinterpret_cast<uint32_t*>(static_cast<Elem*>(bp.dv) + row + c) =
            pack2<Elem>(dv[d8][2 * rr], dv[d8][2 * rr + 1]);
      } else {
        atomic_add2(bp.dk_accum + row + c, k0, k1);
        atomic_add2(bp.dv_accum + row + c, dv[d8][2 * rr], dv[d8][2 * rr + 1]);
      }
    }
  }
}

// A accumulator tile (16 x 16*n16) as A fragments of the next product: column pair kk.
template <class Elem, int kN8>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&acc)[kN8][4], int kk) {
  a[0] = pack2<Elem>(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = pack2<Elem>(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = pack2<Elem>(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = pack2<Elem>(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

template <int kN8>
__device__ __forceinline__ void zero(float (&acc)[kN8][4]) {
#pragma unroll
  for (int j = 0; j < kN8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}

// acc (16 rows x 8*kN8 cols) = rows of A (16 x kD at a_base) times B^T, B's rows (the
// accumulator's columns) at bt_base: the warp's 16 rows against kN8*8 rows of another tile.
template <int kD, int kStride, int kN8, class Elem>
__device__ __forceinline__ void mma_abt(float (&acc)[kN8][4], uint32_t a_base, uint32_t bt_base) {
  zero(acc);
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, a_base + at<kStride>(0, ks * 16));
#pragma unroll
    for (int np = 0; np < kN8 / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, bt_base + at<kStride>(np * 16, ks * 16));
      mma_16816<Elem>(acc[2 * np], a, b[0], b[1]);
      mma_16816<Elem>(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// out (16 x kDV) += acc-as-A (16 x 8*kN8, the product's k dim) times B (8*kN8 rows x kDV
// channels from col0, at b_base).
template <int kStride, int kN8, int kDV, class Elem>
__device__ __forceinline__ void mma_accb(float (&out)[kDV / 8][4], const float (&acc)[kN8][4], uint32_t b_base,
                                         int col0) {
#pragma unroll
  for (int kk = 0; kk < kN8 / 2; ++kk) {
    uint32_t a[4];
    acc_to_a<Elem, kN8>(a, acc, kk);
#pragma unroll
    for (int dp = 0; dp < kDV / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_base + at<kStride>(kk * 16, col0 + dp * 16));
      mma_16816<Elem>(out[2 * dp], a, b[0], b[1]);
      mma_16816<Elem>(out[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// P from the scaled score, and the softcap's derivative factor; invisible or rowless: 0.
__device__ __forceinline__ void prob(float qk, const FlashFwdParams& p, float slope, int pos, int t, float lse2,
                                     bool visible, float& prob_out, float& factor) {
  factor = 1.f;
  if (!visible || lse2 == -INFINITY) {
    prob_out = 0.f;
    return;
  }
  const float x = logit(qk, p.softmax_scale, p.softcap, slope, pos, t);
  if (p.softcap > 0.f) {
    const float th = soft_cap(p.softmax_scale * qk, p.softcap) / p.softcap;
    factor = 1.f - th * th;
  }
  prob_out = fast_exp2(x * kLog2e - lse2);
}

// ---- the q kernel ----------------------------------------------------------------------

template <int kD, int kDV, class Elem>
struct QCfg {
  static constexpr int kBlockM = 16 * kWarps;  // queries per CTA
  static constexpr int kBlockN = 32;           // keys per step
  static constexpr int kStride = kD + 8;
  static constexpr int kSmem = 2 * (2 * kBlockM + 2 * kBlockN) * kStride;
};

template <int kD, int kDV, class Elem>
__global__ void __launch_bounds__(kThreads) bwd_q_kernel(const FlashBwdParams bp, int n_col_chunks) {
  using Cfg = QCfg<kD, kDV, Elem>;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kStride = Cfg::kStride, kN8 = kBlockN / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Elem* sQ = reinterpret_cast<Elem*>(smem_raw);
  Elem* sdO = sQ + kBlockM * kStride;
  Elem* sK = sdO + kBlockM * kStride;
  Elem* sV = sK + kBlockN * kStride;

  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tq = lane % 4;
  const int chunk = blockIdx.x % n_col_chunks, tile = blockIdx.x / n_col_chunks;
  const int h = blockIdx.y, b = blockIdx.z, col0 = chunk * kDV;
  const SeqBounds s = seq_bounds(p, b);
  const int i0 = tile * kBlockM;
  if (i0 >= s.sq || s.sk == 0) return;
  const int hs = p.head_size, hk = kv_head(p, h);
  load_q_do_rows<kBlockM, kD, kStride>(sQ, sdO, bp, b, s, i0, h);
  cp_async_commit();

  const int off = static_cast<int>(key_position(s, 0));
  const int i_last = min(s.sq, i0 + kBlockM) - 1;
  const Range<int> keys = visible_keys_of_rows<int>(p, b, i0 + off, i_last + off, s.sk);
  const int32_t* mm = rows_touch_ranges<int>(p, b, i0 + off, i_last + off) ? mm_ranges_of(p, b) : nullptr;
  const float slope = alibi_slope(p, h);
  // This thread's two query rows: their lse (log2 units), D and window keys.
  int row[2];
  float lse2[2], dsum[2];
  Range<int> win[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    row[rr] = i0 + warp * 16 + g + 8 * rr;
    const bool ok = row[rr] < s.sq;
    const float l = ok ? p.lse[lse_offset(p, b, s, row[rr], h)] : -INFINITY;
    lse2[rr] = l == -INFINITY ? -INFINITY : l * kLog2e;
    dsum[rr] = ok ? bp.dsum[dsum_index(p, s.q_row0 + row[rr], h)] : 0.f;
    win[rr] = window_keys<int>(p, row[rr] + off, s.sk);
  }

  float dq[kDV / 8][4];
  zero(dq);
  const uint32_t q_a = a_lane<kStride>(sQ + warp * 16 * kStride, lane);
  const uint32_t do_a = a_lane<kStride>(sdO + warp * 16 * kStride, lane);
  const uint32_t k_bt = bt_lane<kStride>(sK, lane), v_bt = bt_lane<kStride>(sV, lane);
  const uint32_t k_b = b_lane<kStride>(sK, lane);

  for (int t0 = keys.begin / kBlockN * kBlockN; !keys.empty() && t0 < keys.end; t0 += kBlockN) {
    __syncthreads();  // everyone is done with the previous K / V tile
    load_kv_rows<kBlockN, kD, kStride>(sK, sV, p, b, s, t0, hk);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float sc[kN8][4], fac[kN8][4], dp[kN8][4];
    mma_abt<kD, kStride, kN8, Elem>(sc, q_a, k_bt);
#pragma unroll
    for (int j = 0; j < kN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rr = e / 2, t = t0 + j * 8 + 2 * tq + (e % 2), pos = row[rr] + off;
        const bool vis = row[rr] < s.sq && t < s.sk &&
                         (win[rr].contains(t) || (mm && in_shared_range<int>(mm, p.mm_range_stride, p.mm_max_ranges, pos, t)));
        prob(sc[j][e], p, slope, pos, t, lse2[rr], vis, sc[j][e], fac[j][e]);
      }
    mma_abt<kD, kStride, kN8, Elem>(dp, do_a, v_bt);
#pragma unroll
    for (int j = 0; j < kN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[j][e] = sc[j][e] * (dp[j][e] - dsum[e / 2]) * fac[j][e];
    mma_accb<kStride, kN8, kDV, Elem>(dq, dp, k_b, col0);
  }

  // dQ rows are this CTA's alone: plain stores into the f32 buffer.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (row[rr] >= s.sq) continue;
    float* dst = bp.dq_accum + ((s.q_row0 + row[rr]) * p.num_heads + h) * hs;
#pragma unroll
    for (int d8 = 0; d8 < kDV / 8; ++d8)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = col0 + d8 * 8 + 2 * tq + e;
        if (c < hs) dst[c] = p.softmax_scale * dq[d8][2 * rr + e];
      }
  }
}


// ---- the key-tile kernel ---------------------------------------------------------------
// One CTA per (key tile of kBlockN keys, kv head, sequence[, output column chunk]) (warp w
// owns keys 16w..16w+15 and their dK, dV rows), walking every (query head of the group,
// query tile of kBlockM rows) whose window reaches the tile. One step:
//   1. dP^T = V dO^T and S^T = K Q^T (the warp's 16 keys x the tile's queries)
//   2. P^T and dS^T in place: P = exp2(S * scale * log2 e - lse * log2 e), dS = P (dP - D)
//      (with a softcap or ALiBi: the contract's logit and the softcap's factor); 0 where a
//      row does not see the key (a tile whose every row sees every key skips that test)
//   3. dV += P^T dO, dK += dS^T Q
//   4. (kDq) dS^T to shared memory (rounded to the input dtype, as the products use it);
//      barrier (and, with one stage, the next Q / dO tile starts loading)
//   5. (kDq) dQ of the tile's rows, scale * dS K (warp: one or two 16-row slices, some
//      columns), added into the f32 dq_accum with atomics while the next Q / dO tile loads
// At the end dK and dV go out once (kv_direct: in the output dtype). Up to d128: 8 warps,
// 128 keys, 64-query steps, two Q / dO stages, one CTA per SM; d256: 4 warps, 32-query
// steps, one stage, 128-channel output chunks.
// dQ's terms from different key tiles arrive in the order the CTAs run, so with kDq its
// last bits vary run to run; dK and dV are summed in a fixed order either way.

template <int kD, int kDV, int kWarps, int kBlockM_>
struct FusedCfg {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockN = 16 * kWarps;                      // keys per CTA
  static constexpr int kBlockM = kBlockM_;                          // queries per step
  static constexpr int kStages = kD <= 64 || kWarps == 8 ? 2 : 1;   // Q / dO tiles in flight
  static constexpr int kStride = kD + 8;                            // Q, dO, K, V rows
  static constexpr int kSStride = kBlockM + 8;                      // dS^T rows (keys)
  static constexpr int kMTiles = kBlockM / 16;                      // dQ: 16-row slices
  static constexpr int kSlices = kMTiles >= kWarps ? 1 : kWarps / kMTiles;  // dQ: column slices
  static constexpr int kStage = 2 * kBlockM * kStride;              // Q then dO, elements
  static constexpr int kSmem =
      2 * (2 * kBlockN * kStride + kStages * kStage + kBlockN * kSStride) + kStages * 2 * kBlockM * 4;
};

// kLogitTerms: the op has a softcap or ALiBi (the logit's extra terms and the softcap's
// factor need registers the common case should not pay for).
template <int kD, int kDV, class Elem, bool kLogitTerms, bool kDq, int kWarps, int kBM>
__global__ void __launch_bounds__(32 * kWarps) bwd_key_tile_kernel(const FlashBwdParams bp, int n_col_chunks) {
  using Cfg = FusedCfg<kD, kDV, kWarps, kBM>;
  constexpr int kThreads = Cfg::kThreads;
  constexpr int kBlockN = Cfg::kBlockN, kBlockM = Cfg::kBlockM, kStride = Cfg::kStride,
                kSStride = Cfg::kSStride, kStages = Cfg::kStages, kM8 = kBlockM / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Elem* sK = reinterpret_cast<Elem*>(smem_raw);
  Elem* sV = sK + kBlockN * kStride;
  Elem* sStage = sV + kBlockN * kStride;  // stage j: Q at j * kStage, dO kBlockM rows later
  Elem* sdS = sStage + kStages * Cfg::kStage;
  float* sRows = reinterpret_cast<float*>(sdS + kBlockN * kSStride);  // stage j: lse, then D

  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;  // the cast kernel writes NaN gradients
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tq = lane % 4;
  const int chunk = blockIdx.x % n_col_chunks, tile = blockIdx.x / n_col_chunks;
  const int hk = blockIdx.y, b = blockIdx.z, col0 = chunk * kDV;
  const SeqBounds s = seq_bounds(p, b);
  const int t0 = tile * kBlockN;
  if (t0 >= s.sk || s.sq == 0) return;
  const int hs = p.head_size;
  load_kv_rows<kBlockN, kD, kStride, kThreads>(sK, sV, p, b, s, t0, hk);
  cp_async_commit();

  const KeyTile kt = key_tile<kBlockN>(p, b, s, t0, warp, g);
  const StepWalk<kBlockM> walk(p, kt, hk, tile);
  const int steps = walk.steps;

  // Step n's Q, dO, lse and D into stage n % kStages (one cp.async group).
  auto load_step = [&](int n) {
    const int h = walk.head(n), i0 = walk.row0(n), j = n % kStages;
    Elem* q_dst = sStage + j * Cfg::kStage;
    load_q_do_rows<kBlockM, kD, kStride, kThreads>(q_dst, q_dst + kBlockM * kStride, bp, b, s, i0, h);
    load_lse_dsum<kBlockM, kThreads>(sRows + j * 2 * kBlockM, bp, b, s, i0, h, threadIdx.x);
  };
  if (steps > 0) load_step(0);
  cp_async_commit();

  const float scale2 = p.softmax_scale * kLog2e;

  float dk[kDV / 8][4], dv[kDV / 8][4];
  zero(dk);
  zero(dv);
  const uint32_t k_a = a_lane<kStride>(sK + warp * 16 * kStride, lane);
  const uint32_t v_a = a_lane<kStride>(sV + warp * 16 * kStride, lane);
  const uint32_t k_b = b_lane<kStride>(sK, lane);
  const uint32_t ds_at = bt_lane<kSStride>(sdS, lane);

  for (int n = 0; n < steps; ++n) {
    const int h = walk.head(n), i0 = walk.row0(n), j = n % kStages;
    if constexpr (kStages == 2) {
      if (n + 1 < steps) load_step(n + 1);  // its stage was last read before step n-1's barrier
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // step n's tiles are in; every warp is done with step n-1's dS^T
    const Elem* sQ = sStage + j * Cfg::kStage;
    const Elem* sdO = sQ + kBlockM * kStride;
    const float* sLse = sRows + j * 2 * kBlockM;
    const float* sD = sLse + kBlockM;

    // Which of this thread's kM8 x 4 (query, key) pairs are visible, bit 4 jj + e; set
    // before the products, while registers are free. A tile whose every row sees every key
    // needs no test.
    using Bits = std::conditional_t<(kM8 * 4 > 32), unsigned long long, uint32_t>;
    Bits vis = ~Bits(0);
    if (!(i0 + kBlockM <= s.sq && t0 + kBlockN <= s.sk &&
          window_covers<int>(p, i0 + kt.off, i0 + kBlockM - 1 + kt.off, t0, t0 + kBlockN - 1, s.sk))) {
      vis = 0;
#pragma unroll
      for (int jj = 0; jj < kM8; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          vis |= static_cast<Bits>(kt.sees(p, s, i0 + jj * 8 + 2 * tq + (e % 2), e / 2)) << (4 * jj + e);
        }
    }

    // 1. dP^T = V dO^T, S^T = K Q^T
    float st[kM8][4], dpt[kM8][4];
    mma_abt<kD, kStride, kM8, Elem>(dpt, v_a, bt_lane<kStride>(sdO, lane));
    mma_abt<kD, kStride, kM8, Elem>(st, k_a, bt_lane<kStride>(sQ, lane));
    // 2. P^T into st, dS^T into dpt (invisible: 0, which also covers a row with lse = -inf)
    const float slope = kLogitTerms ? alibi_slope(p, h) : 0.f;
    auto probs = [&](auto all_seen) {
#pragma unroll
      for (int jj = 0; jj < kM8; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = jj * 8 + 2 * tq + (e % 2);
          const bool seen = all_seen || ((vis >> (4 * jj + e)) & 1u);
          float pr, fac = 1.f;
          if constexpr (kLogitTerms)
            prob(st[jj][e], p, slope, i0 + c + kt.off, kt.key[e / 2], sLse[c] * kLog2e, seen, pr, fac);
          else
            pr = seen ? fast_exp2(st[jj][e] * scale2 - sLse[c] * kLog2e) : 0.f;
          dpt[jj][e] = pr * (dpt[jj][e] - sD[c]) * fac;
          st[jj][e] = pr;
        }
    };
    if (vis == ~Bits(0))
      probs(std::true_type{});
    else
      probs(std::false_type{});
    // 3. dV += P^T dO, dK += dS^T Q (scaled at the end)
    mma_accb<kStride, kM8, kDV, Elem>(dv, st, b_lane<kStride>(sdO, lane), col0);
    mma_accb<kStride, kM8, kDV, Elem>(dk, dpt, b_lane<kStride>(sQ, lane), col0);
    // 4. dS^T (keys x queries) for the whole CTA
    if constexpr (kDq) {
#pragma unroll
      for (int jj = 0; jj < kM8; ++jj)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr)
          *reinterpret_cast<uint32_t*>(sdS + (warp * 16 + g + 8 * rr) * kSStride + jj * 8 + 2 * tq) =
              pack2<Elem>(dpt[jj][2 * rr], dpt[jj][2 * rr + 1]);
    }
    // Step n's Q / dO (and dS^T) complete: with two stages the next step's loads, issued
    // before its top barrier, may overwrite this stage only after every warp is here.
    __syncthreads();
    if constexpr (kStages == 1) {
      if (n + 1 < steps) load_step(n + 1);
      cp_async_commit();
    }
    if constexpr (kDq) {
      // 5. dQ += scale * dS K: 16-row slice m of the tile, kQW columns from c0 at a time
      constexpr int kMTiles = Cfg::kMTiles, kCols = kDV / Cfg::kSlices, kQW = kCols < 128 ? kCols : 128;
      constexpr int kPerWarp = (kMTiles >= kWarps ? kMTiles / kWarps : 1) * (kCols / kQW);
#pragma unroll
      for (int mi = 0; mi < kPerWarp; ++mi) {
        const int m = kMTiles >= kWarps ? warp + mi / (kCols / kQW) * kWarps : warp % kMTiles;
        const int c0 = col0 + (kMTiles >= kWarps ? 0 : warp / kMTiles * kCols) + mi % (kCols / kQW) * kQW;
        float dq[kQW / 8][4];
        zero(dq);
#pragma unroll
        for (int ks = 0; ks < kBlockN / 16; ++ks) {
          uint32_t a[4];
          ldmatrix_x4_trans(a, ds_at + at<kSStride>(ks * 16, m * 16));
#pragma unroll
          for (int dp = 0; dp < kQW / 16; ++dp) {
            uint32_t bb[4];
            ldmatrix_x4_trans(bb, k_b + at<kStride>(ks * 16, c0 + dp * 16));
            mma_16816<Elem>(dq[2 * dp], a, bb[0], bb[1]);
            mma_16816<Elem>(dq[2 * dp + 1], a, bb[2], bb[3]);
          }
        }
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int i = i0 + m * 16 + g + 8 * rr;
          if (i >= s.sq) continue;
          float* dst = bp.dq_accum + ((s.q_row0 + i) * p.num_heads + h) * hs + c0 + 2 * tq;
#pragma unroll
          for (int d8 = 0; d8 < kQW / 8; ++d8)
            if (c0 + d8 * 8 < hs)
              atomic_add2(dst + d8 * 8, p.softmax_scale * dq[d8][2 * rr], p.softmax_scale * dq[d8][2 * rr + 1]);
        }
      }
    }
  }
  cp_async_wait<0>();

  store_dk_dv<kDV, Elem>(bp, b, s, hk, col0, kt, dk, dv);
}

}  // namespace wick::kernels::flash_bwd_mma

namespace wick::kernels::flash_bwd_mma {

template <int kD, int kDV, class Elem, bool kDq, int kW, int kBM>
void launch_key_tiles_cfg(const FlashBwdParams& bp, cudaStream_t st, int chunks, int max_sk) {
  const FlashFwdParams& p = bp.fwd;
  using F = FusedCfg<kD, kDV, kW, kBM>;
  static bool smem_set[2][kSmemLimitDevices] = {};  // the two forms' limits, once per device
  raise_smem_limit_once(bwd_key_tile_kernel<kD, kDV, Elem, false, kDq, kW, kBM>, F::kSmem, smem_set[0]);
  raise_smem_limit_once(bwd_key_tile_kernel<kD, kDV, Elem, true, kDq, kW, kBM>, F::kSmem, smem_set[1]);
  const dim3 grid(static_cast<unsigned>((max_sk + F::kBlockN - 1) / F::kBlockN * chunks), p.num_heads_k, p.batch);
  if (p.softcap > 0.f || p.alibi_slopes)
    bwd_key_tile_kernel<kD, kDV, Elem, true, kDq, kW, kBM><<<grid, F::kThreads, F::kSmem, st>>>(bp, chunks);
  else
    bwd_key_tile_kernel<kD, kDV, Elem, false, kDq, kW, kBM><<<grid, F::kThreads, F::kSmem, st>>>(bp, chunks);
  WICK_CUDA_CHECK(cudaGetLastError());
}

// The key-tile kernel of instance kD (head sizes up to kD; output chunks of up to 128
// channels) on `st`, with or without dQ. 8 warps (128 keys, one CTA per SM) up to d128: half
// the dQ atomics and Q / dO reads of 4 warps, 1.1-1.35x faster on the H200
// (bench/RESULTS.md); d256's tiles need 4.
template <int kD, class Elem, bool kDq>
void launch_key_tiles(const FlashBwdParams& bp, cudaStream_t st) {
  constexpr int kDV = kD > 128 ? 128 : kD;
  const FlashFwdParams& p = bp.fwd;
  const int chunks = (p.head_size + kDV - 1) / kDV;
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  if constexpr (kD <= 128)
    launch_key_tiles_cfg<kD, kDV, Elem, kDq, 8, 64>(bp, st, chunks, max_sk);
  else
    launch_key_tiles_cfg<kD, kDV, Elem, kDq, 4, 32>(bp, st, chunks, max_sk);
}

template <int kD, class Elem>
void launch_fused(const FlashBwdParams& bp, cudaStream_t st) {
  launch_key_tiles<kD, Elem, true>(bp, st);
}

template <int kD, class Elem>
void launch(const FlashBwdParams& bp, cudaStream_t st) {
  launch_key_tiles<kD, Elem, false>(bp, st);  // dK, dV
  constexpr int kDV = kD > 128 ? 128 : kD;
  const FlashFwdParams& p = bp.fwd;
  const int chunks = (p.head_size + kDV - 1) / kDV;
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  using Q = QCfg<kD, kDV, Elem>;
  static bool smem_set[kSmemLimitDevices] = {};
  raise_smem_limit_once(bwd_q_kernel<kD, kDV, Elem>, Q::kSmem, smem_set);
  const dim3 q_grid(static_cast<unsigned>((max_sq + Q::kBlockM - 1) / Q::kBlockM * chunks), p.num_heads, p.batch);
  bwd_q_kernel<kD, kDV, Elem><<<q_grid, kThreads, Q::kSmem, st>>>(bp, chunks);
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels::flash_bwd_mma

// Explicit instances of one head size in both dtypes (kernels/flash_bwd/flash_bwd_hdim<D>.cu).
#define WICK_FLASH_BWD_INSTANTIATE(D)                                                                  \
  namespace wick::kernels::flash_bwd_mma {                                                           \
  template void launch<D, __nv_bfloat16>(const FlashBwdParams&, cudaStream_t);                       \
  template void launch<D, __half>(const FlashBwdParams&, cudaStream_t);                              \
  template void launch_fused<D, __nv_bfloat16>(const FlashBwdParams&, cudaStream_t);                 \
  template void launch_fused<D, __half>(const FlashBwdParams&, cudaStream_t);                        \
  }
