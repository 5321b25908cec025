// flash_fwd_naive: the readable lesson kernel. One warp owns one query row and walks the
// keys in tiles of 32 (one key per lane) with the online softmax, in f32, exactly the
// steps of the tiled CPU algorithm (ops/attention/cpu.cpp):
//   0. work item = (query row i, head h, sequence b): one warp; keys past sk or outside the
//      window are masked per key (the fast kernel skips whole key tiles instead)
//   1. load the query row (f32, shared memory)
//   2. for each key tile:
//      a. logits: lane j scores key t0 + j: cap(scale * q.k) - slope * |p(i) - t|, or -inf
//         when the key is not visible (window / causal / mm-prefix) or past sk
//      b. running max m_new = max(m, max over the tile)
//      c. p_j = exp(s_j - m_new), correction = exp(m - m_new)
//      d. l = l * correction + sum_j p_j;  acc = acc * correction + sum_j p_j * v_j
//   3. out = acc / l (0 when l == 0), lse = m + log(l) (-inf when l == 0); a NaN logit
//      makes the running max NaN (nan_max), so l, out and lse end NaN (contract step 5)
// Grid: (ceil(max_seqlen_q / 4), num_heads, batch), 4 warps per block. Any head size up to
// 512, any alignment: every access is a scalar load, which is why it is slow.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/flash/flash_common.cuh"
#include "kernels/flash/flash_fwd.h"
#include "tensor/cuda_check.h"
#include "tensor/error.h"

namespace wick::kernels {
namespace flash {
namespace {

constexpr int kNaiveWarps = 4;
constexpr int kNaiveMaxHead = 512;
constexpr int kNaiveCols = kNaiveMaxHead / 32;  // output channels per lane

// max(a, b) that returns NaN when either is NaN.
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

template <class Elem>
__global__ void __launch_bounds__(kNaiveWarps * 32) flash_naive_kernel(const FlashFwdParams p) {
  __shared__ float s_q[kNaiveWarps][kNaiveMaxHead];
  if (call_faulted(p)) {
    write_fault_outputs<Elem>(p, blockIdx.x + static_cast<int64_t>(gridDim.x) * (blockIdx.y + gridDim.y * blockIdx.z),
                              static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z);
    return;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int i = blockIdx.x * kNaiveWarps + warp;
  const SeqBounds s = seq_bounds(p, b);
  if (i >= s.sq) return;  // whole warp leaves together
  const int hk = kv_head(p, h);
  const int pos = static_cast<int>(key_position(s, i));
  const float slope = alibi_slope(p, h);
  const Elem* q = static_cast<const Elem*>(p.q) + q_offset(p, b, s, i, h);
  const Elem* k = static_cast<const Elem*>(p.k);
  const Elem* v = static_cast<const Elem*>(p.v);

  // 1. the query row
  for (int d = lane; d < p.head_size; d += 32) s_q[warp][d] = to_float(q[d]);
  __syncwarp();

  float m = -INFINITY, l = 0.f, acc[kNaiveCols];
#pragma unroll
  for (int c = 0; c < kNaiveCols; ++c) acc[c] = 0.f;

  // 2. key tiles of 32
  for (int t0 = 0; t0 < s.sk; t0 += 32) {
    const int t = t0 + lane;
    // a. this lane's logit
    float sc = -INFINITY;
    if (t < s.sk && key_visible<int>(p, b, pos, t, s.sk)) {
      const Elem* kt = k + k_offset(p, b, s, t, hk);
      float qk = 0.f;
      for (int d = 0; d < p.head_size; ++d) qk += s_q[warp][d] * to_float(kt[d]);
      sc = logit(qk, p.softmax_scale, p.softcap, slope, pos, t);
    }
    // b. running max; NaN wins (fmaxf would drop it, and a row whose logits are all NaN
    //    would look like a row that saw no key)
    float tile_max = sc;
    for (int o = 16; o > 0; o /= 2) tile_max = nan_max(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float m_new = nan_max(m, tile_max);
    if (m_new == -INFINITY) continue;  // nothing visible yet: l and acc stay 0
    // c. probabilities and the correction of what was summed so far
    const float pj = expf(sc - m_new);
    const float corr = expf(m - m_new);
    m = m_new;
    // d. rescale and accumulate
    float psum = pj;
    for (int o = 16; o > 0; o /= 2) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    l = l * corr + psum;
#pragma unroll
    for (int c = 0; c < kNaiveCols; ++c) acc[c] *= corr;
    const int n = min(32, s.sk - t0);
    for (int j = 0; j < n; ++j) {
      const float pb = __shfl_sync(0xffffffffu, pj, j);
      if (pb == 0.f) continue;  // uniform across the warp
      const Elem* vt = v + v_offset(p, b, s, t0 + j, hk);
#pragma unroll
      for (int c = 0; c < kNaiveCols; ++c) {
        const int d = lane + 32 * c;
        if (d < p.head_size) acc[c] += pb * to_float(vt[d]);
      }
    }
  }

  // 3. normalise and write (contract step 5: NaN stays NaN)
  const float inv = row_inv_sum(l);
  Elem* out = static_cast<Elem*>(p.out) + o_offset(p, b, s, i, h);
#pragma unroll
  for (int c = 0; c < kNaiveCols; ++c) {
    const int d = lane + 32 * c;
    if (d < p.head_size) out[d] = from_float<Elem>(acc[c] * inv);
  }
  if (p.lse && lane == 0) p.lse[lse_offset(p, b, s, i, h)] = row_saw_keys(l) ? m + logf(l) : -INFINITY;
}

}  // namespace
}  // namespace flash

void flash_fwd_naive(const FlashFwdParams& p, void* stream) {
  if (p.head_size > flash::kNaiveMaxHead)
    throw Error("C12", "flash_fwd_naive: head_size " + std::to_string(p.head_size) + " is larger than " +
                std::to_string(flash::kNaiveMaxHead) + ", the largest the kernels support");
  if (p.batch <= 0 || p.num_heads <= 0) return;
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  if (max_sq <= 0) return;
  const dim3 grid((max_sq + flash::kNaiveWarps - 1) / flash::kNaiveWarps, p.num_heads, p.batch);
  auto st = static_cast<cudaStream_t>(stream);
  if (p.dtype == FlashDType::BF16)
    flash::flash_naive_kernel<__nv_bfloat16><<<grid, flash::kNaiveWarps * 32, 0, st>>>(p);
  else
    flash::flash_naive_kernel<__half><<<grid, flash::kNaiveWarps * 32, 0, st>>>(p);
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
