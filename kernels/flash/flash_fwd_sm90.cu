// The Hopper forward (sm_90a): the same steps as flash_fwd_kernel.cuh, with the two matrix
// products of each key tile issued as warpgroup MMAs (hopper.cuh) instead of per-warp
// mma.sync. Built only for sm_90a (its own object library in CMakeLists.txt); flash_fwd.cu
// sends it the calls it covers and everything else to the sm_80 family.
//
// What it covers: head size 128, bf16 / f16, K/V batched, varlen or paged (pages of a
// multiple of 32 rows), GQA / MQA, causal and sliding windows, LSE. The sm_80 family keeps:
// softcap, ALiBi and mm-prefix ranges (their per-element logits would cost this kernel
// registers it does not have), a softmax scale that is not positive, forced split counts,
// decode shapes, inputs without 16-byte rows, and f16 in WICK_FLASH_QUICK builds. It never
// splits the keys: a call with few query tiles and very long keys runs one CTA per (tile,
// head, sequence).
//
// Steps, mapped to the CPU algorithm (ops/attention/cpu.cpp):
//   0. CTA = (query tile of 128 rows, head, sequence); two warpgroups of 4 warps, each owning
//      64 rows. The keys any row of the tile can see are found up front (contract.h), so
//      wholly masked key tiles are never loaded.
//   1. Q tile -> shared memory (cp.async into the 128-byte swizzled layout wgmma reads).
//   2. for each key tile of 128 keys (three shared-memory stages, two when paged: the next
//      tiles load while tile j computes):
//      a. S = Q K^T: 8 wgmmas (k = 16 channels each), Q and K read from shared memory,
//         S (64 x 128 f32 per warpgroup) in registers                         = CPU step 2a
//         masks (window, causal, keys past sk) only on tiles that need them
//      b. running row max (quad shuffles)                                    = CPU step 2b
//      c. P = exp2(S * scale*log2e - m * scale*log2e), row sums, O rescaled   = CPU step 2c
//      d. O += P V: 8 wgmmas with P from registers (the S accumulators re-packed as 16-bit
//         A fragments) and V read transposed from shared memory               = CPU step 2d
//   3. epilogue: O / l and lse = (m + log2 l) * ln2 written from registers    = CPU step 3
#include "kernels/flash/flash_fwd_sm90.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_instances.h"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash/hopper.cuh"
#include "tensor/cuda_check.h"

namespace wick::kernels::flash::sm90 {
namespace {

constexpr int kD = 128;       // head size (channels of Q, K, V, O)
constexpr int kBlockM = 128;  // query rows per CTA: two warpgroups of 64
constexpr int kBlockN = 128;  // keys per tile
constexpr int kThreads = 256;
constexpr uint32_t kTileBytes = kBlockN * kD * 2;        // one swizzled K or V tile (two panels)
constexpr uint32_t kQBytes = kBlockM * kD * 2;           // the swizzled Q tile
// Shared-memory stages of K/V: three (tiles j + 1 and j + 2 load while tile j computes;
// measured 0.5-1.5% faster than two on the H200), two when paged (its block ids are read
// one tile ahead).
template <bool kPaged>
constexpr int kStages = kPaged ? 2 : 3;
// Q, the K/V stages, 1024-byte alignment slack.
template <bool kPaged>
constexpr int kSmem = 1024 + kQBytes + 2 * kStages<kPaged> * kTileBytes;

// Issues the cp.async copies of a 128-row x 128-channel swizzled tile (Q and K/V tiles have
// the same shape) at `dst`: row r comes from rows + r * row_stride; rows at or past `valid`
// are zero-filled (no read). Thread tid copies one 16-byte column chunk of every 16th row
// from row tid / 16, and 16 rows keep a row's swizzle pattern (it repeats every 8 rows), so
// each copy after the first costs one address add in shared and in global memory.
static_assert(kBlockM == kBlockN, "Q and K/V tiles share one swizzled shape");
template <class Elem>
__device__ __forceinline__ void load_swizzled(uint32_t dst, const Elem* rows, int64_t row_stride, int valid,
                                              int tid) {
  constexpr int kChunksPerRow = kD / 8;
  constexpr int kRowStep = kThreads / kChunksPerRow;
  static_assert(kRowStep % 8 == 0 && kBlockN % kRowStep == 0, "a thread's rows share one swizzle pattern");
  const int row = tid / kChunksPerRow, col = (tid % kChunksPerRow) * 8;
  const uint32_t d0 = dst + swizzled_offset(kBlockN, row, col);
  const Elem* s0 = rows + row * row_stride + col;
  const int64_t step = kRowStep * row_stride;
  if (valid >= kBlockN) {
#pragma unroll
    for (int i = 0; i < kBlockN / kRowStep; ++i) cp_async_16(d0 + i * kRowStep * 128, s0 + i * step, true);
  } else {
#pragma unroll
    for (int i = 0; i < kBlockN / kRowStep; ++i) {
      const bool ok = row + i * kRowStep < valid;
      cp_async_16(d0 + i * kRowStep * 128, ok ? s0 + i * step : rows, ok);
    }
  }
}

// kPaged: K/V through p.block_table (a separate instance, so the unpaged loads keep their
// registers and schedule).
template <class Elem, bool kPaged>
__global__ void __launch_bounds__(kThreads, 1) fwd_kernel(const FlashFwdParams p, int m_blocks) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  if (call_faulted(p)) {
    write_fault_outputs<Elem>(p, blockIdx.x, gridDim.x);
    return;
  }
  // 0. which tile: heads fastest, then sequences, then query tiles from the last (under a
  //    causal mask the longest) to the first, so long CTAs start first.
  const int h = static_cast<int>(blockIdx.x % p.num_heads);
  const int rest = static_cast<int>(blockIdx.x / p.num_heads);
  const int b = rest % p.batch;
  const int mtile = m_blocks - 1 - rest / p.batch;
  const SeqBounds sb = seq_bounds(p, b);
  const int r0 = mtile * kBlockM;
  if (r0 >= sb.sq) return;
  const int r_end = min(sb.sq, r0 + kBlockM);
  const int hk = kv_head(p, h);
  const int off = static_cast<int>(key_position(sb, 0));
  const int pos_first = r0 + off, pos_last = r_end - 1 + off;
  const Range<int> tile_keys = visible_keys_of_rows<int>(p, b, pos_first, pos_last, sb.sk);
  const Range<int> unmasked = window_keys_of_all_rows<int>(p, pos_first, pos_last, sb.sk);
  const int nb_lo = tile_keys.begin / kBlockN;
  const int nb_hi = tile_keys.end > tile_keys.begin ? (tile_keys.end + kBlockN - 1) / kBlockN : nb_lo;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = warp / 4, w = warp % 4, g = lane / 4, t = lane % 4;
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;  // swizzled panels: 1024-byte aligned
  const uint32_t sQ = base, sK = base + kQBytes, sV = sK + kStages<kPaged> * kTileBytes;

  const Elem* gq = static_cast<const Elem*>(p.q);
  const Elem* gk = static_cast<const Elem*>(p.k) + hk * p.k_head_stride;
  const Elem* gv = static_cast<const Elem*>(p.v) + hk * p.v_head_stride;
  const int64_t q0 = q_offset(p, b, sb, r0, h);
  // Paged K/V: a 128-key tile is four 32-key quarters, each inside one page (pages are
  // multiples of 32 keys), so a quarter's rows are one block base plus the row stride. The
  // quarters' block ids go to one of two shared slots a tile ahead of their use (tile nb's
  // slot: (nb - nb_lo) % 2), so no table read waits in the loop.
  constexpr int kQuarters = kBlockN / 32;
  __shared__ int s_blocks[2][kQuarters];
  const int page = p.page_block_size;
  auto quarter_page = [&](int tq) { return tq / page; };
  auto prefetch_blocks = [&](int nb) {
    if (!kPaged || nb >= nb_hi || tid >= kQuarters) return;
    const int tq = nb * kBlockN + 32 * tid;
    if (tq < sb.sk)
      cp_async_4(smem_addr(&s_blocks[(nb - nb_lo) % 2][tid]),
                 p.block_table + b * p.block_table_batch_stride + quarter_page(tq), true);
  };
  // Issues tile nb's K and V copies into `stage` (paged: the block ids from the table for the
  // first tile, from their slot after it). Rows at or past sk are zero-filled.
  auto load_kv = [&](int nb, int stage, bool from_slot) {
    const int t0 = nb * kBlockN;
    const uint32_t dk = sK + stage * kTileBytes, dv = sV + stage * kTileBytes;
    if constexpr (!kPaged) {
      const int64_t k0 = packed_kv_offset(b, sb, t0, p.k_batch_stride, p.k_row_stride);
      const int64_t v0 = packed_kv_offset(b, sb, t0, p.v_batch_stride, p.v_row_stride);
      const int valid = min(kBlockN, sb.sk - t0);
      load_swizzled(dk, gk + k0, p.k_row_stride, valid, tid);
      load_swizzled(dv, gv + v0, p.v_row_stride, valid, tid);
    } else {
      static_assert(kThreads / (kD / 8) == 16, "16-row bands of one column per thread: a quarter is two bands");
      const int col = (tid % (kD / 8)) * 8, band_row = tid / (kD / 8);  // row within a 16-row band
      const int* slot = s_blocks[(nb - nb_lo) % 2];
#pragma unroll
      for (int q = 0; q < kQuarters; ++q) {
        const int tq = t0 + 32 * q;
        int64_t kb = 0, vb = 0;
        if (tq < sb.sk) {
          const int pg = quarter_page(tq);
          const int64_t blk = from_slot ? slot[q] : page_block(p, b, pg), in_page = tq - pg * page;
          kb = blk * p.k_batch_stride + in_page * p.k_row_stride;
          vb = blk * p.v_batch_stride + in_page * p.v_row_stride;
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * half + band_row, row = 32 * q + r;
          const bool ok = tq + r < sb.sk;
          cp_async_16(dk + swizzled_offset(kBlockN, row, col), ok ? gk + kb + r * p.k_row_stride + col : gk, ok);
          cp_async_16(dv + swizzled_offset(kBlockN, row, col), ok ? gv + vb + r * p.v_row_stride + col : gv, ok);
        }
      }
    }
  };

  // 1. Q, and the first key tile
  load_swizzled(sQ, gq + q0, p.q_row_stride, r_end - r0, tid);
  if (nb_lo < nb_hi) load_kv(nb_lo, 0, false);
  prefetch_blocks(nb_lo + 1);
  cp_async_commit();
  for (int s = 1; s + 1 < kStages<kPaged>; ++s) {
    if (nb_lo + s < nb_hi) load_kv(nb_lo + s, s, true);
    cp_async_commit();
  }

  // This thread's rows: r0 + 64 wg + 16 w + g + 8 i (i = 0, 1); its columns of a tile:
  // 8 j + 2 t + c (j < 16, c = 0, 1), accumulator element 4 j + 2 i + c.
  float o[64];
#pragma unroll
  for (int e = 0; e < 64; ++e) o[e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  const float sc = p.softmax_scale * kLog2e;
  const int row_lo = r0 + 64 * wg + 16 * w + g;  // row of i = 0 (i = 1: + 8)
  // Descriptors: this warpgroup's 64 Q rows start 64 * 128 bytes into each panel.
  const uint32_t q_wg = sQ + wg * 64 * 128;

  // 2. the key loop
  for (int nb = nb_lo, it = 0; nb < nb_hi; ++nb, ++it) {
    const int stage = it % kStages<kPaged>;
    cp_async_wait<kStages<kPaged> - 2>();
    fence_proxy_async();  // this thread's copies, now landed, to the tensor cores' view
    __syncthreads();      // tile nb visible to all; every warpgroup is done with tile nb - 1
    constexpr int kAhead = kStages<kPaged> - 1;  // into the stage tile nb - 1 used
    if (nb + kAhead < nb_hi) load_kv(nb + kAhead, (it + kAhead) % kStages<kPaged>, true);
    prefetch_blocks(nb + 2);  // into the slot of tile nb, whose copies every thread has issued
    cp_async_commit();

    // a. S = Q K^T
    float s[64];
    const uint32_t k_s = sK + stage * kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const uint32_t panel = (ks / 4), step = (ks % 4) * 32;
      wgmma_m64n128k16_ss<Elem>(s, make_desc(q_wg + panel * (kBlockM * 128) + step, 16, 1024),
                                make_desc(k_s + panel * (kBlockN * 128) + step, 16, 1024), ks > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);

    const int t_tile = nb * kBlockN;
    if (t_tile < unmasked.begin || t_tile + kBlockN > unmasked.end) {
      // causal / sliding window / keys past sk: each row's visible keys are one interval
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = min(row_lo + 8 * i, sb.sq - 1);
        const Range<int> window = window_keys<int>(p, r + off, sb.sk);
        const int lo = window.begin - t_tile - 2 * t, hi = window.end - t_tile - 2 * t;
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int dt = 8 * j + c;
            if (dt < lo || dt >= hi) s[4 * j + 2 * i + c] = -INFINITY;
          }
      }
    }
    // b, c. online softmax on this thread's two rows
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * i], s[4 * j + 2 * i + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[i], mx);
      const float ms = m_new == -INFINITY ? 0.f : m_new * sc;
      const float corr = m_run[i] == -INFINITY ? 0.f : fast_exp2(m_run[i] * sc - ms);
      m_run[i] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float pe = fast_exp2(fmaf(s[4 * j + 2 * i + c], sc, -ms));
          s[4 * j + 2 * i + c] = pe;
          sum += pe;
        }
      l_run[i] = l_run[i] * corr + sum;
#pragma unroll
      for (int j = 0; j < 16; ++j) o[4 * j + 2 * i] *= corr, o[4 * j + 2 * i + 1] *= corr;
    }
    // d. O += P V: k step kk covers keys 16 kk .. 16 kk + 15, the S columns of n-blocks
    //    2 kk and 2 kk + 1
    uint32_t a[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      a[kk][0] = pack2<Elem>(s[8 * kk + 0], s[8 * kk + 1]);
      a[kk][1] = pack2<Elem>(s[8 * kk + 2], s[8 * kk + 3]);
      a[kk][2] = pack2<Elem>(s[8 * kk + 4], s[8 * kk + 5]);
      a[kk][3] = pack2<Elem>(s[8 * kk + 6], s[8 * kk + 7]);
    }
    const uint32_t v_s = sV + stage * kTileBytes;
    fence_operands(o);  // the rescale of O and the packing of P stay above the fence
    fence_operands(a);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      wgmma_m64n128k16_rs<Elem>(o, a[kk], make_desc(v_s + kk * 16 * 128, kBlockN * 128, 1024), 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(o);
  }
  cp_async_wait<0>();  // no copy may still be landing when the CTA exits

  // 3. epilogue from registers
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = row_lo + 8 * i;
    if (r >= r_end) continue;
    const float inv = row_inv_sum(l);  // contract step 5: NaN stays NaN
    Elem* dst = static_cast<Elem*>(p.out) + o_offset(p, b, sb, r, h) + 2 * t;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<Elem>(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv);
    if (p.lse && t == 0)
      p.lse[lse_offset(p, b, sb, r, h)] = row_saw_keys(l) ? (m_run[i] * sc + log2f(l)) * kLn2 : -INFINITY;
  }
#else
  __trap();  // built for sm_90a only; any other target has no body
#endif
}

template <class Elem, bool kPaged>
void launch(const FlashFwdParams& p, cudaStream_t st) {
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  const int m_blocks = (max_sq + kBlockM - 1) / kBlockM;
  const int64_t ctas = static_cast<int64_t>(m_blocks) * p.batch * p.num_heads;
  if (ctas <= 0) return;
  auto kernel = fwd_kernel<Elem, kPaged>;
  static bool attribute_set[64] = {};
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= 64 || !attribute_set[dev]) {
    WICK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem<kPaged>));
    if (dev < 64) attribute_set[dev] = true;
  }
  WICK_CUDA_CHECK(
      launch_programmatic(kernel, dim3(static_cast<unsigned>(ctas)), dim3(kThreads), kSmem<kPaged>, st, p, m_blocks));
}

}  // namespace

bool available() {
  static const bool enabled = [] {
    const char* v = std::getenv("WICK_FLASH_SM90");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  if (!enabled) return false;
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  static int cached[64] = {};  // 0 unknown, 1 yes, 2 no
  if (dev < 64 && cached[dev] != 0) return cached[dev] == 1;
  int major = 0, minor = 0;
  WICK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  WICK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const bool yes = major == 9 && minor == 0;
  if (dev < 64) cached[dev] = yes ? 1 : 2;
  return yes;
}

bool covers(const FlashFwdParams& p) {
  return p.head_size == kD && (p.block_table == nullptr || p.page_block_size % 32 == 0) &&
         p.alibi_slopes == nullptr && !(p.softcap > 0.f) && p.softmax_scale > 0.f &&
         p.mm_prefix_ranges == nullptr && p.num_splits <= 1 &&
         (p.dtype == FlashDType::BF16 || WICK_FLASH_WANT_F16) &&
         static_cast<int64_t>((p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q) + kBlockM - 1) / kBlockM * p.batch *
                 p.num_heads <= 0x7fffffff;
}

void run(const FlashFwdParams& p, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (p.dtype == FlashDType::BF16) {
    if (p.block_table) launch<__nv_bfloat16, true>(p, st);
    else launch<__nv_bfloat16, false>(p, st);
  } else {
#if WICK_FLASH_WANT_F16
    if (p.block_table) launch<__half, true>(p, st);
    else launch<__half, false>(p, st);
#endif
  }
}

}  // namespace wick::kernels::flash::sm90
