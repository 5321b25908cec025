// Elementwise binary ops with numpy broadcasting, comparisons and where. Inputs are read
// through broadcast views of the output shape (stride 0 on broadcast dims), so no input is
// ever materialised. Backward rules reduce each gradient back to its input's shape (sum_to):
//   add: (g, g)   sub: (g, -g)   mul: (g*b, g*a)   div: (g/b, -g*a/b^2)
//   maximum: g to the larger (ties: lhs)   minimum: g to the smaller (ties: lhs)
//   where: (none, where(c, g, 0), where(c, 0, g))
// Each op runs its checked forward before it touches its inputs for the backward closure, so
// a misuse (an empty tensor included) is reported under the op's own name.
#include <algorithm>

#include "kernels/binary.h"
#include "kernels/binary_ops.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;
using kernels::BinaryOp;
using kernels::CmpOp;

namespace {

using Grads = std::vector<Tensor>;

// Checks device, dtype and broadcast; returns the output shape.
Shape check_binary(const char* name, const Tensor& a, const Tensor& b) {
  check_pair(name, a, b);
  return broadcast_shape(name, a.shape(), b.shape());
}

// Op is BinaryOp (out has the inputs' dtype) or CmpOp (out is U8).
template <class Op>
Tensor binary_fwd(const char* name, Op op, const Tensor& a, const Tensor& b) {
  constexpr bool kCmp = std::is_same_v<Op, CmpOp>;
  Shape shape = check_binary(name, a, b);
  Tensor out = Tensor::empty(shape, kCmp ? DType::U8 : a.dtype(), a.device());
  if (out.elem_count() == 0) return out;
  Layout la = a.layout().broadcast_as(shape), lb = b.layout().broadcast_as(shape);
  if (a.device().is_cpu()) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      using C = compute_t<T>;
      const T* pa = cpu_base<T>(a);
      const T* pb = cpu_base<T>(b);
      using Out = std::conditional_t<kCmp, uint8_t, T>;
      Out* o = cpu_base_mut<Out>(out);
      parallel_for_each_offsets<2>({&la, &lb}, [&](size_t i, const std::array<size_t, 2>& off) {
        C r = static_cast<C>(pa[off[0]]), s = static_cast<C>(pb[off[1]]);
        if constexpr (kCmp) {
          o[i] = kernels::apply_compare<C>(op, r, s) ? 1 : 0;
        } else {
          if constexpr (std::is_integral_v<C>)  // the CUDA kernel yields 0 here; the CPU can say why
            if (op == BinaryOp::Div && s == C(0)) throw Error("O08", "div: integer division by zero");
          o[i] = static_cast<T>(kernels::apply_binary<C>(op, r, s));
        }
      });
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(a.device());
  const int64_t n = static_cast<int64_t>(out.elem_count());
  if constexpr (kCmp)
    kernels::compare(op, ktype(a.dtype()), a.data_ptr(), kview(name, la), b.data_ptr(), kview(name, lb),
                     static_cast<uint8_t*>(out.data_ptr()), n);
  else
    kernels::binary(op, ktype(a.dtype()), a.data_ptr(), kview(name, la), b.data_ptr(), kview(name, lb),
                    out.data_ptr(), n);
#else
  no_cuda(name);
#endif
  return out;
}

// maximum and minimum: forward `op`; backward routes g to lhs where lhs_wins(a, b) (ge for
// maximum, le for minimum, so ties go to lhs) and to rhs elsewhere.
Tensor extremum(const char* name, BinaryOp op, Tensor (*lhs_wins)(const Tensor&, const Tensor&), const Tensor& a,
                const Tensor& b) {
  Tensor out = binary_fwd(name, op, a, b);
  if (!autograd::should_record(a, b)) return out;
  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, name, {a, b}, [ad, bd, lhs_wins](const Tensor& g) {
    Tensor z = zeros_like(g);
    Tensor take_a = lhs_wins(ad, bd);
    return Grads{sum_to(where(take_a, g, z), ad.shape()), sum_to(where(take_a, z, g), bd.shape())};
  }, {ad, bd});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_fwd("add", BinaryOp::Add, a, b);
  if (!autograd::should_record(a, b)) return out;
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record(out, "add", {a, b}, [sa, sb](const Tensor& g) {
    return Grads{sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_fwd("sub", BinaryOp::Sub, a, b);
  if (!autograd::should_record(a, b)) return out;
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record(out, "sub", {a, b}, [sa, sb](const Tensor& g) {
    return Grads{sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_fwd("mul", BinaryOp::Mul, a, b);
  if (!autograd::should_record(a, b)) return out;
  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, "mul", {a, b}, [ad, bd](const Tensor& g) {
    return Grads{sum_to(mul(g, bd), ad.shape()), sum_to(mul(g, ad), bd.shape())};
  }, {ad, bd});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_fwd("div", BinaryOp::Div, a, b);
  if (!autograd::should_record(a, b)) return out;
  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, "div", {a, b}, [ad, bd](const Tensor& g) {
    Tensor ga = div(g, bd);
    return Grads{sum_to(ga, ad.shape()), sum_to(neg(div(mul(ga, ad), bd)), bd.shape())};
  }, {ad, bd});
}

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", BinaryOp::Max, ge, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", BinaryOp::Min, le, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary_fwd("eq", CmpOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_fwd("ne", CmpOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_fwd("lt", CmpOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_fwd("le", CmpOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_fwd("gt", CmpOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_fwd("ge", CmpOp::Ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond, "cond");
  Shape ab = check_binary("where", a, b);
  check_same_device("where", cond, a);
  if (cond.dtype() != DType::U8)
    throw Error("O09", std::string("where: condition must be U8, got ") + dtype_name(cond.dtype()));
  Shape shape = broadcast_shape("where", cond.shape(), ab);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  Layout lc = cond.layout().broadcast_as(shape), la = a.layout().broadcast_as(shape),
         lb = b.layout().broadcast_as(shape);
  if (out.elem_count() == 0) {
  } else if (a.device().is_cpu()) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const uint8_t* pc = cpu_base<uint8_t>(cond);
      const T* pa = cpu_base<T>(a);
      const T* pb = cpu_base<T>(b);
      T* o = cpu_base_mut<T>(out);
      parallel_for_each_offsets<3>({&lc, &la, &lb}, [&](size_t i, const std::array<size_t, 3>& off) {
        o[i] = pc[off[0]] ? pa[off[1]] : pb[off[2]];
      });
    });
  } else {
#ifdef WICK_WITH_CUDA
    set_current_device(a.device());
    kernels::where(dtype_size(a.dtype()), static_cast<const uint8_t*>(cond.data_ptr()), kview("where", lc),
                   a.data_ptr(), kview("where", la), b.data_ptr(), kview("where", lb), out.data_ptr(),
                   static_cast<int64_t>(out.elem_count()));
#else
    no_cuda("where");
#endif
  }
  if (!autograd::should_record(cond, a, b)) return out;
  Tensor cd = cond.detach();
  Shape sa = a.shape(), sb = b.shape();
  return autograd::record(out, "where", {cond, a, b}, [cd, sa, sb](const Tensor& g) {
    Tensor z = zeros_like(g);
    return Grads{Tensor(), sum_to(where(cd, g, z), sa), sum_to(where(cd, z, g), sb)};
  }, {cd});
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  check_defined("allclose", a, "lhs");
  check_defined("allclose", b, "rhs");
  check_same_device("allclose", a, b);
  broadcast_shape("allclose", a.shape(), b.shape());
  autograd::NoGradGuard no_grad;
  Tensor x = cast(a, DType::F64), y = cast(b, DType::F64);
  // |x - y| <= atol + rtol |y| between finite values (x - x is 0 only for those), or equal
  // (which covers equal infinities). U8 0/1 values: minimum is "and", maximum is "or".
  Tensor zero = Tensor::zeros(Shape{}, DType::F64, x.device());
  Tensor finite = minimum(eq(sub(x, x), zero), eq(sub(y, y), zero));
  Tensor close = minimum(le(abs(sub(x, y)), affine(abs(y), rtol, atol)), finite);
  Tensor ok = maximum(close, eq(x, y));
  return ok.elem_count() == 0 || min(ok.reshape({-1}), {0}).item() != 0;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

}  // namespace wick
