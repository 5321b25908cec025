// Tensor::full/ones on CUDA: the value is passed as a kernel argument, so filling a tensor
// needs no host buffer and no synchronous copy (a cudaMemcpy from pageable memory would wait
// for the device on every call, e.g. for every backward() seed).
#include <cstring>

#include "kernels/device_utils.h"
#include "kernels/fill.h"

namespace wick::kernels {

namespace {

template <class U>
__global__ void fill_kernel(U* dst, U v, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = v;
}

}  // namespace

void fill(size_t elem_size, void* dst, const void* value, int64_t n) {
  if (n == 0) return;
  const bool known = visit_elem_bytes(elem_size, [&](auto zero) {
    using U = decltype(zero);
    U v;
    std::memcpy(&v, value, sizeof(U));
    fill_kernel<U><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<U*>(dst), v, n);
  });
  if (!known) throw_error("C07", "fill kernel: element size must be 1, 2, 4 or 8, got " + std::to_string(elem_size));
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
