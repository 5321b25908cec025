// Elementwise unary ops (float dtypes). One CPU loop and one CUDA kernel serve every op; the
// op is a kernels::UnaryOp tag with two scalar parameters (a, b) for affine and powf, and both
// devices evaluate it with kernels::apply_unary (kernels/unary_ops.h).
// Backward rules, with the derivative each implements:
//   neg: -g            exp: g*y          log: g/x           sqrt: g/(2y)
//   tanh: g*(1-y^2)    relu: g*[x>0]     gelu: g*gelu'(x)   silu: g*silu'(x)
//   sigmoid: g*y*(1-y) affine: g*a       powf: g*a*x^(a-1)
//   sin: g*cos(x)      cos: -g*sin(x)    abs: g*sign(x)     gelu_erf: g*(Phi(x) + x phi(x))
//   clamp: g*[lo <= x <= hi]
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/unary.h"
#include "kernels/unary_ops.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;
using kernels::UnaryOp;

namespace {

// The forward of every unary op: checks, CPU loop or CUDA kernel. No autograd node.
Tensor unary_fwd(const char* name, UnaryOp op, const Tensor& x, double a = 0, double b = 0) {
  check_defined(name, x);
  require_float(name, x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  if (x.device().is_cpu()) {
    visit_float(name, x, [&](auto zero) {
      using T = decltype(zero);
      using C = compute_t<T>;
      const T* in = cpu_base<T>(x);
      T* o = cpu_base_mut<T>(out);
      const C ca = static_cast<C>(a), cb = static_cast<C>(b);
      parallel_for_each_offset(x.layout(), [&](size_t i, size_t off) {
        o[i] = static_cast<T>(kernels::apply_unary<C>(op, static_cast<C>(in[off]), ca, cb));
      });
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::unary(op, ktype(x.dtype()), x.data_ptr(), kview(name, x.layout()), out.data_ptr(),
                 static_cast<int64_t>(x.elem_count()), a, b);
#else
  no_cuda(name);
#endif
  return out;
}

using Grads = std::vector<Tensor>;

// y = op(x) whose derivative is another elementwise op of x: dx = g * grad_op(x).
Tensor unary_with_derivative(const char* name, UnaryOp op, UnaryOp grad_op, const Tensor& x) {
  Tensor out = unary_fwd(name, op, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, name, {x}, [name, grad_op, xd](const Tensor& g) {
    return Grads{mul(g, unary_fwd(name, grad_op, xd))};
  }, {xd});
}

}  // namespace

Tensor neg(const Tensor& x) {
  return autograd::record(unary_fwd("neg", UnaryOp::Neg, x), "neg", {x},
                          [](const Tensor& g) { return Grads{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor out = unary_fwd("exp", UnaryOp::Exp, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "exp", {x}, [y](const Tensor& g) { return Grads{mul(g, y)}; }, {y});
}

Tensor log(const Tensor& x) {
  Tensor out = unary_fwd("log", UnaryOp::Log, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "log", {x}, [xd](const Tensor& g) { return Grads{div(g, xd)}; }, {xd});
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_fwd("sqrt", UnaryOp::Sqrt, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "sqrt", {x}, [y](const Tensor& g) {
    return Grads{div(g, mul_scalar(y, 2.0))};
  }, {y});
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_fwd("tanh", UnaryOp::Tanh, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "tanh", {x}, [y](const Tensor& g) {
    return Grads{mul(g, affine(mul(y, y), -1.0, 1.0))};
  }, {y});
}

Tensor relu(const Tensor& x) { return unary_with_derivative("relu", UnaryOp::Relu, UnaryOp::Step, x); }

Tensor gelu(const Tensor& x) { return unary_with_derivative("gelu", UnaryOp::Gelu, UnaryOp::GeluGrad, x); }

Tensor silu(const Tensor& x) { return unary_with_derivative("silu", UnaryOp::Silu, UnaryOp::SiluGrad, x); }

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_fwd("sigmoid", UnaryOp::Sigmoid, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "sigmoid", {x}, [y](const Tensor& g) {
    return Grads{mul(g, mul(y, affine(y, -1.0, 1.0)))};
  }, {y});
}

Tensor affine(const Tensor& x, double mul_by, double add_to) {
  return autograd::record(unary_fwd("affine", UnaryOp::Affine, x, mul_by, add_to), "affine", {x},
                          [mul_by](const Tensor& g) { return Grads{mul_scalar(g, mul_by)}; });
}

Tensor add_scalar(const Tensor& x, double s) { return affine(x, 1.0, s); }
Tensor mul_scalar(const Tensor& x, double s) { return affine(x, s, 0.0); }

Tensor powf(const Tensor& x, double e) {
  Tensor out = unary_fwd("powf", UnaryOp::Powf, x, e);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "powf", {x}, [xd, e](const Tensor& g) {
    return Grads{mul(g, mul_scalar(unary_fwd("powf", UnaryOp::Powf, xd, e - 1.0), e))};
  }, {xd});
}

Tensor gelu_erf(const Tensor& x) { return unary_with_derivative("gelu_erf", UnaryOp::GeluErf, UnaryOp::GeluErfGrad, x); }

Tensor sin(const Tensor& x) { return unary_with_derivative("sin", UnaryOp::Sin, UnaryOp::Cos, x); }

Tensor cos(const Tensor& x) {
  Tensor out = unary_fwd("cos", UnaryOp::Cos, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(
      out, "cos", {x}, [xd](const Tensor& g) { return Grads{neg(mul(g, unary_fwd("cos", UnaryOp::Sin, xd)))}; },
      {xd});
}

Tensor abs(const Tensor& x) { return unary_with_derivative("abs", UnaryOp::Abs, UnaryOp::Sign, x); }

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A rank-0 tensor of x's dtype and device holding s, for the integer paths.
Tensor scalar_like(const Tensor& x, double s) { return Tensor::full(Shape{}, s, x.dtype(), x.device()); }

// An integer dtype's bounds as doubles.
std::pair<double, double> int_range(DType dt) {
  std::pair<double, double> r;
  visit_dtype(dt, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>)
      r = {static_cast<double>(std::numeric_limits<T>::lowest()), static_cast<double>(std::numeric_limits<T>::max())};
  });
  return r;
}

}  // namespace

Tensor clamp(const Tensor& x, double lo, double hi) {
  check_defined("clamp", x);
  if (!(lo <= hi)) throw Error("O23", "clamp: needs lo <= hi, got lo " + num(lo) + ", hi " + num(hi));
  if (!is_float(x.dtype())) {
    // Integers: the bounds rounded toward the inside, then limited to the dtype's range.
    auto [tmin, tmax] = int_range(x.dtype());
    const double l = std::min(std::max(std::ceil(lo), tmin), tmax), h = std::max(std::min(std::floor(hi), tmax), tmin);
    return minimum(maximum(x, scalar_like(x, l)), scalar_like(x, h));
  }
  Tensor out = unary_fwd("clamp", UnaryOp::Clamp, x, lo, hi);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "clamp", {x}, [xd, lo, hi](const Tensor& g) {
    return Grads{mul(g, unary_fwd("clamp", UnaryOp::InRange, xd, lo, hi))};
  }, {xd});
}

Tensor operator-(const Tensor& a) { return neg(a); }

// Float tensors (and empty handles, so the error names the op) take the affine path.
static bool scalar_path(const Tensor& a) { return !a.defined() || is_float(a.dtype()); }

Tensor operator+(const Tensor& a, double s) { return scalar_path(a) ? add_scalar(a, s) : add(a, scalar_like(a, s)); }
Tensor operator-(const Tensor& a, double s) { return scalar_path(a) ? add_scalar(a, -s) : sub(a, scalar_like(a, s)); }
Tensor operator*(const Tensor& a, double s) { return scalar_path(a) ? mul_scalar(a, s) : mul(a, scalar_like(a, s)); }
Tensor operator/(const Tensor& a, double s) { return scalar_path(a) ? mul_scalar(a, 1.0 / s) : div(a, scalar_like(a, s)); }
Tensor operator+(double s, const Tensor& a) { return a + s; }
Tensor operator-(double s, const Tensor& a) { return scalar_path(a) ? affine(a, -1.0, s) : sub(scalar_like(a, s), a); }
Tensor operator*(double s, const Tensor& a) { return a * s; }
Tensor operator/(double s, const Tensor& a) {
  return scalar_path(a) ? mul_scalar(powf(a, -1.0), s) : div(scalar_like(a, s), a);
}

}  // namespace wick
