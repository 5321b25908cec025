// Flash-attention, mirroring huggingface/candle's candle-flash-attn: the same entry points,
// the same argument order, the same checks in the same order with the same messages
// (shared/parity/candle-flash-attn.md), on CPU and CUDA tensors alike.
//
//   softmax(Q K^T * softmax_scale [softcap] [- ALiBi] [mask]) V,
//   f16/bf16 in and out, f32 accumulation and f32 softmax; the LSE is f32.
//
// Autograd: when q, k or v requires grad (and grad mode is on) the output carries one graph
// node whose backward recomputes the softmax from the LSE (ops/attention/backward.h; on the
// host in f32). The LSE output of forward_with_lse is not differentiable.
//
// Rust Option<T> maps to std::optional<T>, Option<&Tensor> to const Tensor* (nullptr = None).
// Every error is a wick::Error whose what() is the exact text (catalogue: docs/errors.md).
#pragma once
#include <cstddef>
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace wick {

// The batched op ("flash-attn"): every sequence of the batch has the same lengths.
//   q   (batch, seqlen_q, num_heads,   head_size)   last dim contiguous, any other strides
//   k,v (batch, seqlen_k, num_heads_k, head_size)   num_heads_k divides num_heads (GQA/MQA)
//   out (batch, seqlen_q, num_heads, head_size), contiguous, q's dtype and device
//   lse (batch, num_heads, seqlen_q) f32: log-sum-exp of each row's logits (-inf: no key seen)
// When seqlen_q != seqlen_k the causal mask is aligned bottom-right: query row i sits at key
// position i + seqlen_k - seqlen_q.
struct FlashAttn {
  float softmax_scale = 1.0f;
  std::optional<Tensor> alibi_slopes;          // (num_heads) f32; logit -= slope[h] * |p(i) - j|
  std::optional<size_t> window_size_left;      // keys at most this far left of p(i) (None: all)
  std::optional<size_t> window_size_right;     // keys at most this far right of p(i); 0 = causal
  std::optional<float> softcap;                // softcap * tanh(logit / softcap) when > 0

  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v) const;
  // (out, lse) with lse (batch, num_heads, seqlen_q) f32.
  std::pair<Tensor, Tensor> forward_with_lse(const Tensor& q, const Tensor& k, const Tensor& v) const;
};

// The variable-length op ("flash-attn-varlen"): sequences packed one after another.
//   q   (total_q, num_heads, head_size); sequence b owns rows [seqlens_q[b], seqlens_q[b+1])
//   not paged: k,v (total_k, num_heads_k, head_size), rows [seqlens_k[b], seqlens_k[b+1])
//   paged:     k,v (num_blocks, page_block_size, num_heads_k, head_size); token t of
//              sequence b is row t % page_block_size of block block_table[b][t / page_block_size];
//              sk(b) = seqlens_k[b+1] - seqlens_k[b] (still cumulative)
//   out (total_q, num_heads, head_size) contiguous; lse (num_heads, total_q) f32
struct FlashAttnVarLen {
  float softmax_scale = 1.0f;
  size_t max_seqlen_q = 0;   // >= every sequence's query length
  size_t max_seqlen_k = 0;   // >= every sequence's key length; windows larger than it are "None"
  Tensor seqlens_q;          // (batch + 1) U32, cumulative, starts at 0, ends at total_q
  Tensor seqlens_k;          // (batch + 1) U32, cumulative
  std::optional<Tensor> block_table;       // (batch, max_blocks_per_seq) U32 or I32: paged K/V
  std::optional<Tensor> mm_prefix_ranges;  // (batch, max_ranges, 2) I32: [start, end) key ranges
                                           // attended bidirectionally (multimodal prefixes)
  std::optional<size_t> page_block_size;   // rows per block; required when paged
  std::optional<Tensor> alibi_slopes;      // (num_heads) f32
  std::optional<size_t> window_size_left;
  std::optional<size_t> window_size_right;
  std::optional<float> softcap;

  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v) const;
  // (out, lse) with lse (num_heads, total_q) f32.
  std::pair<Tensor, Tensor> forward_with_lse(const Tensor& q, const Tensor& k, const Tensor& v) const;
};

// ---- the batched entry points (candle's argument order) --------------------------------
Tensor flash_attn(const Tensor& q, const Tensor& k, const Tensor& v, float softmax_scale, bool causal);
Tensor flash_attn_windowed(const Tensor& q, const Tensor& k, const Tensor& v, float softmax_scale,
                           std::optional<size_t> window_size_left,
                           std::optional<size_t> window_size_right);
// alibi_slopes (num_heads) f32.
Tensor flash_attn_alibi(const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& alibi_slopes, float softmax_scale, bool causal);
Tensor flash_attn_alibi_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& alibi_slopes, float softmax_scale,
                                 std::optional<size_t> window_size_left,
                                 std::optional<size_t> window_size_right);
Tensor flash_attn_alibi_windowed_softcap(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor* alibi_slopes, float softmax_scale,
                                         std::optional<size_t> window_size_left,
                                         std::optional<size_t> window_size_right, float softcap);

// ---- the varlen entry points (candle's argument order) ---------------------------------
Tensor flash_attn_varlen(const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& seqlens_q, const Tensor& seqlens_k, size_t max_seqlen_q,
                         size_t max_seqlen_k, float softmax_scale, bool causal);
Tensor flash_attn_varlen_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& seqlens_q, const Tensor& seqlens_k,
                                  size_t max_seqlen_q, size_t max_seqlen_k, float softmax_scale,
                                  std::optional<size_t> window_size_left,
                                  std::optional<size_t> window_size_right);
// k, v paged (num_blocks, page_block_size, num_heads_k, head_size); block_table
// (batch, max_blocks_per_seq) U32/I32; mm_prefix_ranges (batch, max_ranges, 2) I32 or nullptr.
Tensor flash_attn_varlen_paged_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& seqlens_q, const Tensor& seqlens_k,
                                        const Tensor& block_table, const Tensor* mm_prefix_ranges,
                                        size_t max_seqlen_q, size_t max_seqlen_k,
                                        float softmax_scale,
                                        std::optional<size_t> window_size_left,
                                        std::optional<size_t> window_size_right,
                                        size_t page_block_size, std::optional<float> softcap);
Tensor flash_attn_varlen_alibi(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& alibi_slopes, const Tensor& seqlens_q,
                               const Tensor& seqlens_k, size_t max_seqlen_q, size_t max_seqlen_k,
                               float softmax_scale, bool causal);
Tensor flash_attn_varlen_alibi_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& alibi_slopes, const Tensor& seqlens_q,
                                        const Tensor& seqlens_k, size_t max_seqlen_q,
                                        size_t max_seqlen_k, float softmax_scale,
                                        std::optional<size_t> window_size_left,
                                        std::optional<size_t> window_size_right);
Tensor flash_attn_varlen_alibi_windowed_softcap(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor* alibi_slopes,
                                                const Tensor& seqlens_q, const Tensor& seqlens_k,
                                                size_t max_seqlen_q, size_t max_seqlen_k,
                                                float softmax_scale,
                                                std::optional<size_t> window_size_left,
                                                std::optional<size_t> window_size_right,
                                                float softcap);

}  // namespace wick

// The rest of the attention API (one include brings it all, as wick.h expects).
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/reference.h"
