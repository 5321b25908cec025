#include "kernels/cublas_gemm.h"
#include "tensor/stream.h"

#include "tensor/error.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace wick::detail {

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
  const char* name = cublasGetStatusName(static_cast<cublasStatus_t>(status));
  throw Error("C02", std::string("cuBLAS error ") + std::to_string(status) + " (" + name + ") in " + expr +
                   " at " + file + ":" + std::to_string(line));
}

}  // namespace wick::detail

namespace wick::kernels {

namespace {

// One handle per (thread, device), created on first use and kept for the thread's life
// (destroying handles at exit races the CUDA runtime's own teardown). A handle is not shared
// between threads, so each GEMM can point its handle at the calling thread's current stream
// (tensor/stream.h) without a lock.
cublasHandle_t handle_for(int device) {
  thread_local std::vector<cublasHandle_t> cache;
  if (static_cast<size_t>(device) < cache.size() && cache[device]) return cache[device];
  // cublasCreate binds the handle to the current device; the caller made it current.
  cublasHandle_t h = nullptr;
  WICK_CUBLAS_CHECK(cublasCreate(&h));
  if (static_cast<size_t>(device) >= cache.size()) cache.resize(static_cast<size_t>(device) + 1, nullptr);
  cache[device] = h;
  return h;
}

// Makes `device` current with at most one cudaSetDevice: the op layer has normally made it
// current already (ops/matmul.cpp), and cudaGetDevice only reads the thread's state.
void make_current(int device) {
  int current = -1;
  WICK_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) WICK_CUDA_CHECK(cudaSetDevice(device));
}

}  // namespace

void gemm(ElemType type, int device, const CublasGemm& g, const void* A, const void* B, void* C) {
  if (device < 0) throw Error("C03", "cuBLAS: invalid device " + std::to_string(device));
  cudaDataType_t dt;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (type) {
    case ElemType::F32: dt = CUDA_R_32F; break;
    case ElemType::F16: dt = CUDA_R_16F; break;
    case ElemType::BF16: dt = CUDA_R_16BF; break;
    case ElemType::F64: dt = CUDA_R_64F; compute = CUBLAS_COMPUTE_64F; break;
    default: throw Error("C04", "cuBLAS gemm: F32, F64, F16 or BF16 only, got " + elem_type_name(type));
  }
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  make_current(device);
  cublasHandle_t h = handle_for(device);
  WICK_CUBLAS_CHECK(cublasSetStream(h, static_cast<cudaStream_t>(current_stream_handle())));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = type == ElemType::F64;
  // k == 0: cuBLAS with beta 0 writes zeros, which is the right empty sum.
  WICK_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, ta, tb, g.m, g.n, g.k, f64 ? static_cast<const void*>(&one_d) : &one_f, A, dt, g.lda, g.stride_a, B, dt,
      g.ldb, g.stride_b, f64 ? static_cast<const void*>(&zero_d) : &zero_f, C, dt, g.ldc, g.stride_c, g.batch,
      compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace wick::kernels
