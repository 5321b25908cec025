// The two flash-attention op structs, as candle-flash-attn defines them: aggregates with
// public optional fields, set what you need and call forward(). The candle-style free
// functions (flash_attn.h) fill one of these and run it; PagedKvCache (paged_kv_cache.h)
// binds its block table into a FlashAttnVarLen. A low header on purpose: it needs only
// Tensor, so everything that takes an op includes this and nothing else of attention.
//
//   softmax(Q K^T * softmax_scale [softcap] [- ALiBi] [mask]) V,
//   f16/bf16 in and out, f32 accumulation and f32 softmax; the LSE is f32.
// The semantics, the checks and their order: docs/parity.md. Every error is a wick::Error
// whose what() is the exact text and code() its entry in docs/errors.md.
//
// Rust Option<T> maps to std::optional<T>, Option<&Tensor> to const Tensor* (nullptr = None).
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace wick {

namespace attention {
struct StepTables;  // plan.h: the host copies a plan_step op was checked with
}

// The batched op ("flash-attn"): every sequence of the batch has the same lengths.
//   q   (batch, seqlen_q, num_heads,   head_size)   last dim contiguous, any other strides
//   k,v (batch, seqlen_k, num_heads_k, head_size)   num_heads_k divides num_heads (GQA/MQA)
//   out (batch, seqlen_q, num_heads, head_size), contiguous, q's dtype and device
//   lse (batch, num_heads, seqlen_q) f32: log-sum-exp of each row's logits (-inf: no key seen)
// When seqlen_q != seqlen_k the causal mask is aligned bottom-right: query row i sits at key
// position i + seqlen_k - seqlen_q.
struct FlashAttn {
  std::optional<float> softmax_scale;          // unset: 1 / sqrt(head_size)
  std::optional<Tensor> alibi_slopes;          // (num_heads) f32; logit -= slope[h] * |p(i) - j|
  std::optional<size_t> window_size_left;      // keys at most this far left of p(i) (None: all)
  std::optional<size_t> window_size_right;     // keys at most this far right of p(i); 0 = causal
  std::optional<float> softcap;                // softcap * tanh(logit / softcap) when > 0
  bool causal = false;                         // shorthand for window_size_right = 0 (W13)
  // The CUDA backward sums dQ in a fixed order, so gradients are bitwise identical run to
  // run, at the cost of a second pass over S and dP (docs/kernels.md, "The backward"); by default one
  // fused kernel adds dQ with atomics and its last bits vary. WICK_DETERMINISTIC=1 sets it
  // for every call. The CPU backward is always deterministic.
  bool deterministic = false;

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
  std::optional<float> softmax_scale;  // unset: 1 / sqrt(head_size)
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
  bool causal = false;                     // shorthand for window_size_right = 0 (W13)
  bool deterministic = false;              // as FlashAttn::deterministic
  // CUDA tensors: the checks that read seqlens and block_table values (W04-W11) run on the
  // device and a fault raises at the next call that waits for the device (docs/errors.md,
  // "How errors surface on CUDA"); strict runs them on the host at the call instead, at the
  // cost of a copy and a wait. The environment variable WICK_STRICT_CHECKS=1 sets it for
  // every call. CPU tensors are always checked at the call.
  bool strict_checks = false;
  // Set by plan_step (ops/attention/step.h): the host values seqlens and block_table were
  // checked with, so calls check only what depends on k against them, on the host.
  std::shared_ptr<const attention::StepTables> planned;

  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v) const;
  // (out, lse) with lse (num_heads, total_q) f32.
  std::pair<Tensor, Tensor> forward_with_lse(const Tensor& q, const Tensor& k, const Tensor& v) const;
  // The forward into outputs the caller made: out like q (contiguous, q's dtype and device),
  // lse (num_heads, total_q) f32 contiguous, or an undefined lse for none. Allocates no
  // tensor, so it can be captured in a CUDA graph (its split-KV scratch is the CudaGraph's,
  // tensor/graph.h). Not recorded by autograd.
  void forward_into(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse) const;
};

}  // namespace wick
