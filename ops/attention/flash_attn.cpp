// The candle-flash-attn entry points: each builds the op struct exactly as candle's lib.rs
// does and runs it. Checks live in plan.cpp; the device choice in dispatch.cpp.
#include "ops/attention/flash_attn.h"

#include <array>
#include <string>
#include <vector>

#include "ops/attention/dispatch.h"
#include "ops/attention/plan.h"
#include "tensor/grad_node.h"

namespace wick {

namespace {
// candle: causal <=> window_size_left = None, window_size_right = Some(0).
std::optional<size_t> causal_right(bool causal) {
  return causal ? std::optional<size_t>(0) : std::nullopt;
}
std::optional<Tensor> opt(const Tensor* t) { return t ? std::optional<Tensor>(*t) : std::nullopt; }

// Runs a checked plan and, when q, k or v requires grad, records one graph node whose
// backward reuses the plan (the node keeps q, k, v alive, so its pointers stay valid) and
// recomputes the softmax from the LSE (dispatch.h: run_backward). The LSE is not recorded.
std::pair<Tensor, Tensor> run(const char* name, const attention::AttnPlan& plan, const Tensor& q, const Tensor& k,
                              const Tensor& v) {
  // Named tensors, not structured bindings: the backward closure captures them.
  std::pair<Tensor, Tensor> fwd = attention::run_forward_alloc(plan);
  const Tensor out = fwd.first, lse = fwd.second;
  if (!autograd::should_record(q, k, v)) return fwd;
  // Only the gradients some input needs are computed (a frozen k and v cost no dK / dV).
  const std::array<bool, 3> needed{q.requires_grad(), k.requires_grad(), v.requires_grad()};
  Tensor qd = q.detach(), kd = k.detach(), vd = v.detach(), od = out.detach();
  auto backward = [plan, qd, kd, vd, od, lse, needed](const Tensor& grad_out) {
    const auto g = attention::run_backward(plan, qd, kd, vd, od, lse, grad_out, needed);
    return std::vector<Tensor>{g[0], g[1], g[2]};
  };
  // Everything the backward reads, the plan's index tensors included: writing into any of
  // them after the forward makes the backward raise G29.
  const std::vector<Tensor> saved{qd, kd, vd, od, lse, plan.seqlens_q, plan.seqlens_k, plan.block_table,
                                  plan.mm_prefix_ranges, plan.alibi_slopes};
  return {autograd::record(out, name, {q, k, v}, std::move(backward), saved), lse};
}

}  // namespace

std::pair<Tensor, Tensor> FlashAttn::forward_with_lse(const Tensor& q, const Tensor& k,
                                                      const Tensor& v) const {
  return run("flash-attn", attention::plan_batched(*this, q, k, v), q, k, v);
}
Tensor FlashAttn::forward(const Tensor& q, const Tensor& k, const Tensor& v) const {
  return forward_with_lse(q, k, v).first;
}

std::pair<Tensor, Tensor> FlashAttnVarLen::forward_with_lse(const Tensor& q, const Tensor& k,
                                                            const Tensor& v) const {
  return run("flash-attn-varlen", attention::plan_varlen(*this, q, k, v), q, k, v);
}
Tensor FlashAttnVarLen::forward(const Tensor& q, const Tensor& k, const Tensor& v) const {
  return forward_with_lse(q, k, v).first;
}

namespace {
// forward_into's outputs: exactly what the op would have allocated.
void check_output(const char* name, const Tensor& t, const Shape& shape, DType dtype, const Device& dev) {
  if (t.defined() && t.shape() == shape && t.dtype() == dtype && t.device() == dev && t.is_contiguous()) return;
  const std::string got = !t.defined() ? std::string("an empty tensor")
                                       : to_string(t.shape()) + " " + dtype_name(t.dtype()) + " on " +
                                             to_string(t.device()) + (t.is_contiguous() ? "" : " (strided)");
  throw Error("W17", std::string("forward_into: ") + name + " must be a contiguous " + dtype_name(dtype) +
                         " tensor of shape " + to_string(shape) + " on " + to_string(dev) + ", got " + got);
}
}  // namespace

void FlashAttnVarLen::forward_into(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                   const Tensor& lse) const {
  attention::AttnPlan plan = attention::plan_varlen(*this, q, k, v);
  check_output("out", out, plan.out_shape, plan.dtype, plan.device);
  if (lse.defined()) check_output("lse", lse, plan.lse_shape, DType::F32, plan.device);
  attention::bind_outputs(plan, out, lse);
  attention::run_forward(plan);
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
