// Index maps, one thread per index element e (grid-stride), c = unravel(e, iv.dims):
//   gather:      out[e] = x[sum_k (k == dim ? idx[e] : c[k]) * xv.stride[k]]
//   scatter_add: dst[sum_k (k == dim ? idx[e] : c[k]) * dv.stride[k]] += src[sum_k c[k] * sv.stride[k]]
// ops/gather.cpp's CPU loops walk the same coordinates.
#include "kernels/device_utils.h"
#include "kernels/gather.h"

namespace wick::kernels {

namespace {

// Offsets of e's coordinates in a (with coordinate dim replaced by `at`) and in b.
__device__ __forceinline__ void coord_offsets(const StridedView& iv, int64_t e, int dim, int64_t at,
                                              const int64_t* a_stride, const int64_t* b_stride, int64_t& a,
                                              int64_t& b) {
  a = 0;
  b = 0;
  for (int k = iv.rank - 1; k >= 0; --k) {
    const int64_t c = e % iv.dims[k];
    e /= iv.dims[k];
    a += (k == dim ? at : c) * a_stride[k];
    if (b_stride) b += c * b_stride[k];
  }
}

int64_t count(const StridedView& iv) {
  int64_t n = 1;
  for (int k = 0; k < iv.rank; ++k) n *= iv.dims[k];
  return n;
}

template <class U>
__global__ void gather_kernel(const U* x, StridedView xv, const int64_t* idx, StridedView iv, int dim, U* out,
                              int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a, b;
    coord_offsets(iv, e, dim, idx[e], xv.stride, nullptr, a, b);
    out[e] = x[a];
  }
}

template <class T>
__global__ void scatter_add_kernel(T* dst, StridedView dv, const int64_t* idx, StridedView iv, int dim, const T* src,
                                   StridedView sv, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a, b;
    coord_offsets(iv, e, dim, idx[e], dv.stride, sv.stride, a, b);
    atomicAdd(dst + a, src[b]);
  }
}

}  // namespace

void gather(size_t elem_size, const void* x, const StridedView& xv, const int64_t* idx, const StridedView& iv, int dim,
            void* out) {
  const int64_t n = count(iv);
  if (n == 0) return;
  const bool known = visit_elem_bytes(elem_size, [&](auto zero) {
    using U = decltype(zero);
    gather_kernel<U><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<const U*>(x), xv, idx, iv, dim,
                                                                       static_cast<U*>(out), n);
  });
  if (!known) throw_error("C07", "gather kernel: element size must be 1, 2, 4 or 8, got " + std::to_string(elem_size));
  WICK_CUDA_CHECK(cudaGetLastError());
}

void scatter_add(ElemType type, void* dst, const StridedView& dv, const int64_t* idx, const StridedView& iv, int dim,
                 const void* src, const StridedView& sv) {
  const int64_t n = count(iv);
  if (n == 0) return;
  if (type == ElemType::F32)
    scatter_add_kernel<float><<<blocks_for(n), kThreads, 0, launch_stream()>>>(
        static_cast<float*>(dst), dv, idx, iv, dim, static_cast<const float*>(src), sv, n);
  else if (type == ElemType::F64)
    scatter_add_kernel<double><<<blocks_for(n), kThreads, 0, launch_stream()>>>(
        static_cast<double*>(dst), dv, idx, iv, dim, static_cast<const double*>(src), sv, n);
  else
    throw_error("C16", "scatter_add kernel: F32 or F64 only, got " + elem_type_name(type));
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
