// Eigen's GEMM compiled for the avx2 code path (CMakeLists.txt gives this file its
// instruction-set flags). Eigen is renamed here, so none of its inline code built with
// these flags can stand in for the baseline build's copy; ops/cpu/gemm.cpp calls these
// functions only on CPUs that have the instructions.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#define Eigen wick_eigen_avx2
#include <Eigen/Core>

namespace wick::cpu::avx2 {

#include "ops/cpu/gemm_impl.inc"

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool a_row, const float* b,
              int64_t ldb, bool b_row, float* c, int64_t ldc) {
  gemm_any<float>(m, n, k, a, lda, a_row, b, ldb, b_row, c, ldc);
}
void gemm_f64(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, bool a_row, const double* b,
              int64_t ldb, bool b_row, double* c, int64_t ldc) {
  gemm_any<double>(m, n, k, a, lda, a_row, b, ldb, b_row, c, ldc);
}

}  // namespace wick::cpu::avx2
