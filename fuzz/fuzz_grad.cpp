// The gradient part of the fuzz target: one differentiable op of ops/ops.h whose operands
// are views (narrow, permute, broadcast_as) of f64 leaves, now and then one leaf used twice,
// and now and then a view of the result (transpose, select, unsqueeze, flatten, narrow); the
// engine's gradient of <result, r> against central differences (autograd::gradcheck). The
// backward rules then run through every layout the views make: a broadcast operand's
// gradient summed back, a narrowed one's scattered into zeros, a permuted one's transposed,
// two paths' gradients added.
//
// Finite differences only agree where the function is smooth, so the leaves' values are
// chosen for it: element i of a leaf is 0.25 k + c + 0.0007 (i % 100) for an integer k from
// the input and an offset c of 0.1 (leaves hold at most 80 elements). Values of one leaf are
// then distinct (no ties for max and min), at least 0.08 from 0 and from every multiple of
// 0.25 (the kinks of relu and abs, and clamp's bounds, which are multiples of 0.25), and
// positive where log, sqrt and powf need it. maximum's and minimum's second operand takes
// c = 0.2, so none of its values is within 0.03 of one of the first's. A wick::Error is an
// accepted outcome (an argument the op refuses); a gradient gradcheck rejects is a finding.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "fuzz_wick.h"
#include "ops/ops.h"

namespace wick::fuzz {

namespace {

std::string dims_str(const std::vector<size_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

// A leaf's values (the header's rule): positive ones for log, sqrt and powf.
Tensor leaf_values(FuzzedDataProvider& in, const std::vector<size_t>& dims, double offset, bool positive) {
  std::vector<double> values(count(dims));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] =
        0.25 * in.ConsumeIntegralInRange<int>(positive ? 0 : -8, 7) + offset + 0.0007 * static_cast<double>(i % 100);
  return Tensor::from_vec(values, Shape(dims), kCpu);
}

std::vector<size_t> pick_dims(FuzzedDataProvider& in, size_t min_rank, size_t max_rank, size_t max_dim = 3) {
  std::vector<size_t> dims(in.ConsumeIntegralInRange<size_t>(min_rank, max_rank));
  for (auto& d : dims) d = in.ConsumeIntegralInRange<size_t>(1, max_dim);
  return dims;
}

Tensor index_tensor(FuzzedDataProvider& in, const std::vector<size_t>& dims, int64_t below) {
  std::vector<int64_t> ids(count(dims));
  for (auto& id : ids) id = in.ConsumeIntegralInRange<int64_t>(0, std::max<int64_t>(below - 1, 0));
  return Tensor::from_vec(ids, Shape(dims), kCpu);
}

// The case being built: its operands (leaf values and views) and what it calls on them.
struct Case {
  std::string call;
  std::vector<Tensor> leaves;
  std::vector<View> views;
  std::function<Tensor(const std::vector<Tensor>&)> op;  // on the viewed operands

  // An operand of `dims` (a view of a new leaf).
  void operand(FuzzedDataProvider& in, const std::vector<size_t>& dims, bool may_broadcast = true, double offset = 0.1,
               bool positive = false) {
    views.push_back(pick_view(in, dims, may_broadcast ? 6 : 0, 1));
    leaves.push_back(leaf_values(in, views.back().leaf, offset, positive));
    call += (leaves.size() > 1 ? ", " : "(") + dims_str(dims) + (views.back().any_wide ? " broadcast" : "");
  }
};

void unary(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 17);
  const bool positive = which >= 15;  // log, sqrt, powf
  c.operand(in, pick_dims(in, 0, 3), true, 0.1, positive);
  const double lo = 0.25 * in.ConsumeIntegralInRange<int>(-8, 0), hi = lo + 0.25 * in.ConsumeIntegralInRange<int>(1, 8);
  const double e = in.PickValueInArray({2.0, 3.0, 0.5, -1.0, 1.5});
  const double s = 0.25 * in.ConsumeIntegralInRange<int>(-8, 8) + 0.125;
  c.call = "unary " + std::to_string(which) + " " + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return exp(x[0]);
      case 1:
        return tanh(x[0]);
      case 2:
        return sigmoid(x[0]);
      case 3:
        return silu(x[0]);
      case 4:
        return gelu(x[0]);
      case 5:
        return gelu_erf(x[0]);
      case 6:
        return sin(x[0]);
      case 7:
        return cos(x[0]);
      case 8:
        return neg(x[0]);
      case 9:
        return relu(x[0]);
      case 10:
        return abs(x[0]);
      case 11:
        return affine(x[0], s, -s);
      case 12:
        return clamp(x[0], lo, hi);
      case 13:
        return s / x[0];
      case 14:
        return x[0] * s + s;
      case 15:
        return log(x[0]);
      case 16:
        return sqrt(x[0]);
      default:
        return powf(x[0], e);
    }
  };
}

// Two operands broadcast together: the second's dims are a suffix of the first's with some
// set to 1, or the other way round.
void binary(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 5);
  std::vector<size_t> a = pick_dims(in, 0, 3), b(a.begin() + in.ConsumeIntegralInRange<size_t>(0, a.size()), a.end());
  for (auto& d : b)
    if (in.ConsumeBool()) d = 1;
  if (in.ConsumeBool()) std::swap(a, b);
  c.operand(in, a);
  c.operand(in, b, true, which >= 4 ? 0.2 : 0.1);  // maximum, minimum: no ties with the first
  c.call = "binary " + std::to_string(which) + " " + c.call;
  c.op = [which](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return add(x[0], x[1]);
      case 1:
        return sub(x[0], x[1]);
      case 2:
        return mul(x[0], x[1]);
      case 3:
        return div(x[0], x[1]);
      case 4:
        return maximum(x[0], x[1]);
      default:
        return minimum(x[0], x[1]);
    }
  };
}

// sum, mean, max, min over some dims (keepdim or not), the whole-tensor sum and mean, cumsum.
// max and min take no broadcast operand: its repeated values would tie.
void reduction(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 6);
  const std::vector<size_t> dims = pick_dims(in, which == 6 ? 1 : 0, 3);
  c.operand(in, dims, which != 2 && which != 3);
  std::vector<int64_t> over;
  for (size_t d = 0; d < dims.size(); ++d)
    if (in.ConsumeBool())
      over.push_back(in.ConsumeBool() ? static_cast<int64_t>(d)
                                      : static_cast<int64_t>(d) - static_cast<int64_t>(dims.size()));
  const bool keep = in.ConsumeBool();
  const int64_t dim = dims.empty() ? 0 : in.ConsumeIntegralInRange<int64_t>(0, static_cast<int64_t>(dims.size()) - 1);
  c.call = "reduction " + std::to_string(which) + " over " + std::to_string(over.size()) + " dims " + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return sum(x[0], DimList(over), keep);
      case 1:
        return mean(x[0], DimList(over), keep);
      case 2:
        return max(x[0], DimList(over), keep);
      case 3:
        return min(x[0], DimList(over), keep);
      case 4:
        return sum_all(x[0]);
      case 5:
        return mean_all(x[0]);
      default:
        return cumsum(x[0], dim);
    }
  };
}

void softmax_or_norm(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 3);
  const std::vector<size_t> dims = pick_dims(in, 1, 3);
  c.operand(in, dims);
  const int64_t dim =
      in.ConsumeIntegralInRange<int64_t>(-static_cast<int64_t>(dims.size()), static_cast<int64_t>(dims.size()) - 1);
  if (which >= 2) c.operand(in, {dims.back()}, false);  // weight
  if (which == 3) c.operand(in, {dims.back()}, false);  // bias
  // eps large enough that the normalisation stays smooth at the finite differences' scale
  // (two close values have a variance near 0)
  const double eps = in.PickValueInArray({0.1, 0.5});
  c.call = "softmax/norm " + std::to_string(which) + " " + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return softmax(x[0], dim);
      case 1:
        return log_softmax(x[0], dim);
      case 2:
        return rms_norm(x[0], x[1], eps);
      default:
        return layer_norm(x[0], x[1], x[2], eps);
    }
  };
}

// lhs (..., m, k) x rhs (..., k, n), batch dims broadcast (one side's may be 1 or absent).
void matmul_op(FuzzedDataProvider& in, Case& c) {
  const size_t m = in.ConsumeIntegralInRange<size_t>(1, 3), k = in.ConsumeIntegralInRange<size_t>(1, 3),
               n = in.ConsumeIntegralInRange<size_t>(1, 3);
  std::vector<size_t> batch = pick_dims(in, 0, 1), a = batch, b = batch;
  if (!batch.empty() && in.ConsumeBool()) (in.ConsumeBool() ? a : b)[0] = 1;
  if (!batch.empty() && in.ConsumeBool()) (in.ConsumeBool() ? a : b).clear();
  a.push_back(m), a.push_back(k), b.push_back(k), b.push_back(n);
  c.operand(in, a);
  c.operand(in, b);
  c.call = "matmul " + c.call;
  c.op = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
}

void cat_op(FuzzedDataProvider& in, Case& c) {
  const std::vector<size_t> dims = pick_dims(in, 1, 3);
  const size_t dim = in.ConsumeIntegralInRange<size_t>(0, dims.size() - 1);
  const int parts = in.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < parts; ++i) {
    std::vector<size_t> d = dims;
    d[dim] = in.ConsumeIntegralInRange<size_t>(1, 3);
    c.operand(in, d);
  }
  c.call = "cat along " + std::to_string(dim) + " " + c.call;
  c.op = [dim](const std::vector<Tensor>& x) { return cat(x, static_cast<int64_t>(dim)); };
}

// index_select, gather, embedding and scatter_add: the indices are constants of the case.
void indexing(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 3);
  const std::vector<size_t> dims = pick_dims(in, which == 2 ? 2 : 1, which == 2 ? 2 : 3);
  c.operand(in, dims);
  const size_t dim = in.ConsumeIntegralInRange<size_t>(0, dims.size() - 1);
  std::vector<size_t> idims = dims;
  for (size_t d = 0; d < idims.size(); ++d) idims[d] = in.ConsumeIntegralInRange<size_t>(1, d == dim ? 4 : dims[d]);
  Tensor index;
  if (which == 0) index = index_tensor(in, {idims[dim]}, static_cast<int64_t>(dims[dim]));
  if (which == 1 || which == 3) index = index_tensor(in, idims, static_cast<int64_t>(dims[dim]));
  if (which == 2) index = index_tensor(in, pick_dims(in, 0, 2), static_cast<int64_t>(dims[0]));
  if (which == 3) c.operand(in, idims);  // src
  c.call = "indexing " + std::to_string(which) + " along " + std::to_string(dim) + " " + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return index_select(x[0], index, static_cast<int64_t>(dim));
      case 1:
        return gather(x[0], static_cast<int64_t>(dim), index);
      case 2:
        return embedding(index, x[0]);
      default:
        return scatter_add(x[0], static_cast<int64_t>(dim), index, x[1]);
    }
  };
}

// cross_entropy on logits (N, C), or nll_loss on their log_softmax; targets now and then
// the ignored class.
void loss(FuzzedDataProvider& in, Case& c) {
  const size_t n = in.ConsumeIntegralInRange<size_t>(1, 4), classes = in.ConsumeIntegralInRange<size_t>(1, 4);
  c.operand(in, {n, classes});
  std::vector<int64_t> t(n);
  for (auto& x : t) x = in.ConsumeIntegralInRange<int64_t>(0, static_cast<int64_t>(classes) - 1);
  // an ignored class, keeping one target that counts (with none, the loss is NaN)
  std::optional<int64_t> ignore;
  if (classes > 1 && in.ConsumeBool()) ignore = (t[0] + 1) % static_cast<int64_t>(classes);
  const Tensor targets = Tensor::from_vec(t, Shape{n}, kCpu);
  const bool nll = in.ConsumeBool();
  c.call = std::string(nll ? "nll_loss(log_softmax " : "cross_entropy(") + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    return nll ? nll_loss(log_softmax(x[0], -1), targets, ignore) : cross_entropy(x[0], targets, ignore);
  };
}

// tril/triu, where with a constant condition, dropout with a fixed seed, rope.
void masks_and_rotations(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 4);
  if (which == 4) {  // rope: x (T, H, D), positions (T)
    const size_t t = in.ConsumeIntegralInRange<size_t>(1, 3), h = in.ConsumeIntegralInRange<size_t>(1, 2),
                 d = 2 * in.ConsumeIntegralInRange<size_t>(1, 2);
    c.operand(in, {t, h, d});
    const Tensor positions = index_tensor(in, {t}, 7);
    const RopeStyle style = in.ConsumeBool() ? RopeStyle::HalfRotation : RopeStyle::Interleaved;
    const size_t rotary = in.ConsumeBool() ? 0 : 2;
    c.call = "rope " + c.call;
    c.op = [=](const std::vector<Tensor>& x) { return rope(x[0], positions, 10000.0, style, rotary); };
    return;
  }
  const std::vector<size_t> dims = pick_dims(in, which < 2 ? 2 : 0, 3);
  c.operand(in, dims);
  const int64_t diagonal = in.ConsumeIntegralInRange<int64_t>(-2, 2);
  const double p = in.PickValueInArray({0.0, 0.25, 0.5, 1.0});
  const uint64_t seed = in.ConsumeIntegral<uint8_t>();
  Tensor cond;
  if (which == 2) {
    c.operand(in, dims);
    std::vector<uint8_t> bits(count(dims));
    for (auto& bit : bits) bit = in.ConsumeBool();
    cond = Tensor::from_vec(bits, Shape(dims), kCpu);
  }
  c.call = "mask " + std::to_string(which) + " " + c.call;
  c.op = [=](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return tril(x[0], diagonal);
      case 1:
        return triu(x[0], diagonal);
      case 2:
        return where(cond, x[0], x[1]);
      default:
        return dropout(x[0], p, seed);
    }
  };
}

// One leaf used twice, so its gradient is the sum of two paths: x * x, x + exp(x),
// x @ x^T, cat of x with itself.
void reuse(FuzzedDataProvider& in, Case& c) {
  const int which = in.ConsumeIntegralInRange<int>(0, 3);
  c.operand(in, pick_dims(in, which >= 2 ? 2 : 0, which == 2 ? 2 : 3));
  c.call = "reuse " + std::to_string(which) + " " + c.call;
  c.op = [which](const std::vector<Tensor>& x) {
    switch (which) {
      case 0:
        return mul(x[0], x[0]);
      case 1:
        return add(x[0], exp(x[0]));
      case 2:
        return matmul(x[0], x[0].t());
      default:
        return cat({x[0], x[0]}, -1);
    }
  };
}

// A view of the op's result, so the backward also starts from a view: none, a transpose of
// the first and last dims, one index of the first dim, a new leading dim, the flattened
// values, or a narrow of the first dim. Decided by the result's rank at each call (the
// same at every call of one case).
Tensor view_result(const Tensor& r, int kind, size_t at) {
  const size_t rank = r.rank();
  const size_t first = rank ? r.shape().dims()[0] : 0;
  switch (kind) {
    case 1:
      return rank >= 2 ? r.transpose(0, -1) : r;
    case 2:
      return first ? r.select(0, static_cast<int64_t>(at % first)) : r;
    case 3:
      return r.unsqueeze(0);
    case 4:
      return r.contiguous().flatten();
    case 5:
      return first ? r.narrow(0, at % first, first - at % first) : r;
    default:
      return r;
  }
}

}  // namespace

void fuzz_gradients(FuzzedDataProvider& in) {
  Case c;
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 8:
      reuse(in, c);
      break;
    case 0:
      binary(in, c);
      break;
    case 1:
      reduction(in, c);
      break;
    case 2:
      softmax_or_norm(in, c);
      break;
    case 3:
      matmul_op(in, c);
      break;
    case 4:
      cat_op(in, c);
      break;
    case 5:
      indexing(in, c);
      break;
    case 6:
      loss(in, c);
      break;
    case 7:
      masks_and_rotations(in, c);
      break;
    default:
      unary(in, c);
  }
  const int post = in.ConsumeIntegralInRange<int>(0, 9);  // 0 and 6..9: the result itself
  const size_t at = in.ConsumeIntegral<uint8_t>();
  c.call += ") then view " + std::to_string(post);
  const autograd::GradcheckFn f = [&c, post, at](const std::vector<Tensor>& leaves) {
    std::vector<Tensor> x;
    for (size_t i = 0; i < leaves.size(); ++i) x.push_back(c.views[i].apply(leaves[i]));
    return view_result(c.op(x), post, at);
  };
  autograd::GradcheckResult r;
  if (!runs([&] { r = autograd::gradcheck(f, c.leaves); })) return;
  if (!r.ok) fail("gradient of " + c.call + ": " + r.message);
}

}  // namespace wick::fuzz
