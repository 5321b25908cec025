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

// One (row, head)'s merge over its splits: channels [c, c + 4) of O and the merged lse.
struct Merged {
  float4 o;
  float lse;
};

// Merges channels [c, c + 4) of one (row, head) from its splits' partials, which
// load(s, lse_s, o_s) reads for split s (its lse and those channels of its normalised O).
// Splits go in chunks of kChunk: a chunk's loads are issued together before any is used
// (the merge runs at the end of a kernel, where every dependent round trip is exposed, so it
// costs one round trip per chunk), then with m the largest lse so far (the online softmax
// over chunks) sum = sum_s exp(lse_s - m) and acc = sum_s exp(lse_s - m) O_s, rescaled once
// per chunk when m grows; a chunk's exponentials are independent of each other, so they
// overlap instead of forming a chain. lse = m + log(sum) and O = acc / sum. Every reader of
// partials merges through this function, so where they are kept (global scratch, or the
// shared memory of a cluster's CTAs) does not change a result's bits. A split with lse_s =
// -inf weighs 0 (its O is not used); NaN in any lse_s makes the row NaN.
template <int kAhead = 1, class Load>
__device__ __forceinline__ Merged merge_partials(int num_splits, Load load) {
  // kAhead chunks' loads go out together (one round trip for up to 8 kAhead splits); the
  // arithmetic is still chunk by chunk, so kAhead does not change the bits
  constexpr int kChunk = 8, kSpan = kChunk * kAhead;
  float m = -INFINITY, sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  bool nan_split = false;
  for (int s0 = 0; s0 < num_splits; s0 += kSpan) {
    float ls[kSpan];
    float4 x[kSpan];
#pragma unroll
    for (int k = 0; k < kSpan; ++k) {
      load(min(s0 + k, num_splits - 1), ls[k], x[k]);  // a real split: no stray read
      if (s0 + k >= num_splits) ls[k] = -INFINITY;
    }
#pragma unroll
    for (int c = 0; c < kAhead; ++c) {
      if (s0 + c * kChunk >= num_splits) break;  // no chunk past the last split (as kAhead = 1)
      float m_new = m;
#pragma unroll
      for (int k = c * kChunk; k < (c + 1) * kChunk; ++k) {
        nan_split |= ls[k] != ls[k];
        m_new = fmaxf(m_new, ls[k]);  // fmaxf skips NaN: nan_split keeps it
      }
      if (m_new == -INFINITY) continue;  // no split so far saw a key
      const float a = expf(m - m_new);   // 0 while m is -inf (sum and acc are 0 then)
      sum *= a;
      acc.x *= a, acc.y *= a, acc.z *= a, acc.w *= a;
#pragma unroll
      for (int k = c * kChunk; k < (c + 1) * kChunk; ++k) {
        const float w = ls[k] == -INFINITY ? 0.f : expf(ls[k] - m_new);
        sum += w;
        acc.x += w == 0.f ? 0.f : w * x[k].x;
        acc.y += w == 0.f ? 0.f : w * x[k].y;
        acc.z += w == 0.f ? 0.f : w * x[k].z;
        acc.w += w == 0.f ? 0.f : w * x[k].w;
      }
      m = m_new;
    }
  }
  if (nan_split) return {make_float4(NAN, NAN, NAN, NAN), NAN};
  if (m == -INFINITY) return {acc, -INFINITY};  // no split saw a key: 0 and -inf
  const float inv = 1.f / sum;
  return {make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv), m + logf(sum)};
}

// merge_partials over partials in global scratch: split s's lse at lseacc[slot0 + s *
// split_step], its normalised O at oacc[(that slot) * acc_dim + c]. Loads bypass L1
// (__ldcg): the partials may have been written by other SMs during this kernel (the
// in-kernel merge).
template <int kAhead = 1>
__device__ inline Merged merge_splits(const float* oacc, const float* lseacc, int64_t slot0, int64_t split_step,
                                      int num_splits, int acc_dim, int c) {
  return merge_partials<kAhead>(num_splits, [&](int s, float& ls, float4& x) {
    const int64_t slot = slot0 + s * split_step;
    ls = __ldcg(lseacc + slot);
    x = __ldcg(reinterpret_cast<const float4*>(oacc + slot * acc_dim + c));
  });
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
  Elem* out = static_cast<Elem*>(p.out) + o_offset(p, b, sb, i, h);
  for (int c = lane * 4; c < p.head_size; c += 128) {
    const Merged mg = merge_splits(oacc, lseacc, slot0, split_step, num_splits, acc_dim, c);
    store4(out + c, mg.o);
    if (p.lse && c == 0) p.lse[lse_offset(p, b, sb, i, h)] = mg.lse;
  }
}

}  // namespace wick::kernels::flash
