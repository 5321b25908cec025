// The attention op as a user calls it: wall-clock time per call of the public functions,
// over back-to-back calls with one synchronize at the end (allocation, checks, launches and
// any host round trip included), beside the kernel-level numbers of bench/flash_bench.
//   bench_attention_op [--json FILE] [--iters N] [--filter NAME_SUBSTRING]
// Decode (group D of flash_bench): flash_attn_varlen_paged_windowed, one query per
//   sequence, GQA 32/8, d128, page 64, shuffled block table, causal; (B, ctx) =
//   (1, 512), (1, 32768), (8, 4096), (64, 4096); rate = K+V bytes read / time. Beside them
//   (group H): head size 256, and 8 queries per sequence (32 rows of GQA 4) at d128, at
//   (1, 32768) and (64, 4096).
// Prefill (group A): flash_attn_varlen over 32 sequences of U[128, 4096] tokens, d128 h16,
//   causal; TFLOP/s with flash_bench's FLOP count.
// Batched prefill (group B at d128 and d256): flash_attn over 16k tokens in sequences of 1k,
//   4k and 16k, 2048 / d heads, full and causal (a batch of sequences of one length, the
//   form whose causal tiles the Hopper kernel pairs long with short).
// Score modifiers (group G at d128): flash_attn_alibi_windowed_softcap over 4 sequences of
//   4096 tokens, 16 heads, softcap 30 or ALiBi, full and causal.
// CUDA only (a CPU run has no host round trip to measure).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "wick.h"

namespace {

using namespace wick;
FILE* g_json = nullptr;
int g_iters = 200;

// The host's share of the last us_per_call: mean time per call to issue the calls (the loop
// before its synchronize), median over the same rounds. When it is close to us_per_call the
// host is the limit; when it is well below, the GPU is.
double g_issue_us = 0;

void emit(const std::string& name, double us, const char* unit, double value) {
  char line[320];
  std::snprintf(line, sizeof line, "{\"name\": \"%s\", \"us_per_call\": %.2f, \"issue_us\": %.2f, \"%s\": %.3f}",
                name.c_str(), us, g_issue_us, unit, value);
  std::printf("%s\n", line);
  if (g_json) std::fprintf(g_json, "%s\n", line);
}

// Median over 5 rounds of the mean wall time per call of `iters` back-to-back calls (the
// --iters count by default; the longer prefill and 32-layer step calls take kLongIters).
// Before them, calls for half a second: the GPU has idled while the host filled the
// inputs, and on a GPU that runs power-bound a short burst after idle time runs at a
// higher clock than a sustained load (up to 15% faster measured on the H200 at 4k tokens).
constexpr int kLongIters = 20;
template <class F>
double us_per_call(const Device& dev, F&& call, int iters = g_iters) {
  using us = std::chrono::duration<double, std::micro>;
  const auto warm = std::chrono::steady_clock::now();
  for (int i = 0; i < 5 || std::chrono::steady_clock::now() - warm < std::chrono::milliseconds(500); ++i) {
    call();
    synchronize(dev);
  }
  std::vector<double> rounds, issue;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    synchronize(dev);
    rounds.push_back(us(std::chrono::steady_clock::now() - t0).count() / iters);
    issue.push_back(us(t1 - t0).count() / iters);
  }
  std::sort(rounds.begin(), rounds.end());
  std::sort(issue.begin(), issue.end());
  g_issue_us = issue[issue.size() / 2];
  return rounds[rounds.size() / 2];
}

// Paged decode, GQA 32/8, page 64, shuffled block table; d channels, nq queries per sequence
// (causal: the last sees every key; nq > 1 as when speculative decoding checks drafts).
std::string decode_name(size_t B, size_t ctx, size_t d = 128, size_t nq = 1) {
  return "op_decode_B" + std::to_string(B) + "_ctx" + std::to_string(ctx) + (d != 128 ? "_d" + std::to_string(d) : "") +
         (nq > 1 ? "_sq" + std::to_string(nq) : "");
}
void decode(const Device& dev, size_t B, size_t ctx, size_t d = 128, size_t nq = 1) {
  const size_t h = 32, hk = 8, page = 64;
  const size_t pages = (ctx + page - 1) / page, blocks = B * pages;
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(7));
  std::vector<uint32_t> cu_q(B + 1), cu_k(B + 1);
  for (size_t b = 0; b <= B; ++b) cu_q[b] = static_cast<uint32_t>(b * nq), cu_k[b] = static_cast<uint32_t>(b * ctx);
  const Tensor q = Tensor::randn({B * nq, h, d}, DType::BF16, dev, 1);
  const Tensor k = Tensor::randn({blocks, page, hk, d}, DType::BF16, dev, 2);
  const Tensor v = Tensor::randn({blocks, page, hk, d}, DType::BF16, dev, 3);
  const Tensor bt = Tensor::from_vec(table, Shape{B, pages}, dev);
  const Tensor sq = Tensor::from_vec(cu_q, Shape{B + 1}, dev), sk = Tensor::from_vec(cu_k, Shape{B + 1}, dev);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const double us = us_per_call(dev, [&] {
    flash_attn_varlen_paged_windowed(q, k, v, sq, sk, bt, nullptr, nq, ctx, scale, std::nullopt, 0, page, std::nullopt);
  });
  const double bytes = 2.0 * B * ctx * hk * d * 2;
  emit(decode_name(B, ctx, d, nq), us, "tbps", bytes / (us * 1e-6) / 1e12);
}

void prefill(const Device& dev) {
  const size_t h = 16, d = 128;
  const std::vector<uint32_t> lens = bench::varlen_lengths();
  std::vector<uint32_t> cu{0};
  for (uint32_t l : lens) cu.push_back(cu.back() + l);
  const size_t total = cu.back(), max_len = *std::max_element(lens.begin(), lens.end());
  const Tensor q = Tensor::randn({total, h, d}, DType::BF16, dev, 4);
  const Tensor k = Tensor::randn({total, h, d}, DType::BF16, dev, 5);
  const Tensor v = Tensor::randn({total, h, d}, DType::BF16, dev, 6);
  const Tensor cut = Tensor::from_vec(cu, Shape{cu.size()}, dev);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const double us =
      us_per_call(dev, [&] { flash_attn_varlen(q, k, v, cut, cut, max_len, max_len, scale, true); }, kLongIters);
  double pairs = 0;
  for (uint32_t l : lens) pairs += 0.5 * l * (l + 1.0);
  emit("op_prefill_A_varlen_d128_h16_causal", us, "tflops", 4.0 * pairs * h * d / (us * 1e-6) / 1e12);
}

std::string batched_name(size_t S, size_t d, bool causal) {
  return "op_prefill_B_S" + std::to_string(S) + "_d" + std::to_string(d) + (causal ? "_causal" : "");
}

// The masks asked for (full, causal) on one set of tensors: the host fills them, which takes
// longer than the calls.
void prefill_batched(const Device& dev, size_t S, size_t d, bool full, bool causal) {
  const size_t h = 2048 / d, B = 16384 / S;
  const Tensor q = Tensor::randn({B, S, h, d}, DType::BF16, dev, 7);
  const Tensor k = Tensor::randn({B, S, h, d}, DType::BF16, dev, 8);
  const Tensor v = Tensor::randn({B, S, h, d}, DType::BF16, dev, 9);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (bool c : {false, true}) {
    if (!(c ? causal : full)) continue;
    const double us = us_per_call(dev, [&] { flash_attn(q, k, v, scale, c); }, kLongIters);
    const double pairs = static_cast<double>(B) * (c ? 0.5 * S * (S + 1.0) : static_cast<double>(S) * S);
    emit(batched_name(S, d, c), us, "tflops", 4.0 * pairs * h * d / (us * 1e-6) / 1e12);
  }
}

// Score modifiers through the public op (flash_bench group G at d128): flash_attn over 4
// sequences of 4096 tokens, 16 heads of 128, with softcap 30 (no ALiBi) or with ALiBi
// (bench::alibi_slopes), full and causal.
std::string modifier_name(const char* tag, bool causal) {
  return std::string("op_prefill_G_S4096_d128_") + tag + (causal ? "_causal" : "");
}
void prefill_modifiers(const Device& dev, const std::function<bool(const std::string&)>& want) {
  const size_t S = 4096, B = 4, h = 16, d = 128;
  const Tensor q = Tensor::randn({B, S, h, d}, DType::BF16, dev, 10);
  const Tensor k = Tensor::randn({B, S, h, d}, DType::BF16, dev, 11);
  const Tensor v = Tensor::randn({B, S, h, d}, DType::BF16, dev, 12);
  const Tensor slopes = Tensor::from_vec(bench::alibi_slopes(static_cast<int>(h)), Shape{h}, dev);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (const char* tag : {"softcap30", "alibi"})
    for (bool c : {false, true}) {
      if (!want(modifier_name(tag, c))) continue;
      const bool alibi = tag[0] == 'a';
      const double us = us_per_call(dev, [&] {
        flash_attn_alibi_windowed_softcap(q, k, v, alibi ? &slopes : nullptr, scale, std::nullopt,
                                          c ? std::optional<size_t>{0} : std::nullopt, alibi ? 0.f : 30.f);
      }, kLongIters);
      const double pairs = static_cast<double>(B) * (c ? 0.5 * S * (S + 1.0) : static_cast<double>(S) * S);
      emit(modifier_name(tag, c), us, "tflops", 4.0 * pairs * h * d / (us * 1e-6) / 1e12);
    }
}

// A decode step of 32 layers as a serving loop runs it: per layer, the new token's K/V into
// the paged cache (write_kv_slots) and paged attention through one plan_step op; issued call
// by call, then as one captured CUDA graph replayed (the same work). Beside them: the host's
// time to issue one step into an idle stream, and each half of the step alone, issued call
// by call and as a graph of its own.
void graph_step(const Device& dev, size_t B, size_t ctx) {
  constexpr int kLayers = 32;
  const size_t h = 32, hk = 8, d = 128, page = 64;
  const size_t blocks = B * ((ctx + 1 + page - 1) / page) + 8;
  PagedKvCache cache(blocks, page, hk, d, DType::BF16, dev);
  std::vector<uint64_t> ids;
  for (size_t b = 0; b < B; ++b) ids.push_back(b), cache.reserve(b, ctx);  // history slots (contents: zeros)
  std::vector<Tensor> kc{cache.k()}, vc{cache.v()}, k_new, v_new, q, out, lse;
  for (int l = 0; l < kLayers; ++l) {
    // layers 2 and up: device copies of layer 1's random caches (host-generated caches for
    // every layer took minutes at B = 8; a layer's values do not change its time)
    if (l > 0) {
      kc.push_back(l == 1 ? Tensor::randn(cache.k().shape(), DType::BF16, dev, 11) : kc[1].copy());
      vc.push_back(l == 1 ? Tensor::randn(cache.v().shape(), DType::BF16, dev, 51) : vc[1].copy());
    }
    k_new.push_back(Tensor::randn({B, hk, d}, DType::BF16, dev, 100 + l));
    v_new.push_back(Tensor::randn({B, hk, d}, DType::BF16, dev, 200 + l));
    q.push_back(Tensor::randn({B, h, d}, DType::BF16, dev, 300 + l));
    out.push_back(Tensor::empty({B, h, d}, DType::BF16, dev));
    lse.push_back(Tensor::empty({h, B}, DType::F32, dev));
  }
  std::vector<int64_t> s;
  for (uint64_t id : ids) s.push_back(cache.reserve(id, 1)[0]);
  const Tensor slots = Tensor::from_vec(s, Shape{B}, dev);
  FlashAttnVarLen op = plan_step(cache.step_layout(ids, std::vector<size_t>(B, 1)), dev);
  op.causal = true;
  auto step = [&] {
    for (int l = 0; l < kLayers; ++l) {
      write_kv_slots(kc[l], vc[l], k_new[l], v_new[l], slots);
      op.forward_into(q[l], kc[l], vc[l], out[l], lse[l]);
    }
  };
  const double eager = us_per_call(dev, step, kLongIters);
  const double eager_issue = g_issue_us;
  // The host's own cost of a step: issued into an idle stream (a full launch queue would
  // make the host wait, so the back-to-back issue time can hide it), median of 21.
  std::vector<double> host;
  for (int r = 0; r < 21; ++r) {
    synchronize(dev);
    const auto t0 = std::chrono::steady_clock::now();
    step();
    host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  synchronize(dev);
  std::sort(host.begin(), host.end());
  const double host_us = host[host.size() / 2];
  // The step's two halves alone, back to back: 32 K/V writes, 32 attention calls.
  const double writes = us_per_call(dev, [&] {
    for (int l = 0; l < kLayers; ++l) write_kv_slots(kc[l], vc[l], k_new[l], v_new[l], slots);
  }, kLongIters);
  const double writes_issue = g_issue_us;
  const double attn = us_per_call(dev, [&] {
    for (int l = 0; l < kLayers; ++l) op.forward_into(q[l], kc[l], vc[l], out[l], lse[l]);
  }, kLongIters);
  const double attn_issue = g_issue_us;
  CudaGraph graph(dev);
  graph.begin_capture();
  step();
  graph.end_capture();
  const double replay = us_per_call(dev, [&] { graph.replay(); }, kLongIters);
  const double replay_issue = g_issue_us;
  // Each half captured alone: what each kernel chain costs the GPU without the host.
  CudaGraph writes_graph(dev), attn_graph(dev);
  writes_graph.begin_capture();
  for (int l = 0; l < kLayers; ++l) write_kv_slots(kc[l], vc[l], k_new[l], v_new[l], slots);
  writes_graph.end_capture();
  attn_graph.begin_capture();
  for (int l = 0; l < kLayers; ++l) op.forward_into(q[l], kc[l], vc[l], out[l], lse[l]);
  attn_graph.end_capture();
  const double writes_replay = us_per_call(dev, [&] { writes_graph.replay(); }, kLongIters);
  const double writes_replay_issue = g_issue_us;
  const double attn_replay = us_per_call(dev, [&] { attn_graph.replay(); }, kLongIters);
  const double attn_replay_issue = g_issue_us;
  const std::string tag = "_B" + std::to_string(B) + "_ctx" + std::to_string(ctx);
  g_issue_us = eager_issue;
  emit("step32_eager" + tag, eager, "speedup", 1.0);
  g_issue_us = replay_issue;
  emit("step32_graph" + tag, replay, "speedup", eager / replay);
  g_issue_us = host_us;
  emit("step32_host" + tag, host_us, "of_eager", host_us / eager);
  g_issue_us = writes_issue;
  emit("step32_writes_only" + tag, writes, "of_eager", writes / eager);
  g_issue_us = attn_issue;
  emit("step32_attention_only" + tag, attn, "of_eager", attn / eager);
  g_issue_us = writes_replay_issue;
  emit("step32_graph_writes_only" + tag, writes_replay, "of_graph", writes_replay / replay);
  g_issue_us = attn_replay_issue;
  emit("step32_graph_attention_only" + tag, attn_replay, "of_graph", attn_replay / replay);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each result line survives a run cut short
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) g_json = std::fopen(argv[++i], "w");
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) g_iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
  }
  // runs only the cases whose name contains the filter (profiling one case)
  auto want = [&](const std::string& name) { return filter.empty() || name.find(filter) != std::string::npos; };
  if (!Device::cuda_available()) {
    std::printf("bench_attention_op: no CUDA device; this benchmark measures the CUDA call path\n");
    return 0;
  }
  const Device dev = Device::cuda(0);
  for (auto [B, ctx] : {std::pair<size_t, size_t>{1, 512}, {1, 32768}, {8, 4096}, {64, 4096}})
    if (want(decode_name(B, ctx))) decode(dev, B, ctx);
  // head size 256, and 8 queries per sequence (32 rows of GQA 4)
  for (auto [d, nq] : {std::pair<size_t, size_t>{256, 1}, {128, 8}})
    for (auto [B, ctx] : {std::pair<size_t, size_t>{1, 32768}, {64, 4096}})
      if (want(decode_name(B, ctx, d, nq))) decode(dev, B, ctx, d, nq);
  if (want("op_prefill_A_varlen_d128_h16_causal")) prefill(dev);
  for (size_t d : {128, 256})
    for (size_t S : {1024, 4096, 16384}) {
      const bool full = want(batched_name(S, d, false)), causal = want(batched_name(S, d, true));
      if (full || causal) prefill_batched(dev, S, d, full, causal);
    }
  bool modifiers = false;
  for (const char* tag : {"softcap30", "alibi"})
    for (bool c : {false, true}) modifiers = modifiers || want(modifier_name(tag, c));
  if (modifiers) prefill_modifiers(dev, want);
  for (auto [B, ctx] : {std::pair<size_t, size_t>{1, 512}, {8, 4096}, {16, 4096}}) {
    const std::string tag = "_B" + std::to_string(B) + "_ctx" + std::to_string(ctx);
    if (want("step32_eager" + tag) || want("step32_graph" + tag)) graph_step(dev, B, ctx);
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
