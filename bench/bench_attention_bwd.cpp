// The attention backward through the public op, as training code runs it: the forward once
// (recorded by autograd), then the backward pass alone (autograd::grad with the graph
// retained), timed with a device wait after each pass; median of `reps`.
//   bench_attention_bwd [--json FILE] [--reps N] [--only AB] [--filter TEXT]
// Workloads (bf16), the same as bench/bwd_peers.py runs on torch:
//   B  fixed length: 16k tokens per batch (batch = 16384 / S), S = 1k, 4k, 16k, d 64 / 128,
//      heads = 2048 / d, causal and not (flash_attn on (batch, S, heads, d) tensors)
//   A  varlen: flash_bench's 32 sequences of U[128, 4096] tokens, d128 h16 and d64 h32,
//      causal and not (flash_attn_varlen)
// FLOPs: backward = 2.5 x forward, forward = 4 * d * heads * visible (query, key) pairs
// (causal: S (S + 1) / 2 per sequence), the count torch's and FlashAttention's benchmarks use.
// CUDA when a GPU is present, else CPU (a small case only: the host backward is slow).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "wick.h"

namespace {

using namespace wick;
FILE* g_json = nullptr;
int g_reps = 10;
std::string g_filter;  // run only the workloads whose name contains it

bool wanted(const std::string& name) { return name.find(g_filter) != std::string::npos; }

void emit(const std::string& name, double ms, double tflops) {
  char line[256];
  std::snprintf(line, sizeof line, "{\"impl\": \"wick\", \"name\": \"%s\", \"ms\": %.4f, \"tflops\": %.2f}", name.c_str(),
                ms, tflops);
  std::printf("%s\n", line);
  if (g_json) std::fprintf(g_json, "%s\n", line);
}

double pairs(const std::vector<uint32_t>& lens, bool causal) {
  double n = 0;
  for (uint32_t l : lens) n += causal ? 0.5 * l * (l + 1.0) : double(l) * l;
  return n;
}

// Median backward time of out = f(q, k, v) with q, k, v requiring grad.
template <class F>
double backward_ms(const Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, F&& f) {
  Tensor qg = q.detach(), kg = k.detach(), vg = v.detach();
  qg.requires_grad(true), kg.requires_grad(true), vg.requires_grad(true);
  const Tensor out = f(qg, kg, vg);
  static Tensor seeds;  // the gradient of out, drawn once per element count
  if (!seeds.defined() || seeds.elem_count() != out.elem_count())
    seeds = Tensor::randn(Shape{out.elem_count()}, out.dtype(), dev, 9);
  const Tensor seed = seeds.reshape(out.shape());
  autograd::BackwardOptions opt;
  opt.retain_graph = true;
  opt.keep_intermediate = false;
  return 1e3 * bench::median_seconds(g_reps, [&] {
           autograd::GradStore g = autograd::grad(out, seed, opt);
           synchronize(dev);
         });
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = "AB";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) g_json = std::fopen(argv[++i], "w");
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
  }
  const bool cuda = Device::cuda_available();
  const Device dev = cuda ? Device::cuda(0) : Device::cpu();
  if (!cuda) {  // one small case: the CPU backward is the host reference
    const Tensor q = Tensor::randn({1, 256, 4, 64}, DType::BF16, dev, 1), k = Tensor::randn({1, 256, 4, 64}, DType::BF16, dev, 2),
                 v = Tensor::randn({1, 256, 4, 64}, DType::BF16, dev, 3);
    const double ms = backward_ms(dev, q, k, v, [](auto& a, auto& b, auto& c) { return flash_attn(a, b, c, 0.125f, true); });
    emit("cpu_S256_d64_causal", ms, 2.5 * 4.0 * 64 * 4 * pairs({256}, true) / ms / 1e9);
    return 0;
  }
  if (only.find('B') != std::string::npos) {
    // Every B workload has 16384 x 2048 elements per tensor: drawn once (on the host, the
    // slow part of setting up), viewed in each shape.
    const Tensor q_all = Tensor::randn({16384, 2048}, DType::BF16, dev, 1);
    const Tensor k_all = Tensor::randn({16384, 2048}, DType::BF16, dev, 2);
    const Tensor v_all = Tensor::randn({16384, 2048}, DType::BF16, dev, 3);
    for (uint32_t S : {1024u, 4096u, 16384u})
      for (size_t d : {64, 128})
        for (bool causal : {false, true}) {
          const size_t h = 2048 / d, B = 16384 / S;
          const std::string name = "B_S" + std::to_string(S) + "_d" + std::to_string(d) + (causal ? "_causal" : "");
          if (!wanted(name)) continue;
          const Tensor q = q_all.reshape(Shape{B, S, h, d});
          const Tensor k = k_all.reshape(Shape{B, S, h, d});
          const Tensor v = v_all.reshape(Shape{B, S, h, d});
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          const double ms = backward_ms(dev, q, k, v, [&](auto& a, auto& b, auto& c) { return flash_attn(a, b, c, scale, causal); });
          const double flop = 2.5 * 4.0 * d * h * pairs(std::vector<uint32_t>(B, S), causal);
          emit(name, ms, flop / ms / 1e9);
        }
  }
  if (only.find('A') != std::string::npos) {
    const std::vector<uint32_t> lens = bench::varlen_lengths();
    std::vector<uint32_t> cu{0};
    for (uint32_t l : lens) cu.push_back(cu.back() + l);
    const size_t total = cu.back(), max_len = *std::max_element(lens.begin(), lens.end());
    const Tensor cut = Tensor::from_vec(cu, Shape{cu.size()}, dev);
    const Tensor q_all = Tensor::randn({total, 2048}, DType::BF16, dev, 4);  // h * d = 2048 in both
    const Tensor k_all = Tensor::randn({total, 2048}, DType::BF16, dev, 5);
    const Tensor v_all = Tensor::randn({total, 2048}, DType::BF16, dev, 6);
    for (auto [d, h] : {std::pair<size_t, size_t>{128, 16}, {64, 32}})
      for (bool causal : {false, true}) {
        const std::string name = "A_varlen_d" + std::to_string(d) + "_h" + std::to_string(h) + (causal ? "_causal" : "");
        if (!wanted(name)) continue;
        const Tensor q = q_all.reshape(Shape{total, h, d});
        const Tensor k = k_all.reshape(Shape{total, h, d});
        const Tensor v = v_all.reshape(Shape{total, h, d});
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const double ms = backward_ms(dev, q, k, v, [&](auto& a, auto& b, auto& c) {
          return flash_attn_varlen(a, b, c, cut, cut, max_len, max_len, scale, causal);
        });
        const double flop = 2.5 * 4.0 * d * h * pairs(lens, causal);
        emit(name, ms, flop / ms / 1e9);
      }
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
