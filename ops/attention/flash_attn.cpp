// The candle-flash-attn entry points: each builds the op struct exactly as candle's lib.rs
// does and runs it. Checks live in plan.cpp; the device choice in dispatch.cpp.
#include "ops/attention/flash_attn.h"

#include <array>
#include <type_traits>
#include <vector>

#include "autograd/custom_op.h"
#include "autograd/node.h"
#include "ops/attention/backward.h"
#include "ops/attention/dispatch.h"
#include "ops/attention/plan.h"

namespace wick {

namespace {
// candle: causal <=> window_size_left = None, window_size_right = Some(0).
std::optional<size_t> causal_right(bool causal) {
  return causal ? std::optional<size_t>(0) : std::nullopt;
}
std::optional<Tensor> opt(const Tensor* t) { return t ? std::optional<Tensor>(*t) : std::nullopt; }

bool wants_grad(const Tensor& q, const Tensor& k, const Tensor& v) {
  return autograd::grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
}

std::vector<float> host_slopes(const std::optional<Tensor>& a) {
  return a ? a->to_vec<float>() : std::vector<float>{};
}

std::vector<std::vector<std::array<int32_t, 2>>> host_mm_ranges(const std::optional<Tensor>& m) {
  std::vector<std::vector<std::array<int32_t, 2>>> out;
  if (!m) return out;
  const auto d = m->shape().dims3();
  const std::vector<int32_t> v = m->to_vec<int32_t>();
  out.resize(d[0]);
  for (size_t b = 0; b < d[0]; ++b)
    for (size_t r = 0; r < d[1]; ++r) out[b].push_back({v[(b * d[1] + r) * 2], v[(b * d[1] + r) * 2 + 1]});
  return out;
}

// Runs the op as one autograd node: forward (out, lse), backward from the LSE (backward.h).
// Op is FlashAttn or FlashAttnVarLen; plan is the checked plan of (op, q, k, v), reused by
// both directions (the node keeps q, k, v alive, so its pointers stay valid).
template <class Op>
std::pair<Tensor, Tensor> forward_recorded(const char* name, const Op& op, const attention::AttnPlan& plan,
                                           const Tensor& q, const Tensor& k, const Tensor& v) {
  autograd::CustomOp node;
  node.name = name;
  node.cpu_forward = node.cuda_forward = [plan](const std::vector<Tensor>&) {
    attention::AttnPlan run = plan;  // run_plan_alloc binds fresh outputs into its plan
    auto [out, lse] = attention::run_plan_alloc(run);
    return std::vector<Tensor>{out, lse};
  };
  node.backward = [op, plan](const std::vector<Tensor>& in, const std::vector<Tensor>& outs,
                             const Tensor& grad_out) {
    std::vector<std::vector<std::array<int32_t, 2>>> ranges;
    if constexpr (std::is_same_v<Op, FlashAttnVarLen>) ranges = host_mm_ranges(op.mm_prefix_ranges);
    auto g = attention::flash_bwd(plan, host_slopes(op.alibi_slopes), ranges, in[0], in[1], in[2], outs[0],
                                  outs[1], grad_out);
    return std::vector<Tensor>{g[0], g[1], g[2]};
  };
  std::vector<Tensor> outs = node.apply({q, k, v});
  return {outs[0], outs[1]};
}

}  // namespace

std::pair<Tensor, Tensor> FlashAttn::forward_with_lse(const Tensor& q, const Tensor& k,
                                                      const Tensor& v) const {
  attention::AttnPlan plan = attention::plan_batched(*this, q, k, v);  // checks first, always
  if (wants_grad(q, k, v)) return forward_recorded("flash-attn", *this, plan, q, k, v);
  return attention::run_plan_alloc(plan);
}
Tensor FlashAttn::forward(const Tensor& q, const Tensor& k, const Tensor& v) const {
  return forward_with_lse(q, k, v).first;
}

std::pair<Tensor, Tensor> FlashAttnVarLen::forward_with_lse(const Tensor& q, const Tensor& k,
                                                            const Tensor& v) const {
  attention::AttnPlan plan = attention::plan_varlen(*this, q, k, v);  // checks first, always
  if (wants_grad(q, k, v)) return forward_recorded("flash-attn-varlen", *this, plan, q, k, v);
  return attention::run_plan_alloc(plan);
}
Tensor FlashAttnVarLen::forward(const Tensor& q, const Tensor& k, const Tensor& v) const {
  return forward_with_lse(q, k, v).first;
}

// ---- batched ----------------------------------------------------------------------------

Tensor flash_attn(const Tensor& q, const Tensor& k, const Tensor& v, float softmax_scale, bool causal) {
  return FlashAttn{softmax_scale, std::nullopt, std::nullopt, causal_right(causal), std::nullopt}
      .forward(q, k, v);
}

Tensor flash_attn_windowed(const Tensor& q, const Tensor& k, const Tensor& v, float softmax_scale,
                           std::optional<size_t> window_size_left,
                           std::optional<size_t> window_size_right) {
  return FlashAttn{softmax_scale, std::nullopt, window_size_left, window_size_right, std::nullopt}
      .forward(q, k, v);
}

Tensor flash_attn_alibi(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& alibi_slopes,
                        float softmax_scale, bool causal) {
  return FlashAttn{softmax_scale, alibi_slopes, std::nullopt, causal_right(causal), std::nullopt}
      .forward(q, k, v);
}

Tensor flash_attn_alibi_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& alibi_slopes, float softmax_scale,
                                 std::optional<size_t> window_size_left,
                                 std::optional<size_t> window_size_right) {
  return FlashAttn{softmax_scale, alibi_slopes, window_size_left, window_size_right, std::nullopt}
      .forward(q, k, v);
}

Tensor flash_attn_alibi_windowed_softcap(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor* alibi_slopes, float softmax_scale,
                                         std::optional<size_t> window_size_left,
                                         std::optional<size_t> window_size_right, float softcap) {
  return FlashAttn{softmax_scale, opt(alibi_slopes), window_size_left, window_size_right, softcap}
      .forward(q, k, v);
}

// ---- varlen -----------------------------------------------------------------------------

namespace {
FlashAttnVarLen varlen_op(const Tensor& seqlens_q, const Tensor& seqlens_k, size_t max_seqlen_q,
                          size_t max_seqlen_k, float softmax_scale) {
  FlashAttnVarLen op;
  op.softmax_scale = softmax_scale;
  op.max_seqlen_q = max_seqlen_q;
  op.max_seqlen_k = max_seqlen_k;
  op.seqlens_q = seqlens_q;
  op.seqlens_k = seqlens_k;
  return op;
}
}  // namespace

Tensor flash_attn_varlen(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& seqlens_q,
                         const Tensor& seqlens_k, size_t max_seqlen_q, size_t max_seqlen_k,
                         float softmax_scale, bool causal) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.window_size_right = causal_right(causal);
  return op.forward(q, k, v);
}

Tensor flash_attn_varlen_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& seqlens_q, const Tensor& seqlens_k,
                                  size_t max_seqlen_q, size_t max_seqlen_k, float softmax_scale,
                                  std::optional<size_t> window_size_left,
                                  std::optional<size_t> window_size_right) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.window_size_left = window_size_left;
  op.window_size_right = window_size_right;
  return op.forward(q, k, v);
}

Tensor flash_attn_varlen_paged_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& seqlens_q, const Tensor& seqlens_k,
                                        const Tensor& block_table, const Tensor* mm_prefix_ranges,
                                        size_t max_seqlen_q, size_t max_seqlen_k,
                                        float softmax_scale,
                                        std::optional<size_t> window_size_left,
                                        std::optional<size_t> window_size_right,
                                        size_t page_block_size, std::optional<float> softcap) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.block_table = block_table;
  op.mm_prefix_ranges = opt(mm_prefix_ranges);
  op.page_block_size = page_block_size;
  op.window_size_left = window_size_left;
  op.window_size_right = window_size_right;
  op.softcap = softcap;
  return op.forward(q, k, v);
}

Tensor flash_attn_varlen_alibi(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& alibi_slopes, const Tensor& seqlens_q,
                               const Tensor& seqlens_k, size_t max_seqlen_q, size_t max_seqlen_k,
                               float softmax_scale, bool causal) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.alibi_slopes = alibi_slopes;
  op.window_size_right = causal_right(causal);
  return op.forward(q, k, v);
}

Tensor flash_attn_varlen_alibi_windowed(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& alibi_slopes, const Tensor& seqlens_q,
                                        const Tensor& seqlens_k, size_t max_seqlen_q,
                                        size_t max_seqlen_k, float softmax_scale,
                                        std::optional<size_t> window_size_left,
                                        std::optional<size_t> window_size_right) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.alibi_slopes = alibi_slopes;
  op.window_size_left = window_size_left;
  op.window_size_right = window_size_right;
  return op.forward(q, k, v);
}

Tensor flash_attn_varlen_alibi_windowed_softcap(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor* alibi_slopes,
                                                const Tensor& seqlens_q, const Tensor& seqlens_k,
                                                size_t max_seqlen_q, size_t max_seqlen_k,
                                                float softmax_scale,
                                                std::optional<size_t> window_size_left,
                                                std::optional<size_t> window_size_right,
                                                float softcap) {
  FlashAttnVarLen op = varlen_op(seqlens_q, seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale);
  op.alibi_slopes = opt(alibi_slopes);
  op.window_size_left = window_size_left;
  op.window_size_right = window_size_right;
  op.softcap = softcap;
  return op.forward(q, k, v);
}

}  // namespace wick
