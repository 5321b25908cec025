// Elementwise unary ops (float dtypes). One CPU loop and one CUDA kernel serve every op; the
// op is a kernels::UnaryOp tag with two scalar parameters (a, b) for affine and powf, and both
// devices evaluate it with kernels::apply_unary (kernels/unary_ops.h).
// Backward rules, with the derivative each implements:
//   neg: -g            exp: g*y          log: g/x           sqrt: g/(2y)
//   tanh: g*(1-y^2)    relu: g*[x>0]     gelu: g*gelu'(x)   silu: g*silu'(x)
//   sigmoid: g*y*(1-y) affine: g*a       powf: g*a*x^(a-1)
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
      for_each_offset(x.layout(), [&](size_t i, size_t off) {
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

}  // namespace

Tensor neg(const Tensor& x) {
  return autograd::record(unary_fwd("neg", UnaryOp::Neg, x), "neg", {x},
                          [](const Tensor& g) { return Grads{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor out = unary_fwd("exp", UnaryOp::Exp, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "exp", {x}, [y](const Tensor& g) { return Grads{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  Tensor out = unary_fwd("log", UnaryOp::Log, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "log", {x},
                          [xd](const Tensor& g) { return Grads{div(g, xd)}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_fwd("sqrt", UnaryOp::Sqrt, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "sqrt", {x},
                          [y](const Tensor& g) { return Grads{div(g, mul_scalar(y, 2.0))}; });
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_fwd("tanh", UnaryOp::Tanh, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "tanh", {x}, [y](const Tensor& g) {
    return Grads{mul(g, affine(mul(y, y), -1.0, 1.0))};
  });
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_fwd("relu", UnaryOp::Relu, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "relu", {x}, [xd](const Tensor& g) {
    return Grads{mul(g, unary_fwd("relu", UnaryOp::Step, xd))};
  });
}

Tensor gelu(const Tensor& x) {
  Tensor out = unary_fwd("gelu", UnaryOp::Gelu, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "gelu", {x}, [xd](const Tensor& g) {
    return Grads{mul(g, unary_fwd("gelu", UnaryOp::GeluGrad, xd))};
  });
}

Tensor silu(const Tensor& x) {
  Tensor out = unary_fwd("silu", UnaryOp::Silu, x);
  if (!autograd::should_record(x)) return out;
  Tensor xd = x.detach();
  return autograd::record(out, "silu", {x}, [xd](const Tensor& g) {
    return Grads{mul(g, unary_fwd("silu", UnaryOp::SiluGrad, xd))};
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_fwd("sigmoid", UnaryOp::Sigmoid, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "sigmoid", {x}, [y](const Tensor& g) {
    return Grads{mul(g, mul(y, affine(y, -1.0, 1.0)))};
  });
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
  });
}

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s) { return add_scalar(a, s); }
Tensor operator-(const Tensor& a, double s) { return add_scalar(a, -s); }
Tensor operator*(const Tensor& a, double s) { return mul_scalar(a, s); }
Tensor operator/(const Tensor& a, double s) { return mul_scalar(a, 1.0 / s); }

}  // namespace wick
