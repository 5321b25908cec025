// Split-KV combine: merges the per-split partial outputs of one query row by their
// log-sum-exp. With split s holding normalised O_s and lse_s:
//   lse = log(sum_s exp(lse_s)),   O = sum_s exp(lse_s - lse) * O_s
// Splits that saw no key carry lse_s = -inf and weigh 0; a row no split saw gets 0 and -inf.
// A split whose lse is NaN (a NaN or +inf logit, contract step 5) makes the row NaN.
// Grid: (ceil(max_seqlen_q / 4), num_heads, batch); one warp per (row, head), 4 channels per
// lane per step (head_size is a multiple of 8).
#pragma once
#include <cuda_runtime.h>

#include "kernels/flash/flash_common.cuh"

namespace wick::kernels::flash {

constexpr int kCombineWarps = 4;

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
  float mx = -INFINITY;
  bool nan_split = false;
  for (int s = lane; s < num_splits; s += 32) {
    const float ls = lseacc[slot0 + s * split_step];
    mx = fmaxf(mx, ls);  // fmaxf skips NaN: nan_split keeps it
    nan_split |= ls != ls;
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  nan_split = __any_sync(0xffffffffu, nan_split);
  float sum = 0.f;
  if (mx != -INFINITY)
    for (int s = lane; s < num_splits; s += 32) sum += expf(lseacc[slot0 + s * split_step] - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float lse = nan_split ? NAN : (mx == -INFINITY ? -INFINITY : mx + logf(sum));

  Elem* out = static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h);
  for (int c = lane * 4; c < p.head_size; c += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (nan_split) {
      acc = make_float4(NAN, NAN, NAN, NAN);
    } else if (lse != -INFINITY) {
      for (int s = 0; s < num_splits; ++s) {
        const int64_t slot = slot0 + s * split_step;
        const float ls = lseacc[slot];
        if (ls == -INFINITY) continue;
        const float w = expf(ls - lse);
        const float4 x = *reinterpret_cast<const float4*>(oacc + slot * acc_dim + c);
        acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
      }
    }
    out[c] = from_float<Elem>(acc.x);
    out[c + 1] = from_float<Elem>(acc.y);
    out[c + 2] = from_float<Elem>(acc.z);
    out[c + 3] = from_float<Elem>(acc.w);
  }
  if (p.lse && lane == 0) p.lse[lse_offset(p, b, sb, i, h)] = lse;
}

}  // namespace wick::kernels::flash
