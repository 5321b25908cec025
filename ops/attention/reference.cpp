#include "ops/attention/reference.h"

#include <limits>
#include <vector>

#include "kernels/flash/contract.h"
#include "ops/attention/plan.h"
#include "ops/ops.h"

namespace wick {

namespace {

using attention::AttnPlan;
using attention::HostTables;
using kernels::FlashFwdParams;
using namespace kernels::attn;  // the contract: seq_bounds, key_visible, alibi_bias, ...

// x (f32) rounded to `dtype` and back: what storing it in the input precision loses.
Tensor round_through(const Tensor& x, DType dtype) { return cast(cast(x, dtype), DType::F32); }

// Attention for sequence b (bounds s). qb (sq, h, d), kb and vb (sk, hk, d), any float dtype
// and layout; returns (sq, h, d) f32. p: the plan's params with host index tables.
Tensor attend(const FlashFwdParams& p, const Device dev, int b, const SeqBounds& s, ReferencePrecision precision,
              const Tensor& qb, const Tensor& kb, const Tensor& vb) {
  const bool input_precision = precision == ReferencePrecision::Input;
  const size_t sq = qb.dim(0), sk = kb.dim(0), h = qb.dim(1), d = qb.dim(2);
  if (sk == 0) return Tensor::zeros({sq, h, d}, DType::F32, dev);
  // Grouped-query attention: query head i reads kv head kv_head(i).
  std::vector<int32_t> head_of(h);
  for (size_t i = 0; i < h; ++i) head_of[i] = kv_head(p, static_cast<int>(i));
  const Tensor heads = Tensor::from_vec(head_of, Shape{h}, dev);
  const Tensor K = cast(index_select(kb, heads, 1), DType::F32).permute({1, 2, 0});  // (h, d, sk)
  const Tensor V = cast(index_select(vb, heads, 1), DType::F32).permute({1, 0, 2});  // (h, sk, d)
  const Tensor Q = cast(qb, DType::F32).permute({1, 0, 2});                          // (h, sq, d)

  Tensor S = matmul(Q, K);  // (h, sq, sk)
  if (input_precision) S = round_through(S, qb.dtype());
  // The contract's logit, as tensor ops: soft_cap(scale * qk) + alibi_bias.
  S = mul_scalar(S, p.softmax_scale);
  if (p.softcap > 0) S = mul_scalar(tanh(mul_scalar(S, 1.0 / p.softcap)), p.softcap);
  std::vector<uint8_t> visible(sq * sk), seen(sq, 0);
  std::vector<float> bias(sq * sk);  // alibi_bias with slope 1: -|pos(i) - t|
  for (size_t i = 0; i < sq; ++i) {
    const int64_t pos = key_position(s, static_cast<int64_t>(i));
    for (size_t t = 0; t < sk; ++t) {
      const bool vis = key_visible<int64_t>(p, b, pos, static_cast<int64_t>(t), static_cast<int64_t>(sk));
      visible[i * sk + t] = vis;
      seen[i] |= static_cast<uint8_t>(vis);
      bias[i * sk + t] = alibi_bias(1.0f, pos, static_cast<int64_t>(t));
    }
  }
  if (p.alibi_slopes) {
    // (h, 1, 1) slopes times the (sq, sk) unit biases.
    const Tensor slopes = Tensor::from_vec(std::vector<float>(p.alibi_slopes, p.alibi_slopes + h), Shape{h, 1, 1}, dev);
    S = S + slopes * Tensor::from_vec(bias, Shape{sq, sk}, dev);
  }
  const Tensor neg_inf = Tensor::full({1}, -std::numeric_limits<double>::infinity(), DType::F32, dev);
  S = where(Tensor::from_vec(visible, Shape{sq, sk}, dev), S, neg_inf);
  // A row that sees no key would softmax to 0/0: it gets 0 weights instead.
  Tensor P = softmax(S);
  P = where(Tensor::from_vec(seen, Shape{sq, 1}, dev), P, Tensor::zeros({1}, DType::F32, dev));
  if (input_precision) P = round_through(P, qb.dtype());
  return matmul(P, V).permute({1, 0, 2});  // (sq, h, d)
}

// The keys of sequence b in token order, (sk, hk, d): a slice of packed k/v, or the
// sequence's blocks gathered through the block table.
Tensor gather_keys(const AttnPlan& plan, const FlashFwdParams& p, const Tensor& kv, int b, const SeqBounds& s) {
  const size_t sk = static_cast<size_t>(s.sk);
  if (!plan.paged) return kv.narrow(0, static_cast<size_t>(s.k_start), sk);
  const size_t page = static_cast<size_t>(p.page_block_size);
  const size_t pages = (sk + page - 1) / page;
  std::vector<int32_t> ids(pages);
  for (size_t pg = 0; pg < pages; ++pg) ids[pg] = page_block(p, b, static_cast<int64_t>(pg));
  const Tensor blocks = index_select(kv, Tensor::from_vec(ids, Shape{pages}, plan.device), 0);
  return blocks.reshape({pages * page, kv.dim(2), kv.dim(3)}).narrow(0, 0, sk);
}

}  // namespace

Tensor attention_reference(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision) {
  // The reference reads the index tables on the host anyway: its value checks run there too
  // (strict mode), so a bad table raises at this call on every device.
  FlashAttnVarLen strict = op;
  strict.strict_checks = true;
  const AttnPlan plan = attention::plan_varlen(strict, q, k, v);
  const HostTables tables(plan);
  const FlashFwdParams& p = tables.params();
  std::vector<Tensor> parts;
  for (int b = 0; b < p.batch; ++b) {
    const SeqBounds s = seq_bounds(p, b);
    if (s.sq == 0) continue;
    parts.push_back(attend(p, plan.device, b, s, precision, q.narrow(0, static_cast<size_t>(s.q_start), s.sq),
                           gather_keys(plan, p, k, b, s), gather_keys(plan, p, v, b, s)));
  }
  if (parts.empty()) return Tensor::zeros(q.shape(), q.dtype(), q.device());
  return cast(cat(parts, 0), q.dtype());
}

Tensor attention_reference(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision) {
  const AttnPlan plan = attention::plan_batched(op, q, k, v);
  const HostTables tables(plan);
  const FlashFwdParams& p = tables.params();
  if (q.elem_count() == 0) return Tensor::zeros(q.shape(), q.dtype(), q.device());
  std::vector<Tensor> parts;
  for (int b = 0; b < p.batch; ++b) {
    const SeqBounds s = seq_bounds(p, b);
    const size_t bi = static_cast<size_t>(b);
    parts.push_back(attend(p, plan.device, b, s, precision, q.narrow(0, bi, 1).squeeze(0),
                           k.narrow(0, bi, 1).squeeze(0), v.narrow(0, bi, 1).squeeze(0))
                        .unsqueeze(0));
  }
  if (parts.empty()) return Tensor::zeros(q.shape(), q.dtype(), q.device());
  return cast(cat(parts, 0), q.dtype());
}

}  // namespace wick
