// Index map: out[i] = f(x[view_offset(xv, i)]), i in [0, n), grid-stride. Mirrors ops/unary.cpp's
// apply() line for line (same formulas, f32 compute for f16/bf16).
#include "kernels/device_utils.h"
#include "kernels/unary.h"

namespace wick::kernels {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // GELU tanh approximation
constexpr double kGeluCubic = 0.044715;

template <class C>
__device__ C apply(UnaryOp op, C x, C a, C b) {
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
  }
  return x;
}

template <class T>
__global__ void unary_kernel(UnaryOp op, const T* x, StridedView xv, T* out, int64_t n, acc_t<T> a, acc_t<T> b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(apply<acc_t<T>>(op, load(x[view_offset(xv, i)]), a, b));
}

}  // namespace

void unary(UnaryOp op, ElemType type, const void* x, const StridedView& xv, void* out, int64_t n, double a,
           double b) {
  if (n == 0) return;
  visit_floats(type, "unary kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    using C = acc_t<T>;
    unary_kernel<T><<<blocks_for(n), kThreads, 0, cudaStreamLegacy>>>(op, static_cast<const T*>(x), xv,
                                                                      static_cast<T*>(out), n, C(a), C(b));
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
