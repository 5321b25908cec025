// 1024 x 1024 f32 matmul: wick::matmul on the CPU against Eigen's own GEMM
// (MatrixXf product) with the same thread count, in the same run; median of N timed runs
// after a warm-up. With a GPU, also wick's cuBLAS path (f32 and bf16).
//   bench_matmul [n=1024] [reps=15]
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/bench_util.h"
#include "wick.h"

namespace {

using wick::bench::median_seconds;

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  const double flop = 2.0 * double(n) * double(n) * double(n);
  using namespace wick;

  Tensor a = Tensor::randn({size_t(n), size_t(n)}, DType::F32, Device::cpu(), 1);
  Tensor b = Tensor::randn({size_t(n), size_t(n)}, DType::F32, Device::cpu(), 2);
  Tensor c;
  double t_wick = median_seconds(reps, [&] { c = matmul(a, b); });

  // Eigen's own GEMM on the same values (column-major, its default).
  Eigen::MatrixXf ea(n, n), eb(n, n), ec(n, n);
  auto av = a.to_vec<float>(), bv = b.to_vec<float>();
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) { ea(i, j) = av[i * n + j]; eb(i, j) = bv[i * n + j]; }
  double t_eigen = median_seconds(reps, [&] { ec.noalias() = ea * eb; });

  // Same answer (both are f32 GEMMs of the same data; only summation order may differ).
  auto cv = c.to_vec<float>();
  double max_diff = 0;
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) max_diff = std::max(max_diff, double(std::abs(cv[i * n + j] - ec(i, j))));

  std::printf("cpu f32 %ldx%ld, Eigen threads %d, median of %d\n", n, n, Eigen::nbThreads(), reps);
  std::printf("  wick::matmul    %8.3f ms  %7.2f GFLOP/s\n", t_wick * 1e3, flop / t_wick * 1e-9);
  std::printf("  Eigen GEMM      %8.3f ms  %7.2f GFLOP/s\n", t_eigen * 1e3, flop / t_eigen * 1e-9);
  std::printf("  wick / Eigen    %8.1f %%   (max |diff| %.2e)\n", 100.0 * t_eigen / t_wick, max_diff);

  if (Device::cuda_available()) {
    for (DType dt : {DType::F32, DType::BF16}) {
      Tensor ga = a.to_dtype(dt).to_device(Device::cuda(0)), gb = b.to_dtype(dt).to_device(Device::cuda(0));
      Tensor gc;
      double t = median_seconds(reps, [&] {
        gc = matmul(ga, gb);
        synchronize(Device::cuda(0));
      });
      std::printf("cuda %s %ldx%ld (cuBLAS, f32 compute): %8.3f ms  %8.1f GFLOP/s\n", dtype_name(dt), n, n, t * 1e3,
                  flop / t * 1e-9);
    }
  }
  return 0;
}
