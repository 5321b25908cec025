// Device helpers shared by every flash-attention forward kernel: the index maps and the
// visibility rule of kernels/flash/flash_params.h, written once so the naive kernel, the
// tensor-core kernel and the combine kernel cannot disagree about them.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/flash/flash_params.h"

namespace wick::kernels::flash {

constexpr float kLog2e = 1.4426950408889634f;  // exp(x) == exp2(x * kLog2e)
constexpr float kLn2 = 0.6931471805599453f;    // log(x) == log2(x) * kLn2

// Device element type of a FlashDType.
template <FlashDType> struct ElemOf;
template <> struct ElemOf<FlashDType::BF16> { using type = __nv_bfloat16; };
template <> struct ElemOf<FlashDType::F16> { using type = __half; };

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class Elem> __device__ __forceinline__ Elem from_float(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }

// Where sequence b lives: its first q row and key in the packed (varlen) tensors, and
// its lengths. For the batched op the starts are 0 and the batch strides move between
// sequences instead.
struct SeqBounds {
  int64_t q_start;  // q_start(b) of the contract
  int64_t k_start;  // k_start(b); unused when paged
  int sq, sk;
  int64_t q_row0;   // row of (b, i=0) in a (total_q, ...) scratch or lse index space
};

__device__ __forceinline__ SeqBounds seq_bounds(const FlashFwdParams& p, int b) {
  SeqBounds s;
  if (p.cu_seqlens_q) {
    s.q_start = p.cu_seqlens_q[b];
    s.sq = static_cast<int>(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]);
    s.q_row0 = s.q_start;
  } else {
    s.q_start = 0;
    s.sq = p.seqlen_q;
    s.q_row0 = static_cast<int64_t>(b) * p.seqlen_q;
  }
  if (p.cu_seqlens_k) {
    s.k_start = p.cu_seqlens_k[b];
    s.sk = static_cast<int>(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]);
  } else {
    s.k_start = 0;
    s.sk = p.seqlen_k;
  }
  return s;
}

// Element offset of (b, row i, head h, channel 0) in q / out / lse.
__device__ __forceinline__ int64_t q_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int i, int h) {
  return b * p.q_batch_stride + (s.q_start + i) * p.q_row_stride + h * p.q_head_stride;
}
__device__ __forceinline__ int64_t o_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int i, int h) {
  return b * p.o_batch_stride + (s.q_start + i) * p.o_row_stride + h * p.o_head_stride;
}
__device__ __forceinline__ int64_t lse_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int i, int h) {
  return b * p.lse_batch_stride + h * p.lse_head_stride + s.q_start + i;
}

// Element offset of key/value token t of sequence b (head 0, channel 0), paged or not.
// batch_stride is the block stride when paged.
__device__ __forceinline__ int64_t kv_row_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int t,
                                                 int64_t batch_stride, int64_t row_stride) {
  if (p.block_table) {
    const int32_t blk = p.block_table[b * p.block_table_batch_stride + t / p.page_block_size];
    return blk * batch_stride + static_cast<int64_t>(t % p.page_block_size) * row_stride;
  }
  return b * batch_stride + (s.k_start + t) * row_stride;
}

// Key t visible to the query at absolute key position pos (= i + sk - sq)? The contract's
// rule: inside the window, or inside one mm-prefix range together with the query.
// The caller checks t < sk.
__device__ __forceinline__ bool key_visible(const FlashFwdParams& p, int b, int pos, int t) {
  if ((p.window_left < 0 || t >= pos - p.window_left) && (p.window_right < 0 || t <= pos + p.window_right))
    return true;
  if (p.mm_prefix_ranges) {
    const int32_t* r = p.mm_prefix_ranges + b * p.mm_batch_stride;
    for (int k = 0; k < p.mm_max_ranges; ++k) {
      const int s = r[k * p.mm_range_stride], e = r[k * p.mm_range_stride + 1];
      if (s <= pos && pos < e && s <= t && t < e) return true;
    }
  }
  return false;
}

// The logit before masking: cap(scale * qk) - slope * |pos - t|, in natural units.
__device__ __forceinline__ float logit(const FlashFwdParams& p, float qk, float slope, int pos, int t) {
  float x = qk * p.softmax_scale;
  if (p.softcap > 0.f) x = p.softcap * tanhf(x / p.softcap);
  return x - slope * fabsf(static_cast<float>(pos - t));
}

}  // namespace wick::kernels::flash
