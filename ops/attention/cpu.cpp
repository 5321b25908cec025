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

#include "tensor/dtype.h"

namespace wick::attention {

namespace {

using kernels::FlashFwdParams;
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

// Where one sequence's rows are (index maps: kernels/flash/flash_params.h).
struct Sequence {
  int b = 0;
  int64_t q_start = 0, k_start = 0;
  int sq = 0, sk = 0;
};

Sequence sequence(const FlashFwdParams& p, int b) {
  Sequence s;
  s.b = b;
  if (p.cu_seqlens_q) {
    s.q_start = p.cu_seqlens_q[b];
    s.sq = static_cast<int>(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]);
    s.k_start = p.cu_seqlens_k[b];
    s.sk = static_cast<int>(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]);
  } else {
    s.sq = p.seqlen_q;
    s.sk = p.seqlen_k;
  }
  return s;
}

struct Range {
  int64_t begin, end;  // [begin, end) in key positions
};

// The mm-prefix ranges of sequence b that are non-empty.
std::vector<Range> prefix_ranges(const FlashFwdParams& p, int b) {
  std::vector<Range> out;
  if (!p.mm_prefix_ranges) return out;
  for (int r = 0; r < p.mm_max_ranges; ++r) {
    const int32_t* e = p.mm_prefix_ranges + b * p.mm_batch_stride + r * p.mm_range_stride;
    if (e[0] < e[1]) out.push_back({e[0], e[1]});
  }
  return out;
}

// Is key t visible to the query row at key position pos? (parity sheet section 4)
inline bool visible(const FlashFwdParams& p, const std::vector<Range>& ranges, int64_t pos, int64_t t) {
  if ((p.window_left < 0 || t >= pos - p.window_left) && (p.window_right < 0 || t <= pos + p.window_right))
    return true;
  for (const Range& r : ranges)
    if (r.begin <= pos && pos < r.end && r.begin <= t && t < r.end) return true;
  return false;
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
    const Sequence s = sequence(p_, it.b);
    const int m0 = it.m_block * kBlockM;
    const int rows = std::min(kBlockM, s.sq - m0);
    const int hk = it.h / (p_.num_heads / p_.num_heads_k);
    const int64_t pos0 = m0 + static_cast<int64_t>(s.sk) - s.sq;  // p(first row)
    const int64_t pos1 = pos0 + rows - 1;                          // p(last row)
    const std::vector<Range> ranges = prefix_ranges(p_, it.b);
    const float slope = p_.alibi_slopes ? p_.alibi_slopes[it.h] : 0.0f;
    const bool softcap = p_.softcap > 0.0f;

    // Step 1: Q tile in f32. Without softcap the scale folds into Q (one multiply per
    // element of Q instead of one per score); with softcap it must go inside the tanh.
    load_q(s, it.h, m0, rows, softcap ? 1.0f : p_.softmax_scale);
    m_.setConstant(rows, kNegInf);
    l_.setZero(rows);
    O_.setZero(rows, d_);

    // Step 0 (cont.): the keys this tile can see at all.
    auto [n_begin, n_end] = key_range(s.sk, pos0, pos1, ranges);
    if (n_begin < n_end) select_panel(s, hk);
    for (int64_t n0 = n_begin / kBlockN * kBlockN; n0 < n_end; n0 += kBlockN) {
      const int cols = static_cast<int>(std::min<int64_t>(kBlockN, s.sk - n0));
      // Step 2: K and V for these keys, in f32 (converted once per panel).
      ensure_block(s, hk, n0, cols);
      auto Kb = K_.middleRows(n0, cols);
      auto Vb = V_.middleRows(n0, cols);
      // Step 2a: scores.
      S_.resize(rows, cols);
      S_.noalias() = Q_ * Kb.transpose();
      if (softcap) {
        const float inv = p_.softmax_scale / p_.softcap;
        S_.array() = (S_.array() * inv).tanh() * p_.softcap;
      }
      if (slope != 0.0f) add_alibi(slope, pos0, n0, rows, cols);
      const bool masked = !fully_visible(pos0, pos1, n0, n0 + cols - 1);
      if (masked) apply_mask(ranges, pos0, n0, rows, cols);
      // Steps 2b-2d: online softmax update, then O += P V.
      online_softmax(masked);
      O_.noalias() += S_ * Vb;  // step 2d; S_ now holds P
    }
    // Step 3: normalise and store.
    store(s, it.h, m0, rows);
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

  const T* q_row(const Sequence& s, int h, int64_t i) const {
    return static_cast<const T*>(p_.q) + s.b * p_.q_batch_stride + (s.q_start + i) * p_.q_row_stride +
           h * p_.q_head_stride;
  }

  void load_q(const Sequence& s, int h, int m0, int rows, float scale) {
    Q_.resize(rows, d_);
    for (int r = 0; r < rows; ++r) load_f32(q_row(s, h, m0 + r), Q_.row(r).data(), d_);
    if (scale != 1.0f) Q_ *= scale;
  }

  // Keys that some row in [pos0, pos1] may see: the window's span, widened by every
  // mm-prefix range that one of the rows falls into.
  std::pair<int64_t, int64_t> key_range(int sk, int64_t pos0, int64_t pos1,
                                        const std::vector<Range>& ranges) const {
    int64_t lo = 0, hi = sk;
    if (p_.window_left >= 0) lo = std::max<int64_t>(0, pos0 - p_.window_left);
    if (p_.window_right >= 0) hi = std::min<int64_t>(sk, pos1 + p_.window_right + 1);
    if (lo >= hi) lo = sk, hi = 0;  // the window shows nothing; ranges may still
    for (const Range& r : ranges) {
      if (r.begin > pos1 || r.end <= pos0) continue;  // no row of the tile inside
      lo = std::min(lo, std::max<int64_t>(0, r.begin));
      hi = std::max(hi, std::min<int64_t>(sk, r.end));
    }
    return {lo, hi};
  }

  // True when every row of the tile sees every key in [t0, t1] through the window alone:
  // the last row is the most restricted on the left, the first on the right.
  bool fully_visible(int64_t pos0, int64_t pos1, int64_t t0, int64_t t1) const {
    return (p_.window_left < 0 || t0 >= pos1 - p_.window_left) &&
           (p_.window_right < 0 || t1 <= pos0 + p_.window_right);
  }

  void select_panel(const Sequence& s, int hk) {
    if (panel_b_ == s.b && panel_hk_ == hk) return;
    panel_b_ = s.b, panel_hk_ = hk;
    const int64_t padded = (static_cast<int64_t>(s.sk) + kBlockN - 1) / kBlockN * kBlockN;
    if (K_.rows() < padded) {
      K_.resize(padded, d_);
      V_.resize(padded, d_);
    }
    ready_.assign(padded / kBlockN, 0);
  }

  const T* kv_row(const void* base, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                  const Sequence& s, int hk, int64_t t) const {
    const T* ptr = static_cast<const T*>(base) + hk * head_stride;
    if (p_.block_table) {
      const int32_t blk = p_.block_table[s.b * p_.block_table_batch_stride + t / p_.page_block_size];
      return ptr + blk * batch_stride + (t % p_.page_block_size) * row_stride;
    }
    return ptr + s.b * batch_stride + (s.k_start + t) * row_stride;
  }

  void ensure_block(const Sequence& s, int hk, int64_t n0, int cols) {
    char& done = ready_[n0 / kBlockN];
    if (done) return;
    for (int c = 0; c < cols; ++c) {
      const int64_t t = n0 + c;
      load_f32(kv_row(p_.k, p_.k_batch_stride, p_.k_row_stride, p_.k_head_stride, s, hk, t),
               K_.row(t).data(), d_);
      load_f32(kv_row(p_.v, p_.v_batch_stride, p_.v_row_stride, p_.v_head_stride, s, hk, t),
               V_.row(t).data(), d_);
    }
    done = 1;
  }

  void add_alibi(float slope, int64_t pos0, int64_t n0, int rows, int cols) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        S_(r, c) -= slope * static_cast<float>(std::abs(pos0 + r - (n0 + c)));
  }

  // The window leaves each row one contiguous span of keys: fill -inf on both sides of it.
  // Rows inside an mm-prefix range may see more, so they take the per-key test.
  void apply_mask(const std::vector<Range>& ranges, int64_t pos0, int64_t n0, int rows, int cols) {
    for (int r = 0; r < rows; ++r) {
      const int64_t pos = pos0 + r;
      const bool in_range = std::any_of(ranges.begin(), ranges.end(),
                                        [&](const Range& g) { return g.begin <= pos && pos < g.end; });
      if (in_range) {
        for (int c = 0; c < cols; ++c)
          if (!visible(p_, ranges, pos, n0 + c)) S_(r, c) = kNegInf;
        continue;
      }
      const int64_t lo = p_.window_left < 0 ? 0 : std::clamp<int64_t>(pos - p_.window_left - n0, 0, cols);
      const int64_t hi = p_.window_right < 0 ? cols : std::clamp<int64_t>(pos + p_.window_right + 1 - n0, lo, cols);
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

  void store(const Sequence& s, int h, int m0, int rows) {
    std::vector<float> row(d_);
    for (int r = 0; r < rows; ++r) {
      const int64_t i = s.q_start + m0 + r;
      T* out = static_cast<T*>(p_.out) + s.b * p_.o_batch_stride + i * p_.o_row_stride + h * p_.o_head_stride;
      const bool seen = l_(r) > 0.0f;
      for (int c = 0; c < d_; ++c) row[c] = seen ? O_(r, c) / l_(r) : 0.0f;
      store_from_f32(row.data(), out, d_);
      if (p_.lse)
        p_.lse[s.b * p_.lse_batch_stride + h * p_.lse_head_stride + i] = seen ? m_(r) + std::log(l_(r)) : kNegInf;
    }
  }
};

// Work items ordered (sequence, head, query block), so that consecutive items share a K/V panel.
std::vector<Item> work_items(const FlashFwdParams& p) {
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    const int sq = sequence(p, b).sq;
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
