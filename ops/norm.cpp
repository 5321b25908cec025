// rms_norm and layer_norm over the last dim. Forward: one row pass on CPU or one CUDA block
// per row, statistics in f32 (f64 for f64). Backward rules (rows along the last dim, d = cols,
// r = 1/sqrt(stat + eps), gw = g * w):
//   rms_norm:   dx = r * gw - x * r^3 * mean(gw * x)          dw = sum_rows(g * x * r)
//   layer_norm: xh = (x - mean) * r
//               dx = r * (gw - mean(gw) - xh * mean(gw * xh))  dw = sum_rows(g * xh)  db = sum_rows(g)
#include <cmath>

#include "kernels/norm.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

// Checks x (..., d) against a (d) parameter; returns d.
size_t check_param(const char* name, const char* what, const Tensor& x, const Tensor& p) {
  check_pair(name, x, p, "x", what);
  if (p.rank() != 1 || p.dim(0) != x.dims().back())
    throw Error("O11", std::string(name) + ": " + what + " must have shape [" + std::to_string(x.dims().back()) +
                "] for x of shape " + to_string(x.shape()) + ", got " + to_string(p.shape()));
  return p.dim(0);
}

void check_x(const char* name, const Tensor& x) {
  check_defined(name, x);
  require_float(name, x);
  if (x.rank() == 0) throw Error("O10", std::string(name) + ": needs rank >= 1, got shape []");
}

template <class T>
void cpu_norm_rows(bool layer, const T* x, const T* w, const T* b, T* out, size_t rows, size_t cols, double eps) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    C mu = 0, sq = 0;
    if (layer) {
      for (size_t c = 0; c < cols; ++c) mu += static_cast<C>(xr[c]);
      mu /= static_cast<C>(cols);
    }
    for (size_t c = 0; c < cols; ++c) {
      C v = static_cast<C>(xr[c]) - mu;
      sq += v * v;
    }
    const C inv = C(1) / std::sqrt(sq / static_cast<C>(cols) + static_cast<C>(eps));
    for (size_t c = 0; c < cols; ++c) {
      C y = (static_cast<C>(xr[c]) - mu) * inv * static_cast<C>(w[c]);
      if (layer) y += static_cast<C>(b[c]);
      out[r * cols + c] = static_cast<T>(y);
    }
  }
}

Tensor norm_fwd(const char* name, const Tensor& x, const Tensor& w, const Tensor* b, double eps) {
  const size_t cols = x.dims().back();
  const size_t rows = cols ? x.elem_count() / cols : 0;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  Tensor xc = x.detach().contiguous(), wc = w.detach().contiguous();
  Tensor bc = b ? b->detach().contiguous() : Tensor();
  if (x.device().is_cpu()) {
    visit_float(name, x, [&](auto zero) {
      using T = decltype(zero);
      auto base = [](const Tensor& t) { return cpu_base<T>(t) + t.layout().start_offset(); };
      cpu_norm_rows<T>(b != nullptr, base(xc), base(wc), b ? base(bc) : nullptr, cpu_base_mut<T>(out), rows, cols,
                       eps);
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  if (b)
    kernels::layer_norm_rows(ktype(x.dtype()), xc.data_ptr(), wc.data_ptr(), bc.data_ptr(), out.data_ptr(),
                             static_cast<int64_t>(rows), static_cast<int64_t>(cols), eps);
  else
    kernels::rms_norm_rows(ktype(x.dtype()), xc.data_ptr(), wc.data_ptr(), out.data_ptr(),
                           static_cast<int64_t>(rows), static_cast<int64_t>(cols), eps);
#else
  no_cuda(name);
#endif
  return out;
}

// Sums a (..., d) tensor over every dim but the last: the gradient of a (d) parameter.
Tensor sum_rows(const Tensor& t) {
  std::vector<size_t> dims(t.rank() - 1);
  for (size_t i = 0; i + 1 < t.rank(); ++i) dims[i] = i;
  return sum(t, dims, false);
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_x("rms_norm", x);
  check_param("rms_norm", "weight", x, weight);
  Tensor out = norm_fwd("rms_norm", x, weight, nullptr, eps);
  if (!autograd::should_record(x, weight)) return out;
  Tensor xd = x.detach(), wd = weight.detach();
  return autograd::record(out, "rms_norm", {x, weight}, [xd, wd, eps](const Tensor& g) {
    const size_t last = xd.rank() - 1;
    Tensor r = powf(add_scalar(mean(mul(xd, xd), {last}, true), eps), -0.5);  // (..., 1)
    Tensor gw = mul(g, wd);
    Tensor dx = sub(mul(gw, r), mul(xd, mul(powf(r, 3.0), mean(mul(gw, xd), {last}, true))));
    return Grads{dx, sum_rows(mul(g, mul(xd, r)))};
  }, {xd, wd});
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_x("layer_norm", x);
  check_param("layer_norm", "weight", x, weight);
  check_param("layer_norm", "bias", x, bias);
  Tensor out = norm_fwd("layer_norm", x, weight, &bias, eps);
  if (!autograd::should_record(x, weight, bias)) return out;
  Tensor xd = x.detach(), wd = weight.detach();
  return autograd::record(out, "layer_norm", {x, weight, bias}, [xd, wd, eps](const Tensor& g) {
    const size_t last = xd.rank() - 1;
    Tensor xm = sub(xd, mean(xd, {last}, true));
    Tensor r = powf(add_scalar(mean(mul(xm, xm), {last}, true), eps), -0.5);
    Tensor xh = mul(xm, r);
    Tensor gw = mul(g, wd);
    Tensor dx = mul(r, sub(sub(gw, mean(gw, {last}, true)), mul(xh, mean(mul(gw, xh), {last}, true))));
    return Grads{dx, sum_rows(mul(g, xh)), sum_rows(g)};
  }, {xd, wd});
}

}  // namespace wick
