// CUDA flash-attention forward kernels against a float64 host evaluation of the contract
// (kernels/flash/flash_params.h), written here and independent of every other code path.
// Each case builds FlashFwdParams by hand over device buffers (fresh random data, outputs
// poisoned with NaN), runs flash_fwd (the fast path) and flash_fwd_naive, and checks:
//   - every output element and LSE entry was written (no NaN left);
//   - accuracy rule: max|out - ref64| <= 2 * max|out_same_precision - ref64| + 1e-5, where
//     out_same_precision is the larger error of the naive kernel and of a host evaluation
//     that rounds P and the output to the input dtype like a reference attention would;
//   - LSE within 2e-3 of the float64 value; rows that see no key: out 0, LSE -inf.
// Each case prints one line with its errors, so the numbers can be recorded.
#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "devices.h"
#include "seed.h"
#include "kernels/flash/contract.h"
#include "kernels/flash/flash_fwd.h"
#include "kernels/flash/tma_map.h"
#include "tensor/dtype.h"
#include "tensor/graph.h"
#include "tensor/stream.h"

using wick::kernels::FlashDType;
using wick::kernels::FlashFwdParams;

namespace {

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

// Device buffer that frees itself.
struct DevBuf {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(std::max<size_t>(n, 16)) { CUDA_OK(cudaMalloc(&ptr, bytes)); }
  ~DevBuf() { cudaFree(ptr); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

template <class T>
void upload(DevBuf& d, const std::vector<T>& h) {
  CUDA_OK(cudaMemcpy(d.ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> download(const DevBuf& d, size_t n) {
  std::vector<T> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d.ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// One test configuration. Lengths are per sequence; a batched case uses equal lengths.
struct Case {
  std::string name;
  FlashDType dtype = FlashDType::BF16;
  bool varlen = true;
  bool head_major = false;  // batched only: q / out laid out (B, H, S, D)
  std::vector<int> sq, sk;
  int nh = 4, nhk = 4, hs = 64;
  float scale = 0.f;        // 0 = 1/sqrt(hs)
  int wl = -1, wr = -1;
  bool causal = false;
  bool alibi = false;
  float softcap = 0.f;
  std::vector<std::vector<std::pair<int, int>>> mm;  // per sequence [start, end) ranges
  int page = 0;             // > 0: paged K/V with this block size, shuffled block table
  bool kv_interleaved = false;
  int q_pad = 0, kv_pad = 0, o_pad = 0;  // extra elements per row
  int num_splits = 0;
};

double to_double(uint16_t bits, FlashDType dt) {
  if (dt == FlashDType::BF16) return static_cast<double>(std::bit_cast<wick::bf16>(bits));
  return static_cast<double>(std::bit_cast<wick::f16>(bits));
}
uint16_t from_double(double x, FlashDType dt) {
  if (dt == FlashDType::BF16) return std::bit_cast<uint16_t>(wick::bf16(static_cast<float>(x)));
  return std::bit_cast<uint16_t>(wick::f16(static_cast<float>(x)));
}
double round_to(double x, FlashDType dt) { return to_double(from_double(x, dt), dt); }

struct Result {
  std::vector<double> out;  // (total_q, nh, hs) in this order, whatever the device layout
  std::vector<double> lse;  // (total_q, nh)
};

struct RunErrors {
  double fast = 0, naive = 0, emul = 0, lse_fast = 0, lse_naive = 0;
};

// Everything a case needs on the host and on the device.
class Harness {
 public:
  // salt: the case's own seed constant (tests/seed.h moves it by WICK_TEST_SEED).
  Harness(const Case& c, uint64_t salt) : c_(c) {
    seed_ = wick::test::seed(salt);
    rng_.seed(seed_);
    B_ = static_cast<int>(c.sq.size());
    for (int b = 0; b <= B_; ++b) {
      cu_q_.push_back(b == 0 ? 0 : cu_q_[b - 1] + c.sq[b - 1]);
      cu_k_.push_back(b == 0 ? 0 : cu_k_[b - 1] + c.sk[b - 1]);
    }
    max_sq_ = *std::max_element(c.sq.begin(), c.sq.end());
    max_sk_ = *std::max_element(c.sk.begin(), c.sk.end());
    total_q_ = cu_q_[B_];
    total_k_ = cu_k_[B_];
    build();
  }
  uint64_t seed() const { return seed_; }
  int64_t total_q() const { return total_q_; }

  // Runs the fast or the naive kernel with poisoned outputs; returns what it wrote, and
  // fails the test case if any element stayed NaN.
  // capture: the fast call is captured into a CUDA graph, by a wick::CudaGraph (which keeps
  // a workspace for it, like a stream for eager calls) or directly through the CUDA runtime
  // on a stream of its own (none), and the graph launched once.
  enum class Capture { None, Graph, Runtime };
  Result run(bool fast, int num_splits, Capture capture = Capture::None) {
    FlashFwdParams p = params_;
    p.num_splits = num_splits;
    CUDA_OK(cudaMemset(out_->ptr, 0xff, out_->bytes));  // 0xffff: NaN in bf16 and f16
    CUDA_OK(cudaMemset(lse_->ptr, 0xff, lse_->bytes));  // NaN in f32
    if (fast && capture == Capture::Graph) {
      wick::CudaGraph graph(wick::Device::cuda(0));
      graph.begin_capture();
      wick::kernels::flash_fwd(p, wick::current_stream_handle());
      graph.end_capture();
      graph.replay();
      CUDA_OK(cudaDeviceSynchronize());
    } else if (fast && capture == Capture::Runtime) {
      cudaStream_t st = nullptr;
      CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
      wick::kernels::flash_fwd(p, st);
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaStreamEndCapture(st, &graph));
      cudaGraphExec_t exec = nullptr;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphLaunch(exec, st));
      CUDA_OK(cudaStreamSynchronize(st));
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
      CUDA_OK(cudaStreamDestroy(st));
    } else if (fast) {
      wick::kernels::flash_fwd(p, nullptr);
    } else {
      wick::kernels::flash_fwd_naive(p, nullptr);
    }
    CUDA_OK(cudaDeviceSynchronize());
    auto raw = download<uint16_t>(*out_, out_elems_);
    auto lse = download<float>(*lse_, lse_elems_);
    Result r;
    r.out.resize(static_cast<size_t>(total_q_) * c_.nh * c_.hs);
    r.lse.resize(static_cast<size_t>(total_q_) * c_.nh);
    int unwritten = 0;
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < c_.sq[b]; ++i)
        for (int h = 0; h < c_.nh; ++h) {
          const int64_t row = cu_q_[b] + i;
          for (int d = 0; d < c_.hs; ++d) {
            const double x = to_double(raw[o_index(b, i, h) + d], c_.dtype);
            if (std::isnan(x)) ++unwritten;
            r.out[(row * c_.nh + h) * c_.hs + d] = x;
          }
          const double l = lse[lse_index(b, i, h)];
          if (std::isnan(l)) ++unwritten;
          r.lse[row * c_.nh + h] = l;
        }
    CHECK_MESSAGE(unwritten == 0, c_.name, (fast ? " fast" : " naive"), ": ", unwritten,
                  " outputs left unwritten (NaN), seed ", seed_);
    return r;
  }

  // The contract evaluated in float64 (ref) and with P / out rounded to the dtype (emul).
  void reference(Result& ref, Result& emul) const {
    const size_t n = static_cast<size_t>(total_q_) * c_.nh * c_.hs;
    ref.out.assign(n, 0.0);
    emul.out.assign(n, 0.0);
    ref.lse.assign(static_cast<size_t>(total_q_) * c_.nh, -INFINITY);
    const double scale = params_.softmax_scale;
    std::vector<double> logits, pr;
    for (int b = 0; b < B_; ++b) {
      const int sq = c_.sq[b], sk = c_.sk[b];
      for (int h = 0; h < c_.nh; ++h) {
        const int hk = wick::kernels::attn::kv_head(host_p_, h);
        const double slope = c_.alibi ? slopes_[h] : 0.0;
        for (int i = 0; i < sq; ++i) {
          const int64_t pos = wick::kernels::attn::key_position(bounds(b), i);
          const int64_t row = cu_q_[b] + i;
          logits.assign(sk, -INFINITY);
          double mx = -INFINITY;
          for (int t = 0; t < sk; ++t) {
            if (!wick::kernels::attn::key_visible<int64_t>(host_p_, b, pos, t, sk)) continue;
            double qk = 0;
            for (int d = 0; d < c_.hs; ++d) qk += q_at(b, i, h, d) * k_at(b, t, hk, d);
            const double x = wick::kernels::attn::logit<double>(qk, scale, c_.softcap, slope, pos, t);
            logits[t] = x;
            mx = std::max(mx, x);
          }
          if (mx == -INFINITY) continue;  // sees no key: 0 and -inf
          pr.assign(sk, 0.0);
          double sum = 0;
          for (int t = 0; t < sk; ++t) sum += pr[t] = logits[t] == -INFINITY ? 0.0 : std::exp(logits[t] - mx);
          ref.lse[row * c_.nh + h] = mx + std::log(sum);
          for (int d = 0; d < c_.hs; ++d) {
            double acc = 0, acc_e = 0;
            for (int t = 0; t < sk; ++t) {
              if (pr[t] == 0) continue;
              const double vv = v_at(b, t, hk, d);
              acc += pr[t] * vv;
              acc_e += round_to(static_cast<float>(pr[t] / sum), c_.dtype) * vv;
            }
            ref.out[(row * c_.nh + h) * c_.hs + d] = acc / sum;
            emul.out[(row * c_.nh + h) * c_.hs + d] = round_to(static_cast<float>(acc_e), c_.dtype);
          }
        }
      }
    }
  }

 private:
  std::vector<uint16_t> random_elems(size_t n) {
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = from_double(dist(rng_), c_.dtype);
    return v;
  }

  // Element offsets through the contract (kernels/flash/contract.h) on the host mirror of
  // the params; K and V share one buffer, V's region starting v_off_ elements in.
  wick::kernels::attn::SeqBounds bounds(int b) const { return wick::kernels::attn::seq_bounds(host_p_, b); }
  int64_t q_index(int b, int i, int h) const { return wick::kernels::attn::q_offset(host_p_, b, bounds(b), i, h); }
  int64_t o_index(int b, int i, int h) const { return wick::kernels::attn::o_offset(host_p_, b, bounds(b), i, h); }
  int64_t lse_index(int b, int i, int h) const {
    return wick::kernels::attn::lse_offset(host_p_, b, bounds(b), i, h);
  }
  int64_t kv_index(int b, int t, int hk, bool v) const {
    return v ? wick::kernels::attn::v_offset(host_p_, b, bounds(b), t, hk) + v_off_
             : wick::kernels::attn::k_offset(host_p_, b, bounds(b), t, hk);
  }
  double q_at(int b, int i, int h, int d) const { return to_double(hq_[q_index(b, i, h) + d], c_.dtype); }
  double k_at(int b, int t, int hk, int d) const { return to_double(hkv_[kv_index(b, t, hk, false) + d], c_.dtype); }
  double v_at(int b, int t, int hk, int d) const { return to_double(hkv_[kv_index(b, t, hk, true) + d], c_.dtype); }

  void build();

  Case c_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  int B_ = 0, max_sq_ = 0, max_sk_ = 0;
  int64_t total_q_ = 0, total_k_ = 0;
  std::vector<uint32_t> cu_q_, cu_k_;
  std::vector<uint16_t> hq_, hkv_;
  std::vector<int32_t> table_;
  std::vector<float> slopes_;
  int64_t bt_stride_ = 0, v_off_ = 0;
  size_t out_elems_ = 0, lse_elems_ = 0;
  std::vector<int32_t> mm_;
  FlashFwdParams params_;
  FlashFwdParams host_p_;  // params_ with every index pointer on the host (the reference reads it)
  std::unique_ptr<DevBuf> q_, kv_, out_, lse_, cuq_d_, cuk_d_, table_d_, slopes_d_, mm_d_;
};

void Harness::build() {
  const Case& c = c_;
  FlashFwdParams& p = params_;
  p.dtype = c.dtype;
  p.batch = B_;
  p.num_heads = c.nh;
  p.num_heads_k = c.nhk;
  p.head_size = c.hs;
  p.max_seqlen_q = max_sq_;
  p.max_seqlen_k = max_sk_;
  p.total_q = total_q_;
  p.softmax_scale = c.scale > 0 ? c.scale : 1.f / std::sqrt(static_cast<float>(c.hs));
  p.softcap = c.softcap;
  p.window_left = c.causal ? -1 : c.wl;
  p.window_right = c.causal ? 0 : c.wr;
  if (!c.mm.empty() && p.window_right == 0 && p.window_left < 0) p.window_left = max_sk_;  // plan's rule

  // q: varlen (total_q, nh, hs) or batched (B, S, nh, hs) / (B, nh, S, hs), padded rows
  const int64_t q_row = static_cast<int64_t>(c.nh) * c.hs + c.q_pad;
  if (c.varlen) {
    p.q_row_stride = q_row, p.q_head_stride = c.hs, p.q_batch_stride = 0;
  } else if (c.head_major) {
    p.q_row_stride = c.hs + c.q_pad, p.q_head_stride = max_sq_ * p.q_row_stride;
    p.q_batch_stride = c.nh * p.q_head_stride;
  } else {
    p.q_row_stride = q_row, p.q_head_stride = c.hs, p.q_batch_stride = max_sq_ * q_row;
  }
  const int64_t q_elems = c.varlen ? total_q_ * q_row : B_ * p.q_batch_stride;
  hq_ = random_elems(q_elems);
  p.o_row_stride = c.head_major ? c.hs + c.o_pad : static_cast<int64_t>(c.nh) * c.hs + c.o_pad;
  p.o_head_stride = c.head_major ? max_sq_ * p.o_row_stride : c.hs;
  p.o_batch_stride = c.varlen ? 0 : (c.head_major ? c.nh * p.o_head_stride : max_sq_ * p.o_row_stride);
  out_elems_ = c.varlen ? total_q_ * p.o_row_stride : B_ * p.o_batch_stride;
  // lse: varlen (nh, total_q), batched (B, nh, S)
  p.lse_head_stride = c.varlen ? total_q_ : max_sq_;
  p.lse_batch_stride = c.varlen ? 0 : static_cast<int64_t>(c.nh) * max_sq_;
  lse_elems_ = c.varlen ? c.nh * total_q_ : B_ * p.lse_batch_stride;

  // k / v: one row holds k heads then (interleaved) v heads, plus padding
  const int64_t kv_heads = static_cast<int64_t>(c.nhk) * c.hs;
  const int64_t kv_row = (c.kv_interleaved ? 2 : 1) * kv_heads + c.kv_pad;
  p.k_row_stride = p.v_row_stride = kv_row;
  p.k_head_stride = p.v_head_stride = c.hs;
  int64_t kv_rows = 0;
  if (c.page > 0) {
    int64_t blocks = 0;
    std::vector<int> need(B_);
    for (int b = 0; b < B_; ++b) blocks += need[b] = (c.sk[b] + c.page - 1) / c.page;
    blocks += 3;  // unused blocks the table never names
    std::vector<int32_t> perm(blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    const int cols = (max_sk_ + c.page - 1) / c.page + 1;
    bt_stride_ = cols;
    table_.assign(static_cast<size_t>(B_) * cols, 0);
    int next = 0;
    for (int b = 0; b < B_; ++b)
      for (int j = 0; j < cols; ++j) table_[b * cols + j] = j < need[b] ? perm[next++] : perm[blocks - 1];
    p.block_table_batch_stride = p.block_table_cols = cols;
    p.page_block_size = c.page;
    p.num_blocks = blocks;
    p.k_batch_stride = p.v_batch_stride = c.page * kv_row;
    kv_rows = blocks * c.page;
  } else {
    p.k_batch_stride = p.v_batch_stride = c.varlen ? 0 : static_cast<int64_t>(max_sk_) * kv_row;
    kv_rows = c.varlen ? total_k_ : static_cast<int64_t>(B_) * max_sk_;
  }
  const int64_t kv_elems = kv_rows * kv_row;
  std::vector<uint16_t> kbuf = random_elems(kv_elems);
  std::vector<uint16_t> vbuf = c.kv_interleaved ? std::vector<uint16_t>() : random_elems(kv_elems);
  // K and V live in one host/device buffer: [K region | V region], or interleaved per row.
  v_off_ = c.kv_interleaved ? kv_heads : kv_elems;
  hkv_ = kbuf;
  hkv_.insert(hkv_.end(), vbuf.begin(), vbuf.end());

  q_ = std::make_unique<DevBuf>(hq_.size() * 2);
  upload(*q_, hq_);
  kv_ = std::make_unique<DevBuf>(hkv_.size() * 2);
  upload(*kv_, hkv_);
  out_ = std::make_unique<DevBuf>(out_elems_ * 2);
  lse_ = std::make_unique<DevBuf>(lse_elems_ * 4);
  p.q = q_->ptr;
  p.k = kv_->ptr;
  p.v = kv_->as<uint16_t>() + v_off_;
  p.out = out_->ptr;
  p.lse = lse_->as<float>();
  if (c.varlen) {
    cuq_d_ = std::make_unique<DevBuf>(cu_q_.size() * 4);
    upload(*cuq_d_, cu_q_);
    cuk_d_ = std::make_unique<DevBuf>(cu_k_.size() * 4);
    upload(*cuk_d_, cu_k_);
    p.cu_seqlens_q = cuq_d_->as<uint32_t>();
    p.cu_seqlens_k = cuk_d_->as<uint32_t>();
    if (c.page == 0) p.kv_rows = total_k_;
  } else {
    p.seqlen_q = max_sq_;
    p.seqlen_k = max_sk_;
  }
  if (c.page > 0) {
    table_d_ = std::make_unique<DevBuf>(table_.size() * 4);
    upload(*table_d_, table_);
    p.block_table = table_d_->as<int32_t>();
  }
  if (c.alibi) {
    std::uniform_real_distribution<float> sd(0.01f, 0.5f);
    for (int h = 0; h < c.nh; ++h) slopes_.push_back(sd(rng_));
    slopes_d_ = std::make_unique<DevBuf>(slopes_.size() * 4);
    upload(*slopes_d_, slopes_);
    p.alibi_slopes = slopes_d_->as<float>();
  }
  if (!c.mm.empty()) {
    int max_r = 0;
    for (auto& r : c.mm) max_r = std::max<int>(max_r, static_cast<int>(r.size()));
    std::vector<int32_t> mm(static_cast<size_t>(B_) * max_r * 2, 0);  // [0,0) pads: empty ranges
    for (int b = 0; b < B_; ++b)
      for (size_t k = 0; k < c.mm[b].size(); ++k) {
        mm[(b * max_r + k) * 2] = c.mm[b][k].first;
        mm[(b * max_r + k) * 2 + 1] = c.mm[b][k].second;
      }
    mm_d_ = std::make_unique<DevBuf>(mm.size() * 4);
    upload(*mm_d_, mm);
    mm_ = mm;
    p.mm_prefix_ranges = mm_d_->as<int32_t>();
    p.mm_batch_stride = 2 * max_r;
    p.mm_range_stride = 2;
    p.mm_max_ranges = max_r;
  }
  host_p_ = p;
  if (c.varlen) host_p_.cu_seqlens_q = cu_q_.data(), host_p_.cu_seqlens_k = cu_k_.data();
  if (c.page > 0) host_p_.block_table = table_.data();
  if (c.alibi) host_p_.alibi_slopes = slopes_.data();
  if (!c.mm.empty()) host_p_.mm_prefix_ranges = mm_.data();
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// LSE error; a -inf reference must be matched exactly (the row saw no key).
double lse_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (got[i] != ref[i]) return INFINITY;
      continue;
    }
    m = std::max(m, std::abs(got[i] - ref[i]));
  }
  return m;
}

// Each harness draws its inputs from its own seed: the next salt of one sequence, so a run
// with the same WICK_TEST_SEED and the same test selection draws the same inputs.
uint64_t next_salt() {
  static uint64_t salt = 0xF1A5;
  return salt++;
}

// Runs one case (fast, forced split count, naive) and checks everything the header lists.
void check_case(const Case& c) {
  Harness hns(c, next_salt());
  INFO("case ", c.name, " seed ", hns.seed());
  Result ref, emul;
  hns.reference(ref, emul);
  Result fast = hns.run(true, c.num_splits);
  Result naive = hns.run(false, 0);
  RunErrors e;
  e.fast = max_abs_diff(fast.out, ref.out);
  e.naive = max_abs_diff(naive.out, ref.out);
  e.emul = max_abs_diff(emul.out, ref.out);
  e.lse_fast = lse_error(fast.lse, ref.lse);
  e.lse_naive = lse_error(naive.lse, ref.lse);
  const double bound = 2 * std::max(e.naive, e.emul) + 1e-5;
  std::printf("[flash] %-34s fast %.2e naive %.2e emul %.2e bound %.2e lse %.1e/%.1e %s\n", c.name.c_str(),
              e.fast, e.naive, e.emul, bound, e.lse_fast, e.lse_naive, e.fast <= bound ? "ok" : "FAIL");
  CHECK(e.fast <= bound);
  CHECK(e.naive <= 2 * e.emul + 1e-5);
  CHECK(e.lse_fast <= 2e-3);
  CHECK(e.lse_naive <= 2e-3);
}

std::vector<int> lengths(std::mt19937_64& rng, int n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::mt19937_64& case_rng() {
  static std::mt19937_64 rng{wick::test::seed(0xCA5E)};
  return rng;
}

Case varlen_case(std::string name, int batch, int lo, int hi, int hs) {
  Case c;
  c.name = std::move(name);
  c.sq = lengths(case_rng(), batch, lo, hi);
  c.sk = c.sq;
  c.hs = hs;
  return c;
}

// Three sequences of sq queries and sk keys in the batched layout, head-major q and out
// (padded q rows), causal, GQA 6/3.
Case batched_head_major_case(std::string name, int sq, int sk, int hs) {
  Case c;
  c.name = std::move(name);
  c.varlen = false, c.head_major = true;
  c.sq = {sq, sq, sq}, c.sk = {sk, sk, sk};
  c.causal = true, c.hs = hs, c.nh = 6, c.nhk = 3, c.q_pad = 8;
  return c;
}

}  // namespace

TEST_CASE("flash kernels: varlen prefill, masks and score modifiers") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  for (bool causal : {false, true}) {
    Case c = varlen_case(causal ? "varlen causal d64" : "varlen d64", 5, 1, 300, 64);
    c.causal = causal;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("batch 1, sq 600 sk 900, causal d128", 1, 600, 600, 128);
    c.sk = {900};
    c.causal = true;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("sq<sk causal (bottom-right)", 4, 1, 150, 128);
    c.sk = lengths(case_rng(), 4, 150, 400);
    c.causal = true;
    cases.push_back(c);
    c.name = "sq>sk causal (rows see nothing)";
    std::swap(c.sq, c.sk);
    cases.push_back(c);
  }
  {
    Case c = varlen_case("zero-length sequences, batch 9", 9, 0, 200, 64);
    c.sq[0] = 0, c.sk[2] = 0, c.sq[5] = 0, c.sk[5] = 0;
    c.sk[7] = c.sq[7] + 37;
    c.causal = true;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("sliding window 37/5", 4, 50, 300, 64);
    c.wl = 37, c.wr = 5;
    cases.push_back(c);
    c.name = "window left 70 only";
    c.wl = 70, c.wr = -1;
    cases.push_back(c);
    c.name = "window right 20 only, sq!=sk";
    c.wl = -1, c.wr = 20;
    c.sk = lengths(case_rng(), 4, 20, 400);
    cases.push_back(c);
  }
  {
    Case c = varlen_case("alibi causal", 3, 40, 260, 128);
    c.alibi = true, c.causal = true;
    cases.push_back(c);
    c.name = "softcap 5, scale 1";
    c.alibi = false, c.causal = false, c.softcap = 5.f, c.scale = 1.f;
    cases.push_back(c);
    c.name = "alibi + softcap + window";
    c.alibi = true, c.softcap = 20.f, c.scale = 0.f, c.wl = 50, c.wr = 3;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("mm-prefix ranges, causal", 3, 60, 300, 64);
    c.causal = true;
    for (int b = 0; b < 3; ++b) {
      const int n = c.sk[b];
      c.mm.push_back({{n / 8, n / 8 + n / 5}, {n / 2, n / 2 + n / 6}});
    }
    c.mm[1].pop_back();
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

// Softcap, ALiBi, mm-prefix ranges and a softmax scale that is not positive: on an sm_90 GPU
// the Hopper kernels' general instances take every head size they cover, paged or not, one
// query tile or several per sequence (above head size 128 a tile's first scores are formed
// beside the previous tile's last product), a persistent walk over more tiles than SMs, and
// the decode shape.
TEST_CASE("flash kernels: score modifiers on every Hopper head size and layout") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  for (int hs : {64, 96, 128, 192, 256}) {
    Case c = varlen_case("softcap 20 + alibi causal d" + std::to_string(hs), 3, 100, 330, hs);
    c.alibi = true, c.softcap = 20.f, c.causal = true, c.nh = 4, c.nhk = 2;
    c.dtype = hs % 128 == 0 ? FlashDType::BF16 : FlashDType::F16;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("alibi window 90/10, paged 64, d128", 3, 50, 300, 128);
    c.sk = lengths(case_rng(), 3, 200, 600);
    c.alibi = true, c.wl = 90, c.wr = 10, c.page = 64;
    cases.push_back(c);
    c.name = "softcap 8, paged 96 causal, d192 f16";
    c.alibi = false, c.softcap = 8.f, c.wl = c.wr = -1, c.causal = true, c.page = 96, c.hs = 192;
    c.dtype = FlashDType::F16;
    cases.push_back(c);
    c.name = "softcap 30, paged 32, d256";
    c.softcap = 30.f, c.causal = false, c.page = 32, c.hs = 256, c.dtype = FlashDType::BF16;
    cases.push_back(c);
  }
  {
    // overlapping ranges: rows inside both see their union; a range past the keys is clipped
    Case c = varlen_case("mm-prefix ranges, overlapping, causal d128", 3, 150, 400, 128);
    c.causal = true;
    for (int b = 0; b < 3; ++b) {
      const int n = c.sk[b];
      c.mm.push_back({{10, n / 3}, {n / 4, n / 2}, {n - 20, n + 50}});
    }
    cases.push_back(c);
    c.name = "mm-prefix ranges + softcap, window 40/0, d256 paged 64";
    c.softcap = 15.f, c.causal = false, c.wl = 40, c.wr = 0, c.hs = 256, c.page = 64;
    cases.push_back(c);
  }
  {
    Case c = batched_head_major_case("negative scale, softcap 4, batched d64", 260, 300, 64);
    c.scale = -0.05f, c.softcap = 4.f, c.causal = false;
    cases.push_back(c);
    Case d = varlen_case("alibi, paged 32, d64", 3, 150, 420, 64);
    d.alibi = true, d.page = 32, d.nh = 4, d.nhk = 1;
    cases.push_back(d);
  }
  {
    Case c = varlen_case("80 sequences, softcap 12 causal d128", 80, 1, 200, 128);
    c.nh = 2, c.nhk = 1, c.causal = true, c.softcap = 12.f;
    cases.push_back(c);
  }
  {
    // the decode shape (the Hopper decode on an sm_90 GPU): packed GQA rows with their own
    // heads' slopes, the launcher's split count (merged in a cluster) and a forced one
    Case c;
    c.name = "decode softcap 20 + alibi, GQA 8/2, paged 64";
    c.sq = {1, 1, 1}, c.sk = {300, 1500, 65};
    c.nh = 8, c.nhk = 2, c.hs = 128, c.page = 64, c.causal = true, c.softcap = 20.f, c.alibi = true;
    cases.push_back(c);
    c.name = "decode softcap 20 + alibi, 3 splits";
    c.num_splits = 3;
    cases.push_back(c);
    c.name = "decode mm-prefix ranges, window 100/0, d64 varlen";
    c.sq = {2, 1, 3}, c.sk = {400, 90, 260};
    c.nh = 4, c.nhk = 4, c.hs = 64, c.page = 0, c.num_splits = 0, c.softcap = 0.f, c.alibi = false;
    c.causal = false, c.wl = 100, c.wr = 0;
    c.mm = {{{10, 399}}, {{0, 30}, {50, 90}}, {{100, 180}, {150, 259}}};
    cases.push_back(c);
    c.name = "decode softcap 50, GQA 16/8, d256 paged 64";
    c.sq = {1, 1, 1}, c.sk = {700, 2100, 3};
    c.nh = 16, c.nhk = 8, c.hs = 256, c.page = 64, c.causal = true, c.softcap = 50.f, c.wl = c.wr = -1, c.mm.clear();
    cases.push_back(c);
    c.name = "decode 4 queries x GQA 8 (32 rows), softcap 20 + alibi, d128 paged 64";
    c.sq = {4, 4, 4}, c.nh = 16, c.nhk = 2, c.hs = 128, c.softcap = 20.f, c.alibi = true;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("flash kernels: GQA/MQA, head sizes, layouts, dtypes") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  for (auto [nh, nhk] : {std::pair{8, 4}, std::pair{16, 2}, std::pair{8, 1}}) {
    Case c = varlen_case("gqa " + std::to_string(nh) + "/" + std::to_string(nhk) + " causal", 3, 20, 200, 64);
    c.nh = nh, c.nhk = nhk, c.causal = true;
    cases.push_back(c);
  }
  for (int hs : {8, 16, 32, 40, 64, 72, 96, 120, 128, 136, 160, 192, 200, 224, 256, 320, 512}) {
    Case c = varlen_case("head size " + std::to_string(hs), 2, 30, 160, hs);
    c.nh = 2, c.nhk = 1, c.causal = hs % 16 == 0;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("interleaved kv + padded rows", 3, 20, 200, 64);
    c.kv_interleaved = true, c.q_pad = 24, c.kv_pad = 8, c.o_pad = 16, c.nh = 4, c.nhk = 2;
    cases.push_back(c);
    c.name = "misaligned strides (naive fallback)";
    c.q_pad = 4, c.kv_pad = 4;
    cases.push_back(c);
  }
  {
    Case c = batched_head_major_case("batched layout, head-major q/out", 100, 170, 96);
    cases.push_back(c);
    c.name = "batched layout, row-major";
    c.head_major = false, c.causal = false, c.kv_pad = 16;
    cases.push_back(c);
  }
  {
    // the same layouts at d128, where an sm_90 GPU runs the Hopper kernel
    Case c = varlen_case("d128 interleaved kv + padded rows", 3, 20, 300, 128);
    c.kv_interleaved = true, c.q_pad = 24, c.kv_pad = 8, c.o_pad = 16, c.nh = 4, c.nhk = 2, c.causal = true;
    cases.push_back(c);
    Case d = batched_head_major_case("d128 batched layout, head-major q/out", 200, 330, 128);
    cases.push_back(d);
    d.name = "d128 batched layout, row-major window";
    d.head_major = false, d.causal = false, d.wl = 70, d.wr = 20, d.kv_pad = 16;
    cases.push_back(d);
  }
  for (int hs : {64, 96, 128, 192, 256}) {
    Case c = varlen_case("f16 causal d" + std::to_string(hs), 3, 10, 200, hs);
    c.dtype = FlashDType::F16, c.causal = true, c.nh = 4, c.nhk = 2;
    cases.push_back(c);
  }
  {
    Case c = varlen_case("f16 alibi softcap d512", 2, 10, 90, 512);
    c.dtype = FlashDType::F16, c.alibi = true, c.softcap = 10.f, c.nh = 2, c.nhk = 1;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("flash kernels: paged K/V with shuffled block tables") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  for (int page : {32, 64, 256}) {
    for (bool causal : {false, true}) {
      Case c = varlen_case("paged " + std::to_string(page) + (causal ? " causal" : ""), 4, 1, 300, 128);
      c.sk = lengths(case_rng(), 4, 1, 700);
      c.sk[1] = c.sq[1];
      c.page = page, c.causal = causal, c.nh = 4, c.nhk = 2;
      cases.push_back(c);
    }
  }
  {
    Case c = varlen_case("paged 32 interleaved, d64, window", 3, 20, 150, 64);
    c.sk = lengths(case_rng(), 3, 150, 500);
    c.page = 32, c.kv_interleaved = true, c.kv_pad = 8, c.wl = 60, c.wr = 0;
    cases.push_back(c);
    c.name = "paged 64 f16 d256 alibi";
    c.dtype = FlashDType::F16, c.page = 64, c.hs = 256, c.alibi = true, c.wl = -1, c.wr = -1;
    cases.push_back(c);
  }
  // Page 96 with 64-key tiles: some tiles lie in one page, others straddle two (rows split
  // at 32), and tails end inside either part.
  for (bool causal : {false, true}) {
    Case c = varlen_case(std::string("paged 96, 64-key tiles straddle pages") + (causal ? " causal" : ""), 4, 1, 400, 64);
    c.sk = lengths(case_rng(), 4, 1, 900);
    c.sk[0] = c.sq[0];
    c.page = 96, c.causal = causal, c.nh = 4, c.nhk = 2;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

// More (query tile, head, sequence) work units than an H200 has SMs (132): 320 here, so
// each CTA of the persistent Hopper kernel (the default on sm_90) walks three
// rounds of tiles (forwards, backwards, forwards), among them tiles past the end of short
// sequences, and prefetches the next tile's Q while finishing the last one.
TEST_CASE("flash kernels: more query tiles than SMs (persistent CTAs walk several)") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  for (int hs : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      if (hs != 64 && !causal) continue;
      Case c = varlen_case("80 sequences, d" + std::to_string(hs) + (causal ? " causal" : ""), 80, 1, 200, hs);
      c.nh = 2, c.nhk = 1, c.causal = causal;
      cases.push_back(c);
    }
  }
  {
    Case c = varlen_case("80 sequences, d128, sq != sk, paged 64", 80, 1, 200, 128);
    c.sk = lengths(case_rng(), 80, 1, 400);
    c.nh = 2, c.nhk = 1, c.page = 64;
    cases.push_back(c);
    c.name = "80 sequences, d128, sq != sk, window 50/10";
    c.page = 0, c.wl = 50, c.wr = 10;
    cases.push_back(c);
    // Above head size 128 a tile's first S is issued beside the last product of the CTA's
    // tile before: the same shapes there, with tiles that see no keys (rows before the
    // first key when sq > sk) between tiles that do.
    c.name = "80 sequences, d256, sq != sk, window 50/10";
    c.hs = 256;
    cases.push_back(c);
    c.name = "80 sequences, d192 f16, sq != sk, paged 64, causal";
    c.hs = 192, c.dtype = FlashDType::F16, c.wl = c.wr = -1, c.page = 64, c.causal = true;
    cases.push_back(c);
  }
  {
    // Keys of 0.75-1 MiB of K/V per head and no causal mask: the Hopper kernel takes the 18
    // columns in sections of four or five heads (tile_order.h, a 4 MiB budget), the last one
    // narrower.
    Case c = varlen_case("3 sequences, d128, sk 1.5k-2k, 6 heads, L2 sections", 3, 1, 64, 128);
    c.sk = lengths(case_rng(), 3, 1536, 2048);
    c.nh = c.nhk = 6;
    cases.push_back(c);
    // The same under a causal mask: over sequences of varied lengths, one section with the
    // query tiles from the last to the first.
    c.name = "3 sequences, d128, sk 1.5k-2k, 6 heads, causal";
    c.causal = true;
    cases.push_back(c);
  }
  {
    // Causal over sequences of one length (the batched layout): tiles paired long with
    // short. 144 columns of 2 query tiles: 144 pairs, so a full window of 132 pairs and a
    // last one of 12 on an H200, in sections of 32 columns (128 KiB of K/V each), the fifth
    // of 16.
    Case c = batched_head_major_case("batched causal pairs, 2 windows, 5 sections", 256, 256, 128);
    c.nh = c.nhk = 48;
    cases.push_back(c);
    // 3 query tiles per column: 96 pairs, then the 96 middle tiles, over three rounds.
    c = batched_head_major_case("batched causal pairs and middle tiles, d64", 300, 300, 64);
    c.nh = 32, c.nhk = 16;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

// Head size 128 (and 96, which runs its shape) over sequences longer than 1024 rows: on an
// sm_90 GPU three consumer warpgroups of 64 rows each, with 80-key tiles (64 when paged)
// without a right bound and for causal varlen calls. Lengths that leave a
// 192-row tile's warpgroups without rows, and key tails inside an 80-key tile. The 192-row
// tiles end at a sequence's last row, so its first tile is the partial one: rows below the
// sequence's first, which are read as zeros and never written (NaN-poisoned outputs show a
// stray store), under causal masks, windows and sq != sk. Head size 64 takes 192-row tiles
// too (causal ones over 1024 rows): its cases close the list.
TEST_CASE("flash kernels: 192-row tiles at head size 128 (sequences over 1024 rows)") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  Case c = varlen_case("d128 GQA, 1025-1250 rows", 2, 1025, 1250, 128);
  c.nh = 2, c.nhk = 1;
  cases.push_back(c);
  c.name = "d128 GQA causal, 1025-1250 rows";
  c.causal = true;
  cases.push_back(c);
  c.name = "d128 f16, sq != sk, paged 32";
  c.causal = false, c.dtype = FlashDType::F16, c.page = 32;
  c.sk = lengths(case_rng(), 2, 900, 1500);
  cases.push_back(c);
  // without a mask, 64-key tiles of two 32-key pieces (pages of 96) or of one piece, copied
  // as one box of both panels (pages of 256)
  c.name = "d128 paged 96, no mask (tiles straddle pages)";
  c.dtype = FlashDType::BF16, c.page = 96;
  c.sk = lengths(case_rng(), 2, 1100, 1300);
  cases.push_back(c);
  c.name = "d128 paged 256 GQA, sq != sk";
  c.page = 256, c.nh = 4, c.nhk = 2;
  cases.push_back(c);
  c.nh = 2, c.nhk = 1;
  c.name = "d128 paged 96 causal (tiles straddle pages)";
  c.causal = true, c.page = 96;
  c.sk = c.sq;
  cases.push_back(c);
  c.name = "d96 window 300/-1, paged 64";
  c.hs = 96, c.causal = false, c.page = 64, c.wl = 300;
  cases.push_back(c);
  c = batched_head_major_case("batched d128, 1100 rows, no mask", 1100, 1300, 128);
  c.causal = false, c.nh = 2, c.nhk = 1;
  c.sq.resize(2), c.sk.resize(2);
  cases.push_back(c);
  c = varlen_case("d64 GQA causal, 1025-1250 rows", 2, 1025, 1250, 64);
  c.nh = 2, c.nhk = 1, c.causal = true;
  cases.push_back(c);
  c.name = "d64 causal, sk > sq, paged 64";
  c.sk = c.sq, c.page = 64;
  for (int& k : c.sk) k += 77;
  cases.push_back(c);
  c.name = "d64 window 200/30, sq > sk";
  c.causal = false, c.page = 0, c.wl = 200, c.wr = 30;
  c.sk = c.sq;
  for (int& k : c.sk) k -= 150;
  cases.push_back(c);
  c = batched_head_major_case("batched d64 causal, 1100 rows", 1100, 1100, 64);
  c.nh = 2, c.nhk = 1;
  cases.push_back(c);
  // Partial tiles of 18, 40, 44 and 100 rows, so one or two of a tile's warpgroups hold none
  // of its rows (they still compute; nothing of theirs may be written): at head size 64 the
  // partial tile is the last, at 128 the first (a 40-row sequence is one tile with two such
  // warpgroups); at 256, 128-row tiles chain into the next tile, whose warpgroups may differ
  // in that.
  c = Case{};
  c.name = "d64 no mask, partial tiles of 40 and 100 rows";
  c.sq = {1000, 1060}, c.sk = c.sq, c.nh = 2, c.nhk = 1;
  cases.push_back(c);
  c.name = "d128 no mask, partial tiles of 18, 40 and 100 rows";
  c.hs = 128, c.sq = {1170, 40, 1060}, c.sk = c.sq;
  cases.push_back(c);
  c.name = "d128 causal, partial tiles of 18, 40 and 100 rows";
  c.causal = true;
  cases.push_back(c);
  c.name = "d128 paged 64, partial tiles of 18, 40 and 100 rows";
  c.causal = false, c.page = 64;
  cases.push_back(c);
  c.name = "d256 causal, tiles of 40 and 44 rows";
  c.hs = 256, c.page = 0, c.causal = true, c.sq = {300, 40, 172}, c.sk = c.sq;
  cases.push_back(c);
  for (const Case& k : cases) check_case(k);
}

// On an sm_90 GPU the Hopper forward's persistent CTAs claim tiles from a counter in an eager
// call (each launch leaves it at zero for the next) and in a CudaGraph's capture (the graph's
// counter), and take the fixed walk in a capture made through the CUDA runtime: the same
// tiles, computed the same way, so the same bits. Many tiles of varied lengths, so the claims
// reach every CTA; on other GPUs the same holds for their kernels. Split-KV decode likewise:
// merged inside a cluster of its splits on sm_90 (any capture), else in place by the last
// split in eager calls and in a CudaGraph (its own partials and counters) and by the
// separate merge kernel in a runtime capture, with the same arithmetic.
// (The claims' accuracy against float64 is the test of more query tiles than SMs above.)
TEST_CASE("flash kernels: eager calls and captured graphs agree bitwise (tile claims, fixed walk, split merges)") {
  SKIP_WITHOUT_CUDA();
  using Capture = Harness::Capture;
  auto agree = [](Harness& hns, int splits) {
    const Result first = hns.run(true, splits);
    for (Capture how : {Capture::None, Capture::Graph, Capture::Graph, Capture::Runtime}) {
      INFO("capture ", static_cast<int>(how));
      const Result again = hns.run(true, splits, how);
      CHECK(max_abs_diff(again.out, first.out) == 0);
      CHECK(max_abs_diff(again.lse, first.lse) == 0);
    }
  };
  for (int hs : {128, 256}) {
    for (bool causal : {false, true}) {
      Case c = varlen_case("60 sequences 1-600, d" + std::to_string(hs) + (causal ? " causal" : ""), 60, 1, 600, hs);
      c.nh = 2, c.nhk = 1, c.causal = causal;
      Harness hns(c, next_salt());
      INFO("case ", c.name, " seed ", hns.seed());
      agree(hns, 1);
    }
  }
  Case d;
  d.name = "decode gqa 32/8 paged 64, 5 splits";
  d.sq = {1, 1, 1};
  d.sk = lengths(case_rng(), 3, 300, 2500);
  d.nh = 32, d.nhk = 8, d.hs = 128, d.page = 64, d.causal = true;
  Harness hns(d, next_salt());
  INFO("case ", d.name, " seed ", hns.seed());
  agree(hns, 5);
}

TEST_CASE("flash kernels: decode, forced split counts agree") {
  SKIP_WITHOUT_CUDA();
  // One query per sequence, GQA 32/8, paged 64: the decode shape.
  Case c;
  c.name = "decode gqa 32/8 paged 64";
  c.sq = {1, 1, 1, 1, 1};
  c.sk = lengths(case_rng(), 5, 1, 2500);
  c.sk[2] = 0;
  c.nh = 32, c.nhk = 8, c.hs = 128, c.page = 64, c.causal = true;
  check_case(c);
  Harness hns(c, next_salt());
  INFO("seed ", hns.seed());
  Result ref, emul;
  hns.reference(ref, emul);
  const Result one = hns.run(true, 1);
  double top = 0;
  for (double x : one.out) top = std::max(top, std::abs(x));
  for (int splits : {2, 3, 5, 8, 17, 40}) {
    const Result r = hns.run(true, splits);
    const double diff = max_abs_diff(r.out, one.out), err = max_abs_diff(r.out, ref.out);
    std::printf("[flash] decode splits %2d: max|out - out_1split| %.2e, err %.2e, lse %.1e\n", splits, diff, err,
                lse_error(r.lse, ref.lse));
    CHECK(diff <= top * std::ldexp(1.0, -7));  // within two bf16 ulps of the largest output
    CHECK(err <= 2 * max_abs_diff(emul.out, ref.out) + 1e-5);
    CHECK(lse_error(r.lse, ref.lse) <= 2e-3);
  }
  Case d = c;
  d.name = "decode d64 gqa 8/2 sq 1..2, window";
  d.sq = {1, 2, 2, 1}, d.sk = lengths(case_rng(), 4, 2, 1500);
  d.nh = 8, d.nhk = 2, d.hs = 64, d.page = 0, d.causal = false, d.wl = 300, d.wr = 0, d.num_splits = 4;
  check_case(d);
  d.name = "decode f16 mqa 16/1 paged 32, 7 splits";
  d.dtype = FlashDType::F16, d.nh = 16, d.nhk = 1, d.hs = 128, d.page = 32, d.wl = -1, d.num_splits = 7;
  d.sq = {1, 1, 1};
  d.sk = lengths(case_rng(), 3, 100, 3000);
  check_case(d);
}

// On an sm_90 GPU a split decode call merges its splits inside a cluster of CTAs (each
// split's partial rows in its shared memory, read by the others) up to 8 splits, and through
// global scratch when that is switched off or the splits are more: the same partials merged
// in the same order, so the same bits. Split counts from 2 to 8 and 11 (scratch either way),
// paged and not, GQA rows of several queries, a window, an empty sequence, f16 and d64.
TEST_CASE("flash kernels: split decode merged in a cluster and through scratch agree bitwise") {
  SKIP_WITHOUT_CUDA();
  auto agree = [](const Case& c, int splits) {
    Harness hns(c, next_salt());
    INFO("case ", c.name, " splits ", splits, " seed ", hns.seed());
    wick::kernels::flash_set_cluster_merge(true);
    const Result cluster = hns.run(true, splits);
    wick::kernels::flash_set_cluster_merge(false);
    const Result scratch = hns.run(true, splits);
    wick::kernels::flash_set_cluster_merge(true);
    CHECK(max_abs_diff(cluster.out, scratch.out) == 0);
    CHECK(max_abs_diff(cluster.lse, scratch.lse) == 0);
    double worst = 0;
    for (double x : cluster.out) worst = std::max(worst, std::abs(x));
    CHECK(worst > 0);  // something was written
  };
  Case c;
  c.name = "decode gqa 32/8 paged 64";
  c.sq = {1, 1, 1, 1};
  c.sk = lengths(case_rng(), 4, 1, 3000);
  c.sk[1] = 0;
  c.nh = 32, c.nhk = 8, c.hs = 128, c.page = 64, c.causal = true;
  for (int splits : {2, 5, 8, 11}) agree(c, splits);
  Case d;
  d.name = "decode f16 d64 gqa 8/2 sq 1..2, window 700";
  d.sq = {1, 2, 2}, d.sk = lengths(case_rng(), 3, 2, 2500);
  d.nh = 8, d.nhk = 2, d.hs = 64, d.wl = 700, d.wr = 0, d.dtype = FlashDType::F16;
  for (int splits : {3, 7}) agree(d, splits);
  Case e = c;
  e.name = "decode d256 gqa 16/8 paged 64";
  e.nh = 16, e.hs = 256;
  for (int splits : {4, 11}) agree(e, splits);
  e.name = "decode 4 queries x gqa 8 (32 rows) paged 64";
  e.sq = {4, 4, 4, 4}, e.sk[1] = 3, e.nh = 64, e.hs = 128;
  for (int splits : {3, 11}) agree(e, splits);
  check_case(c);  // the launcher's own split count, against float64
  d.num_splits = 7;
  check_case(d);
}

// The decode shape (query rows x GQA group within 16) on every K/V layout; on an sm_90 GPU
// the Hopper decode takes these (copy-engine tiles, block ids read 32 pages at a time, V
// rows past a sequence's end zeroed in shared memory): batched K/V (rows past seqlen_k
// outside the tensor), varlen K/V (the next sequence's rows follow), pages of 32 (two
// pieces per 64-key tile) and 96 (not a multiple of 64), a single split walking more than
// 32 pages, several query rows per sequence under a causal mask (16 rows: 4 queries x 4
// heads), windows, lengths on and off the 64-key boundary, empty sequences, head size 96.
TEST_CASE("flash kernels: decode shape on every K/V layout") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  {
    Case c;
    c.name = "decode batched K/V, gqa 8/2, d128";
    c.varlen = false, c.sq = {1, 1, 1}, c.sk = {777, 777, 777};
    c.nh = 8, c.nhk = 2, c.hs = 128, c.causal = true;
    cases.push_back(c);
    c.name = "decode batched K/V, sq 2, gqa 16/2, d64, window 100";
    c.sq = {2, 2, 2}, c.sk = {320, 320, 320}, c.nh = 16, c.hs = 64, c.wl = 100, c.wr = 0, c.causal = false;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "decode varlen K/V, 4 queries x gqa 4 causal, d128";
    c.sq = {4, 4, 4, 4}, c.sk = {64, 5, 200, 1000};
    c.nh = 8, c.nhk = 2, c.hs = 128, c.causal = true;
    cases.push_back(c);
    c.name = "decode varlen K/V, empty sequences, d96";
    c.sq = {1, 1, 0, 1}, c.sk = {0, 130, 40, 128}, c.hs = 96, c.nh = 4, c.nhk = 1;
    cases.push_back(c);
  }
  for (int page : {32, 96, 256}) {
    Case c;
    c.name = "decode paged " + std::to_string(page) + ", gqa 32/8, d128";
    c.sq = {1, 1, 1, 1}, c.sk = lengths(case_rng(), 4, 1, 2600);
    c.sk[0] = 2 * page, c.sk[1] = 2 * page + 1;
    c.nh = 32, c.nhk = 8, c.hs = 128, c.page = page, c.causal = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "decode paged 32, one split over 90 pages, f16 d64";
    c.sq = {1, 1}, c.sk = {2880, 2001}, c.nh = 4, c.nhk = 4, c.hs = 64, c.page = 32, c.causal = true;
    c.dtype = FlashDType::F16, c.num_splits = 1;
    cases.push_back(c);
    c.name = "decode paged 64, window 500, 6 splits";
    c.sk = {3000, 700}, c.dtype = FlashDType::BF16, c.hs = 128, c.nh = 8, c.nhk = 1, c.page = 64;
    c.causal = false, c.wl = 500, c.wr = 0, c.num_splits = 6;
    cases.push_back(c);
  }
  {
    // head sizes 192 and 256 (the 256-channel decode tiles, Q read from shared memory at
    // every key tile; 192 reads zeros past its channels)
    Case c;
    c.name = "decode paged 64, gqa 16/8, d256";
    c.sq = {1, 1, 1, 1}, c.sk = lengths(case_rng(), 4, 1, 3000);
    c.sk[0] = 128, c.sk[1] = 129;
    c.nh = 16, c.nhk = 8, c.hs = 256, c.page = 64, c.causal = true;
    cases.push_back(c);
    c.name = "decode paged 32, gqa 8/2, d256 f16, 5 splits";
    c.nh = 8, c.nhk = 2, c.page = 32, c.dtype = FlashDType::F16, c.num_splits = 5;
    cases.push_back(c);
    c.name = "decode varlen K/V, 2 queries x gqa 8 causal, d192 f16";
    c.sq = {2, 2, 2}, c.sk = {2, 300, 1000};
    c.nh = 16, c.nhk = 2, c.hs = 192, c.page = 0, c.num_splits = 0;
    cases.push_back(c);
    c.name = "decode batched K/V, gqa 4/1, d256, window 200";
    c.varlen = false, c.sq = {1, 1, 1}, c.sk = {900, 900, 900};
    c.nh = 4, c.nhk = 1, c.hs = 256, c.dtype = FlashDType::BF16, c.causal = false, c.wl = 200, c.wr = 0;
    cases.push_back(c);
  }
  {
    // 17 to 32 rows up to head size 128 (two row tiles of 16): a few queries per sequence
    // times a GQA group, as in speculative decoding's check
    Case c;
    c.name = "decode 4 queries x gqa 8 (32 rows) causal, paged 64, d128";
    c.sq = {4, 4, 4, 4}, c.sk = lengths(case_rng(), 4, 4, 3000);
    c.sk[0] = 4, c.sk[1] = 64;
    c.nh = 32, c.nhk = 4, c.hs = 128, c.page = 64, c.causal = true;
    cases.push_back(c);
    c.name = "decode 3 queries x gqa 8 (24 rows), 4 splits, paged 32, d96 f16";
    c.sq = {3, 1, 3}, c.sk = {3, 1000, 2500}, c.hs = 96, c.page = 32, c.num_splits = 4;
    c.dtype = FlashDType::F16;
    cases.push_back(c);
    c.name = "decode 2 queries x gqa 16 (32 rows), varlen d64, window 150";
    c.sq = {2, 2, 0}, c.sk = {700, 40, 9}, c.nh = 16, c.nhk = 1, c.hs = 64, c.page = 0, c.num_splits = 0;
    c.dtype = FlashDType::BF16, c.causal = false, c.wl = 150, c.wr = 0;
    cases.push_back(c);
    c.name = "decode 5 queries x gqa 4 (20 rows) batched, d128";
    c.varlen = false, c.sq = {5, 5}, c.sk = {1300, 1300}, c.nh = 8, c.nhk = 2, c.hs = 128, c.wl = -1;
    c.causal = true;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

// The Hopper kernels copy K/V through the copy engine's descriptions (tma_map.h); a layout it
// cannot describe goes to the slower cp.async kernel without a word, so a description that
// fails for an ordinary layout shows only in the benchmarks. Every layout the kernels take:
// batched, varlen (packed rows, no batch stride) and paged, with a copy per 64-channel panel
// and with one copy of all panels ("joint": only where the head size is whole panels).
TEST_CASE("flash kernels: the copy engine describes every K/V layout") {
  SKIP_WITHOUT_CUDA();
  using wick::kernels::flash::make_kv_maps;
  void* buf = nullptr;
  REQUIRE(cudaMalloc(&buf, 1 << 20) == cudaSuccess);
  const uint32_t cu[3] = {0, 100, 300};
  const int32_t table[4] = {0, 1, 2, 3};
  for (int hs : {64, 96, 128, 256})
    for (int layout = 0; layout < 3; ++layout) {
      FlashFwdParams p;
      p.k = p.v = buf;
      p.head_size = hs, p.num_heads_k = 4, p.batch = 2, p.seqlen_k = 300;
      p.k_row_stride = p.v_row_stride = int64_t{4} * hs, p.k_head_stride = p.v_head_stride = hs;
      if (layout == 0) p.k_batch_stride = p.v_batch_stride = int64_t{300} * 4 * hs;  // batched
      if (layout == 1) p.cu_seqlens_k = cu, p.kv_rows = 300;                      // varlen, packed
      if (layout == 2) {                                                         // paged, pages of 64
        p.block_table = table, p.page_block_size = 64, p.num_blocks = 4;
        p.k_batch_stride = p.v_batch_stride = int64_t{64} * 4 * hs;
      }
      CAPTURE(hs);
      CAPTURE(layout);
      CUtensorMap k, v;
      CHECK(make_kv_maps(p, 64, 6, false, k, v));
      CHECK(make_kv_maps(p, 64, 6, true, k, v));
      CHECK(make_kv_maps(p, 64, 6, false, k, v, true) == (hs % 64 == 0));
      p.k_row_stride += 1;  // rows 2 bytes past a multiple of 16: not describable
      CHECK_FALSE(make_kv_maps(p, 64, 6, false, k, v));
    }
  CHECK(cudaFree(buf) == cudaSuccess);
}

// Small shapes for compute-sanitizer (memcheck / racecheck): every kernel (naive, prefill
// with Q in registers and from shared memory, d512 column chunks, decode, combine), paged
// and not, causal and not, tails.
TEST_CASE("flash kernels: sanitizer subset") {
  SKIP_WITHOUT_CUDA();
  std::vector<Case> cases;
  {
    Case c = varlen_case("san: d64 causal tails", 3, 1, 150, 64);
    c.causal = true, c.nh = 2, c.nhk = 1;
    cases.push_back(c);
    c.name = "san: d128 paged 32";
    c.hs = 128, c.page = 32, c.causal = false;
    c.sk = lengths(case_rng(), 3, 1, 200);
    cases.push_back(c);
    c.name = "san: d256 paged 64 causal f16";
    c.hs = 256, c.page = 64, c.causal = true, c.dtype = FlashDType::F16;
    cases.push_back(c);
    c.name = "san: d64 paged 96 (tiles straddle pages)";
    c.hs = 64, c.page = 96, c.causal = false;
    c.sk = lengths(case_rng(), 3, 1, 400);
    cases.push_back(c);
    c.name = "san: d512 window";
    c.hs = 512, c.page = 0, c.causal = false, c.wl = 20, c.wr = 10, c.dtype = FlashDType::BF16;
    c.sk = c.sq;
    cases.push_back(c);
    // d128 not paged: the Hopper kernel on an sm_90 GPU (two key tiles and a tail)
    c.name = "san: d128 GQA causal tails";
    c.hs = 128, c.wl = c.wr = -1, c.causal = true, c.nh = 4, c.nhk = 2;
    c.sq = lengths(case_rng(), 3, 1, 300), c.sk = c.sq;
    cases.push_back(c);
    c.name = "san: d128 window f16";
    c.causal = false, c.wl = 40, c.wr = 7, c.dtype = FlashDType::F16;
    cases.push_back(c);
    c.name = "san: d128 paged 96 causal (tiles straddle pages)";
    c.wl = c.wr = -1, c.causal = true, c.page = 96, c.dtype = FlashDType::BF16;
    c.sk = lengths(case_rng(), 3, 1, 400);
    cases.push_back(c);
    // d64 and d256 on the Hopper kernels too (d256: 80-key tiles unpaged, 64-key tiles of two
    // quarters of a page when paged)
    c.name = "san: d256 GQA window tails";
    c.hs = 256, c.page = 0, c.causal = false, c.wl = 70, c.wr = 20;
    c.sq = lengths(case_rng(), 3, 1, 300), c.sk = lengths(case_rng(), 3, 1, 300);
    cases.push_back(c);
    c.name = "san: d64 paged 32 causal";
    c.hs = 64, c.page = 32, c.causal = true, c.wl = c.wr = -1;
    c.sk = c.sq;
    cases.push_back(c);
    c.name = "san: d256 paged 96 (tiles straddle pages)";
    c.hs = 256, c.page = 96, c.causal = false;
    c.sk = lengths(case_rng(), 3, 1, 400);
    cases.push_back(c);
    // d96 on the 128-channel tiles (zeros past the head size), d192 on 112-key tiles unpaged
    // and 64-key tiles paged
    c.name = "san: d96 paged 64 causal";
    c.hs = 96, c.page = 64, c.causal = true;
    cases.push_back(c);
    c.name = "san: d192 GQA window tails";
    c.hs = 192, c.page = 0, c.causal = false, c.wl = 50, c.wr = 30;
    cases.push_back(c);
    c.name = "san: d192 paged 96";
    c.hs = 192, c.page = 96, c.wl = c.wr = -1;
    cases.push_back(c);
    // the general logits' instances: softcap and ALiBi paged, mm-prefix ranges over a window
    c.name = "san: d128 softcap alibi paged 64 causal";
    c.hs = 128, c.page = 64, c.causal = true, c.softcap = 10.f, c.alibi = true;
    cases.push_back(c);
    c.name = "san: d256 mm-prefix ranges, window 30/0";
    c.hs = 256, c.page = 0, c.causal = false, c.wl = 30, c.wr = 0, c.softcap = 0.f, c.alibi = false;
    for (int n : c.sk) c.mm.push_back({{n / 6, n / 2}});
    cases.push_back(c);
    // d128 over 1024 rows: 192-row tiles of 80 keys, and of 64 keys paged or causal varlen
    c.name = "san: d128 1030-1100 rows, paged 64";
    c.hs = 128, c.page = 64, c.wl = c.wr = -1, c.mm.clear(), c.nh = 2, c.nhk = 1;
    c.sq = lengths(case_rng(), 2, 1030, 1100), c.sk = c.sq;
    cases.push_back(c);
    c.name = "san: d128 1030-1100 rows, causal";
    c.page = 0, c.causal = true;
    cases.push_back(c);
    c.name = "san: d128 1030-1100 rows, 80-key tiles";
    c.causal = false;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "san: decode split 3 paged 64";
    c.sq = {1, 1}, c.sk = {300, 129};
    c.nh = 8, c.nhk = 2, c.hs = 128, c.page = 64, c.causal = true, c.num_splits = 3;
    cases.push_back(c);
    // the Hopper decode on an sm_90 GPU: varlen tails, and a window over pages of 32
    c.name = "san: decode varlen d64 tails, 2 splits";
    c.sq = {1, 2, 1}, c.sk = {70, 1, 190};
    c.hs = 64, c.page = 0, c.nh = 8, c.nhk = 4, c.num_splits = 2;
    cases.push_back(c);
    c.name = "san: decode paged 32 d128 window";
    c.sq = {1, 1}, c.sk = {2100, 33};
    c.hs = 128, c.page = 32, c.nh = 4, c.nhk = 1, c.num_splits = 0, c.causal = false, c.wl = 90, c.wr = 0;
    cases.push_back(c);
    c.name = "san: decode d256 paged 64, 3 splits";
    c.sk = {700, 65}, c.hs = 256, c.page = 64, c.nh = 8, c.nhk = 4, c.num_splits = 3, c.wl = -1;
    cases.push_back(c);
    c.name = "san: decode d192 varlen tails f16";
    c.sq = {1, 2}, c.sk = {130, 7}, c.hs = 192, c.page = 0, c.nh = 4, c.nhk = 2, c.num_splits = 0;
    c.dtype = FlashDType::F16;
    cases.push_back(c);
    c.dtype = FlashDType::BF16;
    c.name = "san: decode 32 rows paged 64 d128, 3 splits";
    c.sq = {4, 3}, c.sk = {600, 3}, c.hs = 128, c.page = 64, c.nh = 16, c.nhk = 2, c.num_splits = 3;
    c.causal = true;
    cases.push_back(c);
    c.name = "san: decode 32 rows varlen d64 window";
    c.sq = {2, 2}, c.sk = {300, 70}, c.hs = 64, c.page = 0, c.nh = 16, c.nhk = 1, c.num_splits = 0;
    c.causal = false, c.wl = 40, c.wr = 0;
    cases.push_back(c);
    c.wl = c.wr = -1;
    // d512 computes its output in two column chunks: the splits merge in the combine kernel
    // instead of in place
    c.wl = c.wr = -1, c.causal = true, c.num_splits = 3;
    c.name = "san: d512 split 3 (combine kernel)";
    c.sq = {3, 1}, c.sk = {300, 70};
    c.hs = 512, c.page = 0, c.nh = 2, c.nhk = 1;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

#endif  // WICK_WITH_CUDA
