// Forward + backward of varlen flash-attention through the public op, as training code
// calls it (autograd: out.backward(seed)), on CUDA when a GPU is present, else on the CPU.
//   bench_attention_bwd [reps=5] [seqs=8] [len=1024] [heads=16] [head_size=128]
// Causal, bf16. FLOPs: forward 4 * visible_pairs * head_size per head, backward 2.5x that
// (the usual count: five matmuls against the forward's two).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_util.h"
#include "wick.h"

int main(int argc, char** argv) {
  using namespace wick;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const size_t seqs = argc > 2 ? std::atoi(argv[2]) : 8, len = argc > 3 ? std::atoi(argv[3]) : 1024;
  const size_t heads = argc > 4 ? std::atoi(argv[4]) : 16, d = argc > 5 ? std::atoi(argv[5]) : 128;
  const Device dev = Device::cuda_available() ? Device::cuda(0) : Device::cpu();
  std::vector<uint32_t> cu{0};
  for (size_t b = 0; b < seqs; ++b) cu.push_back(cu.back() + static_cast<uint32_t>(len));
  const size_t n = cu.back();
  FlashAttnVarLen op;
  op.max_seqlen_q = op.max_seqlen_k = len;
  op.seqlens_q = op.seqlens_k = Tensor::from_vec(cu, Shape{cu.size()}, dev);
  op.causal = true;
  Tensor q = Tensor::randn({n, heads, d}, DType::BF16, dev, 501).requires_grad(true);
  Tensor k = Tensor::randn({n, heads, d}, DType::BF16, dev, 502).requires_grad(true);
  Tensor v = Tensor::randn({n, heads, d}, DType::BF16, dev, 503).requires_grad(true);
  const Tensor seed = Tensor::randn({n, heads, d}, DType::BF16, dev, 504);
  auto wait = [](const Tensor& t) { (void)t.narrow(0, 0, 1).to_f64_vec(); };  // waits for the device
  auto step = [&] {
    autograd::zero_grad({q, k, v});
    Tensor out = op.forward(q, k, v);
    out.backward(seed);
    wait(v.grad());
  };
  const double fwd_s = bench::median_seconds(reps, [&] {
    autograd::NoGradGuard no_grad;
    wait(op.forward(q, k, v));
  });
  const double both_s = bench::median_seconds(reps, step);
  const double pairs = 0.5 * double(len) * (len + 1.0) * seqs;
  const double fwd_flop = 4.0 * pairs * heads * d;
  std::printf("flash-attn varlen fwd+bwd on %s: %zu x %zu tokens, %zu heads, d %zu, bf16, causal, median of %d\n",
              to_string(dev).c_str(), seqs, len, heads, d, reps);
  std::printf("  forward %.3f ms (%.1f TFLOP/s); forward + backward %.3f ms; backward alone ~%.3f ms (%.1f TFLOP/s)\n",
              fwd_s * 1e3, fwd_flop / fwd_s * 1e-12, both_s * 1e3, (both_s - fwd_s) * 1e3,
              2.5 * fwd_flop / std::max(both_s - fwd_s, 1e-9) * 1e-12);
  return 0;
}
