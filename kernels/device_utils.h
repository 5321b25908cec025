// Device-side helpers shared by kernels/*.cu (include from .cu files only): strided index
// math, the f16/bf16 <-> f32 compute-type rule, launch sizes and the element-type switch.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common.h"
#include "tensor/stream.h"

namespace wick::kernels {

constexpr int kThreads = 256;  // threads per block for elementwise and row kernels

// The stream every launch goes on: the current stream of the current device (tensor/stream.h).
inline cudaStream_t launch_stream() { return static_cast<cudaStream_t>(current_stream_handle()); }

// Storage offset (elements) of logical element i of a view: unravel i over dims, row-major.
__device__ __forceinline__ int64_t view_offset(const StridedView& v, int64_t i) {
  if (v.contiguous) return i;
  int64_t off = 0;
  for (int k = v.rank - 1; k >= 0; --k) {
    const int64_t d = v.dims[k];
    off += (i % d) * v.stride[k];
    i /= d;
  }
  return off;
}

// Compute type: f32 for half types, the type itself otherwise.
template <class T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };
template <class T> using acc_t = typename Acc<T>::type;

template <class T> __device__ __forceinline__ acc_t<T> load(T v) { return static_cast<acc_t<T>>(v); }
template <> __device__ __forceinline__ float load<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float load<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T store(acc_t<T> v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half store<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

// Grid size for a one-block-per-row kernel: rows itself, which must fit gridDim.x
// (2^31 - 1); otherwise throws wick::Error C09 (too_many + ", got {rows}").
inline unsigned blocks_per_row(int64_t rows, const char* too_many) {
  constexpr int64_t kMaxGridX = 2147483647LL;
  if (rows > kMaxGridX) throw_error("C09", std::string(too_many) + ", got " + std::to_string(rows));
  return static_cast<unsigned>(rows);
}

// Calls f(T{}) with T the device type of t (every ElemType).
template <class F>
void visit_all(ElemType t, F&& f) {
  switch (t) {
    case ElemType::U8: f(uint8_t{}); return;
    case ElemType::U32: f(uint32_t{}); return;
    case ElemType::I16: f(int16_t{}); return;
    case ElemType::I32: f(int32_t{}); return;
    case ElemType::I64: f(int64_t{}); return;
    case ElemType::BF16: f(__nv_bfloat16{}); return;
    case ElemType::F16: f(__half{}); return;
    case ElemType::F32: f(float{}); return;
    case ElemType::F64: f(double{}); return;
  }
  throw_error("C05", "CUDA kernel: unknown element type, got " + elem_type_name(t));
}

// Calls f(T{}) for the float types, throws C06 (what + ", got {type}") for the rest (ops/
// refuses those first).
template <class F>
void visit_floats(ElemType t, const char* what, F&& f) {
  switch (t) {
    case ElemType::BF16: f(__nv_bfloat16{}); return;
    case ElemType::F16: f(__half{}); return;
    case ElemType::F32: f(float{}); return;
    case ElemType::F64: f(double{}); return;
    default: throw_error("C06", std::string(what) + ", got " + elem_type_name(t));
  }
}

// Block-wide sum of v (every thread gets the result). blockDim.x == kThreads.
template <class C>
__device__ C block_sum(C v) {
  __shared__ C part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  C t = 0;
  for (int w = 0; w < kThreads / 32; ++w) t += part[w];
  return t;
}

// Block-wide max of v (every thread gets the result).
template <class C>
__device__ C block_max(C v) {
  __shared__ C part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    C u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  C t = part[0];
  for (int w = 1; w < kThreads / 32; ++w) t = part[w] > t ? part[w] : t;
  return t;
}

}  // namespace wick::kernels
