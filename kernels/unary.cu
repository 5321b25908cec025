// Index map: out[i] = f(x[view_offset(xv, i)]), i in [0, n), grid-stride. f is
// kernels/unary_ops.h's apply_unary, the formula ops/unary.cpp's CPU loop uses too (f32
// compute for f16/bf16).
#include "kernels/device_utils.h"
#include "kernels/unary.h"
#include "kernels/unary_ops.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void unary_kernel(UnaryOp op, const T* x, StridedView xv, T* out, int64_t n, acc_t<T> a, acc_t<T> b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(apply_unary<acc_t<T>>(op, load(x[view_offset(xv, i)]), a, b));
}

}  // namespace

void unary(UnaryOp op, ElemType type, const void* x, const StridedView& xv, void* out, int64_t n, double a,
           double b) {
  if (n == 0) return;
  visit_floats(type, "unary kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    using C = acc_t<T>;
    unary_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(op, static_cast<const T*>(x), xv,
                                                                      static_cast<T*>(out), n, C(a), C(b));
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
