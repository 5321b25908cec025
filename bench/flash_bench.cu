// flash_bench: times wick's CUDA flash-attention forward on the issue-4 workloads (bf16)
// with CUDA events: per config, warm-up runs, then the median of many timed runs, rotating
// among input sets whose total exceeds 3x the L2 cache. Prints one JSON object per line
// (and writes them to --json FILE): name, ms, tflops (prefill) or gbps (decode / copy).
//   A  varlen prefill: 32 sequences, lengths U[128, 4096] (fixed LCG seed, the same in
//      bench/flash_peers.py); d128 h16 and d64 h32; causal and not
//   B  fixed-length prefill, 16k tokens: seqlen 1k / 4k / 16k, d 64 / 128 / 256, h = 2048 / d
//   C  A through a paged K/V cache (page 64, shuffled block table)
//   D  paged decode: one query per sequence, GQA 32/8, d128, page 64, shuffled;
//      (B, ctx) = (64, 4096), (64, 16384), (128, 8192), (1, 32768); K+V bytes / time
//   E  the other head sizes of the Hopper kernels (only when named): 16k tokens, seqlen 1k, 4k
//      and 16k, d 96 / 192, 16 heads, causal and not
//   G  general logits (only when named): B's 4k-token configurations at d64, d128 and d256 with
//      softcap 30 and with ALiBi, and A at d128 with softcap 30, causal and not; D's
//      B64 ctx4096 and B1 ctx32768 with softcap 30
//   copy: a device-to-device copy of 2 GiB (read + write bytes / time), the bandwidth roof
//   P  D with head-major pages (only when named): the same cache bytes laid out as (blocks,
//      heads, page rows, d), so each head's page is one contiguous 16 KiB piece, as in the
//      (B, heads, ctx, d) K/V the cuDNN peer reads; rows of a head are page-stride apart in D
//   U  D on contiguous K/V (only when named): (B, heads, ctx, d), no block table, the
//      layout and call the cuDNN peer of D times
//   H  D's paged decode at head sizes 192 and 256, and at d128 with 4 and 8 queries per
//      sequence (16 and 32 rows of GQA 4; speculative decoding's check), causal (only when
//      named): B = 64 ctx 4096 and B = 1 ctx 32768
//   S  decode split-KV counts (tuning, only when named): B = 1, ctx 512 and 2048, the
//      launcher's count and forced counts 1, 2, 4, 8, 16; B = 1 ctx 32768, 8 to 64 splits,
//      and ctx 8192, 16384 and 65536 at the launcher's count;
//      B = 8 ctx 4096, 1 to 8 splits
//   L  the kernel ladder (docs/kernels.md): workload A at d128 h16 through each level, from
//      the lesson kernel to the library's tensor-core instance, each level's output compared
//      with the lesson kernel's on the same inputs (max_diff; a level off by more than 0.02
//      makes the program exit 1)
// FLOPs: 4 * d * h * (visible query-key pairs); causal counts sq * (sq + 1) / 2 pairs per
// sequence when sq == sk, the convention torch's and FlashAttention's benchmarks use.
// Options: --json FILE, --only GROUPS (e.g. "ABD", "copy"),
// --filter NAME_SUBSTRING. E, G, H, L and S run only when named.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <functional>

#include "bench/bench_util.h"
#include "kernels/flash/flash_fwd.h"
#include "kernels/flash/flash_launch.cuh"  // tile-shape variants (--variants), for tuning only

using wick::kernels::FlashDType;
using wick::kernels::FlashFwdParams;

#define CK(expr)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

FILE* g_json = nullptr;
bool g_check = false;      // compare each run's output with the lesson kernel's (group L)
double g_worst_diff = 0;   // largest such difference seen
// The launch under test: the library's dispatch, or a tile-shape variant (--variants).
std::function<void(const FlashFwdParams&)> g_launch = [](const FlashFwdParams& p) {
  wick::kernels::flash_fwd(p, nullptr);
};
std::string g_filter;  // run only configs whose name contains this (empty: all)
bool selected(const std::string& name) { return g_filter.empty() || name.find(g_filter) != std::string::npos; }

__global__ void fill_random(__nv_bfloat16* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) / static_cast<float>(1ull << 24);  // [0, 1)
    x[i] = __float2bfloat16(2.f * u - 1.f);
  }
}

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CK(cudaMalloc(&p, std::max<size_t>(bytes, 256))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

Dev* random_bf16(size_t n, uint64_t seed) {
  Dev* d = new Dev(n * 2);
  fill_random<<<1024, 256>>>(static_cast<__nv_bfloat16*>(d->p), n, seed);
  CK(cudaGetLastError());
  return d;
}

// The sequence lengths of workloads A and C: a 64-bit LCG, mirrored in flash_peers.py.
std::vector<int> varlen_lengths() {
  uint64_t x = 12345;
  std::vector<int> v;
  for (int i = 0; i < 32; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(128 + static_cast<int>((x >> 33) % (4096 - 128 + 1)));
  }
  return v;
}

int l2_bytes() {
  int dev = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  return l2;
}

__global__ void empty_kernel() {}

// Median milliseconds of fn(set) over rotating input sets.
template <class F>
double time_median(F&& fn, int sets) {
  for (int i = 0; i < 3; ++i) fn(i % sets);
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a));
  fn(0);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float first = 0;
  CK(cudaEventElapsedTime(&first, a, b));
  const int runs = std::clamp(static_cast<int>(400.0 / std::max(first, 0.01f)), 15, 200);
  std::vector<cudaEvent_t> ev(2 * runs);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int r = 0; r < runs; ++r) {
    CK(cudaEventRecord(ev[2 * r]));
    fn(r % sets);
    CK(cudaEventRecord(ev[2 * r + 1]));
  }
  CK(cudaDeviceSynchronize());
  std::vector<float> ms(runs);
  for (int r = 0; r < runs; ++r) CK(cudaEventElapsedTime(&ms[r], ev[2 * r], ev[2 * r + 1]));
  for (auto& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[runs / 2];
}

void emit(const std::string& name, double ms, const char* unit, double value, double max_diff = -1) {
  char line[512];
  int n = std::snprintf(line, sizeof line, "{\"impl\": \"wick\", \"name\": \"%s\", \"ms\": %.5f, \"%s\": %.2f",
                        name.c_str(), ms, unit, value);
  if (max_diff >= 0) n += std::snprintf(line + n, sizeof line - n, ", \"max_diff\": %.3g", max_diff);
  std::snprintf(line + n, sizeof line - n, "}");
  std::printf("%s\n", line);
  std::fflush(stdout);
  if (g_json) std::fprintf(g_json, "%s\n", line);
}

// One prefill configuration over varlen or batched inputs, paged or not.
struct Prefill {
  std::vector<int> lens;  // per sequence (q and k lengths equal)
  int h = 16, hk = 16, d = 128;
  bool causal = false, varlen = true;
  int page = 0;
  float softcap = 0.f;  // > 0: logits capped at +-softcap (tanh)
  bool alibi = false;   // ALiBi with bench::alibi_slopes
};

double pairs(const Prefill& w) {
  double s = 0;
  for (int L : w.lens) s += w.causal ? 0.5 * L * (L + 1.0) : double(L) * L;
  return s;
}

double run_prefill(const std::string& name, const Prefill& w) {
  if (!selected(name)) return 0;
  const int B = static_cast<int>(w.lens.size());
  std::vector<uint32_t> cu(B + 1, 0);
  for (int b = 0; b < B; ++b) cu[b + 1] = cu[b] + w.lens[b];
  const int64_t T = cu[B];
  const int max_len = *std::max_element(w.lens.begin(), w.lens.end());
  const size_t q_elems = size_t(T) * w.h * w.d;
  // paged: blocks for every sequence, shuffled
  std::vector<int32_t> table;
  int cols = 0;
  int64_t kv_rows = T;
  if (w.page > 0) {
    cols = (max_len + w.page - 1) / w.page;
    int64_t blocks = 0;
    for (int L : w.lens) blocks += (L + w.page - 1) / w.page;
    std::vector<int32_t> perm(blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(7));
    table.assign(size_t(B) * cols, 0);
    int64_t next = 0;
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < (w.lens[b] + w.page - 1) / w.page; ++j) table[b * cols + j] = perm[next++];
    kv_rows = blocks * w.page;
  }
  const size_t kv_elems = size_t(kv_rows) * w.hk * w.d;
  const size_t set_bytes = 2 * (2 * q_elems + 2 * kv_elems);
  const int sets = set_bytes >= 3ull * l2_bytes() ? 1 : int(std::min<size_t>(8, 3ull * l2_bytes() / set_bytes + 1));
  std::vector<Dev*> qs, ks, vs, os;
  for (int s = 0; s < sets; ++s) {
    qs.push_back(random_bf16(q_elems, 100 + s));
    ks.push_back(random_bf16(kv_elems, 200 + s));
    vs.push_back(random_bf16(kv_elems, 300 + s));
    os.push_back(new Dev(q_elems * 2));
  }
  Dev cu_d(cu.size() * 4), lse(size_t(T) * w.h * 4), table_d(table.size() * 4 + 4), slopes_d(size_t(w.h) * 4);
  if (w.alibi) {
    const std::vector<float> slopes = wick::bench::alibi_slopes(w.h);
    CK(cudaMemcpy(slopes_d.p, slopes.data(), slopes.size() * 4, cudaMemcpyHostToDevice));
  }
  CK(cudaMemcpy(cu_d.p, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  if (!table.empty()) CK(cudaMemcpy(table_d.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));

  FlashFwdParams p;
  p.dtype = FlashDType::BF16;
  p.batch = B;
  p.num_heads = w.h, p.num_heads_k = w.hk, p.head_size = w.d;
  p.total_q = T;
  p.softmax_scale = 1.f / std::sqrt(float(w.d));
  p.window_left = -1, p.window_right = w.causal ? 0 : -1;
  p.softcap = w.softcap;
  if (w.alibi) p.alibi_slopes = static_cast<const float*>(slopes_d.p);
  p.q_row_stride = p.o_row_stride = int64_t(w.h) * w.d;
  p.q_head_stride = p.o_head_stride = w.d;
  p.k_row_stride = p.v_row_stride = int64_t(w.hk) * w.d;
  p.k_head_stride = p.v_head_stride = w.d;
  p.lse = static_cast<float*>(lse.p);
  p.lse_head_stride = T;
  if (w.varlen) {
    p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const uint32_t*>(cu_d.p);
    p.max_seqlen_q = p.max_seqlen_k = max_len;
    if (w.page == 0) p.kv_rows = T;
  } else {
    p.seqlen_q = p.seqlen_k = p.max_seqlen_q = p.max_seqlen_k = max_len;
    p.q_batch_stride = p.o_batch_stride = int64_t(max_len) * p.q_row_stride;
    p.k_batch_stride = p.v_batch_stride = int64_t(max_len) * p.k_row_stride;
    p.lse_head_stride = max_len, p.lse_batch_stride = int64_t(w.h) * max_len;
  }
  if (w.page > 0) {
    p.block_table = static_cast<const int32_t*>(table_d.p);
    p.block_table_batch_stride = p.block_table_cols = cols;
    p.page_block_size = w.page;
    p.num_blocks = kv_rows / w.page;
    p.k_batch_stride = p.v_batch_stride = int64_t(w.page) * p.k_row_stride;
  }
  const double ms = time_median(
      [&](int s) {
        FlashFwdParams q = p;
        q.q = qs[s]->p, q.k = ks[s]->p, q.v = vs[s]->p, q.out = os[s]->p;
        g_launch(q);
      },
      sets);
  CK(cudaGetLastError());
  double max_diff = -1;
  if (g_check) {
    // The same inputs through the lesson kernel and through the launch under test.
    FlashFwdParams q = p;
    q.q = qs[0]->p, q.k = ks[0]->p, q.v = vs[0]->p;
    Dev ref(q_elems * 2);
    q.out = ref.p;
    wick::kernels::flash_fwd_naive(q, nullptr);
    q.out = os[0]->p;
    g_launch(q);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> a(q_elems), b(q_elems);
    CK(cudaMemcpy(a.data(), ref.p, q_elems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), os[0]->p, q_elems * 2, cudaMemcpyDeviceToHost));
    auto f32 = [](uint16_t x) {
      const uint32_t u = uint32_t(x) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    max_diff = 0;
    for (size_t i = 0; i < q_elems; ++i) {
      const double d = std::fabs(double(f32(a[i])) - double(f32(b[i])));
      max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
    }
    g_worst_diff = std::max(g_worst_diff, max_diff);
  }
  const double tflops = 4.0 * w.d * w.h * pairs(w) / (ms * 1e-3) / 1e12;
  emit(name, ms, "tflops", tflops, max_diff);
  for (auto* x : qs) delete x;
  for (auto* x : ks) delete x;
  for (auto* x : vs) delete x;
  for (auto* x : os) delete x;
  return ms;
}

// Groups D, P and U: the launcher chooses the split-KV count. Group S (sweep): splits > 0
// forces it, 0 lets the launcher choose ("auto"). contiguous (U): the batched op's K/V,
// (B, heads, ctx, d), the same bytes as D's cache. sq > 1: that many queries per sequence
// (as in speculative decoding), the last at the last key, causal (group H).
void run_decode(int B, int ctx, int splits = 0, bool sweep = false, bool head_major = false, bool contiguous = false,
                float softcap = 0.f, int d = 128, int sq = 1) {
  const std::string group = sweep        ? "S"
                            : contiguous ? "U"
                            : head_major ? "P"
                            : softcap > 0.f ? "G"
                            : d != 128 || sq > 1 ? "H"
                                                 : "D";
  const std::string name = group + "_decode_B" + std::to_string(B) + "_ctx" + std::to_string(ctx) +
                           (sweep ? "_splits" + (splits > 0 ? std::to_string(splits) : std::string("auto")) : "") +
                           (softcap > 0.f ? "_softcap30" : "") + (d != 128 ? "_d" + std::to_string(d) : "") +
                           (sq > 1 ? "_sq" + std::to_string(sq) : "");
  if (!selected(name)) return;
  const int h = 32, hk = 8, page = 64;
  const int cols = ctx / page;
  const int64_t blocks = int64_t(B) * cols;
  std::vector<int32_t> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(11));
  std::vector<uint32_t> cuq(B + 1), cuk(B + 1);
  for (int b = 0; b <= B; ++b) cuq[b] = uint32_t(b) * sq, cuk[b] = uint32_t(b) * ctx;
  const size_t kv_elems = size_t(blocks) * page * hk * d;
  const int64_t rows = int64_t(B) * sq;
  Dev* q = random_bf16(size_t(rows) * h * d, 1);
  Dev* k = random_bf16(kv_elems, 2);
  Dev* v = random_bf16(kv_elems, 3);
  Dev out(size_t(rows) * h * d * 2), lse(size_t(rows) * h * 4), table(perm.size() * 4), cuq_d(cuq.size() * 4),
      cuk_d(cuk.size() * 4);
  CK(cudaMemcpy(table.p, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(cuq_d.p, cuq.data(), cuq.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(cuk_d.p, cuk.data(), cuk.size() * 4, cudaMemcpyHostToDevice));
  FlashFwdParams p;
  p.dtype = FlashDType::BF16;
  p.q = q->p, p.k = k->p, p.v = v->p, p.out = out.p, p.lse = static_cast<float*>(lse.p);
  p.batch = B, p.num_heads = h, p.num_heads_k = hk, p.head_size = d;
  p.cu_seqlens_q = static_cast<const uint32_t*>(cuq_d.p);
  p.cu_seqlens_k = static_cast<const uint32_t*>(cuk_d.p);
  p.max_seqlen_q = sq, p.max_seqlen_k = ctx, p.total_q = rows;
  p.q_row_stride = p.o_row_stride = int64_t(h) * d, p.q_head_stride = p.o_head_stride = d;
  p.k_row_stride = p.v_row_stride = head_major ? d : int64_t(hk) * d;
  p.k_head_stride = p.v_head_stride = head_major ? int64_t(page) * d : d;
  p.k_batch_stride = p.v_batch_stride = int64_t(page) * hk * d;
  p.lse_head_stride = rows;
  p.block_table = static_cast<const int32_t*>(table.p);
  p.block_table_batch_stride = p.block_table_cols = cols, p.page_block_size = page, p.num_blocks = blocks;
  p.softmax_scale = 1.f / std::sqrt(float(d));
  p.softcap = softcap;
  p.window_right = 0;
  p.num_splits = splits;
  if (contiguous) {
    p.cu_seqlens_q = p.cu_seqlens_k = nullptr, p.block_table = nullptr;
    p.seqlen_q = 1, p.seqlen_k = ctx;
    p.q_batch_stride = p.o_batch_stride = int64_t(h) * d, p.lse_batch_stride = h, p.lse_head_stride = 1;
    p.k_row_stride = p.v_row_stride = d;
    p.k_head_stride = p.v_head_stride = int64_t(ctx) * d;
    p.k_batch_stride = p.v_batch_stride = int64_t(hk) * ctx * d;
    p.block_table_batch_stride = 0, p.page_block_size = 0, p.num_blocks = 0;
  }
  const double ms = time_median([&](int) { wick::kernels::flash_fwd(p, nullptr); }, 1);
  const double bytes = 2.0 * kv_elems * 2;
  emit(name, ms, "gbps", bytes / (ms * 1e-3) / 1e9);
  delete q, delete k, delete v;
}

void run_copy() {
  const size_t bytes = size_t(2) << 30;
  Dev a(bytes), b(bytes);
  CK(cudaMemset(a.p, 1, bytes));
  const double ms = time_median([&](int) { CK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); }, 1);
  emit("copy_d2d_2GiB", ms, "gbps", 2.0 * bytes / (ms * 1e-3) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) g_json = std::fopen(argv[++i], "w");
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
  }
  auto want = [&](const char* group) { return only.empty() || only.find(group) != std::string::npos; };
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr, "device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, l2_bytes() >> 20);
  const std::vector<int> lens = varlen_lengths();
  if (want("copy") && selected("copy")) run_copy();
  for (auto [d, h] : {std::pair{128, 16}, std::pair{64, 32}}) {
    for (bool causal : {false, true}) {
      Prefill w;
      w.lens = lens, w.h = w.hk = h, w.d = d, w.causal = causal;
      const std::string tag = "d" + std::to_string(d) + "_h" + std::to_string(h) + (causal ? "_causal" : "");
      if (want("A")) run_prefill("A_varlen_" + tag, w);
      w.page = 64;
      if (want("C")) run_prefill("C_paged64_" + tag, w);
    }
  }
  if (want("B")) {
    for (int S : {1024, 4096, 16384})
      for (int d : {64, 128, 256})
        for (bool causal : {false, true}) {
          Prefill w;
          w.lens.assign(16384 / S, S);
          w.d = d, w.h = w.hk = 2048 / d, w.causal = causal, w.varlen = false;
          run_prefill("B_S" + std::to_string(S) + "_d" + std::to_string(d) + (causal ? "_causal" : ""), w);
        }
  }
  if (only.find('E') != std::string::npos) {
    for (int S : {1024, 4096, 16384})
      for (int d : {96, 192})
        for (bool causal : {false, true}) {
          Prefill w;
          w.lens.assign(16384 / S, S);
          w.d = d, w.h = w.hk = 16, w.causal = causal, w.varlen = false;
          run_prefill("E_S" + std::to_string(S) + "_d" + std::to_string(d) + (causal ? "_causal" : ""), w);
        }
  }
  if (only.find('G') != std::string::npos) {
    // General logits: softcap and ALiBi, beside group A and B's plain configurations
    struct Mod {
      const char* tag;
      float softcap;
      bool alibi;
    };
    for (const Mod& m : {Mod{"softcap30", 30.f, false}, Mod{"alibi", 0.f, true}})
      for (int d : {64, 128, 256})
        for (bool causal : {false, true}) {
          Prefill w;
          w.lens.assign(4, 4096);
          w.d = d, w.h = w.hk = 2048 / d, w.causal = causal, w.varlen = false, w.softcap = m.softcap, w.alibi = m.alibi;
          run_prefill(std::string("G_S4096_d") + std::to_string(d) + "_" + m.tag + (causal ? "_causal" : ""), w);
        }
    for (bool causal : {false, true}) {
      Prefill w;
      w.lens = lens, w.h = w.hk = 16, w.d = 128, w.causal = causal, w.softcap = 30.f;
      run_prefill(std::string("G_varlen_d128_h16_softcap30") + (causal ? "_causal" : ""), w);
    }
    for (auto [B, ctx] : {std::pair{64, 4096}, std::pair{1, 32768}}) run_decode(B, ctx, 0, false, false, false, 30.f);
  }
  if (want("V")) {
    // Launch-order variants of the library's kernels (flash_fwd_kernel's seq_chunk: how many
    // sequences share one longest-tiles-first order), against the library's own choice.
    using namespace wick::kernels::flash;
    auto variant = [&](auto cfg, int chunk, const std::string& base, int d, const std::vector<int>& L, bool causal) {
      using Cfg = decltype(cfg);
      static int s_chunk;
      s_chunk = chunk;
      g_launch = [](const FlashFwdParams& p) { launch_flash_cfg<Cfg, FlashDType::BF16>(p, nullptr, 1, nullptr, s_chunk); };
      Prefill w;
      w.lens = L, w.d = d, w.h = w.hk = 2048 / d, w.causal = causal, w.varlen = false;
      run_prefill("V_order_c" + std::to_string(chunk) + "_" + base, w);
      g_launch = [](const FlashFwdParams& p) { wick::kernels::flash_fwd(p, nullptr); };
    };
    const std::vector<int> s1k(16, 1024), s4k(4, 4096);
    for (int chunk : {1, 2, 4, 8, 16}) {
      variant(PrefillConfig<128>::type{}, chunk, "B_S1024_d128_causal", 128, s1k, true);
      variant(PrefillConfig<256>::type{}, chunk, "B_S1024_d256_causal", 256, s1k, true);
      variant(PrefillConfig<64>::type{}, chunk, "B_S1024_d64_causal", 64, s1k, true);
    }
    for (int chunk : {1, 16}) variant(PrefillConfig<128>::type{}, chunk, "B_S1024_d128", 128, s1k, false);
    for (int chunk : {1, 4}) variant(PrefillConfig<128>::type{}, chunk, "B_S4096_d128_causal", 128, s4k, true);
  }
  if (only.find('L') != std::string::npos) {
    // The kernel ladder: one workload (A, d128 h16) through each level. Level 1 is the lesson
    // kernel (flash_naive.cu); levels 2-4 are the tensor-core template of
    // flash_fwd_kernel.cuh with fewer of its choices: 16 query rows per warp and two shared-
    // memory stages, then two 16-row tiles per warp (each K/V fragment feeds two mmas), then
    // three stages, the library's d128 instance (through the library's dispatch).
    using namespace wick::kernels::flash;
    g_check = true;
    Prefill w;
    w.lens = lens, w.h = w.hk = 16, w.d = 128;
    auto level = [&](const std::string& name, void (*launch)(const FlashFwdParams&)) {
      g_launch = launch;
      for (bool causal : {false, true}) {
        w.causal = causal;
        run_prefill(name + (causal ? "_causal" : ""), w);
      }
    };
    level("L1_lesson", [](const FlashFwdParams& p) { wick::kernels::flash_fwd_naive(p, nullptr); });
    level("L2_mma_16rows_2stages", [](const FlashFwdParams& p) {
      launch_flash_cfg<FlashConfig<128, 128, 4, 1, 1, 32, 2, false>, FlashDType::BF16>(p, nullptr, 1, nullptr);
    });
    level("L3_mma_32rows_2stages", [](const FlashFwdParams& p) {
      launch_flash_cfg<FlashConfig<128, 128, 4, 2, 1, 32, 2, false>, FlashDType::BF16>(p, nullptr, 1, nullptr);
    });
    level("L4_library", [](const FlashFwdParams& p) { wick::kernels::flash_fwd(p, nullptr); });
    g_launch = [](const FlashFwdParams& p) { wick::kernels::flash_fwd(p, nullptr); };
    g_check = false;
    if (g_worst_diff > 0.02) {
      std::fprintf(stderr, "kernel ladder: a level differs from the lesson kernel by %g\n", g_worst_diff);
      return 1;
    }
  }
  for (char group : {'D', 'P', 'U'}) {  // P and U only when named
    if (group == 'D' ? !want("D") : only.find(group) == std::string::npos) continue;
    for (auto [B, ctx] : {std::pair{64, 4096}, std::pair{64, 16384}, std::pair{128, 8192}, std::pair{1, 32768}})
      run_decode(B, ctx, 0, false, group == 'P', group == 'U');
  }
  // decode at the other head sizes of the Hopper decode, and at d128 with 8 queries x GQA 4 =
  // 32 rows (the two-row-tile instances) and 4 (16 rows)
  if (only.find('H') != std::string::npos)
    for (auto [d, sq] : {std::pair{192, 1}, std::pair{256, 1}, std::pair{128, 8}, std::pair{128, 4}})
      for (auto [B, ctx] : {std::pair{64, 4096}, std::pair{1, 32768}}) run_decode(B, ctx, 0, false, false, false, 0.f, d, sq);
  if (only.find('S') != std::string::npos) {  // decode, forced split counts (tuning)
    if (selected("S_empty_kernel")) {  // the harness's floor: one launch of an empty kernel
      const double ms = time_median([](int) { empty_kernel<<<1, 32>>>(); }, 1);
      emit("S_empty_kernel", ms, "us", ms * 1e3);
    }
    for (int ctx : {512, 2048})
      for (int splits : {0, 1, 2, 4, 8, 16}) run_decode(1, ctx, splits, true);
    for (int splits : {0, 8, 12, 16, 24, 33, 48, 64}) run_decode(1, 32768, splits, true);  // one long sequence
    // the launcher's count (16 splits) over 8k to 64k keys: time against bytes, whose
    // intercept is a split's fixed start and end
    for (int ctx : {8192, 16384, 65536}) run_decode(1, ctx, 0, true);
    // 8 splits (merged inside a cluster on sm_90) against 16 (merged through global scratch)
    for (int ctx : {4096, 8192, 16384})
      for (int splits : {8, 16}) run_decode(1, ctx, splits, true);
    for (int splits : {0, 1, 2, 3, 4, 5, 8}) run_decode(8, 4096, splits, true);
    // grids of a few waves: split tiles end the last wave sooner, at the cost of a merge
    for (auto [B, ctx] : {std::pair{64, 4096}, std::pair{128, 8192}})
      for (int splits : {1, 2, 4}) run_decode(B, ctx, splits, true);
  }
  if (g_json) std::fclose(g_json);
  return 0;
}
