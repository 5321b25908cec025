// Index map: element i of the output (grid-stride, i < n) is a function of (seed, i) alone;
// dropout reads x[view_offset(xv, i)]. The formulas are kernels/random_ops.h's.
#include "kernels/device_utils.h"
#include "kernels/random.h"
#include "kernels/random_ops.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, int bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(uniform_at<acc_t<T>>(seed, static_cast<uint64_t>(i), bits));
}

template <class T>
__global__ void randint_kernel(T* out, int64_t n, uint64_t seed, int64_t low, uint64_t range) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(static_cast<acc_t<T>>(randint_at(seed, static_cast<uint64_t>(i), low, range)));
}

template <class T>
__global__ void dropout_kernel(const T* x, StridedView xv, T* out, int64_t n, uint64_t seed, uint64_t threshold,
                               acc_t<T> scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(dropout_keep(seed, static_cast<uint64_t>(i), threshold) ? load(x[view_offset(xv, i)]) * scale
                                                                                : acc_t<T>(0));
}

}  // namespace

void fill_uniform(ElemType type, void* out, int64_t n, uint64_t seed) {
  if (n == 0) return;
  visit_floats(type, "rand kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    uniform_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<T*>(out), n, seed,
                                                                        uniform_bits(type));
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

void fill_randint(ElemType type, void* out, int64_t n, uint64_t seed, int64_t low, uint64_t range) {
  if (n == 0) return;
  visit_all(type, [&](auto zero) {
    using T = decltype(zero);
    randint_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<T*>(out), n, seed, low, range);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

void dropout(ElemType type, const void* x, const StridedView& xv, void* out, int64_t n, uint64_t seed,
             uint64_t threshold, double scale) {
  if (n == 0) return;
  visit_floats(type, "dropout kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    dropout_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(
        static_cast<const T*>(x), xv, static_cast<T*>(out), n, seed, threshold, static_cast<acc_t<T>>(scale));
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
