// Flash-attention with candle-flash-attn's public functions: the same entry points, the
// same argument order, the same checks in the same order with the same messages, on CPU and
// CUDA tensors alike (docs/parity.md states them; docs/errors.md lists every message).
// Each function fills the op struct of ops/attention/op.h exactly as candle does and runs
// it; "causal" is candle's window_size_left = None, window_size_right = Some(0).
//
// Autograd: when q, k or v requires grad (and grad mode is on) the output carries one graph
// node whose backward recomputes the softmax from the LSE (ops/attention/backward.h). The
// LSE output of forward_with_lse is not differentiable.
#pragma once
#include <cstddef>
#include <optional>

#include "ops/attention/op.h"
#include "tensor/tensor.h"

namespace wick {

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
