// The Hopper decode (sm_90a): the decode shape of flash_fwd_kernel.cuh (the query heads of
// a GQA group packed as the rows of one 16-row tile, four warps splitting each 64-key tile)
// with the K/V tiles brought by the tensor memory accelerator instead of per-thread copies,
// and split-KV partials merged inside a thread block cluster. Up to head size 128 it also
// takes 32 rows (two row tiles: a few queries per sequence, as in speculative decoding,
// times a GQA group of 8). A decode call is a K/V stream; in the sm_80 kernel every
// thread issues sixteen 16-byte copies per tile with their page lookups and address
// arithmetic, most of the instructions a warp executes (bench/RESULTS.md). Here one producer
// lane asks the copy engine for each page piece of the tile and the four consumer warps only
// compute.
//
// Steps, mapped to the CPU algorithm (ops/attention/cpu.cpp):
//   0. CTA = (K/V head, sequence, split); the keys its rows can see (contract.h,
//      visible_keys_of_rows) in whole 64-key tiles, then this split's share of them.
//   1. Q tile (16 or 32 rows) -> shared memory (cp.async) -> registers as mma A fragments
//      (or read from shared memory at every key tile, DecodeShape).
//   2. producer (warp 4, one lane): for each key tile, once the consumers have freed its
//      stage (barrier `empty`), one copy per page piece (64 or 32 rows) and 64-channel panel
//      of K and of V, landing on the stage's barrier `full`. The block-table entries are
//      read 32 pages at a time by the warp's lanes, so a page id costs no round trip; the
//      first 32 are asked for at the start, beside the sequence bounds, from a guess of
//      where the split begins (read again when the guess was wrong).
//      consumers (warps 0-3): wait for `full`, then on keys 16w .. 16w + 15 of the tile:
//      a. S = Q K^T (ldmatrix from the 128-byte-swizzled tile, mma m16n8k16)  = CPU step 2a
//         general logits (softcap, ALiBi, any scale) in instances of their own (kGeneral)
//         masks (window, causal, keys past sk; mm-prefix ranges in the general instances)
//         only on tiles that need them
//      b, c. online softmax of the warp's keys                               = CPU steps 2b-c
//      d. O += P V                                                            = CPU step 2d
//      then the warp arrives on `empty`. V rows past sk are zeroed by the warp that owns
//      them before its product (they hold another sequence's or a stale stage's values, and
//      P = 0 times a NaN is NaN).
//   3. the four warps' (m, l, O) merged through shared memory (merge_warp_rows, shared
//      with the sm_80 kernel) and written                                     = CPU step 3
//   4. split-KV: the splits of a tile launched as one cluster leave their partial rows in
//      shared memory and merge them there, reading each other's (merge_cluster_partials);
//      otherwise the partials go to global scratch and the tile's last split merges them
//      (write_rows_merged, as in the sm_80 kernel)
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/flash/flash_fwd_sm90.h"
#include "kernels/flash/flash_instances.h"
#include "kernels/flash/flash_launch.cuh"
#include "kernels/flash/hopper.cuh"
#include "kernels/flash/tma_map.h"
#include "kernels/smem_limit.h"
#include "tensor/cuda_check.h"

namespace wick::kernels::flash::sm90 {
namespace {

// D channels (64, 128 or 256), kStages K/V stages, kMT row tiles of 16 (16 or 32 rows: a
// sequence's query rows times the GQA group). The warps are the sm_80 decode shape's
// (DecodeCfg: 4 warps x 16 keys of a 64-key tile, every row), whose epilogue this kernel
// shares; a fifth warp is the producer. Q's mma fragments stay in registers while they and
// O fit (D x kMT up to 128); otherwise (D = 256, or 32 rows at D = 128, where O alone takes
// 128 registers a thread) each key tile reads them from shared memory again (16 more
// ldmatrix a tile and warp, on a kernel that waits for its K/V anyway).
template <int D, int kStages_, int kMT = 1>
struct DecodeShape {
  static constexpr int kD = D, kStages = kStages_, kBlockN = 64, kMTiles = kMT, kRows = 16 * kMT;
  static constexpr bool kQInRegs = D * kMT <= 128;
  using Cfg = FlashConfig<D, D, 1, kMT, 4, kBlockN, kStages, true>;
  static constexpr int kConsumers = Cfg::kThreads;           // 128
  static constexpr int kThreads = kConsumers + 32;           // and the producer warp
  static constexpr uint32_t kTileBytes = kBlockN * D * 2;    // one swizzled K or V tile
  static constexpr uint32_t kStageBytes = 2 * kTileBytes;    // K, then V
  static constexpr int kQStride = D + 8;                     // padded Q rows (elements)
  static constexpr int kSmem = 1024 + kStages * kStageBytes + kRows * kQStride * 2;
  // a split's partial rows for its cluster's merge, after the epilogue's warp merge: O
  // (kRows x D, f32, normalised), then the rows' lse
  static constexpr int kPartOffset = (Cfg::kSmemEpi + 15) / 16 * 16;
  static constexpr int kPartBytes = (kRows * D + kRows) * 4;
  static_assert(kPartOffset + kPartBytes <= kStages * kStageBytes, "the epilogue fits in the stages");
  // CTAs an SM holds by shared memory (227 KiB), for the register budget of __launch_bounds__
  static constexpr int kMinBlocks = 2 * (kSmem + 1024) <= 227 * 1024 ? 2 : 1;
};

// Shared address of element (row, ch) of a swizzled 64-row tile at `tile` (hopper.cuh).
__device__ __forceinline__ uint32_t tile_addr(uint32_t tile, int row, int ch) {
  return tile + swizzled_offset(64, row, ch);
}

// The merge of a cluster's splits (launched in_cluster: the args.num_splits splits of one
// tile form one cluster, cluster rank = split). Each split has left its partial rows at
// shared address `part` (DecodeShape::kPartOffset's layout); every thread of the cluster
// calls this. The splits merge the tile's (row, 4-channel) items between them, reading
// every split's partial from its shared memory, in merge_partials' order (the same bits as
// a merge of the same partials through global scratch).
template <class Sh, class Elem>
__device__ __forceinline__ void merge_cluster_partials(const FlashKernelArgs& args, uint32_t part, int b,
                                                       const SeqBounds& sb, int rows, int hk) {
  constexpr int kD = Sh::kD, kRows = Sh::kRows;
  const FlashFwdParams& p = args.p;
  cluster_sync();  // every split's partial is in its shared memory
  const int splits = args.num_splits, G = args.pack, quads = p.head_size / 4;
  for (int c = cluster_rank() * Sh::kThreads + threadIdx.x; c < rows * quads; c += splits * Sh::kThreads) {
    const int r = c / quads, col = (c % quads) * 4;
    const Merged mg = merge_partials(splits, [&](int s, float& ls, float4& x) {
      const uint32_t peer = peer_smem(part, s);
      ls = ld_peer_f32(peer + 4 * (kRows * kD + r));
      x = ld_peer_f32x4(peer + 4 * (r * kD + col));
    });
    const int i = r / G, h = hk * G + r % G;
    store4(static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h) + col, mg.o);
    if (p.lse && col == 0) p.lse[lse_offset(p, b, sb, i, h)] = mg.lse;
  }
  cluster_sync_relaxed();  // no split leaves while another may still read its shared memory
}

template <class Sh, class Elem, bool kPaged, bool kGeneral>
__global__ void __launch_bounds__(Sh::kThreads, Sh::kMinBlocks)
    decode_kernel(const FlashKernelArgs args, const __grid_constant__ CUtensorMap map_k,
                  const __grid_constant__ CUtensorMap map_v, int piece_shift, bool in_cluster) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kD = Sh::kD, kStages = Sh::kStages, kBlockN = Sh::kBlockN, kQStride = Sh::kQStride;
  constexpr uint32_t kTileBytes = Sh::kTileBytes, kStageBytes = Sh::kStageBytes;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t barriers[2 * kStages];  // full[kStages], empty[kStages]
  const FlashFwdParams& p = args.p;
  // before the wait for the kernel before (none of this reads global memory): the copy
  // engine fetches the tensor maps, thread 0 sets up the stage barriers, and the block
  // barrier that makes them visible is passed while the kernel before may still run
  const uint32_t full = smem_addr(&barriers[0]), empty = full + 8 * kStages;
  if (threadIdx.x == Sh::kConsumers) prefetch_tensor_map(&map_k), prefetch_tensor_map(&map_v);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(full + 8 * s, 1), mbar_init(empty + 8 * s, 4);
    fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int hk = static_cast<int>(blockIdx.x % p.num_heads_k), b = static_cast<int>(blockIdx.x / p.num_heads_k);
  const int split = blockIdx.z;
  // paged: the producer reads the block ids of 32 pages beside the bounds, from the page its
  // split starts on when the sequence has max_seqlen_k keys, all visible (a decode call's
  // usual case); where the guess is wrong the key loop reads them again. Entries below
  // block_table_cols exist whatever the call's values. (The guess is worked out before the
  // wait: it reads no memory.)
  int guess_page = -1, guess_entry = 0;
  if constexpr (kPaged) {
    if (warp == 4 && p.block_table_cols > 0) {
      const int key_tiles = ((p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k) + kBlockN - 1) / kBlockN;
      const int per = (key_tiles + args.num_splits - 1) / args.num_splits;
      guess_page = max(0, min(key_tiles, split * per) * kBlockN / p.page_block_size);  // (0 on any overflow)
    }
  }
  // Every read of the prologue goes out before any value is used (a use waits for its round
  // trip): the verdict of the call's checks (when this kernel does not run them), the
  // guessed block ids, the sequence's bounds. Entries b and b + 1 of cu_seqlens exist
  // whatever their values, which are used only when the call has not faulted. A planned
  // step's tables (tables_settled) are read before the wait for the kernel before, which
  // cannot be writing them: the round trip runs while that kernel ends (bench/RESULTS.md,
  // H200: a 32-layer step's graph replay 1.05x).
  SeqBounds sb;
  auto read_tables = [&] {
    if (guess_page >= 0 && guess_page + lane < p.block_table_cols) guess_entry = page_block(p, b, guess_page + lane);
    sb = seq_bounds(p, b);
  };
  if (p.tables_settled) read_tables();  // a planned step's: no kernel writes them
  wait_for_prior_grid();
  const uint32_t verdict = !args.check_here && p.verdict != nullptr ? *p.verdict : 0u;
  if (!p.tables_settled) read_tables();
  if (args.check_here ? checks_fail_here(p, args.checks) : verdict != 0) {
    write_fault_outputs<Elem>(p, blockIdx.x + static_cast<int64_t>(blockIdx.z) * gridDim.x,
                              static_cast<int64_t>(gridDim.x) * gridDim.z);
    return;
  }
  const int G = args.pack, rows = sb.sq * G;
  if (rows <= 0) return;  // every split of this CTA's tile returns here: its counter stays 0

  // 0. the tile's keys in whole key tiles, then this split's share
  const int off = static_cast<int>(key_position(sb, 0));  // pos(i) = i + off
  const int pos_first = off, pos_last = (rows - 1) / G + off;
  const Range<int> tile_keys = visible_keys_of_rows<int>(p, b, pos_first, pos_last, sb.sk);
  const Range<int> unmasked = window_keys_of_all_rows<int>(p, pos_first, pos_last, sb.sk);
  const int nb_lo = tile_keys.begin / kBlockN;
  const int nb_hi = tile_keys.end > tile_keys.begin ? (tile_keys.end + kBlockN - 1) / kBlockN : nb_lo;
  const int per_split = (nb_hi - nb_lo + args.num_splits - 1) / args.num_splits;
  const int nb_begin = min(nb_hi, nb_lo + split * per_split);
  const int nb_end = min(nb_hi, nb_begin + per_split);

  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // swizzled panels: 1024-byte aligned
  Elem* sQ = reinterpret_cast<Elem*>(smem_raw + (base - raw) + kStages * kStageBytes);
  const uint32_t part = base + Sh::kPartOffset;  // this split's partial rows (in_cluster)

  if (warp == 4) {  // 2. the producer
    const int piece = 1 << piece_shift;
    // K/V are read once per call: evict-first lines (bench/RESULTS.md, H200: B = 1 ctx 32768
    // 3.14-3.17 -> 3.21-3.24 TB/s, larger batches within 0.3%)
    const uint64_t once = l2_evict_first_policy();
    int table_base = -32, table_entry = 0;  // this lane's entry of pages table_base .. + 31
    if (guess_page >= 0) table_base = guess_page, table_entry = guess_entry;
    int stage = 0, phase = 0;  // tile it's stage (it % kStages) and its use of it ((it / kStages) & 1)
    for (int nb = nb_begin, it = 0; nb < nb_end; ++nb, ++it) {
      const int t0 = nb * kBlockN;
      const uint32_t dk = base + stage * kStageBytes, dv = dk + kTileBytes, bar = full + 8 * stage;
      // every lane waits, so no lane runs a phase ahead of the barrier; lane 0 issues
      if (it >= kStages) mbar_wait(empty + 8 * stage, phase ^ 1);
      if constexpr (kPaged) {
        const int n = min(kBlockN >> piece_shift, (sb.sk - t0 + piece - 1) >> piece_shift);  // pieces before sk
        if (lane == 0) mbar_arrive_expect_tx(bar, 2u * n * piece * (kD * 2));
        for (int q = 0; q < n; ++q) {
          const int tq = t0 + (q << piece_shift), pg = tq / p.page_block_size;
          if (pg < table_base || pg - table_base >= 32) {  // the next 32 pages' ids, one per lane
            table_base = pg;
            const int pages = (sb.sk + p.page_block_size - 1) / p.page_block_size;
            table_entry = pg + lane < pages ? page_block(p, b, pg + lane) : 0;
          }
          const int blk = __shfl_sync(0xffffffffu, table_entry, pg - table_base);
          const int in_page = tq - pg * p.page_block_size;
          if (lane == 0) {
#pragma unroll
            for (int panel = 0; panel < kD / 64; ++panel) {
              const uint32_t at = panel * kBlockN * 128 + (q << piece_shift) * 128;
              tma_load_4d(dk + at, &map_k, bar, panel * 64, in_page, hk, blk, once);
              tma_load_4d(dv + at, &map_v, bar, panel * 64, in_page, hk, blk, once);
            }
          }
        }
      } else if (lane == 0) {
        mbar_arrive_expect_tx(bar, kStageBytes);
        const int row = static_cast<int>(sb.k_start) + t0, seq = p.cu_seqlens_k != nullptr ? 0 : b;
#pragma unroll
        for (int panel = 0; panel < kD / 64; ++panel) {
          tma_load_4d(dk + panel * kBlockN * 128, &map_k, bar, panel * 64, row, hk, seq, once);
          tma_load_4d(dv + panel * kBlockN * 128, &map_v, bar, panel * 64, row, hk, seq, once);
        }
      }
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    if (in_cluster) merge_cluster_partials<Sh, Elem>(args, part, b, sb, rows, hk);
    return;
  }

  // the consumers: warp w takes keys 16w .. 16w + 15 of every tile, for all kRows rows (kMT
  // row tiles of 16: each K and V fragment read from shared memory feeds kMT mmas)
  constexpr int kMT = Sh::kMTiles;
  const int g = lane / 4, tq = lane % 4;
  const int hs = p.head_size;
  // 1. Q: row r is query row r / G of head hk * G + r % G (rows past the end and channels
  //    past head_size read as zeros)
  const Elem* gq = static_cast<const Elem*>(p.q);
  for (int c = tid; c < Sh::kRows * (kD / 8); c += Sh::kConsumers) {
    const int r = c / (kD / 8), col = (c % (kD / 8)) * 8;
    const bool valid = r < rows && col < hs;
    const Elem* src = valid ? gq + q_offset(p, b, sb, r / G, hk * G + r % G) + col : gq;
    cp_async_16(smem_addr(sQ + r * kQStride + col), src, valid);
  }
  cp_async_commit();
  cp_async_wait<0>();
  bar_sync(1, Sh::kConsumers);
  // this lane's ldmatrix row of row tile 0; row tile mt is 16 rows further
  const uint32_t q_lane = smem_addr(sQ + ((lane % 8) + 8 * ((lane / 8) % 2)) * kQStride + 8 * (lane / 16));
  constexpr uint32_t kQTileBytes = 16 * kQStride * 2;
  uint32_t qf[Sh::kQInRegs ? kMT : 1][Sh::kQInRegs ? kD / 16 : 1][4];
  if constexpr (Sh::kQInRegs) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) ldmatrix_x4(qf[mt][ks], q_lane + mt * kQTileBytes + 2 * 16 * ks);
  }

  float o[kMT][kD / 8][4];
  float m_run[kMT][2], l_run[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.f;
#pragma unroll
    for (int d = 0; d < kD / 8; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
  }
  const float sc = kGeneral ? 1.f : p.softmax_scale * kLog2e;  // general logits are in log2 units
  // ldmatrix rows of this lane: K (key kr, channels + 8 for lanes 8-15 and 24-31) and V
  // (key vr, channels + 8 for lanes 16-31). In the swizzled tile, 16-channel step ks of a
  // row sits at panel ks / 4, chunk (2 (ks % 4) + hi) ^ (row % 8) = 2 (ks % 4) ^ (hi ^ row % 8):
  // four offsets per lane, the panel a constant, so each ldmatrix is one add from the tile.
  const int kr = 16 * warp + (lane % 8) + 8 * (lane / 16), vr = 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);
  uint32_t k_off[4], v_off[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    k_off[j] = kr * 128 + ((2 * j) ^ (((lane / 8) % 2) ^ (lane % 8))) * 16;
    v_off[j] = vr * 128 + ((2 * j) ^ ((lane / 16) ^ (lane % 8))) * 16;
  }
  constexpr uint32_t kPanel = kBlockN * 128;  // bytes of one 64-channel panel of a tile

  int stage = 0, phase = 0;
  for (int nb = nb_begin; nb < nb_end; ++nb) {
    mbar_wait(full + 8 * stage, phase);
    const uint32_t sk_tile = base + stage * kStageBytes, sv_tile = sk_tile + kTileBytes;
    // a. S = Q K^T for the warp's 16 keys (two 8-key n-blocks) and every row tile
    float s[kMT][2][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][0][e] = s[mt][1][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t bk[4];
      ldmatrix_x4(bk, sk_tile + k_off[ks % 4] + (ks / 4) * kPanel);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        uint32_t(&qa)[4] = qf[Sh::kQInRegs ? mt : 0][Sh::kQInRegs ? ks : 0];
        if constexpr (!Sh::kQInRegs) ldmatrix_x4(qa, q_lane + mt * kQTileBytes + 2 * 16 * ks);
        mma_16816<Elem>(s[mt][0], qa, bk[0], bk[1]);
        mma_16816<Elem>(s[mt][1], qa, bk[2], bk[3]);
      }
    }
    const int t_tile = nb * kBlockN;
    const int t_first = t_tile + 16 * warp + 2 * tq;  // this thread's first key
    // this thread's rows: 16 mt + g + 8 rr (a row past the last real one acts as the last)
    auto row_of = [&](int mt, int rr) { return min(16 * mt + g + 8 * rr, rows - 1); };
    if constexpr (kGeneral) {
      // softcap / ALiBi / any scale: the contract's logits in log2 units (flash_common.cuh);
      // each row has its own head, so its own ALiBi slope
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int r = row_of(mt, rr);
          const GeneralLogit lg(p, alibi_slope(p, hk * G + r % G));
          const float dist0 = static_cast<float>(r / G + off - t_first);
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
              const float dist = dist0 - static_cast<float>(8 * j + (e % 2));
              s[mt][j][e] = lg.has_cap ? lg.capped(s[mt][j][e], dist) : lg.uncapped(s[mt][j][e], dist);
            }
        }
    }
    if (t_tile < unmasked.begin || t_tile + kBlockN > unmasked.end) {
      // causal / sliding window / keys past sk: a row's visible keys are one interval, and
      // with mm-prefix ranges (general instances) a second one (mm_keys_of_row)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int r = row_of(mt, rr);
          const Range<int> window = window_keys<int>(p, r / G + off, sb.sk);
          const Range<int> shared = kGeneral ? mm_keys_of_row<int>(p, b, r / G + off, sb.sk) : Range<int>{0, 0};
          const int lo = window.begin - t_first, hi = window.end - t_first;
          const int mlo = shared.begin - t_first, mhi = shared.end - t_first;
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 2 * rr; e < 2 * rr + 2; ++e) {
              const int dt = 8 * j + (e % 2);
              if ((dt < lo || dt >= hi) && (!kGeneral || dt < mlo || dt >= mhi)) s[mt][j][e] = -INFINITY;
            }
        }
    }
    // b, c. online softmax of rows 16 mt + g and 16 mt + g + 8 over the warp's keys
    float corr[kMT][2];
    online_softmax_rows<kMT, 2>(s, m_run, l_run, sc, corr);
    // O rescaled only when some row of the warp has a new maximum (corr is exactly 1 for
    // the others): after the first tiles of a long sequence most tiles raise none
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      if (__any_sync(0xffffffffu, corr[mt][0] != 1.f || corr[mt][1] != 1.f)) {
#pragma unroll
        for (int d = 0; d < kD / 8; ++d)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mt][d][e] *= corr[mt][e / 2];
      }
    }
    // V rows of this warp's keys at or past sk: zeros before the product
    const int first_past = sb.sk - (t_tile + 16 * warp);
    if (first_past < 16) {
      for (int c = lane; c < 16 * (kD / 8); c += 32) {
        const int r = c / (kD / 8), ch = (c % (kD / 8)) * 8;
        if (r >= first_past) st_shared_zero16(tile_addr(sv_tile, 16 * warp + r, ch));
      }
      fence_proxy_async();  // ordered before the copy engine's next write of this stage
      __syncwarp();
    }
    // d. O += P V: P of each row tile from its S accumulators as one A fragment (16 rows x
    //    16 keys)
    uint32_t a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      a[mt][0] = pack2<Elem>(s[mt][0][0], s[mt][0][1]);
      a[mt][1] = pack2<Elem>(s[mt][0][2], s[mt][0][3]);
      a[mt][2] = pack2<Elem>(s[mt][1][0], s[mt][1][1]);
      a[mt][3] = pack2<Elem>(s[mt][1][2], s[mt][1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      uint32_t bv[4];
      ldmatrix_x4_trans(bv, sv_tile + v_off[dp % 4] + (dp / 4) * kPanel);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        mma_16816<Elem>(o[mt][2 * dp], a[mt], bv[0], bv[1]);
        mma_16816<Elem>(o[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
      }
    }
    __syncwarp();  // every lane's reads of the stage are done
    if (lane == 0) mbar_arrive(empty + 8 * stage);
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
  // 3. the epilogue reuses the stages: every consumer warp is past its last read of them
  bar_sync(1, Sh::kConsumers);
  auto sync = [] { bar_sync(1, Sh::kConsumers); };
  if (!in_cluster) {
    // (through scratch: 9-16 splits, whose merge loads both chunks of 8 in one round trip)
    write_rows_merged<typename Sh::Cfg, Elem, 2>(args, smem_raw + (base - raw), o, m_run, l_run, sc, b, sb, 0, rows,
                                                 hk, 0, sync);
    return;
  }
  // 4. split-KV merged in the cluster: this split's rows to its shared memory, then the merge
  float* part_o = reinterpret_cast<float*>(smem_raw + (part - raw));
  merge_warp_rows<typename Sh::Cfg>(smem_raw + (base - raw), o, m_run, l_run, sc, 0, rows, sync,
                                    [&](int r, int cc, const float (&acc)[8], float inv, float lse) {
    store_partial8(reinterpret_cast<float4*>(part_o + r * kD + cc), acc, inv);
    if (cc == 0) part_o[Sh::kRows * kD + r] = lse;
  });
  merge_cluster_partials<Sh, Elem>(args, part, b, sb, rows, hk);
#else
  __trap();  // built for sm_90a only; any other target has no body
#endif
}

// WICK_FLASH_SM90_DECODE=0 sends decode calls to the sm_80 kernel (for comparisons).
bool decode_on() {
  static const bool on = not_switched_off("WICK_FLASH_SM90_DECODE");
  return on;
}

// set_cluster_merge's state: -1 until the first split call reads WICK_FLASH_CLUSTER_MERGE.
std::atomic<int> g_cluster_merge{-1};
bool cluster_merge_on() {
  int on = g_cluster_merge.load(std::memory_order_relaxed);
  if (on < 0) {
    on = not_switched_off("WICK_FLASH_CLUSTER_MERGE") ? 1 : 0;
    int unset = -1;
    if (!g_cluster_merge.compare_exchange_strong(unset, on)) on = unset;  // set meanwhile
  }
  return on == 1;
}

// Whether `splits` splits of each of `tiles` tiles may run as clusters of one tile's splits
// (merged in shared memory): at most kMaxCluster per cluster (the portable cluster size; the
// H200 holds only 7 clusters of 16 CTAs of one per SM, too few for the 8 K/V heads of a
// GQA 32/8 sequence: bench/RESULTS.md), and the GPU must hold as many of the grid's CTAs at
// once in clusters as it holds without (`resident` CTAs per wave, from the occupancy of the
// unclustered kernel), so clustering never costs a wave. The GPU's answer for a cluster size
// is asked once per kernel and device: `answers` is the caller's per-kernel record.
constexpr int kMaxCluster = 8;
using ClusterAnswers = int[kMaxDevices][kMaxCluster + 1];  // clusters resident at once, + 1 (0: not asked)
template <class Kernel>
bool clusters_fit(Kernel kernel, int smem, int threads, int64_t tiles, int splits, int64_t resident,
                  ClusterAnswers& answers) {
  if (!cluster_merge_on() || splits < 2 || splits > kMaxCluster) return false;
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  int held = 0;
  if (dev < kMaxDevices && answers[dev][splits] > 0) {
    held = answers[dev][splits] - 1;
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(tiles, 1024)), 1u, static_cast<unsigned>(splits));
    cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = splits;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&held, kernel, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      held = 0;
    }
    if (dev < kMaxDevices) answers[dev][splits] = held + 1;
  }
  const int64_t ctas = tiles * splits;
  return held > 0 && (tiles + held - 1) / held <= (ctas + resident - 1) / resident;
}

// One instance: false (nothing launched) when the copy engine cannot describe the call's
// K/V, or when split partials would need a separate combine kernel (no cluster merge, and a
// capture made directly through the CUDA runtime or more tiles than the workspace counts):
// the sm_80 kernel covers those. `resident`: CTAs of this instance the GPU holds at once.
template <class Sh, class Elem, bool kPaged, bool kGeneral>
bool launch_decode(const FlashFwdParams& p, cudaStream_t st, int splits, int64_t resident,
                   const DeviceChecks* checks) {
  const int piece_shift = paged_piece_shift(p, Sh::kBlockN);
  CUtensorMap map_k, map_v;
  if (!make_kv_maps(p, Sh::kBlockN, piece_shift, true, map_k, map_v)) return false;
  auto kernel = decode_kernel<Sh, Elem, kPaged, kGeneral>;
  static bool smem_set[kSmemLimitDevices] = {};
  raise_smem_limit_once(kernel, Sh::kSmem, smem_set);
  FlashKernelArgs a;
  a.p = p;
  a.pack = p.num_heads / p.num_heads_k;
  a.acc_dim = Sh::kD;
  a.m_blocks = 1;
  a.heads_y = p.num_heads_k;
  a.num_splits = splits;
  const int64_t tiles = static_cast<int64_t>(p.batch) * p.num_heads_k;
  static ClusterAnswers answers = {};
  const bool in_cluster = clusters_fit(kernel, Sh::kSmem, Sh::kThreads, tiles, splits, resident, answers);
  if (splits > 1 && !in_cluster) {
    const size_t slots_total = static_cast<size_t>(splits) * p.total_q * p.num_heads;
    SplitWorkspace ws;
    if (!merge_in_place_on() || !split_workspace(st, tiles, slots_total * (a.acc_dim + 1), ws)) return false;
    a.oacc = ws.scratch, a.tile_counters = ws.counters;
    a.lseacc = a.oacc + slots_total * a.acc_dim;
  }
  if (checks && check_cells(p, *checks) <= kChecksInKernelMax) {
    a.check_here = true;
    a.checks = *checks;
  } else if (checks) {
    flash_validate(ValidateArgs{p, *checks}, st);
  }
  const dim3 grid(static_cast<unsigned>(tiles), 1u, static_cast<unsigned>(splits));
  const dim3 cluster(1u, 1u, in_cluster ? static_cast<unsigned>(splits) : 1u);
  WICK_CUDA_CHECK(launch_programmatic_clusters(kernel, grid, cluster, dim3(Sh::kThreads), Sh::kSmem, st, a, map_k,
                                               map_v, piece_shift, in_cluster));
  return true;
}

// Stages: a grid that fills the GPU (no split) runs two CTAs per SM of three stages each; a
// split grid (at most one CTA per SM) runs one CTA per SM with as many stages as fit (six at
// D = 128, eight at D = 64), so more of each SM's K/V is in flight. At D = 256 three stages
// (192 KiB, as many bytes in flight as two CTAs of D = 128) are all an SM holds: one shape
// for both.
template <int D>
constexpr int kDeepStages = D == 64 ? 8 : D == 128 ? 6 : 3;

template <int D, class Elem, bool kPaged, bool kGeneral, int kMT>
bool run_decode_instance(const FlashFwdParams& p, cudaStream_t st, const DeviceChecks* checks) {
  // 32 rows: one shape, the deep one (two CTAs per SM would leave 200 registers a thread,
  // and these instances spilled there)
  using Wide = DecodeShape<D, kMT == 1 ? 3 : kDeepStages<D>, kMT>;
  using Deep = DecodeShape<D, kDeepStages<D>, kMT>;
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  const int64_t tiles = static_cast<int64_t>(p.batch) * p.num_heads_k;
  if (tiles <= 0 || tiles > 0x7fffffff) return false;
  static Residency residency_cache[kMaxDevices] = {};
  const Residency res =
      resident_slots(decode_kernel<Wide, Elem, kPaged, kGeneral>, Wide::kThreads, Wide::kSmem, residency_cache);
  const int key_tiles = (max_sk + Wide::kBlockN - 1) / Wide::kBlockN;
  int splits = p.num_splits > 0 ? p.num_splits : choose_num_splits(tiles, key_tiles, res.slots, res.sms, true);
  // 9 to 16 splits merge through global scratch: over at most kClusterKeyTiles key tiles,
  // 8 splits merged in a cluster finish first (bench/RESULTS.md, H200: B = 1 at 2048 keys
  // 10.5 against 11.6 us; at 4096 equal; at 8192 17.2 against 15.0)
  constexpr int kClusterKeyTiles = 64;
  if (p.num_splits <= 0 && splits > kMaxCluster && splits <= 2 * kMaxCluster && key_tiles <= kClusterKeyTiles &&
      cluster_merge_on())
    splits = kMaxCluster;
  splits = std::max(1, std::min(splits, 65535 / std::max(p.batch, 1)));
  if (splits > 1 && tiles * splits <= res.sms)
    return launch_decode<Deep, Elem, kPaged, kGeneral>(p, st, splits, res.sms, checks);
  return launch_decode<Wide, Elem, kPaged, kGeneral>(p, st, splits, res.slots, checks);
}

// General logits (softcap, ALiBi, mm-prefix ranges, any scale) run instances of their own,
// so the plain ones keep their registers and code. More than 16 rows (up to 32, D <= 128)
// take the two-row-tile instances.
template <int D, class Elem, bool kPaged>
bool run_decode_layout(const FlashFwdParams& p, cudaStream_t st, const DeviceChecks* checks) {
  const bool general = has_general_logits(p);
  if constexpr (D <= 128) {
    if (decode_rows(p) > 16)
      return general ? run_decode_instance<D, Elem, kPaged, true, 2>(p, st, checks)
                     : run_decode_instance<D, Elem, kPaged, false, 2>(p, st, checks);
  }
  return general ? run_decode_instance<D, Elem, kPaged, true, 1>(p, st, checks)
                 : run_decode_instance<D, Elem, kPaged, false, 1>(p, st, checks);
}

template <int D>
bool run_decode_head_size(const FlashFwdParams& p, cudaStream_t st, const DeviceChecks* checks) {
  if (p.dtype == FlashDType::BF16)
    return p.block_table ? run_decode_layout<D, __nv_bfloat16, true>(p, st, checks)
                         : run_decode_layout<D, __nv_bfloat16, false>(p, st, checks);
#if WICK_FLASH_WANT_F16
  return p.block_table ? run_decode_layout<D, __half, true>(p, st, checks)
                       : run_decode_layout<D, __half, false>(p, st, checks);
#else
  return false;
#endif
}

}  // namespace

void set_cluster_merge(bool on) { g_cluster_merge.store(on ? 1 : 0); }

bool decode_covers(const FlashFwdParams& p) {
  const int d = p.head_size;
  const int64_t rows = decode_rows(p);
  return decode_on() && (d == 64 || d == 96 || d == 128 || d == 192 || d == 256) &&
         (rows <= 16 || (rows <= 32 && d <= 128)) &&
         (p.block_table == nullptr || p.page_block_size % 32 == 0) &&
         (p.dtype == FlashDType::BF16 || WICK_FLASH_WANT_F16);
}

bool run_decode(const FlashFwdParams& p, void* stream, const DeviceChecks* checks) {
  auto st = static_cast<cudaStream_t>(stream);
  if (p.head_size <= 64) return run_decode_head_size<64>(p, st, checks);
  if (p.head_size <= 128) return run_decode_head_size<128>(p, st, checks);  // 96: channels 96..127 read as zeros
  return run_decode_head_size<256>(p, st, checks);                          // 192: channels 192..255 likewise
}

}  // namespace wick::kernels::flash::sm90
