// WICK_CUDA_CHECK: turns a failed CUDA runtime call into wick::Error naming the call and its
// file:line. Plain C++ with no includes, so kernels/*.cu and kernels/common.h can use it
// without pulling in tensor/error.h. Internal: not an installed header.
#pragma once

namespace wick::detail {
// Throws wick::Error C01, "CUDA error <code> (<name>) in <expr> at <file>:<line>"; tensor/storage.cpp.
[[noreturn]] void throw_cuda_error(int code, const char* expr, const char* file, int line);
}  // namespace wick::detail

// expr: any CUDA runtime call returning cudaError_t (0 is cudaSuccess).
#define WICK_CUDA_CHECK(expr)                                                          \
  do {                                                                                 \
    auto wick_err_ = (expr);                                                           \
    if (wick_err_ != 0) ::wick::detail::throw_cuda_error(static_cast<int>(wick_err_), \
                                                         #expr, __FILE__, __LINE__);   \
  } while (0)
