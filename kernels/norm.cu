// Index map: block r owns row r of contiguous (rows, cols) x and out; w[c], b[c] per column.
// rms:   inv = 1 / sqrt(sum_c x^2 / cols + eps);            out = x * inv * w
// layer: mu = sum_c x / cols; inv = 1 / sqrt(sum_c (x - mu)^2 / cols + eps); out = (x - mu) * inv * w + b
// Mirrors ops/norm.cpp's cpu_norm_rows.
#include "kernels/device_utils.h"
#include "kernels/norm.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void norm_kernel(bool layer, const T* x, const T* w, const T* b, T* out, int64_t cols, double eps) {
  using C = acc_t<T>;
  const T* xr = x + blockIdx.x * cols;
  T* yr = out + blockIdx.x * cols;
  C mu = 0;
  if (layer) {
    C s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += load(xr[c]);
    mu = block_sum<C>(s) / C(cols);
  }
  C sq = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    C v = load(xr[c]) - mu;
    sq += v * v;
  }
  const C inv = C(1) / sqrt(block_sum<C>(sq) / C(cols) + C(eps));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    C y = (load(xr[c]) - mu) * inv * load(w[c]);
    if (layer) y += load(b[c]);
    yr[c] = store<T>(y);
  }
}

void launch(bool layer, ElemType type, const void* x, const void* w, const void* b, void* out, int64_t rows,
            int64_t cols, double eps) {
  if (rows == 0 || cols == 0) return;
  const unsigned grid = blocks_per_row(rows, "norm kernel: more than 2^31 - 1 rows");
  visit_floats(type, "norm kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    norm_kernel<T><<<grid, kThreads, 0, launch_stream()>>>(
        layer, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<T*>(out),
        cols, eps);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rms_norm_rows(ElemType type, const void* x, const void* w, void* out, int64_t rows, int64_t cols, double eps) {
  launch(false, type, x, w, nullptr, out, rows, cols, eps);
}

void layer_norm_rows(ElemType type, const void* x, const void* w, const void* b, void* out, int64_t rows,
                     int64_t cols, double eps) {
  launch(true, type, x, w, b, out, rows, cols, eps);
}

}  // namespace wick::kernels
