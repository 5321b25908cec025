// Index map: one thread per line (o, i), o < outer, i < inner; it walks j = 0..n-1 (or back)
// over x[(o * n + j) * inner + i] keeping the running sum. Mirrors ops/scan.cpp's cpu_cumsum.
#include <type_traits>

#include "kernels/device_utils.h"
#include "kernels/scan.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void cumsum_kernel(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  using A = std::conditional_t<std::is_integral_v<T>, unsigned long long, acc_t<T>>;  // integers wrap
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < outer * inner;
       line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = line / inner, i = line % inner;
    const int64_t base = o * n * inner + i;
    A s = 0;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t j = reverse ? n - 1 - t : t;
      s += static_cast<A>(load(x[base + j * inner]));
      out[base + j * inner] = store<T>(static_cast<acc_t<T>>(s));
    }
  }
}

}  // namespace

void cumsum(ElemType type, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  const int64_t lines = outer * inner;
  if (lines == 0 || n == 0) return;
  visit_all(type, [&](auto zero) {
    using T = decltype(zero);
    cumsum_kernel<T><<<blocks_for(lines), kThreads, 0, launch_stream()>>>(static_cast<const T*>(x),
                                                                           static_cast<T*>(out), outer, n, inner,
                                                                           reverse);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
