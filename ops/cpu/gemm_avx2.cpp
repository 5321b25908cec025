// Eigen's GEMM compiled for the avx2 code path (CMakeLists.txt gives this file its
// instruction-set flags); the body is ops/cpu/gemm_path.inc.
#define Eigen wick_eigen_avx2
#define WICK_GEMM_PATH avx2
#include "ops/cpu/gemm_path.inc"
