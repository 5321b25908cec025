// The Hopper backward (sm_90a): the fused key-tile backward of flash_bwd_mma.cuh with its
// five matrix products per step issued as warpgroup MMAs (kernels/flash/hopper.cuh), the
// tensor cores reading Q, dO, K, V and dS^T from shared memory instead of each warp loading
// fragments into registers. Built only for sm_90a (the object library of the Hopper
// forward); flash_bwd.cu sends it the calls it covers (flash_bwd_sm90.h).
//
// One CTA per (key tile of 128 keys, kv head, sequence): two warpgroups, warpgroup w owning
// keys 64 w .. 64 w + 63 and their dK, dV rows (f32, in registers for the whole CTA). It walks
// every (query head of the group, query tile of kM rows: 64, or 128 at head size 64) whose
// window reaches the tile, as the mma.sync kernel does, Q, dO, lse and D of a step in one of
// two shared-memory stages (the next step's load runs during this one). One step, per
// warpgroup:
//   1. S^T = K_w Q^T and dP^T = V_w dO^T (64 keys x kM queries)
//   2. P^T = exp2(S^T * scale * log2 e - lse * log2 e), dS^T = P^T (dP^T - D): 0 where a query
//      does not see the key; both packed as 16-bit A fragments
//   3. dV += P^T dO, dK += dS^T Q (A from registers; dO and Q read transposed)
//   4. dS^T to shared memory (the warpgroup's 64 rows), then dQ = dS K (dS and K read
//      transposed) over all 128 keys once both warpgroups' rows are in, added into dq_accum
//      with f32 atomics, each warpgroup taking one 64 x 64 block: 64 of the channels at head
//      size 128, 64 of the 128 query rows at 64. dQ's terms arrive from the CTAs in the
//      order they run, so its last bits vary run to run
// At the end dK (times the softmax scale) and dV are stored once, in the output dtype.
#include "kernels/flash_bwd/flash_bwd_sm90.h"

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_instances.h"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash/hopper.cuh"
#include "kernels/flash_bwd/flash_bwd_mma.cuh"
#include "kernels/smem_limit.h"
#include "tensor/cuda_check.h"

namespace wick::kernels::flash_bwd_sm90 {
namespace {

using namespace wick::kernels::flash;
using namespace wick::kernels::flash::sm90;

constexpr int kBlockN = 128;  // keys per CTA: two warpgroups of 64
constexpr int kThreads = 256;
// Query rows per step: 64 at head size 128; 128 at 64, where the products of a 64-row step
// are half as long as at 128 while the step's barrier, loads and softmax are not.
template <int D>
constexpr int kStepRows = D == 64 ? 128 : 64;
constexpr int kStages = 2;    // Q / dO / lse / D stages

// Shared memory, every tile in the 128-byte swizzle (1024-byte aligned): K, V (kBlockN rows),
// per stage Q and dO (kM rows), dS^T (kBlockN key rows of the step's kM queries), then
// per stage lse and D (f32).
template <int D>
struct Tiles {
  static constexpr int kM = kStepRows<D>;
  static constexpr uint32_t kKBytes = kBlockN * D * 2;
  static constexpr uint32_t kQBytes = kM * D * 2;
  static constexpr uint32_t kDsBytes = kBlockN * kM * 2;
  static constexpr uint32_t kRowsBytes = kStages * 2 * kM * 4;
  static constexpr int kSmem = 1024 + 2 * kKBytes + kStages * 2 * kQBytes + kDsBytes + kRowsBytes;
  static_assert(D % 64 == 0, "whole 64-channel panels");
};

// cp.async copies of a kRows x D swizzled tile at `dst`: row r from rows + r * row_stride;
// rows at or past `valid` and channels at or past `channels` read as zeros. Thread tid
// copies one 16-byte chunk of every kStep-th row (kStep a multiple of 8, so a thread's rows
// share their swizzle pattern).
template <int D, int kRows, class Elem>
__device__ __forceinline__ void load_tile(uint32_t dst, const Elem* rows, int64_t row_stride, int valid, int channels) {
  constexpr int kChunks = D / 8, kStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kStep % 8 == 0 && kRows % kStep == 0, "whole passes of rows");
  const int row = threadIdx.x / kChunks, col = (threadIdx.x % kChunks) * 8;
  const uint32_t d0 = dst + swizzled_offset(kRows, row, col);
#pragma unroll
  for (int i = 0; i < kRows / kStep; ++i) {
    const int r = row + i * kStep;
    const bool ok = r < valid && col < channels;
    cp_async_16(d0 + i * kStep * 128, ok ? rows + r * row_stride + col : rows, ok);
  }
}

__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// Accumulator columns 16 kk .. 16 kk + 15 of a 64 x N tile as the A fragment of k step kk.
template <class Elem, int N>
__device__ __forceinline__ void pack_a(const float (&x)[N / 2], uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = pack2<Elem>(x[8 * kk + 2 * r], x[8 * kk + 2 * r + 1]);
}

template <int D, class Elem>
__global__ void __launch_bounds__(kThreads, 1) bwd_kernel(const FlashBwdParams bp) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Tiles<D>;
  constexpr int kBlockM = T::kM;
  extern __shared__ unsigned char smem_raw[];
  const FlashFwdParams& p = bp.fwd;
  if (call_faulted(p)) return;  // the cast kernel writes NaN gradients
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4, g = lane / 4, tq = lane % 4;
  const int tile = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const SeqBounds s = seq_bounds(p, b);
  const int t0 = tile * kBlockN;
  if (t0 >= s.sk || s.sq == 0) return;
  const int hs = p.head_size;

  const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023) & ~1023u;
  const uint32_t sK = base, sV = sK + T::kKBytes, sStages = sV + T::kKBytes;
  auto sQ = [&](int j) { return sStages + j * 2 * T::kQBytes; };
  auto sdO = [&](int j) { return sQ(j) + T::kQBytes; };
  const uint32_t sdS = sStages + kStages * 2 * T::kQBytes;
  float* rows = reinterpret_cast<float*>(smem_raw + (sdS + T::kDsBytes - raw));  // stage j: lse, then D

  const int valid_k = min(kBlockN, s.sk - t0);
  load_tile<D, kBlockN>(sK,
                        static_cast<const Elem*>(p.k) + hk * p.k_head_stride +
                            packed_kv_offset(b, s, t0, p.k_batch_stride, p.k_row_stride),
                        p.k_row_stride, valid_k, hs);
  load_tile<D, kBlockN>(sV,
                        static_cast<const Elem*>(p.v) + hk * p.v_head_stride +
                            packed_kv_offset(b, s, t0, p.v_batch_stride, p.v_row_stride),
                        p.v_row_stride, valid_k, hs);
  cp_async_commit();

  // The steps: (query head of the group, query tile) pairs whose window reaches the tile.
  const flash_bwd_mma::KeyTile kt = flash_bwd_mma::key_tile<kBlockN>(p, b, s, t0, warp, g);
  const flash_bwd_mma::StepWalk<kBlockM> walk(p, kt, hk, tile);
  const int steps = walk.steps;
  auto load_step = [&](int n) {
    const int h = walk.head(n), i0 = walk.row0(n), j = n % kStages;
    const int valid_q = min(kBlockM, s.sq - i0);
    load_tile<D, kBlockM>(sQ(j), static_cast<const Elem*>(p.q) + q_offset(p, b, s, i0, h), p.q_row_stride, valid_q,
                          hs);
    const Elem* dout = static_cast<const Elem*>(bp.dout) + do_offset(bp, b, s, i0, h);
    load_tile<D, kBlockM>(sdO(j), dout, bp.do_row_stride, valid_q, hs);
    flash_bwd_mma::load_lse_dsum<kBlockM, kThreads>(rows + j * 2 * kBlockM, bp, b, s, i0, h, tid);
  };
  if (steps > 0) load_step(0);
  cp_async_commit();

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int e = 0; e < D / 2; ++e) dk[e] = dv[e] = 0.f;
  const float scale2 = p.softmax_scale * kLog2e;
  constexpr uint32_t kKPanel = kBlockN * 128, kQPanel = kBlockM * 128;  // bytes between 64-channel panels
  const uint32_t k_wg = sK + wg * 64 * 128, v_wg = sV + wg * 64 * 128;   // the warpgroup's key rows
  const int key_row = 16 * warp + g;  // this thread's rows of the tile: key_row, key_row + 8

  for (int n = 0; n < steps; ++n) {
    const int h = walk.head(n), i0 = walk.row0(n), j = n % kStages;
    cp_async_wait<0>();
    fence_proxy_async();  // this thread's copies, landed, to the tensor cores' view
    // Step n's tiles are in for every thread, and every warp is done with step n - 1, so its
    // stage takes step n + 1's tiles (they land while step n computes).
    __syncthreads();
    if (n + 1 < steps) load_step(n + 1);
    cp_async_commit();
    const float* sLse = rows + j * 2 * kBlockM;
    const float* sD = sLse + kBlockM;
    // Which of this thread's kBlockM / 2 (key, query) pairs are visible, bit 4 jj + 2 i + c
    // (the accumulator element below); set before the products, while registers are free. A
    // step whose every row sees every key needs no test.
    using Bits = std::conditional_t<kBlockM == 128, uint64_t, uint32_t>;
    Bits vis = ~Bits{0};
    if (!(i0 + kBlockM <= s.sq && t0 + kBlockN <= s.sk &&
          window_covers<int>(p, i0 + kt.off, i0 + kBlockM - 1 + kt.off, t0, t0 + kBlockN - 1, s.sk))) {
      vis = 0;
#pragma unroll
      for (int i = 0; i < 2; ++i) {  // key row i sees query rows [lo, hi) of the step (no mm ranges here)
        const bool key_in = kt.key[i] < s.sk;
        const int lo = max(kt.q_lo[i], 0) - i0, hi = min(kt.q_hi[i], s.sq) - i0;
#pragma unroll
        for (int jj = 0; jj < kBlockM / 8; ++jj)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = 8 * jj + 2 * tq + c;
            vis |= static_cast<Bits>(key_in && col >= lo && col < hi) << (4 * jj + 2 * i + c);
          }
      }
    }

    // 1. S^T = K_w Q^T, dP^T = V_w dO^T
    float st[kBlockM / 2], dpt[kBlockM / 2];
    const uint64_t d_k = make_desc(k_wg, 16, 1024), d_v = make_desc(v_wg, 16, 1024);
    const uint64_t d_q = make_desc(sQ(j), 16, 1024), d_do = make_desc(sdO(j), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t at = (ks / 4) * kKPanel + (ks % 4) * 32, aq = (ks / 4) * kQPanel + (ks % 4) * 32;
      wgmma_ss<kBlockM, Elem>(st, desc_step(d_k, at), desc_step(d_q, aq), ks > 0);
    }
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t at = (ks / 4) * kKPanel + (ks % 4) * 32, aq = (ks / 4) * kQPanel + (ks % 4) * 32;
      wgmma_ss<kBlockM, Elem>(dpt, desc_step(d_v, at), desc_step(d_do, aq), ks > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(st);
    fence_operands(dpt);

    // 2. P^T in st, dS^T in dpt (element 4 jj + 2 i + c: key row key_row + 8 i, query
    //    column 8 jj + 2 tq + c), packed as A fragments
#pragma unroll
    for (int jj = 0; jj < kBlockM / 8; ++jj)
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int e = 4 * jj + 2 * i + c, col = 8 * jj + 2 * tq + c;
          const float pr = (vis >> e) & 1u ? fast_exp2(st[e] * scale2 - sLse[col] * kLog2e) : 0.f;
          dpt[e] = pr * (dpt[e] - sD[col]);
          st[e] = pr;
        }
    constexpr int kSteps = kBlockM / 16;  // k steps of the products over the step's queries
    uint32_t ap[kSteps][4], as[kSteps][4];
    pack_a<Elem, kBlockM>(st, ap);
    pack_a<Elem, kBlockM>(dpt, as);

    // 3. dV += P^T dO, dK += dS^T Q (dK scaled at the end)
    fence_operands(dv);
    fence_operands(dk);
    fence_operands(ap);
    fence_operands(as);
    wgmma_fence();
    const uint64_t d_do_t = make_desc(sdO(j), kQPanel, 1024), d_q_t = make_desc(sQ(j), kQPanel, 1024);
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) wgmma_rs<D, Elem>(dv, ap[kk], desc_step(d_do_t, kk * 16 * 128), 1);
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) wgmma_rs<D, Elem>(dk, as[kk], desc_step(d_q_t, kk * 16 * 128), 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(dv);
    fence_operands(dk);
    fence_operands(ap);
    fence_operands(as);

    // 4. dS^T rows to shared memory (A fragment register r of step kk: n-block 2 kk + r / 2,
    //    row i = r % 2), published to the tensor cores; then dQ = dS K over all 128 keys of
    //    the tile, added into dq_accum with one set of atomics per step: at D = 128 each
    //    warpgroup takes one 64-channel panel, at D = 64 (128 query rows) each warpgroup
    //    takes 64 of the rows.
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        st_shared_b32(sdS + swizzled_offset(kBlockN, key_row + 8 * (r % 2), 8 * (2 * kk + r / 2) + 2 * tq), as[kk][r]);
    fence_proxy_async();
    __syncthreads();  // both warpgroups' dS^T rows are in
    // Each warpgroup's 64 x 64 block of dQ: channel panel wg at D = 128, query panel wg
    // (64 rows of dS^T's 128 columns) at D = 64.
    static_assert((D == 128 && kBlockM == 64) || (D == 64 && kBlockM == 128), "one 64 x 64 dQ block per warpgroup");
    const int panel = D == 128 ? wg : 0, rows0 = kBlockM == 128 ? 64 * wg : 0;
    {
      constexpr uint32_t kDsPanel = kBlockN * 128;  // bytes between dS^T's 64-query panels
      float dq[32];
      const uint64_t d_ds = make_desc(sdS + (rows0 / 64) * kDsPanel, kDsPanel, 1024);
      const uint64_t d_kt = make_desc(sK + panel * kKPanel, kKPanel, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        wgmma_ss<64, Elem, true>(dq, desc_step(d_ds, kk * 16 * 128), desc_step(d_kt, kk * 16 * 128), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(dq);
      const int c0 = 64 * panel;  // this warpgroup's first dQ channel
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int q = i0 + rows0 + 16 * (warp % 4) + g + 8 * i;
        if (q >= s.sq) continue;
        float* dst = bp.dq_accum + ((s.q_row0 + q) * p.num_heads + h) * hs + c0 + 2 * tq;
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
          if (c0 + 8 * jj < hs)
            flash_bwd_mma::atomic_add2(dst + 8 * jj, p.softmax_scale * dq[4 * jj + 2 * i],
                                       p.softmax_scale * dq[4 * jj + 2 * i + 1]);
      }
    }
  }
  cp_async_wait<0>();
  // The accumulators' layout is store_dk_dv's (n-block jj, row i, column c at 4 jj + 2 i + c).
  flash_bwd_mma::store_dk_dv<D, Elem>(bp, b, s, hk, 0, kt, *reinterpret_cast<const float(*)[D / 8][4]>(dk),
                                      *reinterpret_cast<const float(*)[D / 8][4]>(dv));
#else
  __trap();  // built for sm_90a only; any other target has no body
#endif
}

template <int D, class Elem>
void launch_instance(const FlashBwdParams& bp, cudaStream_t st) {
  const FlashFwdParams& p = bp.fwd;
  auto kernel = bwd_kernel<D, Elem>;
  static bool smem_set[kSmemLimitDevices] = {};
  raise_smem_limit_once(kernel, Tiles<D>::kSmem, smem_set);
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  const dim3 grid(static_cast<unsigned>((max_sk + kBlockN - 1) / kBlockN), p.num_heads_k, p.batch);
  kernel<<<grid, kThreads, Tiles<D>::kSmem, st>>>(bp);
  WICK_CUDA_CHECK(cudaGetLastError());
}

template <class Elem>
void launch_dtype(const FlashBwdParams& bp, cudaStream_t st) {
  if (bp.fwd.head_size <= 64)
    launch_instance<64, Elem>(bp, st);
  else
    launch_instance<128, Elem>(bp, st);
}

}  // namespace

bool covers(const FlashBwdParams& bp) {
  const FlashFwdParams& p = bp.fwd;
  return p.head_size <= 128 && p.head_size % 8 == 0 && p.block_table == nullptr && p.alibi_slopes == nullptr &&
         !(p.softcap > 0.f) && p.mm_prefix_ranges == nullptr && !bp.deterministic && bp.kv_direct &&
         (p.dtype == FlashDType::BF16 || WICK_FLASH_WANT_F16);
}

void launch(const FlashBwdParams& bp, cudaStream_t st) {
  if (bp.fwd.dtype == FlashDType::BF16) {
    launch_dtype<__nv_bfloat16>(bp, st);
  } else {
#if WICK_FLASH_WANT_F16
    launch_dtype<__half>(bp, st);
#endif
  }
}

}  // namespace wick::kernels::flash_bwd_sm90
