// The attention part of the fuzz target. The input picks an entry point (the eleven candle
// functions, the two op structs, or forward_into), batched or varlen, paged or not, the
// dtype, head counts, head size, sequence lengths, every option (causal, windows, softcap,
// ALiBi, mm-prefix ranges, scale, strict checks), the layout of every tensor (padded,
// permuted storage, broadcast, strided last dim) and, now and then, breaks one thing (a
// shape, a dtype, a length, a table entry, an output). A call that runs must match
// attention_reference on its finite data; a backward, when an input requires grad, must
// give finite gradients of the inputs' shapes.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <type_traits>
#include <vector>

#include "fuzz_wick.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/reference.h"
#include "ops/ops.h"

namespace wick::fuzz {

namespace {

// A tensor of `dims` holding standard normal values of dtype, in a layout the input picks:
// bit 0 pads every dim (a narrowed view of a larger tensor, at an offset), bit 1 permutes the
// storage order of the dims, bit 2 broadcasts one dim from a single row (stride 0), bit 3
// doubles every stride (the last dim no longer contiguous).
Tensor any_layout(FuzzedDataProvider& in, const std::vector<size_t>& dims, DType dtype) {
  const uint8_t kind = in.ConsumeIntegral<uint8_t>();
  const uint64_t seed = in.ConsumeIntegral<uint8_t>();
  const size_t r = dims.size();
  std::vector<size_t> base = dims, start(r, 0);
  if (kind & 1)
    for (size_t i = 0; i < r; ++i) {
      const size_t pad = in.ConsumeIntegralInRange<size_t>(0, 2);
      start[i] = in.ConsumeIntegralInRange<size_t>(0, pad);
      base[i] += pad;
    }
  std::optional<size_t> bdim;
  if ((kind & 4) && r > 0) {
    bdim = in.ConsumeIntegralInRange<size_t>(0, r - 1);
    base[*bdim] = 1, start[*bdim] = 0;
  }
  std::vector<size_t> perm(r);
  std::iota(perm.begin(), perm.end(), size_t{0});
  if (kind & 2)
    for (size_t i = r; i-- > 1;) std::swap(perm[i], perm[in.ConsumeIntegralInRange<size_t>(0, i)]);
  std::vector<size_t> storage_dims(r), inverse(r);
  for (size_t i = 0; i < r; ++i) storage_dims[i] = base[perm[i]], inverse[perm[i]] = i;
  const bool spread = (kind & 8) && r > 0;
  if (spread) storage_dims.push_back(2);
  Tensor t = Tensor::randn(Shape(storage_dims), dtype, kCpu, seed);
  if (spread) t = t.narrow(r, 0, 1).squeeze(r);
  t = t.permute(inverse);
  for (size_t i = 0; i < r; ++i)
    if (base[i] != dims[i] && !(bdim && *bdim == i)) t = t.narrow(i, start[i], dims[i]);
  if (bdim) t = t.broadcast_as(Shape(dims));
  return t;
}

// Now and then (about one input in `one_in`) true: the place to break something.
bool now_and_then(FuzzedDataProvider& in, int one_in = 16) { return in.ConsumeIntegralInRange<int>(1, one_in) == 1; }

DType pick_dtype(FuzzedDataProvider& in) {
  if (now_and_then(in)) return in.PickValueInArray({DType::F32, DType::I32, DType::F64});
  return in.ConsumeBool() ? DType::BF16 : DType::F16;
}

size_t pick_head_size(FuzzedDataProvider& in) {
  if (now_and_then(in)) return in.ConsumeIntegralInRange<size_t>(0, 40);  // mostly not a multiple of 8
  return in.PickValueInArray({8, 16, 24, 32, 40, 64});
}

// A length, sometimes far beyond anything real (as a "no limit" value would be).
size_t pick_limit(FuzzedDataProvider& in, size_t real) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return in.ConsumeIntegralInRange<size_t>(0, 20);
    case 1: return size_t{1} << in.ConsumeIntegralInRange<int>(30, 63);
    case 2: return real + in.ConsumeIntegralInRange<size_t>(1, 5);
    default: return real;
  }
}

std::optional<size_t> pick_window(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: case 1: case 2: case 3: return std::nullopt;
    case 4: return SIZE_MAX;
    default: return in.ConsumeIntegralInRange<size_t>(0, 16);
  }
}

// Cumulative lengths of `lens` as U32, or (now and then) something broken: unsorted, a
// wrong dtype, strided, a wrong count, or arbitrary values.
Tensor pick_seqlens(FuzzedDataProvider& in, const std::vector<uint32_t>& lens) {
  std::vector<uint32_t> cu(lens.size() + 1, 0);
  for (size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  if (!now_and_then(in, 12)) return Tensor::from_vec(cu, Shape{cu.size()}, kCpu);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      for (auto& x : cu) x = in.ConsumeIntegralInRange<uint32_t>(0, 40);
      return Tensor::from_vec(cu, Shape{cu.size()}, kCpu);
    case 1: {
      for (auto& x : cu) x = in.ConsumeIntegral<uint32_t>();
      return Tensor::from_vec(cu, Shape{cu.size()}, kCpu);
    }
    case 2:
      return Tensor::from_vec(std::vector<int32_t>(cu.begin(), cu.end()), Shape{cu.size()}, kCpu);
    case 3: {
      std::vector<uint32_t> wide;
      for (uint32_t x : cu) wide.push_back(x), wide.push_back(7);
      return Tensor::from_vec(wide, Shape{cu.size(), 2}, kCpu).narrow(1, 0, 1).squeeze(1);
    }
    default:
      cu.pop_back();
      return Tensor::from_vec(cu, Shape{cu.size()}, kCpu);
  }
}

// (batch, cols) entries naming, for every sequence, the blocks of its pages (distinct,
// shuffled) and valid blocks in the columns past them; now and then arbitrary entries, a
// U32 table, a table whose rows are padded, or too few rows or columns.
Tensor pick_block_table(FuzzedDataProvider& in, const std::vector<uint32_t>& lens_k, size_t page, size_t num_blocks) {
  const size_t batch = lens_k.size();
  size_t cols = 1;
  for (uint32_t len : lens_k) cols = std::max(cols, page ? (len + page - 1) / page : 1);
  cols += in.ConsumeIntegralInRange<size_t>(0, 1);
  std::vector<int32_t> order(std::max<size_t>(num_blocks, 1));
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i-- > 1;) std::swap(order[i], order[in.ConsumeIntegralInRange<size_t>(0, i)]);
  std::vector<int32_t> table(batch * cols, 0);
  size_t next = 0;
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < cols; ++c) table[b * cols + c] = order[next++ % order.size()];
  if (now_and_then(in, 12))
    for (auto& e : table) e = in.ConsumeIntegralInRange<int32_t>(-3, static_cast<int32_t>(num_blocks) + 3);
  size_t rows = batch;
  if (now_and_then(in, 24) && rows > 0) rows -= 1;
  const size_t pad = in.ConsumeIntegralInRange<size_t>(0, 1);
  std::vector<int32_t> padded(rows * (cols + pad), -1);
  for (size_t b = 0; b < rows; ++b)
    for (size_t c = 0; c < cols; ++c) padded[b * (cols + pad) + c] = table[b * cols + c];
  Tensor t = Tensor::from_vec(padded, Shape{rows, cols + pad}, kCpu).narrow(1, 0, cols);
  if (in.ConsumeBool()) t = cast(t.contiguous(), DType::U32);
  return t;
}

// The op's tensors and options, as the input chose them.
struct Call {
  bool varlen = false, paged = false;
  Tensor q, k, v;
  FlashAttn batched;
  FlashAttnVarLen op;
  int entry = 0;  // which public function runs it (see run())
  bool bad_outputs = false;  // forward_into: outputs unlike the op's
};

// Fills the optional fields every entry point may set.
template <class Op>
void pick_options(FuzzedDataProvider& in, Op& op, size_t num_heads, size_t batch, size_t max_k, bool varlen) {
  if (in.ConsumeBool()) op.softmax_scale = in.ConsumeFloatingPointInRange<float>(-1.f, 1.f);
  op.window_size_left = pick_window(in);
  op.window_size_right = pick_window(in);
  op.causal = in.ConsumeBool();
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    op.softcap = now_and_then(in) ? in.ConsumeFloatingPointInRange<float>(-2.f, 0.f)
                                  : in.ConsumeFloatingPointInRange<float>(1.f, 50.f);
  }
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    const size_t n = now_and_then(in) ? num_heads + 1 : num_heads;
    std::vector<float> slopes(2 * n);
    for (auto& s : slopes) s = in.ConsumeFloatingPointInRange<float>(0.f, 1.f);
    Tensor a = Tensor::from_vec(slopes, Shape{n, 2}, kCpu);
    op.alibi_slopes = in.ConsumeBool() ? a.narrow(1, 0, 1).squeeze(1) : a.reshape({2 * n}).narrow(0, 0, n);
  }
  if constexpr (std::is_same_v<Op, FlashAttnVarLen>) {
    if (varlen && in.ConsumeIntegralInRange<int>(0, 3) == 0) {
      const size_t ranges = in.ConsumeIntegralInRange<size_t>(1, 2);
      std::vector<int32_t> m(batch * ranges * 2);
      for (auto& x : m) x = in.ConsumeIntegralInRange<int32_t>(-1, static_cast<int32_t>(max_k) + 1);
      op.mm_prefix_ranges = Tensor::from_vec(m, Shape{batch, ranges, 2}, kCpu);
    }
  }
}

Call pick_call(FuzzedDataProvider& in) {
  Call c;
  c.varlen = in.ConsumeBool();
  c.paged = c.varlen && in.ConsumeBool();
  const DType dtype = pick_dtype(in);
  const size_t hk = in.ConsumeIntegralInRange<size_t>(now_and_then(in, 32) ? 0 : 1, 3);
  size_t h = hk * in.ConsumeIntegralInRange<size_t>(1, 3);
  if (now_and_then(in, 24)) h = in.ConsumeIntegralInRange<size_t>(0, 5);
  const size_t d = pick_head_size(in);
  const size_t batch = in.ConsumeIntegralInRange<size_t>(1, 3);
  std::vector<uint32_t> lq(batch), lk(batch);
  const uint32_t sq_all = in.ConsumeIntegralInRange<uint32_t>(0, 9);
  const uint32_t sk_all = in.ConsumeIntegralInRange<uint32_t>(0, 12);
  for (size_t b = 0; b < batch; ++b) {
    lq[b] = c.varlen ? in.ConsumeIntegralInRange<uint32_t>(0, 9) : sq_all;
    lk[b] = c.varlen ? in.ConsumeIntegralInRange<uint32_t>(0, 12) : sk_all;
  }
  const size_t total_q = std::accumulate(lq.begin(), lq.end(), size_t{0});
  const size_t total_k = std::accumulate(lk.begin(), lk.end(), size_t{0});
  const size_t max_q = *std::max_element(lq.begin(), lq.end()), max_k = *std::max_element(lk.begin(), lk.end());
  // shapes, each broken now and then
  auto bend = [&](std::vector<size_t> dims) {
    if (now_and_then(in, 32) && !dims.empty()) dims[in.ConsumeIntegralInRange<size_t>(0, dims.size() - 1)] += 1;
    if (now_and_then(in, 64)) dims.pop_back();
    return dims;
  };
  std::vector<size_t> qd, kd;
  size_t page = 0, num_blocks = 0;
  if (c.varlen) {
    qd = {total_q, h, d};
    if (c.paged) {
      page = now_and_then(in) ? in.PickValueInArray({size_t{0}, size_t{16}, size_t{33}, size_t{64}}) : 32;
      for (uint32_t len : lk) num_blocks += page ? (len + page - 1) / page : 0;
      num_blocks += in.ConsumeIntegralInRange<size_t>(0, 2);
      kd = {num_blocks, page, hk, d};
    } else {
      kd = {total_k, hk, d};
    }
  } else {
    qd = {batch, sq_all, h, d};
    kd = {batch, sk_all, hk, d};
  }
  c.q = any_layout(in, bend(qd), dtype);
  c.k = any_layout(in, bend(kd), now_and_then(in, 64) ? DType::F32 : dtype);
  c.v = any_layout(in, bend(kd), dtype);
  if (c.varlen) {
    FlashAttnVarLen& op = c.op;
    op.seqlens_q = pick_seqlens(in, lq);
    op.seqlens_k = pick_seqlens(in, lk);
    op.max_seqlen_q = pick_limit(in, max_q);
    op.max_seqlen_k = pick_limit(in, max_k);
    if (c.paged) {
      op.block_table = pick_block_table(in, lk, page, num_blocks);
      op.page_block_size = now_and_then(in, 24) ? in.ConsumeIntegralInRange<size_t>(0, 70) : page;
    }
    pick_options(in, op, h, batch, max_k, true);
    op.strict_checks = in.ConsumeBool();  // the CPU checks on the host either way: same outcome
    c.entry = in.ConsumeIntegralInRange<int>(0, 7);
    c.bad_outputs = now_and_then(in);
  } else {
    pick_options(in, c.batched, h, batch, max_k, false);
    c.entry = in.ConsumeIntegralInRange<int>(0, 5);
  }
  return c;
}

float scale_of(const std::optional<float>& s) { return s.value_or(0.125f); }

// Runs the call through its entry point. Each candle function sets only the fields it has,
// so the struct is first narrowed to what that function can express (the reference then
// sees exactly the call that ran).
Tensor run(Call& c) {
  if (!c.varlen) {
    FlashAttn& op = c.batched;
    const float scale = scale_of(op.softmax_scale);
    const bool causal = op.causal;
    const std::optional<size_t> right_if_causal = causal ? std::optional<size_t>(0) : std::nullopt;
    auto only = [&](bool alibi, bool windows, bool softcap) {
      op.softmax_scale = scale;
      if (!alibi) op.alibi_slopes.reset();
      if (!windows) op.window_size_left.reset(), op.window_size_right.reset();
      if (!softcap) op.softcap.reset();
    };
    switch (c.entry) {
      case 1:
        only(false, false, false), op.causal = false, op.window_size_right = right_if_causal;
        return flash_attn(c.q, c.k, c.v, scale, causal);
      case 2:
        only(false, true, false), op.causal = false;
        return flash_attn_windowed(c.q, c.k, c.v, scale, op.window_size_left, op.window_size_right);
      case 3:
        if (!op.alibi_slopes) break;
        only(true, false, false), op.causal = false, op.window_size_right = right_if_causal;
        return flash_attn_alibi(c.q, c.k, c.v, *op.alibi_slopes, scale, causal);
      case 4:
        if (!op.alibi_slopes) break;
        only(true, true, false), op.causal = false;
        return flash_attn_alibi_windowed(c.q, c.k, c.v, *op.alibi_slopes, scale, op.window_size_left,
                                         op.window_size_right);
      case 5: {
        only(true, true, true), op.causal = false;
        const float softcap = op.softcap.value_or(0.f);
        op.softcap = softcap;
        return flash_attn_alibi_windowed_softcap(c.q, c.k, c.v, op.alibi_slopes ? &*op.alibi_slopes : nullptr, scale,
                                                 op.window_size_left, op.window_size_right, softcap);
      }
      default: break;
    }
    return op.forward(c.q, c.k, c.v);
  }
  FlashAttnVarLen& op = c.op;
  const float scale = scale_of(op.softmax_scale);
  const bool causal = op.causal;
  auto only = [&](bool alibi, bool windows, bool softcap) {
    op.softmax_scale = scale;
    op.block_table.reset(), op.page_block_size.reset(), op.mm_prefix_ranges.reset();
    if (!alibi) op.alibi_slopes.reset();
    if (!windows) op.window_size_left.reset(), op.window_size_right.reset();
    if (!softcap) op.softcap.reset();
    op.causal = false;
  };
  const size_t mq = op.max_seqlen_q, mk = op.max_seqlen_k;
  const std::optional<size_t> right_if_causal = causal ? std::optional<size_t>(0) : std::nullopt;
  switch (c.entry) {
    case 1:
      if (c.paged) break;
      only(false, false, false), op.window_size_right = right_if_causal;
      return flash_attn_varlen(c.q, c.k, c.v, op.seqlens_q, op.seqlens_k, mq, mk, scale, causal);
    case 2:
      if (c.paged) break;
      only(false, true, false);
      return flash_attn_varlen_windowed(c.q, c.k, c.v, op.seqlens_q, op.seqlens_k, mq, mk, scale,
                                        op.window_size_left, op.window_size_right);
    case 3: {
      if (!c.paged || !op.block_table) break;
      const Tensor table = *op.block_table;
      const std::optional<Tensor> mm = op.mm_prefix_ranges;
      const size_t page = op.page_block_size.value_or(0);
      only(false, true, true);
      op.block_table = table, op.page_block_size = page, op.mm_prefix_ranges = mm;
      return flash_attn_varlen_paged_windowed(c.q, c.k, c.v, op.seqlens_q, op.seqlens_k, table, mm ? &*mm : nullptr,
                                              mq, mk, scale, op.window_size_left, op.window_size_right, page,
                                              op.softcap);
    }
    case 4:
      if (c.paged || !op.alibi_slopes) break;
      only(true, false, false), op.window_size_right = right_if_causal;
      return flash_attn_varlen_alibi(c.q, c.k, c.v, *op.alibi_slopes, op.seqlens_q, op.seqlens_k, mq, mk, scale,
                                     causal);
    case 5:
      if (c.paged || !op.alibi_slopes) break;
      only(true, true, false);
      return flash_attn_varlen_alibi_windowed(c.q, c.k, c.v, *op.alibi_slopes, op.seqlens_q, op.seqlens_k, mq, mk,
                                              scale, op.window_size_left, op.window_size_right);
    case 6: {
      if (c.paged) break;
      only(true, true, true);
      const float softcap = op.softcap.value_or(0.f);
      op.softcap = softcap;
      return flash_attn_varlen_alibi_windowed_softcap(c.q, c.k, c.v, op.alibi_slopes ? &*op.alibi_slopes : nullptr,
                                                      op.seqlens_q, op.seqlens_k, mq, mk, scale, op.window_size_left,
                                                      op.window_size_right, softcap);
    }
    case 7: {
      // forward_into: outputs the caller made, sometimes not what the op would make (W17)
      Tensor out, lse;
      const bool as_op = runs([&] {
        out = Tensor::empty(c.q.shape(), c.q.dtype(), kCpu);
        lse = Tensor::empty({c.q.rank() == 3 ? c.q.dim(1) : 0, c.q.rank() == 3 ? c.q.dim(0) : 0}, DType::F32, kCpu);
      });
      if (!as_op || c.bad_outputs) out = Tensor::empty({1}, DType::F32, kCpu);
      op.forward_into(c.q, c.k, c.v, out, c.bad_outputs ? Tensor() : lse);
      return out;
    }
    default: break;
  }
  return op.forward(c.q, c.k, c.v);
}

// out must be attention_reference's within the rounding of f16/bf16 outputs.
void check_against_reference(const Call& c, const Tensor& out) {
  Tensor ref;
  try {
    ref = c.varlen ? attention_reference(c.op, c.q.detach(), c.k.detach(), c.v.detach())
                   : attention_reference(c.batched, c.q.detach(), c.k.detach(), c.v.detach());
  } catch (const Error& e) {
    fail(std::string("the op ran but the reference, with the same checks, raised: ") + e.what());
  }
  if (!(ref.shape() == out.shape()) || ref.dtype() != out.dtype())
    fail("reference and op outputs differ in shape or dtype");
  const std::vector<double> got = out.to_f64_vec(), want = ref.to_f64_vec();
  double vmax = 0;
  for (double x : c.v.to_f64_vec()) vmax = std::max(vmax, std::abs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i]))
      fail("a non-finite output from finite inputs at element " + std::to_string(i));
    if (std::abs(got[i] - want[i]) > 2e-2 * (1 + vmax))
      fail("output element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", the reference says " +
           std::to_string(want[i]));
  }
}

}  // namespace

void fuzz_attention(FuzzedDataProvider& in) {
  Call c;
  // Building the inputs may itself be refused (a view of a broken shape, ...): accepted.
  if (!runs([&] { c = pick_call(in); })) return;
  const bool grads = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  if (grads)
    for (Tensor* t : {&c.q, &c.k, &c.v})
      if (is_float(t->dtype()) && in.ConsumeBool()) t->requires_grad(true);
  Tensor out;
  if (!runs([&] { out = run(c); })) return;
  check_against_reference(c, out);
  if (!out.requires_grad()) return;
  // The backward (host tiled backward on the CPU): gradients of every input that needs one,
  // of its shape, finite for finite inputs.
  if (!runs([&] { out.backward(Tensor::ones(out.shape(), out.dtype(), kCpu)); }))
    fail("the forward ran but its backward raised an error");
  for (const Tensor* t : {&c.q, &c.k, &c.v}) {
    if (!t->requires_grad()) continue;
    const Tensor g = t->grad();
    if (!g.defined() || !(g.shape() == t->shape())) fail("a gradient is missing or has the wrong shape");
    for (double x : g.to_f64_vec())
      if (!std::isfinite(x)) fail("a non-finite gradient from finite inputs");
  }
}

}  // namespace wick::fuzz
