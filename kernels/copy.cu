// Index maps (n elements, grid-stride):
//   copy_strided: dst[view_offset(dv, i)] = src[view_offset(sv, i)]   (bytes of one element)
//   cast:         dst[i] = convert(src[view_offset(sv, i)])          (runtime type switch both sides)
#include "kernels/copy.h"
#include "kernels/device_utils.h"
#include "tensor/convert.h"  // saturating_cast: float -> integer as on the CPU

namespace wick::kernels {

namespace {

template <class U>
__global__ void copy_kernel(const U* src, StridedView sv, U* dst, StridedView dv, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[view_offset(dv, i)] = src[view_offset(sv, i)];
}

__device__ bool is_int(ElemType t) {
  return t == ElemType::U8 || t == ElemType::U32 || t == ElemType::I16 || t == ElemType::I32 || t == ElemType::I64;
}

__device__ int64_t load_int(const void* p, ElemType t, int64_t o) {
  switch (t) {
    case ElemType::U8: return static_cast<const uint8_t*>(p)[o];
    case ElemType::U32: return static_cast<const uint32_t*>(p)[o];
    case ElemType::I16: return static_cast<const int16_t*>(p)[o];
    case ElemType::I32: return static_cast<const int32_t*>(p)[o];
    default: return static_cast<const int64_t*>(p)[o];
  }
}

__device__ double load_f64(const void* p, ElemType t, int64_t o) {
  switch (t) {
    case ElemType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[o]);
    case ElemType::F16: return __half2float(static_cast<const __half*>(p)[o]);
    case ElemType::F32: return static_cast<const float*>(p)[o];
    case ElemType::F64: return static_cast<const double*>(p)[o];
    default: return static_cast<double>(load_int(p, t, o));
  }
}

__device__ void store_int(void* p, ElemType t, int64_t o, int64_t v) {
  switch (t) {
    case ElemType::U8: static_cast<uint8_t*>(p)[o] = static_cast<uint8_t>(v); break;
    case ElemType::U32: static_cast<uint32_t*>(p)[o] = static_cast<uint32_t>(v); break;
    case ElemType::I16: static_cast<int16_t*>(p)[o] = static_cast<int16_t>(v); break;
    case ElemType::I32: static_cast<int32_t*>(p)[o] = static_cast<int32_t>(v); break;
    default: static_cast<int64_t*>(p)[o] = v; break;
  }
}

__device__ void store_f64(void* p, ElemType t, int64_t o, double v) {
  switch (t) {
    case ElemType::BF16: static_cast<__nv_bfloat16*>(p)[o] = __double2bfloat16(v); break;
    case ElemType::F16: static_cast<__half*>(p)[o] = __double2half(v); break;
    case ElemType::F32: static_cast<float*>(p)[o] = static_cast<float>(v); break;
    case ElemType::F64: static_cast<double*>(p)[o] = v; break;
    case ElemType::U8: static_cast<uint8_t*>(p)[o] = saturating_cast<uint8_t>(v); break;
    case ElemType::U32: static_cast<uint32_t*>(p)[o] = saturating_cast<uint32_t>(v); break;
    case ElemType::I16: static_cast<int16_t*>(p)[o] = saturating_cast<int16_t>(v); break;
    case ElemType::I32: static_cast<int32_t*>(p)[o] = saturating_cast<int32_t>(v); break;
    default: static_cast<int64_t*>(p)[o] = saturating_cast<int64_t>(v); break;
  }
}

__global__ void cast_kernel(ElemType from, const void* src, StridedView sv, ElemType to, void* dst, int64_t n) {
  const bool ints = is_int(from) && is_int(to);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = view_offset(sv, i);
    if (ints) store_int(dst, to, i, load_int(src, from, o));
    else store_f64(dst, to, i, load_f64(src, from, o));
  }
}

}  // namespace

void copy_strided(size_t elem_size, const void* src, const StridedView& sv, void* dst, const StridedView& dv,
                  int64_t n) {
  if (n == 0) return;
  if (sv.contiguous && dv.contiguous) {
    WICK_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * elem_size, cudaMemcpyDeviceToDevice,
                                    launch_stream()));
    return;
  }
  const bool known = visit_elem_bytes(elem_size, [&](auto zero) {
    using U = decltype(zero);
    copy_kernel<U><<<blocks_for(n), kThreads, 0, launch_stream()>>>(static_cast<const U*>(src), sv,
                                                                     static_cast<U*>(dst), dv, n);
  });
  if (!known) throw_error("C07", "copy kernel: element size must be 1, 2, 4 or 8, got " + std::to_string(elem_size));
  WICK_CUDA_CHECK(cudaGetLastError());
}

void cast(ElemType from, const void* src, const StridedView& sv, ElemType to, void* dst, int64_t n) {
  if (n == 0) return;
  cast_kernel<<<blocks_for(n), kThreads, 0, launch_stream()>>>(from, src, sv, to, dst, n);
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
