// The CPU GEMM behind wick::matmul: C = A * B for one (m x k) by (k x n) product, C row-major
// and contiguous, A and B row- or column-major with a leading dimension (so transposed and
// row-strided operands are read in place). oneDNN's f32 GEMM where the build has it (below),
// else Eigen's GEMM, compiled once per CPU code path
// (ops/cpu/isa.h: baseline, AVX2 + FMA, AVX-512) and picked at run time, so a portable build
// multiplies at the machine's width too. A large product splits into blocks over the
// shared CPU pool; a small one (or one inside a parallel region) runs on the calling thread.
#pragma once
#include <cstdint>

#include "ops/cpu/isa.h"

namespace wick::cpu {

template <class T>
struct GemmOperand {
  const T* data;
  int64_t ld;      // elements between rows (row-major) or columns (column-major)
  bool row_major;
};

// T is float or double. Runs the best path of this CPU, or `isa` when given (a path the CPU
// lacks falls back to its best; Avx512Bf16 and Amx multiply f32 as Avx512 does). In a build
// with oneDNN (WICK_WITH_ONEDNN, Debian's libdnnl-dev), the first form hands large f32
// products to oneDNN's GEMM (measured 1.26x Eigen's on a 2-core AMD VM and equal on a
// 16-core Xeon host, bench/RESULTS.md); the second always runs Eigen's copy for `isa` (the
// tests of each path).
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c);
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, Isa isa);

}  // namespace wick::cpu
