// The tensor-core forward (FlashAttention-2 style), one template for prefill, paged
// prefill and split-KV decode. Steps, mapped to the CPU algorithm (ops/attention/cpu.cpp)
// and to the lesson kernel (flash_naive.cu):
//   0. CTA = (query tile of kBlockM rows, head [group], sequence [, split]); the keys any row
//      of the tile can see (window and mm-prefix ranges: contract.h, visible_keys_of_rows)
//      are found up front, so tiles wholly masked are never loaded and an empty range goes
//      straight to the epilogue.
//   1. Q tile -> shared memory (cp.async, 16 B per thread, zero-filled tails), then into
//      registers as mma A fragments (head sizes <= 128; larger ones re-read shared memory).
//   2. for each key tile (cp.async pipeline of kStages shared-memory stages, one barrier per
//      tile; the next tiles load while this one computes; a tile's rows are found from one
//      base per page it touches, the block-table entries read a tile ahead, so paged and
//      contiguous K/V issue the same unrolled copies):
//      a. S = Q K^T on the tensor cores (ldmatrix K, mma m16n8k16, f32 accumulators);
//         softcap / ALiBi turn S into log2-scaled logits; masks (window, causal, mm-prefix,
//         keys past sk) are applied only on tiles that need them          = CPU step 2a
//      b. running row max (quad shuffles)                                = CPU step 2b
//      c. P = exp2(S * scale*log2e - m * scale*log2e): log2e is folded into the scale, so
//         one FMA and one ex2 per element; correction exp2(m_old - m_new) = CPU step 2c
//      d. O = O * correction + P V: P stays in registers, re-packed as bf16/f16 A fragments;
//         V through ldmatrix.trans                                        = CPU step 2d
//   3. epilogue: a warp that owns whole rows (prefill) normalises them in registers and
//      writes them through its own Q rows, without a block barrier; otherwise per-warp
//      (m, l, O) go to shared memory; warps that split the key tile
//      (kNWarps > 1, the decode shape) merge by their maxima; O / l is written with
//      16-byte stores, lse = (m + log2 l) * ln2; or, with split-KV, the normalised partial
//      O and its lse go to f32 scratch for flash_combine_kernel          = CPU step 3
//
// Row packing (pack = G > 1, decode): the G query heads that share one K/V head become
// G consecutive rows of the tile (row r = query row r / G, head hk*G + r % G), so one
// K/V read serves all of them.
//
// Shared memory: rows padded by 16 bytes, so the 8 row addresses of one ldmatrix phase hit
// 8 different bank groups (conflict free) while cp.async keeps 16-byte chunks.
#pragma once
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/flash/flash_combine.cuh"
#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_mma.cuh"
#include "kernels/flash/validate.cuh"

namespace wick::kernels::flash {

// The compile-time shape of one kernel instance.
//   kD:       head size the QK^T product runs over (the instance; smaller head sizes are
//             zero-padded up to it)
//   kDV:      output channels one CTA produces (kD, or half of it for d = 512: the grid then
//             has a column-chunk dimension and QK^T is recomputed per chunk)
//   kMWarps:  warps along the rows; kMTiles: 16-row mma tiles per warp (kBlockM =
//             16 * kMTiles * kMWarps). Two tiles per warp let every K/V fragment read from
//             shared memory feed two mmas: shared-memory bandwidth, not the tensor cores,
//             bounds a one-tile warp.
//   kNWarps:  warps that split each key tile between them (decode: few rows, many keys)
//   kBlockN:  keys per tile;  kStages: shared-memory pipeline depth
//   kQInRegs: Q fragments live in registers for the whole key loop
template <int kD_, int kDV_, int kMWarps_, int kMTiles_, int kNWarps_, int kBlockN_, int kStages_, bool kQInRegs_>
struct FlashConfig {
  static constexpr int kD = kD_, kDV = kDV_, kMWarps = kMWarps_, kMTiles = kMTiles_, kNWarps = kNWarps_;
  static constexpr int kBlockN = kBlockN_, kStages = kStages_;
  static constexpr bool kQInRegs = kQInRegs_;
  static constexpr int kWarps = kMWarps * kNWarps, kThreads = kWarps * 32;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarpRows * kMWarps;
  static constexpr int kWN = kBlockN / kNWarps;  // keys per warp per tile
  static constexpr int kStrideQK = kD + 8, kStrideV = kDV + 8;  // padded rows (elements)
  static constexpr int kStrideO = kDV + 8;                       // epilogue rows (floats)
  static constexpr int kElemsQ = kBlockM * kStrideQK, kElemsK = kBlockN * kStrideQK, kElemsV = kBlockN * kStrideV;
  static constexpr int kSmemMain = 2 * (kElemsQ + kStages * (kElemsK + kElemsV));
  static constexpr int kSmemEpi = 4 * (kNWarps * kBlockM * kStrideO + 2 * kNWarps * kBlockM);
  static constexpr int kSmem = kSmemMain > kSmemEpi ? kSmemMain : kSmemEpi;
  static_assert(kD % 16 == 0 && kDV % 16 == 0 && kWN % 16 == 0, "tile shapes are multiples of 16");
  static_assert(kStages >= 2, "the pipeline needs two stages");
};

// Everything one launch needs besides the contract.
struct FlashKernelArgs {
  FlashFwdParams p;
  float* oacc = nullptr;    // split-KV scratch: (num_splits, total_q, num_heads, acc_dim) f32
  float* lseacc = nullptr;  // split-KV scratch: (num_splits, total_q, num_heads) f32
  int num_splits = 1;
  int pack = 1;             // query heads packed into rows (1 = one head per CTA)
  int n_col_chunks = 1;     // output column chunks of kDV channels
  int acc_dim = 0;          // n_col_chunks * kDV
  int page_shift = -1;      // log2(page_block_size) when a power of two, else -1 (divide)
  int m_blocks = 0;         // query tiles per sequence (of the longest one)
  int heads_y = 0;          // head slots per sequence: (query or K/V) heads x n_col_chunks
  int seq_chunk = 1;        // sequences whose tiles are interleaved in the launch order
  // Split-KV merged in place: one counter per blockIdx.x (the splits of a tile share it), zero
  // at launch; the last split of a tile to finish merges and sets it back to zero. Null: a
  // separate combine kernel merges (n_col_chunks must be 1 for the in-place merge).
  int* tile_counters = nullptr;
  // The call's value checks (validate.h), run by every CTA before it reads through an index
  // value when check_here; else a check kernel ran before this one and p.verdict holds its
  // verdict.
  bool check_here = false;
  DeviceChecks checks;
};

// The general logit of one score: the contract's logit in log2 units when `transform`, and
// -inf when `need_mask` and key t is neither in the row's window keys [window_begin,
// window_end) (the contract's window_keys, computed once per row) nor in an mm-prefix range
// shared with the query (mm: the sequence's ranges, or null): the visibility rule of
// contract.h. Out of line on purpose.
static __device__ __noinline__ float general_logit(float qk, float scale, float softcap, float slope, int pos, int t,
                                                   int window_begin, int window_end, int sk, const int32_t* mm,
                                                   int64_t mm_range_stride, int mm_n, bool transform,
                                                   bool need_mask) {
  float x = qk;
  if (transform) x = logit(qk, scale, softcap, slope, pos, t) * kLog2e;
  if (need_mask) {
    const bool vis = (window_begin <= t && t < window_end) ||
                     (mm && t < sk && in_shared_range<int>(mm, mm_range_stride, mm_n, pos, t));
    if (!vis) x = -INFINITY;
  }
  return x;
}

// Where the rows of one key tile live, as element offsets from the head's base pointer:
// row r (0 <= r < kBlockN) is at (r < split ? base0 : base1) + r * row_stride, and rows
// r >= valid (past sk) are zero-filled. A tile that lies in one page (or is not paged) has
// split = kBlockN; one that straddles two pages has base1 = the second page's row 0 minus
// split rows, so the same formula covers both.
struct TileRows {
  int64_t base0, base1;
  int split, valid;
};

// Issues the cp.async copies of one key tile (kRows rows x channels [col0, col0 + kCols))
// into a padded shared tile at byte address dst. Fully unrolled: thread tid copies 16-byte
// chunks tid, tid + kThreads, ... When kThreads is a multiple of the chunks per row, a
// thread keeps one column and steps rows by a constant, so each chunk costs one 64-bit
// address add beside the copy; kWhole (every row in one page and before sk, the common
// case) drops the per-row page and tail selects. Channels past head_size read as zeros.
template <int kRows, int kCols, int kStride, int kThreads, bool kWhole, class Elem>
__device__ __forceinline__ void load_tile(uint32_t dst, const Elem* src, const TileRows& tr, int64_t row_stride,
                                          int col0, int head_size, int tid) {
  constexpr int kChunksPerRow = kCols / 8;
  constexpr int kTotal = kRows * kChunksPerRow;
  constexpr bool kRegular = kThreads % kChunksPerRow == 0 && kTotal % kThreads == 0;
  constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = tid + i * kThreads;
    if (!kRegular && c >= kTotal) break;
    const int row = kRegular ? tid / kChunksPerRow + i * (kThreads / kChunksPerRow) : c / kChunksPerRow;
    const int col = kRegular ? (tid % kChunksPerRow) * 8 : (c % kChunksPerRow) * 8;
    const bool col_ok = col0 + col < head_size;
    const uint32_t d = dst + 2 * (row * kStride + col);
    if constexpr (kWhole) {
      // a column past head_size reads nothing; its address stays inside row `row`
      cp_async_16(d, src + tr.base0 + row * row_stride + (col_ok ? col0 + col : col0), col_ok);
    } else {
      const bool ok = col_ok && row < tr.valid;
      const int64_t o = (row < tr.split ? tr.base0 : tr.base1) + row * row_stride + col0 + col;
      cp_async_16(d, ok ? src + o : src + tr.base0 + col0, ok);  // row 0 is always a real row
    }
  }
}

// b, c. online softmax of the rows a thread holds, in the mma accumulators' layout: s[mt][j]
//    is row tile mt's 8-key n-block j, e = 0, 1 on row g and e = 2, 3 on row g + 8 (g =
//    lane / 4; the four lanes of a quad hold a row's keys). Scores in, P = exp2(s * sc - m *
//    sc) out in place; each row's running maximum m (unscaled) and sum l updated, and the
//    factor O must be rescaled by in corr (0 while a row has seen no key).
template <int kMT, int kNB>
__device__ __forceinline__ void online_softmax_rows(float (&s)[kMT][kNB][4], float (&m_run)[kMT][2],
                                                    float (&l_run)[kMT][2], float sc, float (&corr)[kMT][2]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kNB; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * rr], s[mt][j][2 * rr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[mt][rr], mx);
      const float ms = m_new == -INFINITY ? 0.f : m_new * sc;
      corr[mt][rr] = m_run[mt][rr] == -INFINITY ? 0.f : fast_exp2(m_run[mt][rr] * sc - ms);
      m_run[mt][rr] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kNB; ++j) {
#pragma unroll
        for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
          const float pe = fast_exp2(fmaf(s[mt][j][e], sc, -ms));
          s[mt][j][e] = pe;
          sum += pe;
        }
      }
      l_run[mt][rr] = l_run[mt][rr] * corr[mt][rr] + sum;
    }
  }
}

// call_faulted for a kernel that runs the checks itself: after the wait for the kernel before,
// the CTA checks every index value of the call (the same cells in every CTA, so every CTA
// reaches the same verdict), and the first CTA writes the verdict (for the backward) and
// records the fault. All threads of the block call it.
__device__ __forceinline__ bool checks_fail_here(const FlashFwdParams& p, const DeviceChecks& c) {
  wait_for_prior_grid();
  __shared__ unsigned long long s_key;
  const unsigned long long key = checks::first_fault_in_block(p, c, s_key);
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) checks::report(p, c, key);
  return key != checks::kNone;
}

// 3. general epilogue, first half: per-warp partial state to shared memory, merged across
//    the warps that split a key tile. Called by the Cfg::kThreads threads that ran the key
//    loop (threadIdx.x < kThreads), with every copy into `smem` landed and every read of it
//    done; `sync` is a barrier of exactly those threads. (o, m_run, l_run): the thread's rows
//    in the key loop's layout; rows [r0, r_end) of the tile are real. For each real row r
//    and 8-channel chunk cc (of kDV) a thread calls sink(r, cc, acc, inv, lse): the row's
//    unnormalised output acc[0..7], 1 / its sum (contract step 5) and its log-sum-exp.
//    Reads `smem` up to Cfg::kSmemEpi bytes.
template <class Cfg, class Sync, class Sink>
__device__ __forceinline__ void merge_warp_rows(unsigned char* smem, const float (&o)[Cfg::kMTiles][Cfg::kDV / 8][4],
                                                const float (&m_run)[Cfg::kMTiles][2],
                                                const float (&l_run)[Cfg::kMTiles][2], float sc, int r0, int r_end,
                                                Sync sync, Sink sink) {
  constexpr int kDV = Cfg::kDV, kBlockM = Cfg::kBlockM, kThreads = Cfg::kThreads, kStrideO = Cfg::kStrideO;
  constexpr int kMWarps = Cfg::kMWarps, kNWarps = Cfg::kNWarps, kMT = Cfg::kMTiles, kWarpRows = Cfg::kWarpRows;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % kMWarps, wn = warp / kMWarps;
  const int g = lane / 4, tq = lane % 4;

  float* sO = reinterpret_cast<float*>(smem);
  float* sM = sO + kNWarps * kBlockM * kStrideO;  // row max in log2 units (m * sc)
  float* sL = sM + kNWarps * kBlockM;             // row sum of p
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float l = l_run[mt][rr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = wm * kWarpRows + mt * 16 + g + 8 * rr;
      if (r0 + row >= r_end) continue;  // never read below (a decode tile's GQA rows fill a few of its 16)
      if (tq == 0) {
        sM[wn * kBlockM + row] = m_run[mt][rr] == -INFINITY ? -INFINITY : m_run[mt][rr] * sc;
        sL[wn * kBlockM + row] = l;
      }
#pragma unroll
      for (int d = 0; d < kDV / 8; ++d)
        *reinterpret_cast<float2*>(sO + (wn * kBlockM + row) * kStrideO + 8 * d + 2 * tq) =
            make_float2(o[mt][d][2 * rr], o[mt][d][2 * rr + 1]);
    }
  }
  sync();
  for (int c = tid; c < kBlockM * (kDV / 8); c += kThreads) {
    const int row = c / (kDV / 8), cc = (c % (kDV / 8)) * 8, r = r0 + row;
    if (r >= r_end) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kNWarps; ++w) mx = fmaxf(mx, sM[w * kBlockM + row]);
    float l = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < kNWarps; ++w) {
      const float mw = sM[w * kBlockM + row];
      const float wt = mw == -INFINITY ? 0.f : exp2f(mw - mx);
      l += wt * sL[w * kBlockM + row];
      const float4* src = reinterpret_cast<const float4*>(sO + (w * kBlockM + row) * kStrideO + cc);
      const float4 x0 = src[0], x1 = src[1];
      acc[0] += wt * x0.x; acc[1] += wt * x0.y; acc[2] += wt * x0.z; acc[3] += wt * x0.w;
      acc[4] += wt * x1.x; acc[5] += wt * x1.y; acc[6] += wt * x1.z; acc[7] += wt * x1.w;
    }
    const float inv = row_inv_sum(l);  // contract step 5: NaN stays NaN
    const float lse = row_saw_keys(l) ? (mx + log2f(l)) * kLn2 : -INFINITY;
    sink(r, cc, acc, inv, lse);
  }
}

// A sink's split-KV partial for one 8-channel chunk: the normalised output acc * inv, as
// two float4 at dst (global scratch or shared memory).
__device__ __forceinline__ void store_partial8(float4* dst, const float (&acc)[8], float inv) {
  dst[0] = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
  dst[1] = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
}

// 3. general epilogue (merge_warp_rows, above), written out: the rows, or split-KV partials
//    to the global scratch; with split-KV and tile counters, 4. the in-place merge. The
//    arguments are merge_warp_rows'.
template <class Cfg, class Elem, int kMergeAhead = 1, class Sync>
__device__ __forceinline__ void write_rows_merged(const FlashKernelArgs& args, unsigned char* smem,
                                                  const float (&o)[Cfg::kMTiles][Cfg::kDV / 8][4],
                                                  const float (&m_run)[Cfg::kMTiles][2],
                                                  const float (&l_run)[Cfg::kMTiles][2], float sc, int b,
                                                  const SeqBounds& sb, int r0, int r_end, int head_y, int v_col0,
                                                  Sync sync) {
  constexpr int kThreads = Cfg::kThreads;
  const FlashFwdParams& p = args.p;
  const int tid = threadIdx.x;
  const int G = args.pack, split = blockIdx.z, hs = p.head_size;
  auto row_head = [&](int r) { return G > 1 ? head_y * G + r % G : head_y; };

  merge_warp_rows<Cfg>(smem, o, m_run, l_run, sc, r0, r_end, sync,
                       [&](int r, int cc, const float (&acc)[8], float inv, float lse) {
    const int i = r / G, h = row_head(r), col = v_col0 + cc;
    if (args.num_splits == 1) {
      if (col < hs) {
        uint32_t packed[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) packed[k] = pack2<Elem>(acc[2 * k] * inv, acc[2 * k + 1] * inv);
        Elem* dst = static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h) + col;
        *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      }
      if (p.lse && col == 0) p.lse[lse_offset(p, b, sb, i, h)] = lse;
    } else {
      const int64_t slot = (static_cast<int64_t>(split) * p.total_q + sb.q_row0 + i) * p.num_heads + h;
      store_partial8(reinterpret_cast<float4*>(args.oacc + slot * args.acc_dim + col), acc, inv);
      if (col == 0) args.lseacc[slot] = lse;
    }
  });
  if (args.num_splits > 1 && args.tile_counters != nullptr) {
    // 4. split-KV merge in place: the last split of this tile to finish merges every split's
    //    partials (a counted split-K reduction). The barrier orders the CTA's partial
    //    stores before thread 0's count, whose release makes them visible device-wide
    //    with it; the merging CTA's count acquires every earlier count's stores, and its
    //    barrier passes them to its threads, which read them past L1. (No full fence per
    //    thread: the end of a split call is a chain of round trips, this is one less.)
    __shared__ int s_last;
    sync();
    if (tid == 0) {
      cuda::atomic_ref<int, cuda::thread_scope_device> counter(args.tile_counters[blockIdx.x]);
      s_last = counter.fetch_add(1, cuda::memory_order_acq_rel) == args.num_splits - 1;
      if (s_last) counter.store(0, cuda::memory_order_relaxed);  // every split has counted: ready for the next launch
    }
    sync();
    if (!s_last) return;
    const int64_t split_step = static_cast<int64_t>(p.total_q) * p.num_heads;
    const int quads = hs / 4;
    for (int c = tid; c < (r_end - r0) * quads; c += kThreads) {
      const int r = r0 + c / quads, col = (c % quads) * 4;
      const int i = r / G, h = row_head(r);
      const int64_t slot0 = (sb.q_row0 + i) * p.num_heads + h;
      const Merged mg =
          merge_splits<kMergeAhead>(args.oacc, args.lseacc, slot0, split_step, args.num_splits, args.acc_dim, col);
      store4(static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h) + col, mg.o);
      if (p.lse && col == 0) p.lse[lse_offset(p, b, sb, i, h)] = mg.lse;
    }
  }
}

template <class Cfg, class Elem>
__global__ void __launch_bounds__(Cfg::kThreads) flash_fwd_kernel(const FlashKernelArgs args) {
  constexpr int kD = Cfg::kD, kDV = Cfg::kDV, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  constexpr int kWN = Cfg::kWN, kStages = Cfg::kStages, kThreads = Cfg::kThreads;
  constexpr int kMWarps = Cfg::kMWarps, kNWarps = Cfg::kNWarps, kMT = Cfg::kMTiles, kWarpRows = Cfg::kWarpRows;
  constexpr int kStrideQK = Cfg::kStrideQK, kStrideV = Cfg::kStrideV;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Elem* sQ = reinterpret_cast<Elem*>(smem_raw);
  Elem* sK = sQ + Cfg::kElemsQ;
  Elem* sV = sK + kStages * Cfg::kElemsK;

  const FlashFwdParams& p = args.p;
  if (args.check_here ? checks_fail_here(p, args.checks) : call_faulted(p)) {
    write_fault_outputs<Elem>(p, blockIdx.x + static_cast<int64_t>(blockIdx.z) * gridDim.x,
                              static_cast<int64_t>(gridDim.x) * gridDim.z);
    return;
  }
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % kMWarps, wn = warp / kMWarps;
  const int g = lane / 4, tq = lane % 4;
  // Which (query tile, head slot, sequence) this CTA is: blockIdx.x runs over chunks of
  // seq_chunk sequences; inside a chunk the last query tiles come first (under a causal mask
  // they have the most keys, so the long CTAs start early and the short ones fill the
  // tail), then the sequences, then the head slots. The CTAs resident at one time then
  // read the K/V of the chunk's few sequences, which stays in L2.
  int col_chunk, head_y, b, mtile;
  {
    const int slots = args.m_blocks * args.heads_y;  // CTAs per sequence
    const int chunk = static_cast<int>(blockIdx.x) / (slots * args.seq_chunk);
    const int b0 = chunk * args.seq_chunk, n = min(args.seq_chunk, args.p.batch - b0);
    int rem = static_cast<int>(blockIdx.x) - chunk * slots * args.seq_chunk;
    const int tile_rev = rem / (n * args.heads_y);
    rem -= tile_rev * n * args.heads_y;
    b = b0 + rem / args.heads_y;
    const int hy = rem % args.heads_y;
    col_chunk = hy % args.n_col_chunks, head_y = hy / args.n_col_chunks;
    mtile = args.m_blocks - 1 - tile_rev;
  }
  const int split = blockIdx.z;
  const SeqBounds sb = seq_bounds(p, b);
  const int G = args.pack;
  const int rows = sb.sq * G;
  const int r0 = mtile * kBlockM;
  if (r0 >= rows) return;  // tile past this sequence's end
  const int r_end = min(rows, r0 + kBlockM);
  const int hk = G > 1 ? head_y : kv_head(p, head_y);
  auto row_head = [&](int r) { return G > 1 ? head_y * G + r % G : head_y; };
  const int hs = p.head_size;

  // 0. the keys this tile can see (contract: visible_keys_of_rows), in whole key tiles, then
  //    this split's share
  const int off = static_cast<int>(key_position(sb, 0));  // pos(i) = i + off
  const int pos_first = r0 / G + off, pos_last = (r_end - 1) / G + off;
  const bool has_mm = rows_touch_ranges<int>(p, b, pos_first, pos_last);  // some row needs the per-key rule
  const Range<int> tile_keys = visible_keys_of_rows<int>(p, b, pos_first, pos_last, sb.sk);
  const int t_lo = tile_keys.begin, t_hi = tile_keys.end;
  // keys every row sees through its window: key tiles inside need no mask (window_covers)
  const Range<int> unmasked = window_keys_of_all_rows<int>(p, pos_first, pos_last, sb.sk);
  const int nb_lo = t_lo / kBlockN;
  const int nb_hi = t_hi > t_lo ? (t_hi + kBlockN - 1) / kBlockN : nb_lo;
  const int per_split = (nb_hi - nb_lo + args.num_splits - 1) / args.num_splits;
  const int nb_begin = min(nb_hi, nb_lo + split * per_split);
  const int nb_end = min(nb_hi, nb_begin + per_split);

  const Elem* gq = static_cast<const Elem*>(p.q);
  const Elem* gk = static_cast<const Elem*>(p.k) + hk * p.k_head_stride;
  const Elem* gv = static_cast<const Elem*>(p.v) + hk * p.v_head_stride;
  const int v_col0 = col_chunk * kDV;

  // 1. Q tile (rows past the end and channels past head_size read as zeros). One head per
  //    CTA: the rows are evenly strided, the same unrolled copies as a key tile.
  if (G == 1) {
    TileRows qr;
    qr.base0 = qr.base1 = q_offset(p, b, sb, r0, head_y);
    qr.split = kBlockM, qr.valid = r_end - r0;
    if (qr.valid == kBlockM)
      load_tile<kBlockM, kD, kStrideQK, kThreads, true>(smem_addr(sQ), gq, qr, p.q_row_stride, 0, hs, tid);
    else
      load_tile<kBlockM, kD, kStrideQK, kThreads, false>(smem_addr(sQ), gq, qr, p.q_row_stride, 0, hs, tid);
  } else {
    for (int c = tid; c < kBlockM * (kD / 8); c += kThreads) {
      const int row = c / (kD / 8), col = (c % (kD / 8)) * 8, r = r0 + row;
      const bool valid = r < r_end && col < hs;
      const Elem* src = valid ? gq + q_offset(p, b, sb, r / G, row_head(r)) + col : gq;
      cp_async_16(smem_addr(sQ + row * kStrideQK + col), src, valid);
    }
  }
  cp_async_commit();

  // Block-table entries of key tile nb: its first page, the next page when the tile
  // straddles a page boundary, and the tile's first row inside its page. Read a tile ahead
  // of their use, so the global read overlaps a tile of compute.
  struct PageIds {
    int blk0, blk1, in_page;
  };
  const bool paged = p.block_table != nullptr;
  auto page_ids = [&](int nb) {
    PageIds r{0, 0, 0};
    if (paged && nb < nb_end) {
      const int t0 = nb * kBlockN;
      const int page = args.page_shift >= 0 ? t0 >> args.page_shift : t0 / p.page_block_size;
      r.in_page = t0 - page * p.page_block_size;
      r.blk0 = page_block(p, b, page);
      // the second entry only when the tile reaches into that page (the plan checked only
      // the entries a sequence uses)
      if (r.in_page + kBlockN > p.page_block_size && t0 + p.page_block_size - r.in_page < sb.sk)
        r.blk1 = page_block(p, b, page + 1);
    }
    return r;
  };
  // Issues tile nb into `stage`: the tile's row bases from the page ids (or the sequence's
  // contiguous rows), then the unrolled copies.
  auto load_kv = [&](int nb, int stage, const PageIds& ids) {
    const int t0 = nb * kBlockN;
    TileRows rk, rv;
    rk.valid = rv.valid = min(kBlockN, sb.sk - t0);
    rk.split = rv.split = paged ? min(kBlockN, p.page_block_size - ids.in_page) : kBlockN;
    if (paged) {
      rk.base0 = ids.blk0 * p.k_batch_stride + ids.in_page * p.k_row_stride;
      rv.base0 = ids.blk0 * p.v_batch_stride + ids.in_page * p.v_row_stride;
    } else {
      rk.base0 = packed_kv_offset(b, sb, t0, p.k_batch_stride, p.k_row_stride);
      rv.base0 = packed_kv_offset(b, sb, t0, p.v_batch_stride, p.v_row_stride);
    }
    const uint32_t dk = smem_addr(sK + stage * Cfg::kElemsK), dv = smem_addr(sV + stage * Cfg::kElemsV);
    if (rk.split == kBlockN && rk.valid == kBlockN) {
      load_tile<kBlockN, kD, kStrideQK, kThreads, true>(dk, gk, rk, p.k_row_stride, 0, hs, tid);
      load_tile<kBlockN, kDV, kStrideV, kThreads, true>(dv, gv, rv, p.v_row_stride, v_col0, hs, tid);
    } else {
      // the second page's bases only here: whole tiles never select them
      rk.base1 = paged ? ids.blk1 * p.k_batch_stride - rk.split * p.k_row_stride : rk.base0;
      rv.base1 = paged ? ids.blk1 * p.v_batch_stride - rv.split * p.v_row_stride : rv.base0;
      load_tile<kBlockN, kD, kStrideQK, kThreads, false>(dk, gk, rk, p.k_row_stride, 0, hs, tid);
      load_tile<kBlockN, kDV, kStrideV, kThreads, false>(dv, gv, rv, p.v_row_stride, v_col0, hs, tid);
    }
  };

  // Per-thread row state: mma tile mt of this warp, rows g and g + 8 of it (rr = 0, 1).
  float o[kMT][kDV / 8][4];
  float m_run[kMT][2], l_run[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int d = 0; d < kDV / 8; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) m_run[mt][rr] = -INFINITY, l_run[mt][rr] = 0.f;
  }
  // Without softcap / ALiBi the max is taken on raw scores and the scale folds into exp2's
  // FMA; otherwise scores become log2-unit logits first and the exp2 scale is 1.
  const bool transform = p.softcap > 0.f || p.alibi_slopes != nullptr || !(p.softmax_scale > 0.f);
  const float sc = transform ? 1.f : p.softmax_scale * kLog2e;
  const bool warp_active = r0 + wm * kWarpRows < r_end;
  uint32_t qf[Cfg::kQInRegs ? kMT : 1][Cfg::kQInRegs ? kD / 16 : 1][4];
  // ldmatrix row addresses: one per-lane base each, the tile offsets are compile-time
  // constants that fold into the instruction's immediate.
  const uint32_t q_lane = smem_addr(sQ + (wm * kWarpRows + (lane % 8) + 8 * ((lane / 8) % 2)) * kStrideQK + 8 * (lane / 16));
  const uint32_t k_lane = smem_addr(sK + (wn * kWN + (lane % 8) + 8 * (lane / 16)) * kStrideQK + 8 * ((lane / 8) % 2));
  const uint32_t v_lane = smem_addr(sV + (wn * kWN + (lane % 8) + 8 * ((lane / 8) % 2)) * kStrideV + 8 * (lane / 16));
  auto q_frag_addr = [&](int mt, int ks) { return q_lane + 2 * (mt * 16 * kStrideQK + ks * 16); };

  // The first kStages - 1 tiles in flight, and the page ids of the next one.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (nb_begin + s < nb_end) load_kv(nb_begin + s, s, page_ids(nb_begin + s));
    cp_async_commit();
  }
  PageIds next_ids = page_ids(nb_begin + kStages - 1);

  // 2. the key loop
  // One barrier per tile: after it, tile nb is in shared memory for everyone and every warp
  // has finished tile nb - 1, whose stage is then refilled with tile nb + kStages - 1.
  for (int nb = nb_begin, it = 0; nb < nb_end; ++nb, ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (nb + kStages - 1 < nb_end) load_kv(nb + kStages - 1, (it + kStages - 1) % kStages, next_ids);
    cp_async_commit();
    const int stage = it % kStages;
    next_ids = page_ids(nb + kStages);  // used by the next iteration's load
    const uint32_t k_s = k_lane + stage * (2 * Cfg::kElemsK);
    const uint32_t v_s = v_lane + stage * (2 * Cfg::kElemsV);
    if (warp_active) {
      if constexpr (Cfg::kQInRegs) {
        if (it == 0) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int ks = 0; ks < kD / 16; ++ks) ldmatrix_x4(qf[mt][ks], q_frag_addr(mt, ks));
        }
      }
      // a. S = Q K^T for this warp's rows x kWN keys; each K fragment feeds kMT mmas
      float s[kMT][kWN / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (Cfg::kQInRegs) {
            a[mt][0] = qf[mt][ks][0], a[mt][1] = qf[mt][ks][1], a[mt][2] = qf[mt][ks][2], a[mt][3] = qf[mt][ks][3];
          } else {
            ldmatrix_x4(a[mt], q_frag_addr(mt, ks));
          }
        }
#pragma unroll
        for (int np = 0; np < kWN / 16; ++np) {
          uint32_t bk[4];
          ldmatrix_x4(bk, k_s + 2 * (np * 16 * kStrideQK + ks * 16));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_16816<Elem>(s[mt][2 * np], a[mt], bk[0], bk[1]);
            mma_16816<Elem>(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
          }
        }
      }
      // a'. logits and masks; interior tiles of a plain causal / full attention skip this
      const int t_tile = nb * kBlockN;
      const bool need_mask = has_mm || t_tile < unmasked.begin || t_tile + kBlockN > unmasked.end;
      if (transform || has_mm) {
        // general path (softcap / ALiBi / mm-prefix): one out-of-line call per element keeps
        // this rarely used code small, so the hot loop stays in the instruction cache
        const int32_t* mm = has_mm ? mm_ranges_of(p, b) : nullptr;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int r = min(r0 + wm * kWarpRows + mt * 16 + g + 8 * rr, rows - 1);
            const int pos = r / G + off;
            const float slope = alibi_slope(p, row_head(r));
            const Range<int> window = window_keys<int>(p, pos, sb.sk);
#pragma unroll
            for (int j = 0; j < kWN / 8; ++j)
#pragma unroll
              for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
                const int t = t_tile + wn * kWN + 8 * j + 2 * tq + (e % 2);
                s[mt][j][e] = general_logit(s[mt][j][e], p.softmax_scale, p.softcap, slope, pos, t, window.begin,
                                            window.end, sb.sk, mm, p.mm_range_stride, has_mm ? p.mm_max_ranges : 0,
                                            transform, need_mask);
              }
          }
      } else if (need_mask) {
        // causal / sliding window: the visible keys of a row are one interval [lo, hi)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int r = min(r0 + wm * kWarpRows + mt * 16 + g + 8 * rr, rows - 1);
            const int pos = r / G + off;
            const Range<int> window = window_keys<int>(p, pos, sb.sk);
            const int base = t_tile + wn * kWN + 2 * tq;  // this thread's first key of the tile
            const int lo = window.begin - base, hi = window.end - base;
#pragma unroll
            for (int j = 0; j < kWN / 8; ++j)
#pragma unroll
              for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
                const int dt = 8 * j + (e % 2);  // key t minus the per-thread base folded into lo / hi
                if (dt < lo || dt >= hi) s[mt][j][e] = -INFINITY;
              }
          }
      }
      // b, c. online softmax on the rows this thread holds; then O's rows are rescaled, in
      //    a loop of their own (1.01-1.04x at d64 on the H200 against rescaling inside the
      //    row loop)
      float corr[kMT][2];
      online_softmax_rows<kMT, kWN / 8>(s, m_run, l_run, sc, corr);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int d = 0; d < kDV / 8; ++d)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mt][d][e] *= corr[mt][e / 2];
      // d. O += P V, P re-packed from the S accumulators into A fragments; each V fragment
      //    feeds kMT mmas
#pragma unroll
      for (int kk = 0; kk < kWN / 16; ++kk) {
        uint32_t a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          a[mt][0] = pack2<Elem>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = pack2<Elem>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = pack2<Elem>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = pack2<Elem>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < kDV / 16; ++dp) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, v_s + 2 * (kk * 16 * kStrideV + dp * 16));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_16816<Elem>(o[mt][2 * dp], a[mt], bv[0], bv[1]);
            mma_16816<Elem>(o[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
          }
        }
      }
    }
  }
  if (kNWarps == 1 && G == 1 && args.num_splits == 1) {
    if constexpr (kNWarps == 1) {
    // 3. epilogue of a warp that owns whole rows (prefill): O / l and the LSE from
    // registers; O staged as Elem in the warp's own Q rows (no other warp reads them, and
    // every copy into them has landed), then written with 16-byte stores. No block barrier:
    // a warp that finishes early leaves while the others still compute.
    if (nb_begin >= nb_end) {  // no key tile: the Q copies were never waited for
      cp_async_wait<0>();
      __syncthreads();
    }
    if (!warp_active) return;
    __syncwarp();  // every lane's last ldmatrix of these Q rows is done before any lane writes
    Elem* sOw = sQ + wm * kWarpRows * kStrideQK;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float l = l_run[mt][rr];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = row_inv_sum(l);  // contract step 5: NaN stays NaN
        const int row = mt * 16 + g + 8 * rr, r = r0 + wm * kWarpRows + row;
#pragma unroll
        for (int d = 0; d < kDV / 8; ++d)
          *reinterpret_cast<uint32_t*>(sOw + row * kStrideQK + 8 * d + 2 * tq) =
              pack2<Elem>(o[mt][d][2 * rr] * inv, o[mt][d][2 * rr + 1] * inv);
        if (p.lse && tq == 0 && col_chunk == 0 && r < r_end)
          p.lse[lse_offset(p, b, sb, r, head_y)] = row_saw_keys(l) ? (m_run[mt][rr] * sc + log2f(l)) * kLn2 : -INFINITY;
      }
    }
    __syncwarp();
    constexpr int kChunksPerRow = kDV / 8;
    const int rw0 = r0 + wm * kWarpRows;
    Elem* gout = static_cast<Elem*>(p.out) + o_offset(p, b, sb, rw0, head_y) + v_col0;
    static_assert(kWarpRows * kChunksPerRow % 32 == 0, "whole 16-byte chunks per lane");
#pragma unroll
    for (int i = 0; i < kWarpRows * kChunksPerRow / 32; ++i) {
      const int c = lane + 32 * i, row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      if (rw0 + row < r_end && v_col0 + col < hs)
        *reinterpret_cast<uint4*>(gout + row * p.o_row_stride + col) =
            *reinterpret_cast<const uint4*>(sOw + row * kStrideQK + col);
    }
    return;
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the epilogue reuses all shared memory
  write_rows_merged<Cfg, Elem>(args, smem_raw, o, m_run, l_run, sc, b, sb, r0, r_end, head_y, v_col0,
                               [] { __syncthreads(); });
}

}  // namespace wick::kernels::flash
