// Flash attention on the CPU, written as the lesson for how the GPU kernel works.
//
// The naive computation materialises the (sq x sk) score matrix, softmaxes each row and
// multiplies by V. Flash attention never holds more than one (kBlockM x kBlockN) tile of
// scores: it walks the keys block by block, keeping for every query row a running max m,
// a running sum l of exp(logit - m) and an unnormalised output O, and rescales m, l and O
// whenever a new block raises the max (the "online softmax"). The result is exact, not an
// approximation: at the end O / l is the softmax-weighted sum and m + log(l) the row's LSE.
//
// The steps below are numbered; the CUDA kernels (kernels/flash/flash_fwd_kernel.cuh and the
// lesson kernel flash_naive.cu) cite the same numbers.
//   Step 0  one work item = (sequence b, query head h, query block of kBlockM rows); the key
//           range [n_begin, n_end) any row of the block can see (windows, causal, mm-prefix
//           ranges) is found up front, so key blocks outside it are never touched.
//   Step 1  load the query tile Q (kBlockM x d) in f32, pre-scaled by softmax_scale.
//   Step 2  for each key block (K and V brought to f32, through the block table when paged):
//     2a      S = Q K^T (Eigen GEMM), then softcap, ALiBi and the mask (-inf where unseen),
//             the mask only on blocks that need one;
//     2b      running row max: m_new = max(m, rowmax S);
//     2c      P = exp(S - m_new) and the correction alpha = exp(m - m_new);
//     2d      l = alpha l + rowsum P;  O = alpha O + P V.
//   Step 3  O / l into out (q's dtype), m + log l into lse; a row that saw no key gets 0 and
//           -inf (never 0/0).
#include "ops/attention/cpu.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/flash/contract.h"
#include "tensor/dtype.h"

namespace wick::attention {

namespace {

using kernels::FlashFwdParams;
using namespace kernels::attn;  // the contract: seq_bounds, window_keys, key_visible, logit, ...
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Column = Eigen::Array<float, Eigen::Dynamic, 1>;

constexpr int kBlockM = 64;  // query rows per tile (one GPU thread block's rows)
constexpr int kBlockN = 64;  // keys per tile
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- element conversion: f16/bf16 storage, f32 arithmetic ----------------------------

inline void load_f32(const bf16* src, float* dst, int n) {
  // bf16 is the top half of an f32: a shift, which the compiler vectorises.
  const auto* bits = reinterpret_cast<const uint16_t*>(src);
  for (int i = 0; i < n; ++i) {
    uint32_t w = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(dst + i, &w, sizeof w);
  }
}
inline void load_f32(const f16* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
template <class T>
inline void store_from_f32(const float* src, T* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

struct Item {
  int b, h, m_block;
};

// One thread's state. T is the storage type (f16 or bf16).
template <class T>
class Worker {
 public:
  explicit Worker(const FlashFwdParams& p) : p_(p), d_(p.head_size) {}

  void run(const Item& it) {
    // Step 0: the tile's rows, and where they sit among the keys (bottom-right alignment).
    const SeqBounds s = seq_bounds(p_, it.b);
    const int m0 = it.m_block * kBlockM;
    const int rows = std::min(kBlockM, s.sq - m0);
    const int hk = kv_head(p_, it.h);
    const int64_t pos0 = key_position(s, m0);  // pos(first row)
    const int64_t pos1 = pos0 + rows - 1;      // pos(last row)
    const float slope = alibi_slope(p_, it.h);
    // Softcap and ALiBi need the contract's logit per score; without them the logit is
    // softmax_scale * q.k, so the scale folds into Q (one multiply per element of Q instead
    // of one per score).
    const bool general_logits = p_.softcap > 0.0f || slope != 0.0f;

    // Step 1: Q tile in f32.
    load_q(s, it.b, it.h, m0, rows, general_logits ? 1.0f : p_.softmax_scale);
    m_.setConstant(rows, kNegInf);
    l_.setZero(rows);
    O_.setZero(rows, d_);

    // Step 0 (cont.): the keys this tile can see at all.
    const int64_t sk = s.sk;
    const KeyRange keys = visible_keys_of_rows<int64_t>(p_, it.b, pos0, pos1, sk);
    if (!keys.empty()) select_panel(it.b, s, hk);
    const int64_t n_end = keys.empty() ? 0 : keys.end;
    for (int64_t n0 = keys.begin / kBlockN * kBlockN; n0 < n_end; n0 += kBlockN) {
      const int cols = static_cast<int>(std::min<int64_t>(kBlockN, s.sk - n0));
      // Step 2: K and V for these keys, in f32 (converted once per panel).
      ensure_block(it.b, s, hk, n0, cols);
      auto Kb = K_.middleRows(n0, cols);
      auto Vb = V_.middleRows(n0, cols);
      // Step 2a: scores.
      S_.resize(rows, cols);
      S_.noalias() = Q_ * Kb.transpose();
      if (general_logits) apply_logits(slope, pos0, n0, rows, cols);
      const bool masked = rows_touch_ranges<int64_t>(p_, it.b, pos0, pos1) ||
                          !window_covers<int64_t>(p_, pos0, pos1, n0, n0 + cols - 1, sk);
      if (masked) apply_mask(it.b, pos0, n0, rows, cols, sk);
      // Steps 2b-2d: online softmax update, then O += P V.
      online_softmax(masked);
      O_.noalias() += S_ * Vb;  // step 2d; S_ now holds P
    }
    // Step 3: normalise and store.
    store(it.b, s, it.h, m0, rows);
  }

 private:
  const FlashFwdParams& p_;
  const int d_;
  RowMatrix Q_, S_, O_;
  Column m_, l_;
  // The f32 K/V panel of one (sequence, kv head): converted block by block on first use
  // and reused by every query block and every query head of the GQA group.
  int panel_b_ = -1, panel_hk_ = -1;
  RowMatrix K_, V_;
  std::vector<char> ready_;

  void load_q(const SeqBounds& s, int b, int h, int m0, int rows, float scale) {
    Q_.resize(rows, d_);
    const T* q = static_cast<const T*>(p_.q);
    for (int r = 0; r < rows; ++r) load_f32(q + q_offset(p_, b, s, m0 + r, h), Q_.row(r).data(), d_);
    if (scale != 1.0f) Q_ *= scale;
  }

  void select_panel(int b, const SeqBounds& s, int hk) {
    if (panel_b_ == b && panel_hk_ == hk) return;
    panel_b_ = b, panel_hk_ = hk;
    const int64_t padded = (static_cast<int64_t>(s.sk) + kBlockN - 1) / kBlockN * kBlockN;
    if (K_.rows() < padded) {
      K_.resize(padded, d_);
      V_.resize(padded, d_);
    }
    ready_.assign(padded / kBlockN, 0);
  }

  void ensure_block(int b, const SeqBounds& s, int hk, int64_t n0, int cols) {
    char& done = ready_[n0 / kBlockN];
    if (done) return;
    const T* k = static_cast<const T*>(p_.k);
    const T* v = static_cast<const T*>(p_.v);
    for (int c = 0; c < cols; ++c) {
      const int64_t t = n0 + c;
      load_f32(k + k_offset(p_, b, s, t, hk), K_.row(t).data(), d_);
      load_f32(v + v_offset(p_, b, s, t, hk), V_.row(t).data(), d_);
    }
    done = 1;
  }

  // S_ holds q.k (Q not pre-scaled): each score becomes the contract's logit.
  void apply_logits(float slope, int64_t pos0, int64_t n0, int rows, int cols) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        S_(r, c) = logit(S_(r, c), p_.softmax_scale, p_.softcap, slope, pos0 + r, n0 + c);
  }

  // The window leaves each row one contiguous span of keys (window_keys): fill -inf on both
  // sides of it. Rows inside an mm-prefix range may see more, so they take the per-key rule.
  void apply_mask(int b, int64_t pos0, int64_t n0, int rows, int cols, int64_t sk) {
    for (int r = 0; r < rows; ++r) {
      const int64_t pos = pos0 + r;
      if (rows_touch_ranges<int64_t>(p_, b, pos, pos)) {
        for (int c = 0; c < cols; ++c)
          if (!key_visible<int64_t>(p_, b, pos, n0 + c, sk)) S_(r, c) = kNegInf;
        continue;
      }
      // the row's window keys as columns of this block: [lo, hi), empty when hi <= lo
      const KeyRange w = window_keys<int64_t>(p_, pos, sk);
      const int64_t lo = std::clamp<int64_t>(w.begin - n0, 0, cols), hi = std::clamp<int64_t>(w.end - n0, lo, cols);
      float* row = S_.row(r).data();
      std::fill(row, row + lo, kNegInf);
      std::fill(row + hi, row + cols, kNegInf);
    }
  }

  // S_ holds this block's logits; on return it holds P = exp(S - m_new) (exact zeros where
  // masked), and m_, l_, O_ are rescaled to the new max.
  void online_softmax(bool masked) {
    const Column m_new = m_.max(S_.rowwise().maxCoeff().array());  // 2b
    // A row that has seen no key yet keeps m = -inf; subtracting 0 instead keeps exp finite.
    const Column m_safe = (m_new == kNegInf).select(Column::Zero(m_new.size()), m_new);
    const Column alpha = (m_ - m_safe).exp();  // 2c
    if (masked)
      S_.array() = (S_.array() == kNegInf).select(0.0f, (S_.array().colwise() - m_safe).exp());
    else
      S_.array() = (S_.array().colwise() - m_safe).exp();
    l_ = l_ * alpha + S_.rowwise().sum().array();  // 2d (P V is added by the caller)
    O_.array().colwise() *= alpha;
    m_ = m_new;
  }

  void store(int b, const SeqBounds& s, int h, int m0, int rows) {
    std::vector<float> row(d_);
    for (int r = 0; r < rows; ++r) {
      T* out = static_cast<T*>(p_.out) + o_offset(p_, b, s, m0 + r, h);
      const bool seen = l_(r) > 0.0f;
      for (int c = 0; c < d_; ++c) row[c] = seen ? O_(r, c) / l_(r) : 0.0f;
      store_from_f32(row.data(), out, d_);
      if (p_.lse) p_.lse[lse_offset(p_, b, s, m0 + r, h)] = seen ? m_(r) + std::log(l_(r)) : kNegInf;
    }
  }
};

// Work items ordered (sequence, head, query block), so that consecutive items share a K/V panel.
std::vector<Item> work_items(const FlashFwdParams& p) {
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    const int sq = seq_bounds(p, b).sq;
    const int blocks = (sq + kBlockM - 1) / kBlockM;
    for (int h = 0; h < p.num_heads; ++h)
      for (int m = 0; m < blocks; ++m) items.push_back({b, h, m});
  }
  return items;
}

template <class T>
void run_all(const FlashFwdParams& p, const std::vector<Item>& items, int num_threads) {
  std::atomic<size_t> next{0};
  auto body = [&] {
    Worker<T> w(p);
    for (size_t i; (i = next.fetch_add(1)) < items.size();) w.run(items[i]);
  };
  if (num_threads <= 1) return body();
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(num_threads);
  for (int t = 0; t < num_threads; ++t)
    threads.emplace_back([&, t] {
      try {
        body();
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void cpu_flash_fwd(const FlashFwdParams& p, int num_threads) {
  if (p.head_size <= 0 || p.num_heads <= 0) return;
  const std::vector<Item> items = work_items(p);
  if (items.empty()) return;
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads = static_cast<int>(std::min<size_t>(num_threads, items.size()));
  if (p.dtype == kernels::FlashDType::F16)
    run_all<f16>(p, items, num_threads);
  else
    run_all<bf16>(p, items, num_threads);
}

}  // namespace wick::attention
