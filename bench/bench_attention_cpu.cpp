// CPU varlen flash-attention throughput beside Eigen's f32 GEMM rate, measured in the same
// run with the same thread count (one independent GEMM per thread, as attention runs one
// work item per thread).
//   bench_attention_cpu [reps=3] [threads=pool size] [path=best: generic|avx2|avx512|avx512_bf16|amx]
// Workload: 8 sequences of 512..2048 tokens (q and k alike), 8 heads (8 kv heads), head
// size 64 and 128, bf16 in, f32 accumulate; full and causal masks.
// FLOPs count the two matmuls over the keys each row sees: 4 * visible_pairs * head_size.
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ops/attention/cpu.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"
#include "ops/attention/plan.h"
#include "bench/bench_util.h"
#include "wick.h"

namespace {

using wick::bench::median_seconds;

// Eigen's f32 GEMM rate: `threads` independent n x n products at once.
double eigen_gemm_gflops(int threads, int reps) {
  constexpr long n = 1024;
  std::vector<Eigen::MatrixXf> a(threads), b(threads), c(threads);
  for (int t = 0; t < threads; ++t) {
    a[t] = Eigen::MatrixXf::Random(n, n);
    b[t] = Eigen::MatrixXf::Random(n, n);
    c[t].resize(n, n);
  }
  double s = median_seconds(reps, [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { c[t].noalias() = a[t] * b[t]; });
    for (auto& th : pool) th.join();
  });
  return 2.0 * n * n * n * threads / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace wick;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  const int threads = argc > 2 ? std::atoi(argv[2]) : cpu::max_threads();
  cpu::Isa isa = cpu::best_isa();
  if (argc > 3) {
    bool known = false;
    for (int i = 0; i <= static_cast<int>(cpu::Isa::Amx); ++i)
      if (std::string(argv[3]) == cpu::isa_name(static_cast<cpu::Isa>(i))) isa = static_cast<cpu::Isa>(i), known = true;
    if (!known || !cpu::isa_supported(isa)) {
      std::fprintf(stderr, "path %s: unknown or not supported by this CPU (best: %s)\n", argv[3],
                   cpu::isa_name(cpu::best_isa()));
      return 2;
    }
  }
  const std::vector<uint32_t> lens{512, 731, 951, 1170, 1390, 1609, 1829, 2048};
  std::vector<uint32_t> cu{0};
  for (uint32_t l : lens) cu.push_back(cu.back() + l);
  const size_t total = cu.back(), heads = 8;

  const double gemm = eigen_gemm_gflops(threads, reps);
  std::printf("cpu attention, %d threads, path %s, median of %d; Eigen f32 GEMM (1024^3 per thread): %.2f GFLOP/s\n",
              threads, cpu::isa_name(isa), reps, gemm);
  std::printf("  %-4s %-7s %10s %10s %8s\n", "d", "mask", "ms", "GFLOP/s", "of GEMM");
  for (size_t d : {64, 128}) {
    Tensor q = Tensor::randn({total, heads, d}, DType::BF16, Device::cpu(), 1);
    Tensor k = Tensor::randn({total, heads, d}, DType::BF16, Device::cpu(), 2);
    Tensor v = Tensor::randn({total, heads, d}, DType::BF16, Device::cpu(), 3);
    for (bool causal : {false, true}) {
      FlashAttnVarLen op;
      op.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
      op.max_seqlen_q = op.max_seqlen_k = 2048;
      op.seqlens_q = op.seqlens_k = Tensor::from_vec(cu, Shape{cu.size()}, Device::cpu());
      if (causal) op.window_size_right = 0;
      attention::AttnPlan plan = attention::plan_varlen(op, q, k, v);
      Tensor out = Tensor::empty(plan.out_shape, plan.dtype, plan.device);
      Tensor lse = Tensor::empty(plan.lse_shape, DType::F32, plan.device);
      attention::bind_outputs(plan, out, lse);
      double pairs = 0;
      for (uint32_t l : lens) pairs += causal ? 0.5 * l * (l + 1.0) : double(l) * l;
      const double flop = 4.0 * pairs * heads * d;
      const double s = median_seconds(reps, [&] { attention::cpu_flash_fwd(plan.params, threads, isa); });
      const double gf = flop / s * 1e-9;
      std::printf("  %-4zu %-7s %10.1f %10.2f %7.1f%%\n", d, causal ? "causal" : "full", s * 1e3, gf,
                  100.0 * gf / gemm);
    }
  }
  return 0;
}
