// The CPU GEMM behind wick::matmul: C = A * B for one (m x k) by (k x n) product, C row-major
// and contiguous, A and B row- or column-major with a leading dimension (so transposed and
// row-strided operands are read in place). Large f32 products go to a library's threaded
// GEMM where the build has one (MKL, oneDNN; gemm_library() below); everything else runs
// Eigen's GEMM, compiled once per CPU code path (ops/cpu/isa.h: baseline, AVX2 + FMA,
// AVX-512) and picked at run time, so a portable build multiplies at the machine's width
// too. A large product splits into blocks over the shared CPU pool; a small one (or one
// inside a parallel region) runs on the calling thread.
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

// Who runs the large f32 products: Eigen's blocks over the pool, oneDNN's GEMM (Debian's
// libdnnl-dev) or MKL's (libmkl-dev, non-free), each library threaded over the pool's OpenMP
// runtime.
enum class GemmLibrary : int { Eigen = 0, Onednn = 1, Mkl = 2 };

// "eigen", "onednn", "mkl".
const char* gemm_library_name(GemmLibrary lib);

// The library of this build and CPU, asked once: MKL on Intel CPUs, oneDNN on others (at 16
// threads on a 16-core Xeon, MKL's medians were 0.87-0.91x torch.matmul's and oneDNN's
// 0.66x; on a 2-core AMD machine MKL ran at half oneDNN's rate; bench/RESULTS.md), Eigen in
// a build with neither.
// The environment variable WICK_CPU_GEMM, set to one of the names above, picks another one
// the build has.
GemmLibrary gemm_library();

// T is float or double. Runs a large f32 product on gemm_library(), anything else on the
// best path of this CPU (the second form: on `isa`, a path the CPU lacks falling back to its
// best; Avx512Bf16 and Amx multiply f32 as Avx512 does). The second form always runs Eigen's
// copy for `isa` (the tests of each path).
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c);
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, Isa isa);

// Runs the f32 product on `lib` whatever its size (the tests of each library); false when
// this build does not have `lib` (Eigen: always true, on the best path).
bool gemm_on(GemmLibrary lib, int64_t m, int64_t n, int64_t k, GemmOperand<float> a, GemmOperand<float> b,
             float* c);

}  // namespace wick::cpu
