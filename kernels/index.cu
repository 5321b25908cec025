// Index maps over the output / source element e = (o * n_idx + j) * inner + i, grid-stride:
//   index_select: out[e] = x[(o * dim + idx[j]) * inner + i]
//   index_add:    dst[(o * dim + idx[j]) * inner + i] += src[e]   (atomicAdd)
// idx is int64, checked here (kernels/index.h).
#include "kernels/device_fault.cuh"
#include "kernels/device_utils.h"
#include "kernels/index.h"

namespace wick::kernels {

namespace {

template <class U>
__global__ void select_kernel(const U* x, int64_t dim, int64_t inner, const int64_t* idx, int64_t n_idx, U* out,
                              int64_t n, const IndexCheck check) {
  const int64_t start = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = start; e < n; e += step) {
    const int64_t i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
    const int64_t k = idx[j];
    out[e] = k >= 0 && k < dim ? x[(o * dim + k) * inner + i] : U(0);
  }
  for (int64_t j = start; j < n_idx; j += step) {
    const int64_t k = idx[j];
    const bool bad = k < 0 || k >= dim;
    // one lane per warp records: the lowest bad lane holds the smallest position j
    const unsigned bad_lanes = __ballot_sync(__activemask(), bad);
    if (!bad || static_cast<unsigned>(__ffs(bad_lanes) - 1) != (threadIdx.x % 32)) continue;
    int64_t v[16];
    for (int c = 0; c < 16; ++c) v[c] = check.values[c];
    v[0] = k;
    record_fault(check.sink, FaultKind::Index, static_cast<uint64_t>(j), v, check.n);
  }
}

template <class T>
__global__ void add_kernel(T* dst, int64_t dim, int64_t inner, const int64_t* idx, int64_t n_idx, const T* src,
                           int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, j = (e / inner) % n_idx, o = e / (inner * n_idx);
    const int64_t k = idx[j];
    if (k >= 0 && k < dim) atomicAdd(dst + (o * dim + k) * inner + i, src[e]);
  }
}

}  // namespace

void index_select(size_t elem_size, const void* x, int64_t outer, int64_t dim, int64_t inner, const int64_t* idx,
                  int64_t n_idx, void* out, const IndexCheck& check) {
  const int64_t n = outer * n_idx * inner;
  if (n_idx == 0) return;
  const bool known = visit_elem_bytes(elem_size, [&](auto zero) {
    using U = decltype(zero);
    select_kernel<U><<<blocks_for(n > n_idx ? n : n_idx), kThreads, 0, launch_stream()>>>(
        static_cast<const U*>(x), dim, inner, idx, n_idx, static_cast<U*>(out), n, check);
  });
  if (!known) throw_error("C07", "index_select kernel: element size must be 1, 2, 4 or 8, got " + std::to_string(elem_size));
  WICK_CUDA_CHECK(cudaGetLastError());
}

void index_add(ElemType type, void* dst, int64_t outer, int64_t dim, int64_t inner, const int64_t* idx, int64_t n_idx,
               const void* src) {
  const int64_t n = outer * n_idx * inner;
  if (n == 0) return;
  if (type == ElemType::F32)
    add_kernel<float><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<float*>(dst), dim, inner, idx,
                                                                        n_idx, static_cast<const float*>(src), n);
  else if (type == ElemType::F64)
    add_kernel<double><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<double*>(dst), dim, inner, idx,
                                                                         n_idx, static_cast<const double*>(src), n);
  else
    throw_error("C08", "index_add kernel: F32 or F64 only, got " + elem_type_name(type));
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
