#include "ops/cpu/gemm.h"

#include <Eigen/Core>

#include <type_traits>

#include "ops/cpu/isa.h"

namespace wick::cpu {

namespace baseline {
#include "ops/cpu/gemm_impl.inc"
}  // namespace baseline

#define WICK_GEMM_PATH(isa)                                                                                       \
  namespace isa {                                                                                                 \
  void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool a_row, const float* b,        \
                int64_t ldb, bool b_row, float* c);                                                               \
  void gemm_f64(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, bool a_row, const double* b,      \
                int64_t ldb, bool b_row, double* c);                                                              \
  }
WICK_GEMM_PATH(avx2)
WICK_GEMM_PATH(avx512)
#undef WICK_GEMM_PATH

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c) {
  gemm<T>(m, n, k, a, b, c, best_isa());
}

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, Isa isa) {
  if (isa > best_isa()) isa = best_isa();
  if constexpr (std::is_same_v<T, float>) {
    if (isa >= Isa::Avx512) return avx512::gemm_f32(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c);
    if (isa >= Isa::Avx2) return avx2::gemm_f32(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c);
  } else {
    if (isa >= Isa::Avx512) return avx512::gemm_f64(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c);
    if (isa >= Isa::Avx2) return avx2::gemm_f64(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c);
  }
  baseline::gemm_any<T>(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c);
}

template void gemm<float>(int64_t, int64_t, int64_t, GemmOperand<float>, GemmOperand<float>, float*);
template void gemm<double>(int64_t, int64_t, int64_t, GemmOperand<double>, GemmOperand<double>, double*);
template void gemm<float>(int64_t, int64_t, int64_t, GemmOperand<float>, GemmOperand<float>, float*, Isa);
template void gemm<double>(int64_t, int64_t, int64_t, GemmOperand<double>, GemmOperand<double>, double*, Isa);

}  // namespace wick::cpu
