// Index map: element e = r * row_len + k (grid-stride); its head starts at
// h0 = r * row_len + (k / head_dim) * head_dim and c = k % head_dim;
// out[e] = rope_element(c, positions[r], x[h0 + .]). Mirrors ops/rope.cpp's CPU loop.
#include "kernels/device_utils.h"
#include "kernels/rope.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void rope_kernel(const T* x, T* out, const int64_t* positions, RopeParams p, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / p.row_len, k = e % p.row_len;
    const T* head = x + r * p.row_len + (k / p.head_dim) * p.head_dim;
    out[e] = store<T>(rope_element<acc_t<T>>(p, k % p.head_dim, positions[r], [&](int64_t c) { return load(head[c]); }));
  }
}

}  // namespace

void rope(ElemType type, const void* x, void* out, const int64_t* positions, const RopeParams& p) {
  const int64_t n = p.rows * p.row_len;
  if (n == 0) return;
  visit_floats(type, "rope kernel: float types only", [&](auto zero) {
    using T = decltype(zero);
    rope_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                                                     positions, p, n);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
