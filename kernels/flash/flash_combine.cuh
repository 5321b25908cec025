// Split-KV combine: merges the per-split partial outputs of one query row by their
// log-sum-exp. With split s holding normalised O_s and lse_s:
//   lse = log(sum_s exp(lse_s)),   O = sum_s exp(lse_s - lse) * O_s
// Splits that saw no key carry lse_s = -inf and weigh 0; a row no split saw gets 0 and -inf.
// A split whose lse is NaN (a NaN or +inf logit, contract step 5) makes the row NaN.
// The forward kernel merges in place when the launcher gives it per-tile counters (the last
// split of a tile to finish merges; see flash_fwd_kernel's epilogue), else this kernel runs
// after it.
#pragma once
#include <cuda_runtime.h>

#include "kernels/flash/flash_common.cuh"

namespace wick::kernels::flash {

constexpr int kCombineWarps = 4;

// The merged log-sum-exp of one (row, head) over its splits' partial lse values, read at
// lseacc[slot0 + s * split_step]. Loads bypass L1 (__ldcg): the partials may have been
// written by other SMs during this kernel (the in-kernel merge below).
__device__ inline float merged_lse(const float* lseacc, int64_t slot0, int64_t split_step, int num_splits) {
  float mx = -INFINITY;
  bool nan_split = false;
  for (int s = 0; s < num_splits; ++s) {
    const float ls = __ldcg(lseacc + slot0 + s * split_step);
    mx = fmaxf(mx, ls);  // fmaxf skips NaN: nan_split keeps it
    nan_split |= ls != ls;
  }
  if (nan_split) return NAN;
  if (mx == -INFINITY) return -INFINITY;
  float sum = 0.f;
  for (int s = 0; s < num_splits; ++s) sum += expf(__ldcg(lseacc + slot0 + s * split_step) - mx);
  return mx + logf(sum);
}

// Channels [c, c + 4) of one (row, head) merged from the splits' partial outputs, given the
// merged lse: sum_s exp(lse_s - lse) * O_s; NaN when lse is NaN, 0 when no split saw a key.
__device__ inline float4 merged_channels(const float* oacc, const float* lseacc, int64_t slot0, int64_t split_step,
                                         int num_splits, int acc_dim, int c, float lse) {
  if (lse != lse) return make_float4(NAN, NAN, NAN, NAN);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (lse == -INFINITY) return acc;
  for (int s = 0; s < num_splits; ++s) {
    const int64_t slot = slot0 + s * split_step;
    const float ls = __ldcg(lseacc + slot);
    if (ls == -INFINITY) continue;
    const float w = expf(ls - lse);
    const float4 x = __ldcg(reinterpret_cast<const float4*>(oacc + slot * acc_dim + c));
    acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
  }
  return acc;
}

template <class Elem>
__device__ inline void store4(Elem* dst, float4 v) {
  dst[0] = from_float<Elem>(v.x);
  dst[1] = from_float<Elem>(v.y);
  dst[2] = from_float<Elem>(v.z);
  dst[3] = from_float<Elem>(v.w);
}

// The merge as its own kernel (when the forward kernel could not merge in place: see
// launch_flash_cfg). Grid: (ceil(max_seqlen_q / 4), num_heads, batch); one warp per
// (row, head), 4 channels per lane per step (head_size is a multiple of 8).
template <class Elem>
__global__ void __launch_bounds__(kCombineWarps * 32)
    flash_combine_kernel(const FlashFwdParams p, const float* __restrict__ oacc, const float* __restrict__ lseacc,
                         int num_splits, int acc_dim) {
  if (call_faulted(p)) return;  // the main kernel wrote the NaN outputs
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int i = blockIdx.x * kCombineWarps + warp;
  const SeqBounds sb = seq_bounds(p, b);
  if (i >= sb.sq) return;
  const int64_t slot0 = (sb.q_row0 + i) * p.num_heads + h;   // split 0's slot
  const int64_t split_step = p.total_q * p.num_heads;         // slots between splits
  const float lse = merged_lse(lseacc, slot0, split_step, num_splits);
  Elem* out = static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h);
  for (int c = lane * 4; c < p.head_size; c += 128)
    store4(out + c, merged_channels(oacc, lseacc, slot0, split_step, num_splits, acc_dim, c, lse));
  if (p.lse && lane == 0) p.lse[lse_offset(p, b, sb, i, h)] = lse;
}

}  // namespace wick::kernels::flash
