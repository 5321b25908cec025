// Batched GEMM through cuBLAS (cublasGemmStridedBatchedEx), one lazily created handle per
// device, on the current stream (tensor/stream.h). Arguments come from to_cublas() in gemm_layout.h.
#pragma once
#include "kernels/common.h"
#include "kernels/gemm_layout.h"

namespace wick::kernels {

// C = op(A) * op(B) per cuBLAS's column-major convention with the pointers named as cuBLAS
// names them (A = row-major rhs base, B = row-major lhs base, C = output base), alpha 1,
// beta 0. F32 (f32 compute), F16/BF16 (f32 compute), F64. `device` is the CUDA device that
// holds A, B and C: it becomes current (cudaSetDevice only when it is not already) and its
// handle is used. The handle lookup takes no lock after the device's first GEMM on a thread.
// Throws wick::Error on any failure (arguments are checked before any CUDA call).
void gemm(ElemType type, int device, const CublasGemm& args, const void* A, const void* B, void* C);

}  // namespace wick::kernels

namespace wick::detail {
[[noreturn]] void throw_cublas_error(int status, const char* expr, const char* file, int line);
}

// Throws wick::Error C02 with the status name, the expression and file:line when cuBLAS fails.
#define WICK_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                 \
    auto wick_st_ = (expr);                                                            \
    if (wick_st_ != 0)                                                                 \
      ::wick::detail::throw_cublas_error(static_cast<int>(wick_st_), #expr, __FILE__, __LINE__); \
  } while (0)
