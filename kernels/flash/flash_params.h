// FlashFwdParams: everything a flash-attention forward needs, as plain data.
// ops/attention/plan.cpp fills it (after every argument check); the CPU path
// (ops/attention/cpu.cpp) and the CUDA kernels (kernels/flash/) read the same struct,
// so both devices compute the same function from the same numbers.
//
// Index maps (all strides in elements, 64-bit; pointers already advanced by start_offset):
//   sequence b, query row i (0 <= i < sq(b)), query head h, channel d:
//     q[b*q_batch_stride + (q_start(b) + i)*q_row_stride + h*q_head_stride + d]
//     q_start(b) = cu_seqlens_q ? cu_seqlens_q[b] : 0     (varlen: q_batch_stride == 0)
//     sq(b)      = cu_seqlens_q ? cu_seqlens_q[b+1] - cu_seqlens_q[b] : seqlen_q
//   key/value token t (0 <= t < sk(b)), kv head hk = h / (num_heads / num_heads_k):
//     not paged: k[b*k_batch_stride + (k_start(b) + t)*k_row_stride + hk*k_head_stride + d]
//     paged:     k[blk*k_batch_stride + (t % page_block_size)*k_row_stride + hk*k_head_stride + d]
//                blk = block_table[b*block_table_batch_stride + t / page_block_size]
//                (k_batch_stride is then the stride between blocks; k_start is unused)
//     v likewise with the v_* strides.
//   out like q with the o_* strides; lse (f32) at
//     lse[b*lse_batch_stride + h*lse_head_stride + q_start(b) + i]
//
// Semantics (shared/parity/candle-flash-attn.md section 4), with p(i) = i + sk - sq:
//   key t visible to row i  <=>  (window_left < 0 || t >= p(i) - window_left) &&
//                                (window_right < 0 || t <= p(i) + window_right)
//                            or  some mm-prefix range [s, e) has s <= p(i) < e and s <= t < e
//   logit = cap(softmax_scale * q.k) - alibi_slopes[h] * |p(i) - t|,
//   cap(x) = softcap > 0 ? softcap * tanh(x / softcap) : x
//   a row that sees no key: out = 0, lse = -inf.
// window_left/right arrive already converted by candle's rules (plan.cpp); causal is
// window_right == 0 with window_left < 0 (is_causal is set then, as a fast-path hint).
#pragma once
#include <cstdint>

namespace wick::kernels {

enum class FlashDType : int { F16 = 0, BF16 = 1 };

struct FlashFwdParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // may be null: then no LSE is written

  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;

  const uint32_t* cu_seqlens_q = nullptr;  // (batch + 1), cumulative; null for the batched op
  const uint32_t* cu_seqlens_k = nullptr;  // (batch + 1), cumulative; null for the batched op
  int batch = 0;
  int seqlen_q = 0, seqlen_k = 0;          // batched op: every sequence's length
  int max_seqlen_q = 0, max_seqlen_k = 0;  // upper bounds (checked by the plan)
  int64_t total_q = 0;                     // rows of q (varlen) or batch * seqlen_q
  int num_heads = 0, num_heads_k = 0, head_size = 0;

  // Paged K/V (null block_table = not paged). Entries are in [0, num_blocks): the plan
  // checked every entry a sequence uses, so kernels read no stray memory.
  const int32_t* block_table = nullptr;  // u32 or i32 storage read as i32
  int64_t block_table_batch_stride = 0;
  int page_block_size = 0;
  int64_t num_blocks = 0;

  float softmax_scale = 1.0f;
  float softcap = 0.0f;                  // 0 = off
  const float* alibi_slopes = nullptr;   // (num_heads) f32, null = no ALiBi
  int window_left = -1, window_right = -1;
  bool is_causal = false;

  // mm_prefix_ranges: (batch, mm_max_ranges, 2) i32, ranges [start, end) in key positions.
  const int32_t* mm_prefix_ranges = nullptr;
  int64_t mm_batch_stride = 0, mm_range_stride = 0;
  int mm_max_ranges = 0;

  FlashDType dtype = FlashDType::BF16;
  int num_splits = 0;  // split-KV: 0 = choose by heuristic, n >= 1 = force n splits
};

}  // namespace wick::kernels
