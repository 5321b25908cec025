// Index maps (n = output elements, grid-stride):
//   binary:  out[i] = op(l[view_offset(lv, i)], r[view_offset(rv, i)])
//   compare: out[i] = op(l[...], r[...]) ? 1 : 0   (uint8)
//   where:   out[i] = c[view_offset(cv, i)] ? a[view_offset(av, i)] : b[view_offset(bv, i)]
// Broadcast inputs arrive as views with stride 0 on broadcast dims. The formulas are
// kernels/binary_ops.h, shared with the CPU loop in ops/binary.cpp.
#include "kernels/binary.h"
#include "kernels/binary_ops.h"
#include "kernels/device_utils.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void binary_kernel(BinaryOp op, const T* l, StridedView lv, const T* r, StridedView rv, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<T>(apply_binary<acc_t<T>>(op, load(l[view_offset(lv, i)]), load(r[view_offset(rv, i)])));
}

template <class T>
__global__ void compare_kernel(CmpOp op, const T* l, StridedView lv, const T* r, StridedView rv, uint8_t* out,
                               int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = apply_compare<acc_t<T>>(op, load(l[view_offset(lv, i)]), load(r[view_offset(rv, i)])) ? 1 : 0;
}

template <class T>
__global__ void where_kernel(const uint8_t* c, StridedView cv, const T* a, StridedView av, const T* b, StridedView bv,
                             T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = c[view_offset(cv, i)] ? a[view_offset(av, i)] : b[view_offset(bv, i)];
}

}  // namespace

void binary(BinaryOp op, ElemType type, const void* l, const StridedView& lv, const void* r, const StridedView& rv,
            void* out, int64_t n) {
  if (n == 0) return;
  visit_all(type, [&](auto zero) {
    using T = decltype(zero);
    binary_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(op, static_cast<const T*>(l), lv,
                                                                       static_cast<const T*>(r), rv,
                                                                       static_cast<T*>(out), n);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

void compare(CmpOp op, ElemType type, const void* l, const StridedView& lv, const void* r, const StridedView& rv,
             uint8_t* out, int64_t n) {
  if (n == 0) return;
  visit_all(type, [&](auto zero) {
    using T = decltype(zero);
    compare_kernel<T><<<blocks_for(n), kThreads, 0, launch_stream()>>>(op, static_cast<const T*>(l), lv,
                                                                        static_cast<const T*>(r), rv, out, n);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

void where(size_t elem_size, const uint8_t* c, const StridedView& cv, const void* a, const StridedView& av,
           const void* b, const StridedView& bv, void* out, int64_t n) {
  if (n == 0) return;
  const bool known = visit_elem_bytes(elem_size, [&](auto zero) {
    using U = decltype(zero);
    where_kernel<U><<<blocks_for(n), kThreads, 0, launch_stream()>>>(c, cv, static_cast<const U*>(a), av,
                                                                      static_cast<const U*>(b), bv,
                                                                      static_cast<U*>(out), n);
  });
  if (!known) throw_error("C07", "where kernel: element size must be 1, 2, 4 or 8, got " + std::to_string(elem_size));
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
