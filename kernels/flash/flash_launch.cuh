// Launch of one tensor-core instance: grid shape, split-KV choice, scratch, combine.
// Included by the kernels/flash/flash_fwd_hdim<D>.cu instance files, and by the Hopper decode
// (flash_decode_sm90.cu) for the split rule, residency and workspace it shares with them.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/flash/flash_combine.cuh"
#include "kernels/flash/flash_configs.cuh"
#include "kernels/flash/flash_fwd_kernel.cuh"
#include "kernels/flash/flash_launch.h"
#include "tensor/cuda_check.h"
#include "tensor/error.h"

namespace wick::kernels::flash {

// WICK_FLASH_MERGE_IN_PLACE=0 merges split-KV partials in the separate combine kernel in every
// call (for comparisons; the split counts stay those of the in-place merge).
inline bool merge_in_place_on() {
  static const bool on = not_switched_off("WICK_FLASH_MERGE_IN_PLACE");
  return on;
}

// Number of KV splits: 1 when the (tile, head, sequence) CTAs already fill the GPU's
// resident slots; else as many splits as keep the CTAs within one per SM, with at least
// `min_tiles` key tiles per split. A split's CTA pays a fixed start (its Q tile, the first
// K/V tile's latency) before its keys stream, so one with too few tiles does not pay for
// itself when a separate combine kernel has to run: there at least 4 tiles per split, and
// none under 16 key tiles. When the forward kernel merges the splits itself (in place, or in
// a cluster on sm_90), one tile per split pays: on the H200 (bench/RESULTS.md) B = 1 ctx 512 went
// from 4 splits of 2 tiles to 8 of 1, 9.34-9.40 -> 8.41 us per call through the op.
// At most one CTA per SM, not one per resident slot: on the H200 (132 SMs, two
// slots each) B = 1 ctx 32768 (8 CTAs before splitting) streams K/V at 3.03 TB/s with 16
// splits, 2.55 with 12, 2.61 with 24 and 2.77 with 33; with the older two-pass merge, 17
// splits (4 SMs running two) measured 2.53 against 2.82 for 16, and B = 8 ctx 4096 (64 CTAs)
// 3.09 with 2 splits, 2.80 with 3, 2.34 with 5. Splits past one CTA per SM do not even out
// the SMs' unequal streaming rates either, though the GPU then hands an SM that finishes
// early another split: on the Hopper decode, B = 1 ctx 32768 took 38.4-39.5 us with 16
// splits, 45.9-46.8 with 48 and 47.7-48.5 with 64.
inline int choose_num_splits(int64_t ctas, int key_tiles, int slots, int sms, bool merge_in_place) {
  const int min_tiles = merge_in_place ? 1 : 4;
  if (ctas <= 0 || ctas * 5 >= static_cast<int64_t>(slots) * 4) return 1;
  if (!merge_in_place && key_tiles < 16) return 1;
  int n = static_cast<int>(sms / ctas);
  n = std::min({n, key_tiles / min_tiles, 128});
  return std::max(n, 1);
}

// Resident CTAs per SM times SMs (`slots`), and the SMs, for one kernel on the current device
// (cached per device). `cache` is the caller's per-instance array of kMaxDevices entries; the
// first call on a device also raises the kernel's dynamic shared-memory limit.
constexpr int kMaxDevices = 64;
struct Residency {
  int slots = 0, sms = 0;
};
template <class Kernel>
Residency resident_slots(Kernel kernel, int threads, int smem, Residency* cache) {
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < kMaxDevices && cache[dev].slots > 0) return cache[dev];
  WICK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0, sms = 0;
  WICK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  WICK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (per_sm <= 0)
    throw Error("C13", "flash_fwd: a kernel instance needing " + std::to_string(smem) +
                " bytes of shared memory cannot run on device " + std::to_string(dev));
  const Residency r{per_sm * sms, sms};
  if (dev < kMaxDevices) cache[dev] = r;
  return r;
}

// Sequences per launch-order chunk (see flash_fwd_kernel): as many as one wave of resident
// CTAs holds, at least one. Measured on the H200 (bench/RESULTS.md): at S=1k causal, chunks
// of about one wave beat one sequence per chunk by 3-5% and the whole batch by 5-10% (its
// K/V no longer fits L2); chunks of 5 of 16 sequences (a last chunk of 1, whose longest
// tiles start last) measured 10% below chunks of 2 or 4.
inline int choose_seq_chunk(int64_t ctas_per_seq, int batch, int slots) {
  if (ctas_per_seq <= 0) return 1;
  const int64_t c = slots / ctas_per_seq;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(c, std::max(batch, 1))));
}

// seq_chunk > 0 forces the launch-order chunk (benchmarks of the ordering); 0 chooses.
template <class Cfg, FlashDType DT>
void launch_flash_cfg(const FlashFwdParams& p, cudaStream_t st, int pack, const DeviceChecks* checks,
                      int seq_chunk = 0) {
  using Elem = typename ElemOf<DT>::type;
  auto kernel = flash_fwd_kernel<Cfg, Elem>;
  static Residency residency_cache[kMaxDevices] = {};  // one per instance: the attribute is per kernel
  const Residency res = resident_slots(kernel, Cfg::kThreads, Cfg::kSmem, residency_cache);
  const int slots = res.slots;

  FlashKernelArgs a;
  a.p = p;
  a.pack = pack;
  a.n_col_chunks = (p.head_size + Cfg::kDV - 1) / Cfg::kDV;
  a.acc_dim = a.n_col_chunks * Cfg::kDV;
  if (p.block_table && p.page_block_size > 0 && (p.page_block_size & (p.page_block_size - 1)) == 0) {
    a.page_shift = 0;
    while ((1 << a.page_shift) < p.page_block_size) ++a.page_shift;
  }
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  const int max_sk = p.cu_seqlens_k ? p.max_seqlen_k : p.seqlen_k;
  const int64_t m_blocks = (static_cast<int64_t>(max_sq) * pack + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t heads_y = static_cast<int64_t>(pack > 1 ? p.num_heads_k : p.num_heads) * a.n_col_chunks;
  if (m_blocks <= 0) {
    if (checks) flash_validate(ValidateArgs{p, *checks}, st);
    return;
  }
  if (m_blocks > 0x7fffffff || heads_y > 65535)
    throw Error("C14", "flash_fwd: grid too large (" + std::to_string(m_blocks) + " query tiles, " +
                std::to_string(heads_y) + " head slots)");
  if (m_blocks * heads_y > 0x7fffffff / std::max(p.batch, 1))
    throw Error("C14", "flash_fwd: grid too large (" + std::to_string(m_blocks) + " query tiles x " +
                std::to_string(heads_y) + " head slots x " + std::to_string(p.batch) + " sequences)");
  a.m_blocks = static_cast<int>(m_blocks);
  a.heads_y = static_cast<int>(heads_y);
  a.seq_chunk = seq_chunk > 0 ? std::min(seq_chunk, std::max(p.batch, 1))
                              : choose_seq_chunk(m_blocks * heads_y, p.batch, slots);
  const int key_tiles = (max_sk + Cfg::kBlockN - 1) / Cfg::kBlockN;
  int splits = p.num_splits > 0 ? p.num_splits
                                : choose_num_splits(m_blocks * heads_y * p.batch, key_tiles, slots, res.sms,
                                                    a.n_col_chunks == 1);
  splits = std::max(1, std::min(splits, 65535 / std::max(p.batch, 1)));
  a.num_splits = splits;

  const int64_t tiles = m_blocks * heads_y * p.batch;  // CTAs per split (grid x)
  bool own_scratch = false;
  if (splits > 1) {
    // the partials: (splits, total_q, heads) rows of acc_dim floats, then their lse values
    const size_t slots_total = static_cast<size_t>(splits) * p.total_q * p.num_heads;
    const size_t floats = slots_total * (a.acc_dim + 1);
    SplitWorkspace ws;
    if (a.n_col_chunks == 1 && merge_in_place_on() && split_workspace(st, tiles, floats, ws)) {
      a.oacc = ws.scratch, a.tile_counters = ws.counters;  // merged in place
    } else {
      WICK_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&a.oacc), floats * sizeof(float), st));
      own_scratch = true;
    }
    a.lseacc = a.oacc + slots_total * a.acc_dim;
  }
  // The value checks go into this kernel when it is the call's only one (no combine kernel
  // after it reads the verdict) and they are few; else one check kernel runs first.
  if (checks && (splits == 1 || a.tile_counters) && check_cells(p, *checks) <= kChecksInKernelMax) {
    a.check_here = true;
    a.checks = *checks;
  } else if (checks) {
    flash_validate(ValidateArgs{p, *checks}, st);
  }
  const dim3 grid(static_cast<unsigned>(tiles), 1u, static_cast<unsigned>(splits));
  cudaError_t err = launch_programmatic(kernel, grid, dim3(Cfg::kThreads), Cfg::kSmem, st, a);
  if (err == cudaSuccess && splits > 1 && a.tile_counters == nullptr) {
    const dim3 cgrid(static_cast<unsigned>((max_sq + kCombineWarps - 1) / kCombineWarps),
                     static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.batch));
    flash_combine_kernel<Elem><<<cgrid, kCombineWarps * 32, 0, st>>>(p, a.oacc, a.lseacc, splits, a.acc_dim);
    err = cudaGetLastError();
  }
  if (own_scratch) WICK_CUDA_CHECK(cudaFreeAsync(a.oacc, st));
  WICK_CUDA_CHECK(err);
}

template <int D, FlashDType DT>
void run_flash_hdim(const FlashFwdParams& p, void* stream, bool decode, const DeviceChecks* checks) {
  auto st = static_cast<cudaStream_t>(stream);
  using Decode = typename DecodeConfig<D>::type;
  if constexpr (!std::is_void_v<Decode>) {
    if (decode) {
      launch_flash_cfg<Decode, DT>(p, st, p.num_heads / p.num_heads_k, checks);
      return;
    }
  }
  launch_flash_cfg<typename PrefillConfig<D>::type, DT>(p, st, 1, checks);
}

}  // namespace wick::kernels::flash

// Explicit instances of one head size, in both dtypes the build wants.
#if WICK_FLASH_WANT_F16
#define WICK_FLASH_INSTANTIATE_F16(D) \
  template void run_flash_hdim<D, ::wick::kernels::FlashDType::F16>(const FlashFwdParams&, void*, bool, \
                                                                   const DeviceChecks*);
#else
#define WICK_FLASH_INSTANTIATE_F16(D)
#endif
#define WICK_FLASH_INSTANTIATE(D)                                                              \
  namespace wick::kernels::flash {                                                             \
  template void run_flash_hdim<D, ::wick::kernels::FlashDType::BF16>(const FlashFwdParams&, void*, bool, \
                                                                     const DeviceChecks*);     \
  WICK_FLASH_INSTANTIATE_F16(D)                                                                \
  }
