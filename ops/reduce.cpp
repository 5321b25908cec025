// Reductions over a list of dims. Both devices move the reduced dims last (a permuted
// contiguous copy, skipped when already in place) and reduce a (rows, cols) matrix row by row.
// Backward rules:
//   sum: g broadcast back over the reduced dims      mean: the same, divided by the count
//   max/min: g routed to every element equal to the result (ties all receive it, as candle)
#include <algorithm>
#include <limits>
#include <numeric>

#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;
using kernels::ReduceOp;

namespace {

using Grads = std::vector<Tensor>;

Shape reduced_shape(const Shape& s, const std::vector<size_t>& rdims, bool keepdim) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.rank(); ++i) {
    bool reduced = std::binary_search(rdims.begin(), rdims.end(), i);
    if (!reduced) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return Shape(out);
}

// g (the reduced shape) made x-shaped again: reduced dims re-inserted, then broadcast.
Tensor expand_back(const Tensor& g, const Shape& x_shape, const std::vector<size_t>& rdims, bool keepdim) {
  Tensor e = g;
  if (!keepdim)
    for (size_t d : rdims) e = e.unsqueeze(d);
  return e.broadcast_as(x_shape).contiguous();
}

template <class T>
void cpu_reduce_rows(ReduceOp op, const T* x, size_t rows, size_t cols, void* out) {
  using C = compute_t<T>;
  // Sums: f64 for floats; for integers uint64_t, which wraps (defined) where a signed sum
  // would overflow, and then reduces modulo 2^bits of T: the integer sum wraps in T.
  using Acc = std::conditional_t<is_float_v<T>, double, uint64_t>;
  for (size_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    if (op == ReduceOp::Sum) {
      Acc s = 0;
      for (size_t c = 0; c < cols; ++c) s += static_cast<Acc>(static_cast<C>(row[c]));
      static_cast<T*>(out)[r] = static_cast<T>(static_cast<C>(s));
      continue;
    }
    C best = static_cast<C>(row[0]);
    int64_t at = 0;
    for (size_t c = 1; c < cols; ++c) {
      C v = static_cast<C>(row[c]);
      bool better = (op == ReduceOp::Max || op == ReduceOp::ArgMax) ? v > best : v < best;
      if (better) { best = v; at = static_cast<int64_t>(c); }
    }
    if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) static_cast<int64_t*>(out)[r] = at;
    else static_cast<T*>(out)[r] = static_cast<T>(best);
  }
}

Tensor reduce_fwd(const char* name, ReduceOp op, const Tensor& x, const std::vector<size_t>& rdims,
                  bool keepdim) {
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  // Kept dims first, reduced dims last, so each output element reduces one contiguous row.
  std::vector<size_t> perm;
  size_t rows = 1, cols = 1;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!std::binary_search(rdims.begin(), rdims.end(), i)) { perm.push_back(i); rows *= x.dim(i); }
  for (size_t d : rdims) { perm.push_back(d); cols *= x.dim(d); }
  if (op != ReduceOp::Sum && cols == 0 && rows > 0)
    throw Error("O12", std::string(name) + ": cannot reduce over an empty dim of shape " + to_string(x.shape()));
  Tensor out = Tensor::empty(reduced_shape(x.shape(), rdims, keepdim), arg ? DType::I64 : x.dtype(), x.device());
  if (rows == 0) return out;
  Tensor xc = x.detach().permute(perm).contiguous();
  if (x.device().is_cpu()) {
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      cpu_reduce_rows<T>(op, cpu_base<T>(xc) + xc.layout().start_offset(), rows, cols, out.storage()->data());
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::reduce_rows(op, ktype(x.dtype()), xc.data_ptr(), static_cast<int64_t>(rows),
                       static_cast<int64_t>(cols), out.data_ptr());
#else
  no_cuda(name);
#endif
  return out;
}

// max and min share their backward: g goes to the elements equal to the result.
Tensor extreme(const char* name, ReduceOp op, const Tensor& x, const DimList& dims, bool keepdim) {
  check_defined(name, x);
  std::vector<size_t> rd = check_dims(name, x, dims);
  Tensor out = reduce_fwd(name, op, x, rd, keepdim);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach(), yd = out.detach();
  return autograd::record(out, name, {x}, [xd, yd, rd, keepdim](const Tensor& g) {
    Tensor hit = eq(xd, expand_back(yd, xd.shape(), rd, keepdim));
    Tensor z = Tensor::zeros(xd.shape(), g.dtype(), g.device());
    return Grads{where(hit, expand_back(g, xd.shape(), rd, keepdim), z)};
  }, {xd, yd});
}

std::vector<size_t> all_dims(const Tensor& x) {
  std::vector<size_t> d(x.rank());
  std::iota(d.begin(), d.end(), size_t{0});
  return d;
}

}  // namespace

Tensor sum(const Tensor& x, const DimList& dims, bool keepdim) {
  check_defined("sum", x);
  std::vector<size_t> rd = check_dims("sum", x, dims);
  Shape xs = x.shape();
  return autograd::record(reduce_fwd("sum", ReduceOp::Sum, x, rd, keepdim), "sum", {x},
                          [xs, rd, keepdim](const Tensor& g) { return Grads{expand_back(g, xs, rd, keepdim)}; });
}

Tensor mean(const Tensor& x, const DimList& dims, bool keepdim) {
  check_defined("mean", x);
  require_float("mean", x);
  std::vector<size_t> rd = check_dims("mean", x, dims);
  size_t count = 1;
  for (size_t d : rd) count *= x.dim(d);
  // The mean of no elements is 0 / 0: NaN, as numpy and PyTorch give.
  const double scale = count ? 1.0 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
  Tensor out;
  {
    autograd::NoGradGuard no_grad;  // the node below is mean's, not sum's and affine's
    out = mul_scalar(reduce_fwd("mean", ReduceOp::Sum, x, rd, keepdim), scale);
  }
  Shape xs = x.shape();
  return autograd::record(out, "mean", {x}, [xs, rd, keepdim, scale](const Tensor& g) {
    return Grads{mul_scalar(expand_back(g, xs, rd, keepdim), scale)};
  });
}

Tensor max(const Tensor& x, const DimList& dims, bool keepdim) {
  return extreme("max", ReduceOp::Max, x, dims, keepdim);
}

Tensor min(const Tensor& x, const DimList& dims, bool keepdim) {
  return extreme("min", ReduceOp::Min, x, dims, keepdim);
}

Tensor sum_all(const Tensor& x) {
  check_defined("sum", x);
  return sum(x, all_dims(x), false);
}

Tensor mean_all(const Tensor& x) {
  check_defined("mean", x);
  return mean(x, all_dims(x), false);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmax", x);
  return reduce_fwd("argmax", ReduceOp::ArgMax, x, {check_dim("argmax", x, dim)}, keepdim);
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmin", x);
  return reduce_fwd("argmin", ReduceOp::ArgMin, x, {check_dim("argmin", x, dim)}, keepdim);
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  check_defined("sum_to", grad, "the gradient");
  if (grad.shape() == shape) return grad;
  const size_t r = grad.rank();
  bool ok = shape.rank() <= r;
  std::vector<size_t> dims;
  for (size_t i = 0; ok && i < r; ++i) {
    if (i < r - shape.rank()) { dims.push_back(i); continue; }
    size_t want = shape[i - (r - shape.rank())];
    if (want == grad.dim(i)) continue;
    if (want == 1) dims.push_back(i);
    else ok = false;
  }
  if (!ok)
    throw Error("O13", "sum_to: cannot sum " + to_string(grad.shape()) + " down to " + to_string(shape));
  return sum(grad, dims, true).reshape(shape);
}

}  // namespace wick
