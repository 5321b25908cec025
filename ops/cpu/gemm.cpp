#include "ops/cpu/gemm.h"

#include <Eigen/Core>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

// WICK_WITH_MKL, WICK_WITH_ONEDNN: set by CMakeLists.txt when it finds the library
#ifndef WICK_WITH_MKL
#define WICK_WITH_MKL 0
#endif
#ifndef WICK_WITH_ONEDNN
#define WICK_WITH_ONEDNN 0
#endif
#if WICK_WITH_MKL
#include <mkl_cblas.h>
#include <mkl_service.h>
#endif
#if WICK_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"

namespace wick::cpu {

namespace baseline {
#include "ops/cpu/gemm_impl.inc"
}  // namespace baseline

// WICK_GEMM_PATHS (set by CMakeLists.txt unless the build targets this machine's CPU):
// the AVX2 and AVX-512 copies of the GEMM exist and are picked at run time.
#if WICK_GEMM_PATHS
#define WICK_GEMM_PATH(isa)                                                                                       \
  namespace isa {                                                                                                 \
  void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool a_row, const float* b,        \
                int64_t ldb, bool b_row, float* c, int64_t ldc);                                                  \
  void gemm_f64(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, bool a_row, const double* b,      \
                int64_t ldb, bool b_row, double* c, int64_t ldc);                                                 \
  }
WICK_GEMM_PATH(avx2)
WICK_GEMM_PATH(avx512)
#undef WICK_GEMM_PATH
#endif

namespace {

// One thread's product on one path: C (m x n, row stride ldc) = A * B.
template <class T>
void gemm_one([[maybe_unused]] Isa isa, int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c,
              int64_t ldc) {
#if WICK_GEMM_PATHS
  if constexpr (std::is_same_v<T, float>) {
    if (isa >= Isa::Avx512)
      return avx512::gemm_f32(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c, ldc);
    if (isa >= Isa::Avx2) return avx2::gemm_f32(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c, ldc);
  } else {
    if (isa >= Isa::Avx512)
      return avx512::gemm_f64(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c, ldc);
    if (isa >= Isa::Avx2) return avx2::gemm_f64(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c, ldc);
  }
#endif
  baseline::gemm_any<T>(m, n, k, a.data, a.ld, a.row_major, b.data, b.ld, b.row_major, c, ldc);
}

// Operand rows [r0, ...) of A and columns [c0, ...) of B, wherever they are stored.
template <class T>
GemmOperand<T> rows_from(GemmOperand<T> a, int64_t r0) {
  a.data += a.row_major ? r0 * a.ld : r0;
  return a;
}
template <class T>
GemmOperand<T> cols_from(GemmOperand<T> b, int64_t c0) {
  b.data += b.row_major ? c0 : c0 * b.ld;
  return b;
}

constexpr int64_t kMinMacsPerThread = int64_t(1) << 22;  // below this a thread is not worth a fork

#if WICK_WITH_MKL
// MKL's f32 GEMM, threaded over the same OpenMP runtime as wick's pool (its GNU threading
// layer) with the pool's size; inside a parallel region it runs on the calling thread. Its
// instruction set is capped once at this process's best path, so WICK_CPU_ISA caps it too.
void mkl_sgemm(int64_t m, int64_t n, int64_t k, GemmOperand<float> a, GemmOperand<float> b, float* c) {
  static const bool capped = [] {
    const Isa isa = best_isa();
    if (isa < Isa::Avx2) return mkl_enable_instructions(MKL_ENABLE_SSE4_2) == 1;
    return mkl_enable_instructions(isa >= Isa::Avx512 ? MKL_ENABLE_AVX512 : MKL_ENABLE_AVX2) == 1;
  }();
  (void)capped;  // a refused cap (MKL already in use) leaves MKL's own choice
  mkl_set_num_threads_local(max_threads());
  // op(A) is m x k: a row-major A as is, a column-major one as the transpose of its storage
  cblas_sgemm(CblasRowMajor, a.row_major ? CblasNoTrans : CblasTrans, b.row_major ? CblasNoTrans : CblasTrans, m, n,
              k, 1.0f, a.data, a.ld, b.data, b.ld, 0.0f, c, n);
}
#endif

#if WICK_WITH_ONEDNN
// oneDNN's f32 GEMM (row-major, threaded over the same OpenMP runtime as wick's pool; inside
// a parallel region it runs on the calling thread). Its instruction set is capped once at
// this process's best path, so WICK_CPU_ISA caps it too. False when oneDNN refuses the
// arguments.
bool onednn_sgemm(int64_t m, int64_t n, int64_t k, GemmOperand<float> a, GemmOperand<float> b, float* c) {
  static const bool capped = [isa = best_isa()] {
    dnnl_cpu_isa_t cap = dnnl_cpu_isa_sse41;
    if (isa == Isa::Avx2) cap = dnnl_cpu_isa_avx2;
    if (isa == Isa::Avx512) cap = dnnl_cpu_isa_avx512_core;
    if (isa == Isa::Avx512Bf16) cap = dnnl_cpu_isa_avx512_core_bf16;
    if (isa == Isa::Amx) cap = dnnl_cpu_isa_avx512_core_amx;
    return dnnl_set_max_cpu_isa(cap) == dnnl_success;
  }();
  (void)capped;  // a refused cap (oneDNN already in use elsewhere) leaves oneDNN's own choice
  // op(A) is m x k: a row-major A as is, a column-major one as the transpose of its storage
  return dnnl_sgemm(a.row_major ? 'N' : 'T', b.row_major ? 'N' : 'T', m, n, k, 1.0f, a.data, a.ld, b.data, b.ld,
                    0.0f, c, n) == dnnl_success;
}
#endif

bool built_with(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::Eigen: return true;
    case GemmLibrary::Onednn: return WICK_WITH_ONEDNN;
    case GemmLibrary::Mkl: return WICK_WITH_MKL;
  }
  return false;
}

GemmLibrary pick_library() {
  if (const char* e = std::getenv("WICK_CPU_GEMM"); e != nullptr && *e != 0)
    for (GemmLibrary lib : {GemmLibrary::Eigen, GemmLibrary::Onednn, GemmLibrary::Mkl})
      if (std::strcmp(e, gemm_library_name(lib)) == 0 && built_with(lib)) return lib;
  if (built_with(GemmLibrary::Mkl) && (intel_cpu() || !built_with(GemmLibrary::Onednn))) return GemmLibrary::Mkl;
  if (built_with(GemmLibrary::Onednn)) return GemmLibrary::Onednn;
  return GemmLibrary::Eigen;
}

}  // namespace

const char* gemm_library_name(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::Eigen: return "eigen";
    case GemmLibrary::Onednn: return "onednn";
    case GemmLibrary::Mkl: return "mkl";
  }
  return "?";
}

GemmLibrary gemm_library() {
  static const GemmLibrary lib = pick_library();
  return lib;
}

bool gemm_on(GemmLibrary lib, int64_t m, int64_t n, int64_t k, GemmOperand<float> a, GemmOperand<float> b,
             float* c) {
  switch (lib) {
    case GemmLibrary::Eigen: gemm<float>(m, n, k, a, b, c, best_isa()); return true;
#if WICK_WITH_ONEDNN
    case GemmLibrary::Onednn: return onednn_sgemm(m, n, k, a, b, c);
#endif
#if WICK_WITH_MKL
    case GemmLibrary::Mkl: mkl_sgemm(m, n, k, a, b, c); return true;
#endif
    default: return false;
  }
}

// A library's threads pay off from twice a thread's minimum product, on a CPU with AVX2.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    const bool large = double(m) * double(n) * double(k) >= 2.0 * double(kMinMacsPerThread);
    if (large && best_isa() >= Isa::Avx2 && gemm_library() != GemmLibrary::Eigen &&
        gemm_on(gemm_library(), m, n, k, a, b, c))
      return;
  }
  gemm<T>(m, n, k, a, b, c, best_isa());
}

// A large product splits C into a grid of tm x tn blocks, one per pool thread, each an
// independent single-threaded GEMM (the grid with the shortest block sides, so each thread
// packs the least of A and B); the blocks' edges fall on multiples of 16.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, Isa isa) {
  if (isa > best_isa()) isa = best_isa();
  const double macs = double(m) * double(n) * double(k);
  const int threads = static_cast<int>(std::min<double>(max_threads(), macs / double(kMinMacsPerThread)));
  if (threads <= 1) return gemm_one<T>(isa, m, n, k, a, b, c, n);
  int tm = 1, tn = threads;
  double best = 1e300;
  for (int i = 1; i <= threads; ++i) {
    const int j = threads / i;
    if (i * j != threads) continue;
    const double cost = double(m) / i + double(n) / j;
    if (cost < best) best = cost, tm = i, tn = j;
  }
  auto edge = [](int64_t len, int parts, int64_t i) { return std::min(len, (len * i / parts + 15) / 16 * 16); };
  parallel_for(int64_t(tm) * tn, 1, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t bi = blk / tn, bj = blk % tn;
      const int64_t r0 = edge(m, tm, bi), r1 = edge(m, tm, bi + 1), c0 = edge(n, tn, bj), c1 = edge(n, tn, bj + 1);
      if (r0 < r1 && c0 < c1)
        gemm_one<T>(isa, r1 - r0, c1 - c0, k, rows_from(a, r0), cols_from(b, c0), c + r0 * n + c0, n);
    }
  });
}

template void gemm<float>(int64_t, int64_t, int64_t, GemmOperand<float>, GemmOperand<float>, float*);
template void gemm<double>(int64_t, int64_t, int64_t, GemmOperand<double>, GemmOperand<double>, double*);
template void gemm<float>(int64_t, int64_t, int64_t, GemmOperand<float>, GemmOperand<float>, float*, Isa);
template void gemm<double>(int64_t, int64_t, int64_t, GemmOperand<double>, GemmOperand<double>, double*, Isa);

}  // namespace wick::cpu
