// Index map: block r owns row r of contiguous (rows, cols) x and out: x[r * cols + c].
// Pass 1: m = max_c x; pass 2: s = sum_c exp(x - m); pass 3: out = exp(x - m) / s, or
// (x - m) - log(s) for log_softmax. Mirrors ops/softmax.cpp's cpu_softmax_rows.
#include "kernels/device_utils.h"
#include "kernels/softmax.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void softmax_kernel(bool log_out, const T* x, T* out, int64_t cols) {
  using C = acc_t<T>;
  const T* xr = x + blockIdx.x * cols;
  T* yr = out + blockIdx.x * cols;
  C m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = max(m, load(xr[c]));
  m = block_max<C>(m);
  C s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += exp(load(xr[c]) - m);
  s = block_sum<C>(s);
  const C log_s = log(s);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    C v = load(xr[c]) - m;
    yr[c] = store<T>(log_out ? v - log_s : exp(v) / s);
  }
}

}  // namespace

void softmax_rows(bool log_out, ElemType type, const void* x, void* out, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const unsigned grid = blocks_per_row(rows, "softmax kernel: more than 2^31 - 1 rows");
  visit_floats(type, "softmax kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    softmax_kernel<T><<<grid, kThreads, 0, launch_stream()>>>(
        log_out, static_cast<const T*>(x), static_cast<T*>(out), cols);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
