// Elementwise unary CUDA kernels: out[i] = f(x[view(i)]) for a strided x and a contiguous out.
// f16/bf16 compute in f32 registers, f32 in f32, f64 in f64. Other dtypes are refused in ops/.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

enum class UnaryOp : int {
  Neg, Exp, Log, Sqrt, Tanh, Relu,
  Gelu,      // tanh approximation
  GeluGrad,  // d gelu / dx (tanh approximation), for the backward rule
  Silu,
  SiluGrad,  // d silu / dx
  Sigmoid,
  Step,      // 1 where x > 0 else 0 (relu's derivative)
  Affine,    // x * a + b
  Powf,      // x ^ a
  Sin, Cos, Abs,
  Sign,         // 1 for x > 0, -1 for x < 0, 0 for 0 (abs's derivative)
  GeluErf,      // exact GELU, 0.5 x (1 + erf(x / sqrt 2))
  GeluErfGrad,  // d gelu_erf / dx
  Clamp,        // min(max(x, a), b); NaN stays NaN
  InRange,      // 1 where a <= x <= b else 0 (clamp's derivative)
};

// x: n elements read through xv; out: n contiguous elements of the same type.
void unary(UnaryOp op, ElemType type, const void* x, const StridedView& xv, void* out, int64_t n,
           double a, double b);

}  // namespace wick::kernels
