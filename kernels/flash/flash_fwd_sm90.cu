// The Hopper forward (sm_90a): the same steps as flash_fwd_kernel.cuh, with the two matrix
// products of each key tile issued as warpgroup MMAs (hopper.cuh) instead of per-warp
// mma.sync. Built only for sm_90a (its own object library in CMakeLists.txt); flash_fwd.cu
// sends it the calls it covers and everything else to the sm_80 family.
//
// What it covers: head sizes 64, 96 (on the 128-channel tiles), 128, 192 and 256, bf16 / f16,
// K/V batched, varlen or paged (pages of a multiple of 32 rows), GQA / MQA, causal and sliding
// windows, LSE, and the general logits (softcap, ALiBi, mm-prefix ranges, any softmax scale)
// in instances of their own when the copy engine can describe the K/V. The sm_80 family
// keeps: the other head sizes, forced split counts, decode shapes (those at head sizes 64,
// 96, 128, 192 and 256 go to the Hopper decode, flash_decode_sm90.cu), general logits whose K/V the
// copy engine cannot describe, inputs without 16-byte rows, and f16 in
// WICK_FLASH_QUICK builds. It never splits the keys: a call with few query tiles and very
// long keys runs one CTA per (tile, head, sequence).
//
// Two kernels share the steps below (device functions of this file) and differ in how K/V
// tiles reach shared memory:
//   fwd_kernel_tma  unpaged and paged K/V: a producer warpgroup asks the tensor memory
//                   accelerator for each tile (bulk copies) and mbarriers hand stages between
//                   it and the two consumer warpgroups, which take turns issuing their
//                   products and compute each tile's softmax while products run. Persistent:
//                   one CTA per SM takes query tiles until none is left, each from a
//                   counter shared by the CTAs (claim_tile), so a CTA that drew short tiles
//                   takes more of them; the producer publishes each tile to the consumers,
//                   asks L2 for its Q rows and runs ahead into the next tile's keys, and
//                   each consumer warpgroup copies its next Q rows while its last products
//                   run, so a tile's start and end cost no idle SM; above head size 128 the
//                   next tile's first S goes out beside the last O += P V, and the rows are
//                   written while it runs. WICK_FLASH_SM90_PERSISTENT=0 starts one CTA per
//                   tile instead.
//   fwd_kernel      calls the copy engine cannot describe, and every call with
//                   WICK_FLASH_SM90_TMA=0: every thread issues cp.async copies, one block
//                   barrier per tile.
//
// Steps, mapped to the CPU algorithm (ops/attention/cpu.cpp):
//   0. work unit = (query tile of 128 rows, head, sequence); two warpgroups of 4 warps, each
//      owning 64 rows (three and 192 rows at head size 64, and at 128 over sequences longer
//      than 1024 rows; most 192-row tiles end at their sequence's last row, find_tile). The
//      keys any row of the tile can see are found up front (contract.h), so wholly masked
//      key tiles are never loaded.
//   1. Q tile -> shared memory (cp.async into the 128-byte swizzled layout wgmma reads).
//   2. for each key tile of kBlockN keys (128; 64 above head size 128) in two or three
//      shared-memory stages (Shape below), the next tiles loading while tile j computes:
//      a. S = Q K^T: D / 16 wgmmas (k = 16 channels each), Q and K read from shared memory,
//         S (64 x kBlockN f32 per warpgroup) in registers                     = CPU step 2a
//         general logits (softcap, ALiBi, any scale) in the kGeneral instances
//         masks (window, causal, keys past sk; mm-prefix ranges in the kGeneral instances)
//         only on tiles that need them
//      b. running row max (quad shuffles)                                    = CPU step 2b
//      c. P = exp2(S * scale*log2e - m * scale*log2e), row sums, O rescaled   = CPU step 2c
//      d. O += P V: kBlockN / 16 wgmmas (two at D = 256) with P from registers (the S
//         accumulators re-packed as 16-bit A fragments) and V read transposed from shared
//         memory                                                              = CPU step 2d
//   3. epilogue: O / l and lse = (m + log2 l) * ln2 written from registers    = CPU step 3
#include "kernels/flash/flash_fwd_sm90.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_instances.h"
#include "kernels/flash/flash_launch.h"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash/hopper.cuh"
#include "kernels/flash/tile_order.h"
#include "kernels/flash/tma_map.h"
#include "kernels/smem_limit.h"
#include "tensor/cuda_check.h"

namespace wick::kernels::flash::sm90 {
namespace {

// The tile shape of one kernel instance: D channels (64, 128, 192 or 256) of Q, K, V and O in
// 64-channel panels, and M query rows per CTA, one warpgroup (128 threads) per 64 rows. A call
// with fewer channels (head size 96 on the 128 shape) reads zeros past its head size and
// stores only its own channels. N keys per tile: 128 up to D = 128 (80 or 64 in the 192-row
// tiles at D = 128); above it, where a 64 x D f32 O per warpgroup already takes D / 2
// registers per thread, 64 (paged K/V, whole 32-key quarters of a page) or, unpaged, 112 at
// D = 192 and 80 at D = 256 (launch() below).
// Shared-memory stages of K/V: three where they fit (tiles j + 1 and j + 2 load while tile j
// computes; measured 0.5-1.5% faster than two at D = 128 on the H200), else two (D = 256,
// and the wider tiles at D = 192: Q and two stages take 216-225 KiB) and in the cp.async
// kernel when paged (its block ids are read one tile ahead).
template <int D, int M = 128, int N = (D > 128 ? 64 : 128), bool FromEnd = (M > N && M > 128)>
struct Shape {
  static constexpr int kD = D;
  static constexpr int kBlockM = M;
  static constexpr int kWarpgroups = M / 64;
  static constexpr int kThreads = 128 * kWarpgroups;  // the consumers (all threads of fwd_kernel)
  static constexpr int kBlockN = N;
  static constexpr uint32_t kTileBytes = kBlockN * D * 2;  // one swizzled K or V tile
  static constexpr uint32_t kQBytes = M * D * 2;           // the swizzled Q tile
  // Copy-engine kernel: K and V in separate rings of stages (below) above D = 128, where
  // two stages leave no slack otherwise (measured on the H200: d256 +25-35%; at d128 0-1%
  // slower, so d64 and d128 keep one ring for the pair).
  static constexpr bool kSplitKV = D > 128;
  // Whether the copy-engine kernel's tiles end at a sequence's last row (find_tile's
  // kFromEnd): by default the 192-row tiles of fewer keys. With M == N it would gain
  // nothing; the 128-row tiles of fewer keys (D > 128) keep the first row, since ptxas
  // spilled 20-48 bytes more there with it; and launch() picks it for D = 64's 192-row
  // tiles under a right bound only, and not for D = 128's paged ones (64/128 bytes of
  // spills against none, and no gain measured).
  static constexpr bool kFromEnd = FromEnd;
  // three K/V stages where they fit beside Q (all but D = 256), two in the paged cp.async kernel
  template <bool kPaged>
  static constexpr int kStages = !kPaged && 1024 + kQBytes + 6 * kTileBytes <= 227 * 1024 ? 3 : 2;
  // Q, the K/V stages, 1024-byte alignment slack.
  template <bool kPaged>
  static constexpr int kSmem = 1024 + kQBytes + 2 * kStages<kPaged> * kTileBytes;
  // (the paged cp.async kernel also needs whole 32-key quarters: it asserts it)
  static_assert(D % 64 == 0 && kBlockN % 16 == 0, "whole 64-channel panels, whole 16-key steps");
  static_assert(M % 64 == 0 && (M * 128) % 1024 == 0, "whole warpgroups; Q panels on 1024-byte boundaries");
};
constexpr int kMinBlockM = 128;  // the smallest M of any instance

// Issues the cp.async copies of a kRows x D swizzled tile (Q: kBlockM rows, K/V: kBlockN)
// at `dst` from the Sh::kThreads consumer threads: row r comes from rows + r * row_stride;
// rows at or past `valid` are zero-filled (no read). Thread tid copies one 16-byte column
// chunk of every kRowStep-th row from row tid / (D / 8), and kRowStep (a multiple of 8) rows
// keep a row's swizzle pattern (it repeats every 8 rows), so each copy after the first costs
// one address add in shared and in global memory.
// Channels at or past `channels` (the call's head size, below D on a padded shape) are
// zero-filled too. Shapes whose threads do not divide into whole rows (D = 192) take a
// plain loop over the tile's chunks.
template <class Sh, int kRows, class Elem>
__device__ __forceinline__ void load_swizzled(uint32_t dst, const Elem* rows, int64_t row_stride, int valid,
                                              int channels, int tid) {
  constexpr int kChunksPerRow = Sh::kD / 8;
  constexpr int kRowStep = Sh::kThreads / kChunksPerRow;
  if constexpr (Sh::kThreads % kChunksPerRow != 0 || kRowStep % 8 != 0 || kRows % kRowStep != 0) {
    for (int c = tid; c < kRows * kChunksPerRow; c += Sh::kThreads) {
      const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const bool ok = row < valid && col < channels;
      cp_async_16(dst + swizzled_offset(kRows, row, col), ok ? rows + row * row_stride + col : rows, ok);
    }
  } else {
    const int row = tid / kChunksPerRow, col = (tid % kChunksPerRow) * 8;
    const uint32_t d0 = dst + swizzled_offset(kRows, row, col);
    const Elem* s0 = rows + row * row_stride + col;
    const int64_t step = kRowStep * row_stride;
    if (valid >= kRows && channels >= Sh::kD) {
#pragma unroll
      for (int i = 0; i < kRows / kRowStep; ++i) cp_async_16(d0 + i * kRowStep * 128, s0 + i * step, true);
    } else {
#pragma unroll
      for (int i = 0; i < kRows / kRowStep; ++i) {
        const bool ok = row + i * kRowStep < valid && col < channels;
        cp_async_16(d0 + i * kRowStep * 128, ok ? s0 + i * step : rows, ok);
      }
    }
  }
}

// 0. The CTA's work: (query tile, head, sequence), in the order of tile_order.h, and the
//    key tiles [nb_lo, nb_hi) any of its rows can see (contract.h), so wholly masked key
//    tiles are never loaded.
// r0 is the tile's first row; below 0 in a sequence's first tile when the tiles end at its
// last row (find_tile's kFromEnd), and rows below 0 hold nothing. The sequence's rows of the
// tile are [max(r0, 0), r_end).
struct TileWork {
  int h, b, hk, r0, r_end, off, nb_lo, nb_hi;
  SeqBounds sb;
  Range<int> unmasked;  // keys every row of the tile sees: tiles inside need no mask
};
// The tile's first row inside its sequence, max(r0, 0).
template <class Sh>
__device__ __forceinline__ int first_row_in_seq(const TileWork& w) {
  return Sh::kFromEnd ? max(w.r0, 0) : w.r0;
}
// Sh::kFromEnd: a sequence's tiles end at its last row, so when kBlockM does not divide its
// rows the partial tile is the first, not the last. Under a causal mask the first tile sees the
// fewest keys, so its empty rows cost the fewest products: with 192-row tiles and 64-key
// tiles, 4096 rows compute 0.955 useful where tiles from the first row compute 0.902 (the
// last tile's 128 empty rows saw every key). Without a mask both cost the same.
template <class Sh>
__device__ __forceinline__ bool find_tile(const FlashFwdParams& p, TileOrder order, int index, TileWork& w) {
  constexpr int kBlockM = Sh::kBlockM, kBlockN = Sh::kBlockN;
  constexpr bool kFromEnd = Sh::kFromEnd;
  const TileSlot slot = tile_slot(order, p.num_heads * p.batch, index);
  w.h = slot.column % p.num_heads;
  w.b = slot.column / p.num_heads;
  w.sb = seq_bounds(p, w.b);
  w.r0 = slot.m_block * kBlockM;
  if (w.r0 >= w.sb.sq) return false;
  if (kFromEnd) w.r0 -= (kBlockM - w.sb.sq % kBlockM) % kBlockM;
  w.r_end = min(w.sb.sq, w.r0 + kBlockM);
  w.hk = kv_head(p, w.h);
  w.off = static_cast<int>(key_position(w.sb, 0));
  const int pos_first = first_row_in_seq<Sh>(w) + w.off, pos_last = w.r_end - 1 + w.off;
  const Range<int> tile_keys = visible_keys_of_rows<int>(p, w.b, pos_first, pos_last, w.sb.sk);
  w.unmasked = window_keys_of_all_rows<int>(p, pos_first, pos_last, w.sb.sk);
  w.nb_lo = tile_keys.begin / kBlockN;
  w.nb_hi = tile_keys.end > tile_keys.begin ? (tile_keys.end + kBlockN - 1) / kBlockN : w.nb_lo;
  return true;
}

// Whether tile `index` has rows (its first row inside its sequence): the test find_tile
// starts with, alone, for the producer's few registers.
template <class Sh>
__device__ __forceinline__ bool tile_has_rows(const FlashFwdParams& p, TileOrder order, int index) {
  const TileSlot slot = tile_slot(order, p.num_heads * p.batch, index);
  return slot.m_block * Sh::kBlockM < seq_bounds(p, slot.column / p.num_heads).sq;
}

// The tile of round r of a persistent CTA in the fixed walk: rounds of gridDim.x tiles,
// walked forwards in even rounds and backwards in odd ones (walk_index, tile_order.h), so
// that under a causal mask each CTA's long and short tiles pair up and the CTAs finish
// together; striding by gridDim.x instead left the CTAs of the first columns up to 13% more
// work. Over sequences of varied lengths no fixed walk evens out the CTAs' work, which the
// lengths (on the device) decide: there the CTAs claim tiles from a shared counter instead
// (claim_tile), and the walk serves the calls that have no counter.
__device__ __forceinline__ int cta_tile(int r) {
  return walk_index(r, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

// The n-th tile index of this CTA (n = 0, 1, ...), `tiles` when none is left. With a counter
// (sched: two zeroed ints, the launch's own), the CTA's first tile is its blockIdx.x and each
// later one the next unclaimed index after the grid's first tiles, so tiles go out in index
// order to whichever CTA asks first, and every CTA ends within about one tile of the others.
// The last CTA to run out sets the counter back to zero for the next launch on the stream.
// Without one: the fixed walk, cta_tile(n). One thread per CTA asks, in order.
__device__ __forceinline__ int claim_tile(int* sched, int n, int tiles) {
  if (sched == nullptr) {
    const int rounds = (tiles + gridDim.x - 1) / gridDim.x;
    return n < rounds ? min(cta_tile(n), tiles) : tiles;
  }
  if (n == 0) return static_cast<int>(blockIdx.x);
  const unsigned index = gridDim.x + static_cast<unsigned>(atomicAdd(&sched[0], 1));
  if (index < static_cast<unsigned>(tiles)) return static_cast<int>(index);
  __threadfence();  // this CTA's last claim, before it counts itself out
  if (atomicAdd(&sched[1], 1) == static_cast<int>(gridDim.x) - 1) {
    __threadfence();  // every CTA has counted itself out: no claim is still coming
    sched[0] = 0, sched[1] = 0;
  }
  return tiles;
}

// The rows and columns a consumer thread owns: rows row_lo and row_lo + 8 of the tile's
// sequence; columns 8 j + 2 t + c (c = 0, 1) of a key tile (j < kBlockN / 8) and of O
// (j < D / 8), accumulator element 4 j + 2 i + c for row row_lo + 8 i.
struct Fragment {
  int row_lo, t;
};
// This consumer thread's Fragment of tile w: warpgroup warp / 4 holds rows 64 (warp / 4) ..,
// each of its warps 16 of them.
__device__ __forceinline__ Fragment fragment_of(const TileWork& w) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  return Fragment{w.r0 + 64 * (warp / 4) + 16 * (warp % 4) + lane / 4, lane % 4};
}

// The row whose mask row f.row_lo + 8 i takes: itself, or for rows outside the sequence (a
// tile's empty rows, never written) the nearest row inside it, so they see keys too and
// their softmax stays finite.
template <bool kFromEnd>
__device__ __forceinline__ int row_in_seq(const Fragment& f, int i, const TileWork& w) {
  const int r = min(f.row_lo + 8 * i, w.sb.sq - 1);
  return kFromEnd ? max(r, 0) : r;
}

// a. S = Q K^T for this warpgroup's 64 rows (q_wg: its rows of the swizzled Q tile), issued
//    and committed; the caller waits.
template <class Sh, class Elem>
__device__ __forceinline__ void issue_qk(float (&s)[Sh::kBlockN / 2], uint32_t q_wg, uint32_t k_s) {
  const uint64_t dq = make_desc(q_wg, 16, 1024), dk = make_desc(k_s, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Sh::kD / 16; ++ks) {
    const uint32_t panel = (ks / 4), step = (ks % 4) * 32;
    wgmma_ss<Sh::kBlockN, Elem>(s, desc_step(dq, panel * (Sh::kBlockM * 128) + step),
                                desc_step(dk, panel * (Sh::kBlockN * 128) + step), ks > 0);
  }
  wgmma_commit();
}

// Masks (causal, sliding window, keys past sk) on the tiles that need them: each row's
// visible keys are one interval.
template <int kBlockN, bool kFromEnd>
__device__ __forceinline__ void mask_tile(float (&s)[kBlockN / 2], const FlashFwdParams& p, const TileWork& w,
                                          const Fragment& f, int nb) {
  const int t_tile = nb * kBlockN;
  if (t_tile >= w.unmasked.begin && t_tile + kBlockN <= w.unmasked.end) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row_in_seq<kFromEnd>(f, i, w);
    const Range<int> window = window_keys<int>(p, r + w.off, w.sb.sk);
    const int lo = window.begin - t_tile - 2 * f.t, hi = window.end - t_tile - 2 * f.t;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int dt = 8 * j + c;
        if (dt < lo || dt >= hi) s[4 * j + 2 * i + c] = -INFINITY;
      }
  }
}

// The general logits, in instances of their own (kGeneral): softcap, ALiBi, mm-prefix ranges,
// any softmax scale. Each score becomes the contract's logit in log2 units (GeneralLogit,
// flash_common.cuh), the softmax that follows runs with scale 1, and masked tiles test each
// key against a row's two intervals (mask_tile_ranges). The plain instances keep the code
// above: none of this reaches their registers or instruction cache.
template <int kBlockN, bool kFromEnd>
__device__ __forceinline__ void general_logits(float (&s)[kBlockN / 2], const FlashFwdParams& p, const TileWork& w,
                                               const Fragment& f, int nb) {
  const int t_first = nb * kBlockN + 2 * f.t;  // the key of this thread's element (j, c) is t_first + 8 j + c
  const GeneralLogit lg(p, alibi_slope(p, w.h));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float dist0 = static_cast<float>(row_in_seq<kFromEnd>(f, i, w) + w.off - t_first);
    auto each = [&](auto logit) {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float& x = s[4 * j + 2 * i + c];
          x = logit(x, dist0 - static_cast<float>(8 * j + c));
        }
    };
    if (lg.has_cap) each([&](float qk, float dist) { return lg.capped(qk, dist); });
    else each([&](float qk, float dist) { return lg.uncapped(qk, dist); });
  }
}
// Masks with mm-prefix ranges, on the tiles that need a mask: a row sees two intervals of
// keys, its window's and its mm-prefix ranges' (mm_keys_of_row, contract.h).
template <int kBlockN, bool kFromEnd>
__device__ __forceinline__ void mask_tile_ranges(float (&s)[kBlockN / 2], const FlashFwdParams& p,
                                                 const TileWork& w, const Fragment& f, int nb) {
  const int t_tile = nb * kBlockN;
  if (t_tile >= w.unmasked.begin && t_tile + kBlockN <= w.unmasked.end) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int pos = row_in_seq<kFromEnd>(f, i, w) + w.off;
    const Range<int> window = window_keys<int>(p, pos, w.sb.sk), shared = mm_keys_of_row<int>(p, w.b, pos, w.sb.sk);
    const int base = t_tile + 2 * f.t;
    const int lo = window.begin - base, hi = window.end - base;
    const int mlo = shared.begin - base, mhi = shared.end - base;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int dt = 8 * j + c;
        if ((dt < lo || dt >= hi) && (dt < mlo || dt >= mhi)) s[4 * j + 2 * i + c] = -INFINITY;
      }
  }
}
template <int kBlockN, bool kGeneral, bool kFromEnd>
__device__ __forceinline__ void logits_tile(float (&s)[kBlockN / 2], const FlashFwdParams& p, const TileWork& w,
                                            const Fragment& f, int nb) {
  if constexpr (kGeneral) {
    general_logits<kBlockN, kFromEnd>(s, p, w, f, nb);
    mask_tile_ranges<kBlockN, kFromEnd>(s, p, w, f, nb);
  } else {
    mask_tile<kBlockN, kFromEnd>(s, p, w, f, nb);
  }
}

// b, c. Online softmax on this thread's two rows: running max, P = exp2(S * sc - m * sc) in
// place of S, row sums; corr[i] is the factor O's row must be rescaled by (rescale_o).
template <int kBlockN>
__device__ __forceinline__ void online_softmax(float (&s)[kBlockN / 2], float (&m_run)[2], float (&l_run)[2],
                                               float sc, float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * i], s[4 * j + 2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m_run[i], mx);
    const float ms = m_new == -INFINITY ? 0.f : m_new * sc;
    corr[i] = m_run[i] == -INFINITY ? 0.f : fast_exp2(m_run[i] * sc - ms);
    m_run[i] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float pe = fast_exp2(fmaf(s[4 * j + 2 * i + c], sc, -ms));
        s[4 * j + 2 * i + c] = pe;
        sum += pe;
      }
    l_run[i] = l_run[i] * corr[i] + sum;
  }
}
// Above head size 128, only when some row of the warp has a new maximum (corr != 1):
// multiplying by exactly 1 changes nothing, and after the first key tiles most tiles raise
// no row's maximum.
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 2], const float (&corr)[2]) {
  if (D > 128 && !__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) return;
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int i = 0; i < 2; ++i) o[4 * j + 2 * i] *= corr[i], o[4 * j + 2 * i + 1] *= corr[i];
}

// d. O += P V: k step kk covers keys 16 kk .. 16 kk + 15, the S columns of n-blocks 2 kk and
//    2 kk + 1, re-packed as 16-bit A fragments (pack_p); issue_pv issues and commits, the
//    caller waits, and keeps `a` unchanged until then (fence_operands(a) after the wait).
//    At D = 256 each k step is two m64n128 products, one per 128-channel half of O.
template <int kBlockN, class Elem>
__device__ __forceinline__ void pack_p(const float (&s)[kBlockN / 2], uint32_t (&a)[kBlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    a[kk][0] = pack2<Elem>(s[8 * kk + 0], s[8 * kk + 1]);
    a[kk][1] = pack2<Elem>(s[8 * kk + 2], s[8 * kk + 3]);
    a[kk][2] = pack2<Elem>(s[8 * kk + 4], s[8 * kk + 5]);
    a[kk][3] = pack2<Elem>(s[8 * kk + 6], s[8 * kk + 7]);
  }
}
template <class Sh, class Elem>
__device__ __forceinline__ void issue_pv(float (&o)[Sh::kD / 2], uint32_t (&a)[Sh::kBlockN / 16][4], uint32_t v_s) {
  constexpr int kN = Sh::kD % 128 == 0 ? 128 : 64;  // O channels per product (D = 64: one of 64)
  constexpr uint32_t kPanelBytes = Sh::kBlockN * 128;
  const uint64_t dv = make_desc(v_s, kPanelBytes, 1024);
  fence_operands(o);  // the rescale of O and the packing of P stay above the fence
  fence_operands(a);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Sh::kBlockN / 16; ++kk)
#pragma unroll
    for (int part = 0; part < Sh::kD / kN; ++part)
      wgmma_rs<kN, Elem>(*reinterpret_cast<float(*)[kN / 2]>(&o[part * kN / 2]), a[kk],
                         desc_step(dv, part * (kN / 64) * kPanelBytes + kk * 16 * 128), 1);
  wgmma_commit();
}

// 3. Epilogue from registers: O / l and lse = (m + log2 l) * ln2.
// A quad (the 4 threads t of a row) holds each 8-channel chunk of the row as four 4-byte
// pairs, thread t the pair 2t, 2t + 1. Per 4 chunks, two exchange rounds (lanes t ^ 1, then
// t ^ 2) give thread t all of chunk 4g + t, written with one 16-byte store: a quarter of
// the stores, each filling whole 32-byte sectors (at D = 128 the compiler still splits one
// chunk per row into four 4-byte stores). With 4-byte stores, each holding its register
// until the memory unit took it, the epilogue was where the consumers waited most outside
// the key loop at 1k tokens (bench/RESULTS.md, which also has the split).
// Every lane takes part in the exchanges, so rows past the tile's end only skip the
// stores. The call's out is 16-byte aligned with strides in multiples of 8 elements
// (flash_fwd.cu sends no other call here).
__device__ __forceinline__ uint4 quad_transpose(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int t) {
  const bool odd = t & 1, high = t & 2;
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 1);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? a2 : a3, 1);
  const uint32_t c0 = odd ? r0 : a0, c1 = odd ? a1 : r0, c2 = odd ? r1 : a2, c3 = odd ? a3 : r1;
  const uint32_t r2 = __shfl_xor_sync(0xffffffffu, high ? c0 : c2, 2);
  const uint32_t r3 = __shfl_xor_sync(0xffffffffu, high ? c1 : c3, 2);
  return uint4{high ? r2 : c0, high ? r3 : c1, high ? c2 : r2, high ? c3 : r3};
}
template <int D, class Elem, bool kFromEnd>
__device__ __forceinline__ void write_rows(const FlashFwdParams& p, const TileWork& w, const Fragment& f,
                                           const float (&o)[D / 2], const float (&m_run)[2],
                                           const float (&l_run)[2], float sc) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = f.row_lo + 8 * i;
    const bool in_tile = (!kFromEnd || r >= 0) && r < w.r_end;
    const float inv = row_inv_sum(l);  // contract step 5: NaN stays NaN
    Elem* dst = static_cast<Elem*>(p.out) + o_offset(p, w.b, w.sb, r, w.h);
    auto pair = [&](int j) { return pack2<Elem>(o[4 * j + 2 * i] * inv, o[4 * j + 2 * i + 1] * inv); };
#pragma unroll
    for (int g = 0; g < D / 32; ++g) {
      const uint4 chunk = quad_transpose(pair(4 * g), pair(4 * g + 1), pair(4 * g + 2), pair(4 * g + 3), f.t);
      const int j = 4 * g + f.t;
      if (in_tile && (D == 64 || 8 * j < p.head_size))  // a padded shape stores only the call's channels
        *reinterpret_cast<uint4*>(dst + 8 * j) = chunk;
    }
    if (in_tile && p.lse && f.t == 0)
      p.lse[lse_offset(p, w.b, w.sb, r, w.h)] = row_saw_keys(l) ? (m_run[i] * sc + log2f(l)) * kLn2 : -INFINITY;
  }
}

// The kernel that copies K/V with cp.async from every thread (one block barrier per tile):
// paged K/V (kPaged, through p.block_table), and unpaged calls the copy engine cannot
// describe. Separate instances, so the unpaged loads keep their registers and schedule.
template <class Sh, class Elem, bool kPaged>
__global__ void __launch_bounds__(Sh::kThreads, 1) fwd_kernel(const FlashFwdParams p, TileOrder order) {
  static_assert(!kPaged || Sh::kBlockN % 32 == 0, "paged: whole 32-key quarters");
  static_assert(!Sh::kFromEnd, "its Q copy (load_swizzled) starts at the tile's first row");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kD = Sh::kD, kBlockN = Sh::kBlockN, kS = Sh::template kStages<kPaged>;
  constexpr int kBlockM = Sh::kBlockM, kThreads = Sh::kThreads;
  constexpr uint32_t kTileBytes = Sh::kTileBytes;
  extern __shared__ unsigned char smem_raw[];
  if (call_faulted(p)) {
    write_fault_outputs<Elem>(p, blockIdx.x, gridDim.x);
    return;
  }
  TileWork w;
  if (!find_tile<Sh>(p, order, static_cast<int>(blockIdx.x), w)) return;
  const int b = w.b, nb_lo = w.nb_lo, nb_hi = w.nb_hi;
  const SeqBounds& sb = w.sb;

  const int tid = threadIdx.x, warp = tid / 32;
  const int wg = warp / 4;
  const Fragment f = fragment_of(w);
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;  // swizzled panels: 1024-byte aligned
  const uint32_t sQ = base, sK = base + Sh::kQBytes, sV = sK + kS * kTileBytes;

  const Elem* gq = static_cast<const Elem*>(p.q);
  const Elem* gk = static_cast<const Elem*>(p.k) + w.hk * p.k_head_stride;
  const Elem* gv = static_cast<const Elem*>(p.v) + w.hk * p.v_head_stride;
  const int64_t q0 = q_offset(p, b, sb, w.r0, w.h);
  // Paged K/V: a key tile is 32-key quarters (four, two at D = 256), each inside one page
  // (pages are multiples of 32 keys), so a quarter's rows are one block base plus the row
  // stride. The quarters' block ids go to one of two shared slots a tile ahead of their use
  // (tile nb's slot: (nb - nb_lo) % 2), so no table read waits in the loop.
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
      load_swizzled<Sh, kBlockN>(dk, gk + k0, p.k_row_stride, valid, p.head_size, tid);
      load_swizzled<Sh, kBlockN>(dv, gv + v0, p.v_row_stride, valid, p.head_size, tid);
    } else {
      const int* slot = s_blocks[(nb - nb_lo) % 2];
      // the element offsets of quarter q's first row in K and in V (0 past sk)
      auto quarter_base = [&](int q, int64_t& kb, int64_t& vb) {
        const int tq = t0 + 32 * q;
        kb = vb = 0;
        if (tq >= sb.sk) return;
        const int pg = quarter_page(tq);
        const int64_t blk = from_slot ? slot[q] : page_block(p, b, pg), in_page = tq - pg * page;
        kb = blk * p.k_batch_stride + in_page * p.k_row_stride;
        vb = blk * p.v_batch_stride + in_page * p.v_row_stride;
      };
      auto copy_row_chunk = [&](int64_t kb, int64_t vb, int row, int col) {
        const int r = row % 32;
        const bool ok = t0 + row < sb.sk && col < p.head_size;
        cp_async_16(dk + swizzled_offset(kBlockN, row, col), ok ? gk + kb + r * p.k_row_stride + col : gk, ok);
        cp_async_16(dv + swizzled_offset(kBlockN, row, col), ok ? gv + vb + r * p.v_row_stride + col : gv, ok);
      };
      constexpr int kBand = kThreads / (kD / 8);  // rows per pass, one 16-byte chunk per thread
      if constexpr (kThreads % (kD / 8) == 0 && 32 % kBand == 0) {
        const int col = (tid % (kD / 8)) * 8, band_row = tid / (kD / 8);  // row within a band
#pragma unroll
        for (int q = 0; q < kQuarters; ++q) {
          int64_t kb, vb;
          quarter_base(q, kb, vb);
#pragma unroll
          for (int band = 0; band < 32 / kBand; ++band) copy_row_chunk(kb, vb, 32 * q + kBand * band + band_row, col);
        }
      } else {  // D = 192: a plain loop over the tile's chunks
        for (int c = tid; c < kBlockN * (kD / 8); c += kThreads) {
          const int row = c / (kD / 8);
          int64_t kb, vb;
          quarter_base(row / 32, kb, vb);
          copy_row_chunk(kb, vb, row, (c % (kD / 8)) * 8);
        }
      }
    }
  };

  // 1. Q, and the first key tiles
  load_swizzled<Sh, kBlockM>(sQ, gq + q0, p.q_row_stride, w.r_end - w.r0, p.head_size, tid);
  if (nb_lo < nb_hi) load_kv(nb_lo, 0, false);
  prefetch_blocks(nb_lo + 1);
  cp_async_commit();
  for (int s = 1; s + 1 < kS; ++s) {
    if (nb_lo + s < nb_hi) load_kv(nb_lo + s, s, true);
    cp_async_commit();
  }

  float o[kD / 2];
#pragma unroll
  for (int e = 0; e < kD / 2; ++e) o[e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  const float sc = p.softmax_scale * kLog2e;
  const uint32_t q_wg = sQ + wg * 64 * 128;  // this warpgroup's 64 Q rows in each panel

  // 2. the key loop
  for (int nb = nb_lo, it = 0; nb < nb_hi; ++nb, ++it) {
    const int stage = it % kS;
    cp_async_wait<kS - 2>();
    fence_proxy_async();  // this thread's copies, now landed, to the tensor cores' view
    __syncthreads();      // tile nb visible to all; every warpgroup is done with tile nb - 1
    constexpr int kAhead = kS - 1;  // into the stage tile nb - 1 used
    if (nb + kAhead < nb_hi) load_kv(nb + kAhead, (it + kAhead) % kS, true);
    prefetch_blocks(nb + 2);  // into the slot of tile nb, whose copies every thread has issued
    cp_async_commit();

    float s[kBlockN / 2];
    issue_qk<Sh, Elem>(s, q_wg, sK + stage * kTileBytes);
    wgmma_wait<0>();
    fence_operands(s);
    mask_tile<kBlockN, false>(s, p, w, f, nb);
    float corr[2];
    online_softmax<kBlockN>(s, m_run, l_run, sc, corr);
    rescale_o<kD>(o, corr);
    uint32_t a[kBlockN / 16][4];
    pack_p<kBlockN, Elem>(s, a);
    issue_pv<Sh, Elem>(o, a, sV + stage * kTileBytes);
    wgmma_wait<0>();
    fence_operands(o);
    fence_operands(a);
  }
  cp_async_wait<0>();  // no copy may still be landing when the CTA exits
  write_rows<kD, Elem, false>(p, w, f, o, m_run, l_run, sc);
#else
  __trap();  // built for sm_90a only; any other target has no body
#endif
}

// The kernel with the copy engine: a producer warpgroup (the last four warps, of which the
// first works; 24 registers per thread, so two consumer warpgroups get 240 each, or 32 and
// three get 160: an SM sub-partition's 16K registers hold one producer warp and the consumer
// warps) issues each K/V tile as bulk tensor copies in the 128-byte swizzle, into
// kStages<false> stages: unpaged, one copy per 64-channel panel of K and of V; paged
// (kPaged), one per panel and piece of 64 keys (32 when pages are not multiples of 64), each
// piece from the block its page names in the table; with `joint` (the head size fills the
// shape, and paged, a tile is one piece) one copy of all panels of K and one of V. "Full"
// barriers say a stage has landed, "empty" barriers that every consumer warp is done with
// it, so no block barrier ties the warpgroups to each other. One ring of stages holds a
// tile's K and V together; with Sh::kSplitKV, K and V have rings of their own, and a K stage
// is free for the tile kStages ahead as soon as S is computed, before O += P V has read the
// V stage beside it. The consumers take turns issuing their products, in warpgroup order
// (named barriers 2, 3, ...), and each issues S of tile j together with O += P V of tile
// j - 1, so its softmax of tile j runs while its own and the other warpgroups' products do.
template <class Sh, class Elem, bool kPaged, bool kGeneral>
__global__ void __launch_bounds__(Sh::kThreads + 128, 1)
    fwd_kernel_tma(const FlashFwdParams p, TileOrder order, int tiles, int* sched, int piece_shift, bool joint,
                   const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v) {
  static_assert(!kPaged || Sh::kBlockN % 32 == 0, "paged: whole 32-key pieces");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kD = Sh::kD, kBlockN = Sh::kBlockN, kBlockM = Sh::kBlockM, kThreads = Sh::kThreads;
  constexpr int kWG = Sh::kWarpgroups;
  constexpr bool kSplitKV = Sh::kSplitKV;
  // Registers per thread after setmaxnreg: the block launches with 65536 / threads (rounded
  // down to 8) each, and the warpgroups' new budgets must fit that pool: 24 for the producer
  // and 240 for two consumer warpgroups (64512 in all); 32 and 160 for three (65536).
  constexpr int kProducerRegs = kWG == 2 ? 24 : 32;
  constexpr int kConsumerRegs = std::min(240, ((65536 - 128 * kProducerRegs) / kThreads) / 8 * 8);
  constexpr int kLaunchRegs = (65536 / (kThreads + 128)) / 8 * 8;
  static_assert(128 * kProducerRegs + kThreads * kConsumerRegs <= kLaunchRegs * (kThreads + 128),
                "the register budgets fit the block's pool");
  constexpr uint32_t kTileBytes = Sh::kTileBytes;
  constexpr int kS = Sh::template kStages<false>;  // paged or not: the producer reads block ids itself
  extern __shared__ unsigned char smem_raw[];
  // full_k[kS], full_v[kS], empty_k[kS], empty_v[kS], tail[kS], then the tile slots' barriers:
  // published[kSlots] (the producer wrote the slot) and taken[kSlots] (every consumer thread
  // is done with it)
  constexpr int kSlots = 4;
  __shared__ __align__(8) uint64_t barriers[5 * kS + 2 * kSlots];
  __shared__ int tile_slots[kSlots];
  if (call_faulted(p)) {
    write_fault_outputs<Elem>(p, blockIdx.x, gridDim.x);
    return;
  }
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;  // swizzled panels: 1024-byte aligned
  const uint32_t sQ = base, sK = base + Sh::kQBytes, sV = sK + kS * kTileBytes;
  const uint32_t full_k = smem_addr(&barriers[0]), full_v = full_k + 8 * kS;
  const uint32_t empty_k = full_v + 8 * kS, empty_v = empty_k + 8 * kS, tail = empty_v + 8 * kS;
  const uint32_t published = tail + 8 * kS, taken = published + 8 * kSlots;
  if (tid == 0) {
    for (int s = 0; s < 2 * kS; ++s) mbar_init(full_k + 8 * s, 1), mbar_init(empty_k + 8 * s, kThreads / 32);
    for (int s = 0; s < kS; ++s) mbar_init(tail + 8 * s, 1);
    for (int s = 0; s < kSlots; ++s) mbar_init(published + 8 * s, 1), mbar_init(taken + 8 * s, kThreads);
    fence_barrier_init();
  }
  __syncthreads();
  // Varlen or paged K/V: a tile's rows past sk are the next sequence's, or whatever the page
  // (or the stage, for pieces not copied) holds. Its K rows are masked, but its V rows meet
  // P = 0, and 0 * inf is NaN, so in a key tile that straddles sk (the last of a query tile)
  // the producer zeroes those V rows, then arrives on its stage's `tail` barrier (one per
  // stage: the producer cannot refill a stage before the consumers have waited on it, so no
  // tail barrier runs two phases ahead of a waiting thread). Batched unpaged K/V need none of
  // it: rows past seqlen_k are outside the tensor the copy engine reads, so zeros.
  const bool zero_tail = kPaged || p.cu_seqlens_k != nullptr;
  // The CTA's query tiles: the producer claims them (claim_tile), skips those without rows
  // (past a shorter sequence's end) and publishes the others, then `tiles`, in a ring of
  // kSlots slots: round r's tile index in slot r % kSlots, for the (r / kSlots)-th time. Both
  // roles walk the published tiles and count key tiles in `it` (stage it % kS, its
  // (it / kS)-th use), so their barrier phases agree.

  if (warp >= kThreads / 32) {  // the producer warpgroup
    setmaxnreg_dec<kProducerRegs>();
    if (warp != kThreads / 32) return;
    // Publishes the CTA's next tile with rows and returns its index (`tiles`: none left).
    int claims = 0, rounds = 0;
    auto publish_next = [&]() {
      for (;;) {
        int index = 0;
        if (lane == 0) index = claim_tile(sched, claims, tiles);
        index = __shfl_sync(0xffffffffu, index, 0);
        ++claims;
        if (index < tiles && !tile_has_rows<Sh>(p, order, index)) continue;
        const int slot = rounds % kSlots;
        if (rounds >= kSlots) mbar_wait(taken + 8 * slot, (rounds / kSlots - 1) & 1);
        if (lane == 0) {
          tile_slots[slot] = index;
          mbar_arrive(published + 8 * slot);  // releases the slot's write to the waiting consumers
        }
        ++rounds;
        return index;
      }
    };
    // Paged: a tile is pieces of 2^piece_shift rows (32 or 64, the map's box), each inside one
    // page; the pieces past sk are not copied.
    const int piece = 1 << piece_shift;
    int it = 0;
    // The next tile is claimed once this one's last key tile is asked for, kS tiles ahead of
    // the consumers, so the claim's round trip to global memory runs while they work.
    for (int index = publish_next(); index < tiles; index = publish_next()) {
      TileWork w;
      find_tile<Sh>(p, order, index, w);  // true: only tiles with rows are published
      // The tile's Q rows into L2, one 128-byte line at a time: the consumers copy them (load_q)
      // once the tile before has seen its last key tile, about kS key tiles from now, and then
      // wait on L2 instead of DRAM.
      const int r_lo = first_row_in_seq<Sh>(w);
      const Elem* q_row = static_cast<const Elem*>(p.q) + q_offset(p, w.b, w.sb, r_lo + lane, w.h);
      for (int r = r_lo + lane; r < w.r_end; r += 32, q_row += 32 * p.q_row_stride)
        for (int c = 0; c < p.head_size; c += 64) prefetch_l2(q_row + c);
      auto pieces = [&](int nb) {
        return min(kBlockN >> piece_shift, (w.sb.sk - nb * kBlockN + piece - 1) >> piece_shift);
      };
      auto tile_bytes = [&](int nb) -> uint32_t {
        if constexpr (kPaged) return pieces(nb) * piece * (kD * 2);
        return kTileBytes;
      };
      // Asks for key tile nb of K or V (map, to shared address dst; with `both`, also of V to
      // dst_v), landing on barrier full; the caller announces the bytes on `full` first.
      auto copy_tile = [&](const CUtensorMap* map, uint32_t dst, bool both, uint32_t dst_v, uint32_t full, int nb) {
        const int t0 = nb * kBlockN;
        // unpaged: the tile's first row and its sequence's index in the description
        int row = static_cast<int>(w.sb.k_start) + t0, seq = p.cu_seqlens_k != nullptr ? 0 : w.b;
        if (joint) {  // one copy of all panels (paged: the tile is one piece)
          if constexpr (kPaged) {
            const int pg = t0 / p.page_block_size;
            seq = page_block(p, w.b, pg), row = t0 - pg * p.page_block_size;
          }
          tma_load_5d(dst, map, full, 0, row, 0, w.hk, seq);
          if (both) tma_load_5d(dst_v, &map_v, full, 0, row, 0, w.hk, seq);
        } else if constexpr (kPaged) {
          const int n = pieces(nb);
          for (int q = 0; q < n; ++q) {
            const int tq = t0 + (q << piece_shift), pg = tq / p.page_block_size;
            const int blk = page_block(p, w.b, pg), in_page = tq - pg * p.page_block_size;
#pragma unroll
            for (int panel = 0; panel < kD / 64; ++panel) {
              const uint32_t at = panel * kBlockN * 128 + (q << piece_shift) * 128;
              tma_load_4d(dst + at, map, full, panel * 64, in_page, w.hk, blk);
              if (both) tma_load_4d(dst_v + at, &map_v, full, panel * 64, in_page, w.hk, blk);
            }
          }
        } else {
#pragma unroll
          for (int panel = 0; panel < kD / 64; ++panel) {
            tma_load_4d(dst + panel * kBlockN * 128, map, full, panel * 64, row, w.hk, seq);
            if (both) tma_load_4d(dst_v + panel * kBlockN * 128, &map_v, full, panel * 64, row, w.hk, seq);
          }
        }
      };
      for (int nb = w.nb_lo; nb < w.nb_hi; ++nb, ++it) {
        const int stage = it % kS, t0 = nb * kBlockN;
        const uint32_t dk = sK + stage * kTileBytes, dv = sV + stage * kTileBytes;
        const uint32_t fk = full_k + 8 * stage, fv = (kSplitKV ? full_v : full_k) + 8 * stage;
        // Every lane waits on each barrier, so no lane runs a phase ahead of one (it would
        // read an old phase of the same parity as the one it waits for); lane 0 issues.
        if (it >= kS) mbar_wait(empty_k + 8 * stage, (it / kS - 1) & 1);
        if constexpr (kSplitKV) {  // K first: its stage frees a product earlier than V's
          if (lane == 0) {
            mbar_arrive_expect_tx(fk, tile_bytes(nb));
            copy_tile(&map_k, dk, false, 0, fk, nb);
          }
          if (it >= kS) mbar_wait(empty_v + 8 * stage, (it / kS - 1) & 1);
          if (lane == 0) {
            mbar_arrive_expect_tx(fv, tile_bytes(nb));
            copy_tile(&map_v, dv, false, 0, fv, nb);
          }
        } else if (lane == 0) {
          mbar_arrive_expect_tx(fk, 2 * tile_bytes(nb));
          copy_tile(&map_k, dk, true, dv, fk, nb);
        }
        if (zero_tail && (nb + 1) * kBlockN > w.sb.sk) {
          mbar_wait(fv, (it / kS) & 1);
          const int first = w.sb.sk - t0;  // rows first.. go (the swizzle keeps a row's chunks in the row)
          for (int c = first * (kD / 8) + lane; c < kBlockN * (kD / 8); c += 32) {
            const int r = c / (kD / 8), chunk = c % (kD / 8);
            st_shared_zero16(dv + (chunk / 8) * kBlockN * 128 + r * 128 + (chunk % 8) * 16);
          }
          fence_proxy_async();  // the zeros, to the tensor cores' view
          __syncwarp();
          if (lane == 0) mbar_arrive(tail + 8 * stage);
        }
      }
    }
    return;
  }

  setmaxnreg_inc<kConsumerRegs>();
  const int wg = warp / 4, wtid = tid % 128;
  const float sc = kGeneral ? 1.f : p.softmax_scale * kLog2e;  // general logits are in log2 units
  const uint32_t q_wg = sQ + wg * 64 * 128;  // this warpgroup's 64 Q rows in each panel
  // 1. Q: each warpgroup copies its own 64 rows (cp.async) and publishes them among its
  //    warps with its named barrier; the next tile's rows are copied as soon as this tile's
  //    last S is done, so they land while its last product and epilogue run.
  const int q_bar = 2 + kWG + wg;
  //    Rows outside the sequence (a first tile's rows below 0, a last one's past its end)
  //    read as zeros.
  auto load_q = [&](const TileWork& w) {
    const int r0 = w.r0 + 64 * wg, skip = Sh::kFromEnd ? max(-r0, 0) : 0, valid = min(64, w.r_end - r0);
    const Elem* src = static_cast<const Elem*>(p.q) + q_offset(p, w.b, w.sb, r0 + skip, w.h);
    for (int c = wtid; c < 64 * (kD / 8); c += 128) {
      const int row = c / (kD / 8), col = (c % (kD / 8)) * 8;
      const bool ok = row >= skip && row < valid && col < p.head_size;  // zeros past a padded shape's head size
      cp_async_16(sQ + swizzled_offset(kBlockM, 64 * wg + row, col),
                  ok ? src + (row - skip) * p.q_row_stride + col : src, ok);
    }
    cp_async_commit();
  };
  // The tile index of round r, once the producer has published it (every lane waits). A
  // thread reads rounds r and r + 1 during round r and gives slot r back (give_back) after it:
  // at the start of round r + 1 above head size 128, at the end of round r below (either is
  // correct; each keeps the consumers' spills at or below those of a loop without slots:
  // the other form spilled 100-450 bytes more on the other shapes).
  auto tile_of = [&](int r) {
    mbar_wait(published + 8 * (r % kSlots), (r / kSlots) & 1);
    return tile_slots[r % kSlots];
  };
  constexpr bool kGiveBackAtStart = kD > 128;
  auto give_back = [&](int r) {  // every thread, after its own reads of the slot
    mbar_arrive(taken + 8 * (r % kSlots));
  };
  // The next round's tile if it has keys to see, into nw (-1: none, or no keys).
  auto next_with_keys = [&](int r, TileWork& nw) {
    const int index = tile_of(r + 1);
    return index < tiles && find_tile<Sh>(p, order, index, nw) && nw.nb_lo < nw.nb_hi ? index : -1;
  };
  // Turns: warpgroup g issues its products after bar_sync(2 + g) and hands the turn to the
  // next warpgroup with bar_arrive(2 + (g + 1) % kWG); each barrier counts the two
  // warpgroups of a hand-over. Warpgroup 0 goes first (the last one's arrival before the
  // tiles) and takes the last hand-over after them, so every barrier sees matched arrivals.
  constexpr int kTurn = 256;
  const int my_turn = 2 + wg, next_turn = 2 + (wg + 1) % kWG;
  if (wg == kWG - 1) bar_arrive(2, kTurn);
  int it = 0, q_index = -1;
  uint32_t tail_parity = 0;  // bit s: the phase of stage s's tail barrier to wait for next
  auto wait_tail = [&](int it_) {
    const int stage = it_ % kS;
    mbar_wait(tail + 8 * stage, (tail_parity >> stage) & 1u);
    tail_parity ^= 1u << stage;
  };
  // Waits for key tile nb of tile w's K (joint ring: K and V) before S, and for its V before
  // O += P V; a straddling tile's V also waits for the producer's zeros (tail).
  auto straddles_sk = [&](const TileWork& w, int nb) { return zero_tail && (nb + 1) * kBlockN > w.sb.sk; };
  auto wait_k = [&](const TileWork& w, int nb, int it_) {
    mbar_wait(full_k + 8 * (it_ % kS), (it_ / kS) & 1);
    if (!kSplitKV && straddles_sk(w, nb)) wait_tail(it_);
  };
  auto wait_v = [&](const TileWork& w, int nb, int it_) {
    if (!kSplitKV) return;
    mbar_wait(full_v + 8 * (it_ % kS), (it_ / kS) & 1);
    if (straddles_sk(w, nb)) wait_tail(it_);
  };
  auto release = [&](uint32_t empty, int it_) {  // this warp is done with the stage
    if (lane == 0) mbar_arrive(empty + 8 * (it_ % kS));
  };
  // After a tile's last S (round r): this warpgroup's Q rows are free for the next tile's,
  // once every warp of the warpgroup is past its wait for that S (a warp's copies land in
  // rows the others' part of the product reads).
  auto prefetch_q = [&](int r) {
    TileWork nw;
    const int next = next_with_keys(r, nw);
    if (next < 0) return;
    bar_sync(q_bar, 128);
    load_q(nw), q_index = next;
  };
  // The running state of this warpgroup's rows of the current tile: O, the row maxima and
  // sums, and P of its latest key tile (the A operand of the next O += P V).
  float o[kD / 2];
  float m_run[2], l_run[2];
  uint32_t a[kBlockN / 16][4];
  auto start_rows = [&] {
#pragma unroll
    for (int e = 0; e < kD / 2; ++e) o[e] = 0.f;
    m_run[0] = m_run[1] = -INFINITY, l_run[0] = l_run[1] = 0.f;
  };
  // The first key tile of tile w (round r), once its S is in registers: masks, softmax (O is
  // still zero: no rescale), P.
  auto first_softmax = [&](float (&s)[kBlockN / 2], const TileWork& w, int r) {
    fence_operands(s);
    if (kSplitKV) release(empty_k, it);
    if (w.nb_lo + 1 == w.nb_hi) prefetch_q(r);
    logits_tile<kBlockN, kGeneral, Sh::kFromEnd>(s, p, w, fragment_of(w), w.nb_lo);
    float corr[2];
    online_softmax<kBlockN>(s, m_run, l_run, sc, corr);
    pack_p<kBlockN, Elem>(s, a);
    ++it;
  };
  // started: the current tile's first key tile is done already: its S was issued in the last
  // turn of the tile before, beside that tile's last O += P V (below), so the tensor cores
  // compute it while the tile before writes its rows.
  bool started = false;
  for (int r = 0;; ++r) {
    if (kGiveBackAtStart && r > 0) give_back(r - 1);
    const int index = tile_of(r);
    if (index >= tiles) break;
    TileWork w;
    find_tile<Sh>(p, order, index, w);  // true: only tiles with rows are published
    const Fragment f = fragment_of(w);
    if (!started) start_rows();
    if (w.nb_lo < w.nb_hi) {
      // 2. the key loop: S of tile j is issued together with O += P V of tile j - 1, and the
      //    softmax of tile j runs while that product does (O is rescaled after it).
      if (!started) {
        if (q_index != index) load_q(w), q_index = index;
        cp_async_wait<0>();
        fence_proxy_async();
        bar_sync(q_bar, 128);  // the warpgroup's Q rows are in
        wait_k(w, w.nb_lo, it);
        float s[kBlockN / 2];
        bar_sync(my_turn, kTurn);
        issue_qk<Sh, Elem>(s, q_wg, sK + (it % kS) * kTileBytes);
        bar_arrive(next_turn, kTurn);
        wgmma_wait<0>();
        first_softmax(s, w, r);
      }
      started = false;
      for (int nb = w.nb_lo + 1; nb < w.nb_hi; ++nb, ++it) {
        wait_k(w, nb, it);
        wait_v(w, nb - 1, it - 1);
        float s[kBlockN / 2];
        bar_sync(my_turn, kTurn);
        issue_qk<Sh, Elem>(s, q_wg, sK + (it % kS) * kTileBytes);
        issue_pv<Sh, Elem>(o, a, sV + ((it - 1) % kS) * kTileBytes);
        bar_arrive(next_turn, kTurn);
        wgmma_wait<1>();  // S of tile nb
        fence_operands(s);
        if (kSplitKV) release(empty_k, it);
        if (nb + 1 == w.nb_hi) prefetch_q(r);
        logits_tile<kBlockN, kGeneral, Sh::kFromEnd>(s, p, w, f, nb);
        float corr[2];
        online_softmax<kBlockN>(s, m_run, l_run, sc, corr);
        wgmma_wait<0>();  // O += P V of tile nb - 1
        fence_operands(o);
        fence_operands(a);
        release(kSplitKV ? empty_v : empty_k, it - 1);
        rescale_o<kD>(o, corr);
        pack_p<kBlockN, Elem>(s, a);
      }
      // The last O += P V. When the next round's tile has keys and its Q rows are in flight
      // (prefetch_q), its first S goes in the same turn: O is complete first (the products
      // of a warpgroup finish in order), the rows are written while that S runs, and the
      // next round starts from its second key tile. Only above head size 128 (kChainTiles):
      // measured on the H200, d256 1.03-1.09x, d192 1.02-1.04x; d128 0.97-1.01x; d64
      // 0.93-1.01x, where three consumer warpgroups of 160 registers spilled twice the bytes.
      constexpr bool kChainTiles = kD > 128;
      TileWork nw;
      const int next = kChainTiles ? next_with_keys(r, nw) : -1;
      const bool chain = next >= 0 && q_index == next;
      wait_v(w, w.nb_hi - 1, it - 1);
      if (chain) {
        cp_async_wait<0>();
        fence_proxy_async();
        bar_sync(q_bar, 128);  // the next tile's Q rows are in
        wait_k(nw, nw.nb_lo, it);
        float s[kBlockN / 2];
        bar_sync(my_turn, kTurn);
        issue_pv<Sh, Elem>(o, a, sV + ((it - 1) % kS) * kTileBytes);
        issue_qk<Sh, Elem>(s, q_wg, sK + (it % kS) * kTileBytes);
        bar_arrive(next_turn, kTurn);
        wgmma_wait<1>();  // O += P V of the last key tile
        fence_operands(o);
        fence_operands(a);
        release(kSplitKV ? empty_v : empty_k, it - 1);
        write_rows<kD, Elem, Sh::kFromEnd>(p, w, f, o, m_run, l_run, sc);
        start_rows();
        wgmma_wait<0>();  // the next tile's first S
        first_softmax(s, nw, r + 1);
        started = true;
        if (!kGiveBackAtStart) give_back(r);
        continue;
      }
      bar_sync(my_turn, kTurn);
      issue_pv<Sh, Elem>(o, a, sV + ((it - 1) % kS) * kTileBytes);
      bar_arrive(next_turn, kTurn);
      wgmma_wait<0>();
      fence_operands(o);
      fence_operands(a);
      release(kSplitKV ? empty_v : empty_k, it - 1);
    }
    write_rows<kD, Elem, Sh::kFromEnd>(p, w, f, o, m_run, l_run, sc);
    if (!kGiveBackAtStart) give_back(r);
  }
  if (wg == 0) bar_sync(2, kTurn);
  cp_async_wait<0>();  // no copy may still be landing when the CTA exits
#else
  __trap();  // built for sm_90a only; any other target has no body
#endif
}

// WICK_FLASH_SM90_TMA=0 sends every call to the cp.async kernel (for comparisons).
bool use_tma() {
  static const bool on = not_switched_off("WICK_FLASH_SM90_TMA");
  return on;
}

// The tile count of an instance (0: nothing to launch), its grid, one CTA per (query tile,
// head, sequence) or at most max_ctas persistent ones, and the tiles' order (tile_order.h):
// sections of columns whose K/V (all keys of the longest sequence) fit in kL2Budget bytes. In
// one section of every column, each wave of the GPU read as many heads' K/V as it ran
// columns, and at 1k tokens a head's K/V had left L2 before its next query tile came;
// sections measured 1.04-1.31x without a causal mask on the H200 (bench/RESULTS.md). Under a
// causal mask (a window bounded on the right, open on the left) over sequences of one length,
// tiles pair long with short, so each persistent CTA gets the same work; over sequences of
// varied lengths a pair would not add up to one sequence's work, and one section keeps the
// query tiles from the last to the first (sections without pairs split causal work unevenly:
// 0.67-1.34x). A window bounded on both sides keeps one section too. The budget: 4 MiB
// measured 1.00-1.02x of 16 MiB on most shapes, 1.04-1.08x at d256 causal (1k and 4k
// tokens), 0.98-0.99x at d64 causal (1k and 16k tokens; bench/RESULTS.md). For measuring,
// WICK_FLASH_L2_MB sets the budget of every call (0: one section).
constexpr int64_t kL2Budget = int64_t{4} << 20;
template <class Sh>
int grid_of(const FlashFwdParams& p, int max_ctas, dim3& grid, TileOrder& order) {
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  static const int64_t forced = [] {  // -1: not set
    const char* mb = std::getenv("WICK_FLASH_L2_MB");
    return mb ? int64_t{std::max(std::atoi(mb), 0)} << 20 : int64_t{-1};
  }();
  const int m_blocks = (max_sq + Sh::kBlockM - 1) / Sh::kBlockM;
  const int64_t columns = static_cast<int64_t>(p.batch) * p.num_heads;
  const int64_t tiles = m_blocks * columns;
  if (tiles <= 0) return 0;
  const int ctas = static_cast<int>(std::min<int64_t>(tiles, max_ctas));
  const int64_t kv_bytes = int64_t{4} * max_sk * p.head_size;  // K and V, 2 bytes an element
  // causal arrives as window_left = max_seqlen_k (the plan) or -1 (callers of the kernels)
  const bool right_bounded = p.window_right >= 0;
  const bool causal = right_bounded && (p.window_left < 0 || p.window_left >= max_sk);
  const bool paired = causal && p.cu_seqlens_q == nullptr;  // every column has m_blocks query tiles
  const int64_t budget = forced >= 0 ? forced : right_bounded && !paired ? 0 : kL2Budget;
  order = tile_order(m_blocks, columns, p.num_heads / p.num_heads_k, kv_bytes, budget, paired, ctas);
  grid = dim3(static_cast<unsigned>(ctas));
  return static_cast<int>(tiles);  // the kernel's tile indices are ints
}

// The copy-engine kernel of shape Sh; false (nothing launched) when the copy engine cannot
// describe the call's K/V.
template <class Sh, class Elem, bool kPaged, bool kGeneral = false>
bool launch_tma(const FlashFwdParams& p, cudaStream_t st) {
  const int piece_shift = paged_piece_shift(p, Sh::kBlockN);
  CUtensorMap map_k, map_v;
  // One copy of all of a K/V tile's panels (make_kv_maps' `joint` description) where the head
  // size fills the shape and, paged, a tile is one piece: on the H200 paged d128 calls 1.01x
  // and the rest within 1% either way (bench/RESULTS.md, 2026-12-04).
  const bool joint = p.head_size == Sh::kD && Sh::kD > 64 && (!kPaged || (1 << piece_shift) == Sh::kBlockN);
  if (!make_kv_maps(p, Sh::kBlockN, piece_shift, false, map_k, map_v, joint)) return false;
  // Persistent: one CTA per SM (the kernel's shared memory allows no second) walks the
  // tiles; with WICK_FLASH_SM90_PERSISTENT=0 one CTA per tile. On the H200 the walk measured
  // 0.98-1.14x the per-tile launch (geometric mean 1.02x over flash_bench's A, B, C).
  static const bool persistent = not_switched_off("WICK_FLASH_SM90_PERSISTENT");
  dim3 grid;
  TileOrder order;
  const int tiles = grid_of<Sh>(p, persistent ? sm_count() : INT_MAX, grid, order);
  if (tiles == 0) return true;
  // Over sequences of varied lengths (varlen, paged) the CTAs claim tiles from a counter of
  // the stream's workspace (claim_tile) when they take several: on the H200, workload A and
  // C 1.03-1.10x the fixed walk (d64 causal 1.00-1.03x). Over sequences of one length every
  // column has the same tiles and the walk (with its causal pairs) stays: claims there
  // measured 0.95-1.05x (bench/RESULTS.md). The walk also serves calls while the stream is
  // captured directly through the CUDA runtime (no workspace; a CudaGraph has one), and every
  // call with WICK_FLASH_SM90_CLAIM=0.
  static const bool claim = not_switched_off("WICK_FLASH_SM90_CLAIM");
  int* sched = nullptr;
  SplitWorkspace ws;
  if (claim && p.cu_seqlens_q != nullptr && static_cast<int64_t>(grid.x) < tiles && split_workspace(st, 2, 0, ws))
    sched = ws.counters;
  auto kernel = fwd_kernel_tma<Sh, Elem, kPaged, kGeneral>;
  constexpr int smem = Sh::template kSmem<false>;
  static bool smem_set[kSmemLimitDevices] = {};
  raise_smem_limit_once(kernel, smem, smem_set);
  WICK_CUDA_CHECK(launch_programmatic(kernel, grid, dim3(Sh::kThreads + 128), smem, st, p, order, tiles, sched,
                                      piece_shift, joint, map_k, map_v));
  return true;
}

// Head size 64 runs three consumer warpgroups (192 query rows) in the copy-engine kernel:
// its products are half as long as at 128 while the softmax per key tile is not, and a
// third warpgroup's products cover it. Not for causal (or right-bounded window) calls of at
// most 1024 query rows per sequence, where the wider tile's masked corner costs more than
// that gains (both measured on the H200, bench/RESULTS.md). Right-bounded calls take tiles
// that end at a sequence's last row (Shape::kFromEnd): on the H200 S4k causal 1.02-1.04x,
// workload A causal 1.01-1.02x. Calls without a right bound gain nothing by it, and ptxas
// spilled more with it (80/156 bytes against 64/104; those calls ran 0.98-1.00x), so
// they keep the tiles that start at the first row.
// Calls with general logits (softcap, ALiBi, mm-prefix ranges, a softmax scale that is not
// positive) run the copy-engine kernel's general instance of the plain tile shape; false
// (nothing launched) when the copy engine cannot describe their K/V: the sm_80 family takes
// them then.
template <int D, class Elem, bool kPaged>
bool launch(const FlashFwdParams& p, cudaStream_t st) {
  if (has_general_logits(p)) return use_tma() && launch_tma<Shape<D>, Elem, kPaged, true>(p, st);
  if (use_tma()) {
    const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
    if constexpr (D == 64)
      if (p.window_right < 0 ? launch_tma<Shape<D, 192, 128, false>, Elem, kPaged>(p, st)
                             : max_sq > 1024 && launch_tma<Shape<D, 192, 128, true>, Elem, kPaged>(p, st))
        return true;
    // Head size 128 (and 96 on its shape) over sequences longer than 1024 rows: three
    // warpgroups as well, with 80-key tiles (64 when paged: whole 32-key pieces; paged 80-key
    // tiles, copied as 16-key pieces or as runs of 16-64 rows cut at page ends, ran 0.94-0.97x
    // the 64-key ones) without a right bound and for causal varlen calls; at 160 registers a
    // thread the 128-key tile's S and P no longer fit beside O. Workload A 1.04-1.07x, causal
    // 1.04-1.06x, S16k 1.02-1.03x on the H200; causal varlen calls ran 64-key tiles until the
    // tiles ended at a sequence's last row (find_tile), and 80-key tiles then measured
    // 1.02-1.04x. Up to 1024 rows a 192-row tile wastes up to an eighth of its rows; batched
    // causal calls lost 5-7% to its masked corner, and 2-7% at 4k rows with 64- or 80-key
    // tiles ending at the last row (bench/RESULTS.md, 2026-12-04), so they keep 128 rows, as
    // do windows bounded on both sides.
    if constexpr (D == 128)
      if (max_sq > 1024) {
        const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
        const bool causal = p.window_right >= 0 && (p.window_left < 0 || p.window_left >= max_sk);
        if ((p.window_right < 0 || (causal && p.cu_seqlens_q)) &&
            launch_tma<Shape<D, 192, kPaged ? 64 : 80, !kPaged>, Elem, kPaged>(p, st))
          return true;
      }
    // Unpaged head sizes 192 and 256: 112- and 80-key tiles in two stages, 6-14% faster than
    // 64-key tiles from 4k tokens up (3% slower at d256 causal over 1k-token sequences;
    // measured on the H200, bench/RESULTS.md). The larger products leave the softmax less
    // of each tile's time; each is the widest tile (in 16-key steps) whose two stages fit.
    if constexpr (D > 128 && !kPaged)
      if (launch_tma<Shape<D, 128, D == 256 ? 80 : 112>, Elem, kPaged>(p, st)) return true;
    if (launch_tma<Shape<D>, Elem, kPaged>(p, st)) return true;
  }
  dim3 grid;
  TileOrder order;
  using ShC = Shape<D>;
  if (grid_of<ShC>(p, INT_MAX, grid, order) == 0) return true;
  auto kernel = fwd_kernel<ShC, Elem, kPaged>;
  constexpr int smem = ShC::template kSmem<kPaged>;
  static bool smem_set[kSmemLimitDevices] = {};
  raise_smem_limit_once(kernel, smem, smem_set);
  WICK_CUDA_CHECK(launch_programmatic(kernel, grid, dim3(ShC::kThreads), smem, st, p, order));
  return true;
}

}  // namespace

bool available() {
  static const bool enabled = not_switched_off("WICK_FLASH_SM90");
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
  const int d = p.head_size;
  return (d == 64 || d == 96 || d == 128 || d == 192 || d == 256) &&
         (p.block_table == nullptr || p.page_block_size % 32 == 0) && p.num_splits <= 1 &&
         (p.dtype == FlashDType::BF16 || WICK_FLASH_WANT_F16) &&
         static_cast<int64_t>((p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q) + kMinBlockM - 1) / kMinBlockM * p.batch *
                 p.num_heads <= 0x7fffffff;
}

namespace {
template <int D>
bool run_head_size(const FlashFwdParams& p, cudaStream_t st) {
  if (p.dtype == FlashDType::BF16)
    return p.block_table ? launch<D, __nv_bfloat16, true>(p, st) : launch<D, __nv_bfloat16, false>(p, st);
#if WICK_FLASH_WANT_F16
  return p.block_table ? launch<D, __half, true>(p, st) : launch<D, __half, false>(p, st);
#else
  return false;
#endif
}
}  // namespace

bool run(const FlashFwdParams& p, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (p.head_size) {
    case 64: return run_head_size<64>(p, st);
    case 96:  // on the 128-channel shape, channels 96..127 read as zeros
    case 128: return run_head_size<128>(p, st);
    case 192: return run_head_size<192>(p, st);
    case 256: return run_head_size<256>(p, st);
    default: return false;  // not a head size covers() admits
  }
}

}  // namespace wick::kernels::flash::sm90
