// The element formula of every unary op, for one compute type C (f32 for f16/bf16 storage,
// f32 or f64 otherwise). The CPU loop in ops/unary.cpp and the CUDA kernel in kernels/unary.cu
// both call apply_unary, so the two devices compute the same thing.
#pragma once
#include <cmath>

#include "kernels/common.h"
#include "kernels/unary.h"

namespace wick::kernels {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi), GELU's tanh approximation
constexpr double kGeluCubic = 0.044715;              // GELU's cubic coefficient
constexpr double kSqrtHalf = 0.7071067811865476;     // 1 / sqrt(2), exact GELU's erf argument
constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1 / sqrt(2 pi), the normal density's scale

// op(x) with the scalar parameters a (Affine's scale, Powf's exponent) and b (Affine's shift).
// The std:: names resolve to CUDA's device overloads in device code.
template <class C>
WICK_HOST_DEVICE C apply_unary(UnaryOp op, C x, C a, C b) {
  using std::cos;
  using std::erf;
  using std::exp;
  using std::fabs;
  using std::log;
  using std::sin;
  using std::pow;
  using std::sqrt;
  using std::tanh;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Relu: return x > C(0) ? x : C(0);
    case UnaryOp::Gelu: {
      C inner = C(kSqrt2OverPi) * (x + C(kGeluCubic) * x * x * x);
      return C(0.5) * x * (C(1) + tanh(inner));
    }
    case UnaryOp::GeluGrad: {
      C inner = C(kSqrt2OverPi) * (x + C(kGeluCubic) * x * x * x);
      C t = tanh(inner);
      C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCubic) * x * x);
      return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner;
    }
    case UnaryOp::Silu: return x / (C(1) + exp(-x));
    case UnaryOp::SiluGrad: {
      C s = C(1) / (C(1) + exp(-x));
      return s * (C(1) + x * (C(1) - s));
    }
    case UnaryOp::Sigmoid: return C(1) / (C(1) + exp(-x));
    case UnaryOp::Step: return x > C(0) ? C(1) : C(0);
    case UnaryOp::Affine: return x * a + b;
    case UnaryOp::Powf: return pow(x, a);
    case UnaryOp::Sin: return sin(x);
    case UnaryOp::Cos: return cos(x);
    case UnaryOp::Abs: return fabs(x);
    case UnaryOp::Sign: return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
    case UnaryOp::GeluErf: return C(0.5) * x * (C(1) + erf(x * C(kSqrtHalf)));
    case UnaryOp::GeluErfGrad:  // Phi(x) + x phi(x)
      return C(0.5) * (C(1) + erf(x * C(kSqrtHalf))) + x * C(kInvSqrt2Pi) * exp(C(-0.5) * x * x);
    case UnaryOp::Clamp: return x < a ? a : (x > b ? b : x);
    case UnaryOp::InRange: return (x >= a && x <= b) ? C(1) : C(0);
  }
  return x;
}

}  // namespace wick::kernels
