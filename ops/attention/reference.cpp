#include "ops/attention/reference.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "ops/attention/plan.h"
#include "ops/ops.h"

namespace wick {

namespace {

using attention::AttnPlan;

struct Range {
  int64_t begin, end;
};

// The mm-prefix ranges of every sequence, read on the host in logical order.
std::vector<std::vector<Range>> host_ranges(const std::optional<Tensor>& m) {
  std::vector<std::vector<Range>> out;
  if (!m) return out;
  const auto d = m->shape().dims3();
  const std::vector<int32_t> v = m->to_vec<int32_t>();
  out.resize(d[0]);
  for (size_t b = 0; b < d[0]; ++b)
    for (size_t r = 0; r < d[1]; ++r) {
      const int32_t s = v[(b * d[1] + r) * 2], e = v[(b * d[1] + r) * 2 + 1];
      if (s < e) out[b].push_back({s, e});
    }
  return out;
}

// x (f32) rounded to `dtype` and back: what storing it in the input precision loses.
Tensor round_through(const Tensor& x, DType dtype) { return cast(cast(x, dtype), DType::F32); }

// Attention for one sequence. qb (sq, h, d), kb and vb (sk, hk, d), any float dtype and
// layout; returns (sq, h, d) f32.
// slopes: the ALiBi slopes (num_heads), empty for none.
Tensor attend(const AttnPlan& plan, const std::vector<Range>& ranges, const std::vector<float>& slopes,
              ReferencePrecision precision, const Tensor& qb, const Tensor& kb, const Tensor& vb) {
  const bool input_precision = precision == ReferencePrecision::Input;
  const auto& p = plan.params;
  const size_t sq = qb.dim(0), sk = kb.dim(0), h = qb.dim(1), d = qb.dim(2);
  const Device dev = plan.device;
  if (sk == 0) return Tensor::zeros({sq, h, d}, DType::F32, dev);
  // Grouped-query attention: query head i reads kv head i / group.
  const size_t group = h / kb.dim(1);
  std::vector<int32_t> head_of(h);
  for (size_t i = 0; i < h; ++i) head_of[i] = static_cast<int32_t>(i / group);
  const Tensor heads = Tensor::from_vec(head_of, Shape{h}, dev);
  const Tensor K = cast(index_select(kb, heads, 1), DType::F32).permute({1, 2, 0});  // (h, d, sk)
  const Tensor V = cast(index_select(vb, heads, 1), DType::F32).permute({1, 0, 2});  // (h, sk, d)
  const Tensor Q = cast(qb, DType::F32).permute({1, 0, 2});                          // (h, sq, d)

  Tensor S = matmul(Q, K);  // (h, sq, sk)
  if (input_precision) S = round_through(S, qb.dtype());
  S = mul_scalar(S, p.softmax_scale);
  if (p.softcap > 0) S = mul_scalar(tanh(mul_scalar(S, 1.0 / p.softcap)), p.softcap);
  // Row i sits at key position i + sk - sq (bottom-right alignment).
  std::vector<uint8_t> visible(sq * sk), seen(sq, 0);
  std::vector<float> distance(sq * sk);
  for (size_t i = 0; i < sq; ++i) {
    const int64_t pos = static_cast<int64_t>(i + sk) - static_cast<int64_t>(sq);
    for (size_t t = 0; t < sk; ++t) {
      const int64_t j = static_cast<int64_t>(t);
      bool vis = (p.window_left < 0 || j >= pos - p.window_left) && (p.window_right < 0 || j <= pos + p.window_right);
      for (const Range& r : ranges) vis = vis || (r.begin <= pos && pos < r.end && r.begin <= j && j < r.end);
      visible[i * sk + t] = vis;
      seen[i] |= static_cast<uint8_t>(vis);
      distance[i * sk + t] = static_cast<float>(std::llabs(pos - j));
    }
  }
  if (!slopes.empty()) {
    // -slope[h] * |p(i) - j|: (h, 1, 1) slopes times the (sq, sk) distances.
    const Tensor s = Tensor::from_vec(slopes, Shape{h, 1, 1}, dev);
    S = S - s * Tensor::from_vec(distance, Shape{sq, sk}, dev);
  }
  const Tensor neg_inf = Tensor::full({1}, -std::numeric_limits<double>::infinity(), DType::F32, dev);
  S = where(Tensor::from_vec(visible, Shape{sq, sk}, dev), S, neg_inf);
  // A row that sees no key would softmax to 0/0: it gets 0 weights instead.
  Tensor P = softmax(S);
  P = where(Tensor::from_vec(seen, Shape{sq, 1}, dev), P, Tensor::zeros({1}, DType::F32, dev));
  if (input_precision) P = round_through(P, qb.dtype());
  return matmul(P, V).permute({1, 0, 2});  // (sq, h, d)
}

// The keys of sequence b in token order, (sk, hk, d): a slice of k, or its blocks gathered
// through the block table.
Tensor gather_keys(const AttnPlan& plan, const Tensor& kv, size_t b, size_t k0, size_t sk) {
  if (!plan.paged) return kv.narrow(0, k0, sk);
  const size_t page = static_cast<size_t>(plan.params.page_block_size);
  const size_t pages = (sk + page - 1) / page;
  std::vector<int32_t> ids(plan.block_table.begin() + b * plan.block_table_cols,
                           plan.block_table.begin() + b * plan.block_table_cols + pages);
  const Tensor blocks = index_select(kv, Tensor::from_vec(ids, Shape{pages}, plan.device), 0);
  return blocks.reshape({pages * page, kv.dim(2), kv.dim(3)}).narrow(0, 0, sk);
}

}  // namespace

Tensor attention_reference(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision) {
  const AttnPlan plan = attention::plan_varlen(op, q, k, v);
  const auto ranges = host_ranges(op.mm_prefix_ranges);
  const std::vector<float> slopes = op.alibi_slopes ? op.alibi_slopes->to_vec<float>() : std::vector<float>{};
  std::vector<Tensor> parts;
  for (size_t b = 0; b + 1 < plan.seqlens_q.size(); ++b) {
    const size_t q0 = plan.seqlens_q[b], sq = plan.seqlens_q[b + 1] - q0;
    const size_t k0 = plan.seqlens_k[b], sk = plan.seqlens_k[b + 1] - k0;
    if (sq == 0) continue;
    parts.push_back(attend(plan, ranges.empty() ? std::vector<Range>{} : ranges[b], slopes, precision, q.narrow(0, q0, sq),
                           gather_keys(plan, k, b, k0, sk), gather_keys(plan, v, b, k0, sk)));
  }
  if (parts.empty()) return Tensor::zeros(q.shape(), q.dtype(), q.device());
  return cast(cat(parts, 0), q.dtype());
}

Tensor attention_reference(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision) {
  const AttnPlan plan = attention::plan_batched(op, q, k, v);
  const std::vector<float> slopes = op.alibi_slopes ? op.alibi_slopes->to_vec<float>() : std::vector<float>{};
  std::vector<Tensor> parts;
  for (size_t b = 0; b < q.dim(0); ++b)
    parts.push_back(attend(plan, {}, slopes, precision, q.narrow(0, b, 1).squeeze(0), k.narrow(0, b, 1).squeeze(0),
                           v.narrow(0, b, 1).squeeze(0))
                        .unsqueeze(0));
  if (parts.empty() || q.elem_count() == 0) return Tensor::zeros(q.shape(), q.dtype(), q.device());
  return cast(cat(parts, 0), q.dtype());
}

}  // namespace wick
