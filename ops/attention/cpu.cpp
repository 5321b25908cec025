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
//   Step 0  one tile = (sequence b, query head h, query block of kBlockM rows); the key
//           range [n_begin, n_end) any row of the block can see (windows, causal, mm-prefix
//           ranges) is found up front, so key blocks outside it are never touched.
//   Step 1  load the query tile Q.
//   Step 2  for each key block (K and V packed into scratch, through the block table when
//           paged):
//     2a      S = scale * Q K^T, then softcap and ALiBi (the contract's logit) and the mask
//             (-inf where unseen), the mask only on blocks that need one;
//     2b      running row max: m_new = max(m, rowmax S);
//     2c      P = exp(S - m_new) and the correction alpha = exp(m - m_new);
//     2d      l = alpha l + rowsum P;  O = alpha O + P V.
//   Step 3  O / l into out (q's dtype), m + log l into lse; a row that saw no key gets 0 and
//           -inf (never 0/0).
//
// Non-finite inputs propagate as they do in the float64 evaluation and in PyTorch: a NaN or
// infinite logit makes l NaN (exp(NaN) is NaN; +inf raises the max to +inf and exp(inf - inf)
// is NaN), so the row's out and lse are NaN; a NaN or inf in V reaches the rows that give its
// key a nonzero weight (a block holding one multiplies P V key by key, skipping zero weights,
// because 0 * NaN would reach rows that never see the key).
//
// How it runs on a CPU. The arithmetic of steps 1-2d lives in cpu_tiles.h, once per code
// path (generic C++, AVX2, AVX-512, AVX512-BF16 dot products, AMX tiles on request), picked
// at run time for the CPU at hand. Tiles are grouped into work items of (sequence, kv head, a few
// consecutive query blocks); an item runs every query head of its GQA group, so K and V are
// packed once per item into a small ring of key blocks (at most kRingBytes per thread,
// whatever the sequence length: a long sequence with a short window holds only what a tile
// sees). Items run on the shared CPU thread pool (ops/cpu/parallel.h), largest first.
#include "ops/attention/cpu.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "kernels/flash/contract.h"
#include "ops/attention/cpu_tiles.h"
#include "ops/cpu/parallel.h"
#include "tensor/dtype.h"

namespace wick::attention {

namespace {

using kernels::FlashFwdParams;
using namespace kernels::attn;  // the contract: seq_bounds, window_keys, key_visible, logit, ...
using tiles::kBlockM;
using tiles::kBlockN;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kRingBytes = size_t(2) << 20;  // packed K/V kept per thread
constexpr int kMaxChunk = 8;                      // query blocks per work item, at most

// Scratch aligned for vector loads (and AMX tile loads).
class Buffer {
 public:
  void reserve(size_t bytes) {
    if (bytes <= size_) return;
    data_.reset(static_cast<unsigned char*>(::operator new(bytes, std::align_val_t(64))));
    size_ = bytes;
  }
  void* get(size_t offset = 0) const { return data_.get() + offset; }
  float* f32() const { return reinterpret_cast<float*>(data_.get()); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete(p, std::align_val_t(64)); }
  };
  std::unique_ptr<unsigned char, Free> data_;
  size_t size_ = 0;
};

struct Item {
  int b, hk;
  int mb_begin, mb_end;  // query blocks [mb_begin, mb_end)
  double cost;           // visible (row, key) pairs of every head of the group
};

// Keys bits -> f32 for the scalar fallback below.
inline float bits_to_f32(uint16_t bits, bool is_bf16) {
  return is_bf16 ? static_cast<float>(bf16::from_bits(bits)) : static_cast<float>(f16::from_bits(bits));
}

// One thread's state: the scratch tiles and the ring of packed key blocks.
class Worker {
 public:
  Worker(const FlashFwdParams& p, const tiles::Kernels& k)
      : p_(p), k_(k), d_(p.head_size), dp_((p.head_size + k.pad_d - 1) / k.pad_d * k.pad_d),
        bf16_(p.dtype == kernels::FlashDType::BF16) {
    q_.reserve(tiles::q_bytes(k.format, dp_));
    s_.reserve(sizeof(float) * kBlockM * kBlockN);
    pbuf_.reserve(tiles::p_bytes(k.format));
    o_.reserve(sizeof(float) * kBlockM * dp_);
    ml_.reserve(sizeof(float) * 3 * kBlockM);
    slot_bytes_ = tiles::kv_bytes(k.format, dp_);
    max_slots_ = std::max<int64_t>(1, static_cast<int64_t>(kRingBytes / (2 * slot_bytes_)));
  }

  void run(const Item& it) {
    const SeqBounds s = seq_bounds(p_, it.b);
    // The keys any row of the item can see: the ring never needs more slots than that.
    const int64_t first = key_position(s, int64_t(it.mb_begin) * kBlockM);
    const int64_t last = key_position(s, std::min<int64_t>(int64_t(it.mb_end) * kBlockM, s.sq) - 1);
    const KeyRange all = visible_keys_of_rows<int64_t>(p_, it.b, first, last, s.sk);
    const int64_t blocks = all.empty() ? 0 : (all.end + kBlockN - 1) / kBlockN - all.begin / kBlockN;
    slots_ = std::max<int64_t>(1, std::min(blocks, max_slots_));
    kv_.reserve(static_cast<size_t>(2 * slots_) * slot_bytes_);
    tag_.assign(slots_, -1);
    bad_.assign(slots_, 0);
    const int g = group_size(p_);
    for (int mb = it.mb_begin; mb < it.mb_end; ++mb)
      for (int h = it.hk * g; h < (it.hk + 1) * g; ++h) tile(it.b, s, h, it.hk, mb);
  }

 private:
  const FlashFwdParams& p_;
  const tiles::Kernels& k_;
  const int d_, dp_;
  const bool bf16_;
  Buffer q_, s_, pbuf_, o_, ml_, kv_;
  size_t slot_bytes_;
  int64_t max_slots_, slots_ = 1;
  std::vector<int64_t> tag_;  // the key block each ring slot holds (-1: none)
  std::vector<char> bad_;     // the slot's V holds an inf or NaN
  const void* rows_[kBlockM > kBlockN ? kBlockM : kBlockN];

  float* m() const { return ml_.f32(); }
  float* l() const { return ml_.f32() + kBlockM; }
  float* alpha() const { return ml_.f32() + 2 * kBlockM; }

  void tile(int b, const SeqBounds& s, int h, int hk, int mb) {
    // Step 0: the tile's rows, and where they sit among the keys (bottom-right alignment).
    const int m0 = mb * kBlockM;
    const int rows = std::min(kBlockM, s.sq - m0);
    const int64_t pos0 = key_position(s, m0);  // pos(first row)
    const int64_t pos1 = pos0 + rows - 1;      // pos(last row)
    const int64_t sk = s.sk;
    const float slope = alibi_slope(p_, h);
    // Softcap and ALiBi need the contract's logit per score; without them the logit is
    // softmax_scale * q.k, which the score kernel forms directly.
    const bool general_logits = p_.softcap > 0.0f || slope != 0.0f;

    // Step 1: the query tile.
    const auto* q = static_cast<const uint16_t*>(p_.q);
    for (int r = 0; r < rows; ++r) rows_[r] = q + q_offset(p_, b, s, m0 + r, h);
    k_.pack_q(rows_, rows, d_, dp_, bf16_, q_.get());
    std::fill(m(), m() + kBlockM, kNegInf);
    std::fill(l(), l() + kBlockM, 0.0f);
    std::fill(o_.f32(), o_.f32() + size_t(kBlockM) * dp_, 0.0f);

    // Step 0 (cont.): the keys this tile can see at all.
    const KeyRange keys = visible_keys_of_rows<int64_t>(p_, b, pos0, pos1, sk);
    const int64_t n_end = keys.empty() ? 0 : keys.end;
    float* S = s_.f32();
    for (int64_t n0 = keys.begin / kBlockN * kBlockN; n0 < n_end; n0 += kBlockN) {
      const int cols = static_cast<int>(std::min<int64_t>(kBlockN, sk - n0));
      // Step 2: K and V for these keys, packed (once per item: the ring).
      const int slot = ensure_block(b, s, hk, n0, cols);
      const void* K = kv_.get(size_t(2 * slot) * slot_bytes_);
      const void* V = kv_.get(size_t(2 * slot + 1) * slot_bytes_);
      // Step 2a: logits.
      k_.scores(q_.get(), K, S, rows, dp_, general_logits ? 1.0f : p_.softmax_scale);
      if (general_logits) apply_logits(slope, pos0, n0, rows, cols);
      if (cols < kBlockN)  // keys past the sequence's end
        for (int r = 0; r < rows; ++r) std::fill(S + r * kBlockN + cols, S + (r + 1) * kBlockN, kNegInf);
      const bool masked = rows_touch_ranges<int64_t>(p_, b, pos0, pos1) ||
                          !window_covers<int64_t>(p_, pos0, pos1, n0, n0 + cols - 1, sk);
      if (masked) apply_mask(b, pos0, n0, rows, cols, sk);
      // Steps 2b-2d: the online softmax update, then O = alpha O + P V.
      k_.softmax(S, rows, m(), l(), alpha(), pbuf_.get());
      if (bad_[slot])
        pv_skipping_zeros(V, rows);
      else
        k_.pv(pbuf_.get(), V, o_.f32(), rows, dp_, alpha());
    }
    // Step 3: normalise and store.
    store(b, s, h, m0, rows);
  }

  // Packs key block n0 into its ring slot unless the slot holds it already.
  int ensure_block(int b, const SeqBounds& s, int hk, int64_t n0, int cols) {
    const int64_t blk = n0 / kBlockN;
    const int slot = static_cast<int>(blk % slots_);
    if (tag_[slot] == blk) return slot;
    const auto* k = static_cast<const uint16_t*>(p_.k);
    const auto* v = static_cast<const uint16_t*>(p_.v);
    void* K = kv_.get(size_t(2 * slot) * slot_bytes_);
    void* V = kv_.get(size_t(2 * slot + 1) * slot_bytes_);
    for (int c = 0; c < cols; ++c) rows_[c] = k + k_offset<int64_t>(p_, b, s, n0 + c, hk);
    k_.pack_k(rows_, cols, d_, dp_, bf16_, K);
    for (int c = 0; c < cols; ++c) rows_[c] = v + v_offset<int64_t>(p_, b, s, n0 + c, hk);
    bad_[slot] = k_.pack_v(rows_, cols, d_, dp_, bf16_, V);
    tag_[slot] = blk;
    return slot;
  }

  // S holds scale-free q.k: each score becomes the contract's logit.
  void apply_logits(float slope, int64_t pos0, int64_t n0, int rows, int cols) {
    float* S = s_.f32();
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float& x = S[r * kBlockN + c];
        x = logit(x, p_.softmax_scale, p_.softcap, slope, pos0 + r, n0 + c);
      }
  }

  // The window leaves each row one contiguous span of keys (window_keys): fill -inf on both
  // sides of it. Rows inside an mm-prefix range may see more, so they take the per-key rule.
  void apply_mask(int b, int64_t pos0, int64_t n0, int rows, int cols, int64_t sk) {
    float* S = s_.f32();
    for (int r = 0; r < rows; ++r) {
      const int64_t pos = pos0 + r;
      float* row = S + r * kBlockN;
      if (rows_touch_ranges<int64_t>(p_, b, pos, pos)) {
        for (int c = 0; c < cols; ++c)
          if (!key_visible<int64_t>(p_, b, pos, n0 + c, sk)) row[c] = kNegInf;
        continue;
      }
      // the row's window keys as columns of this block: [lo, hi), empty when hi <= lo
      const KeyRange w = window_keys<int64_t>(p_, pos, sk);
      const int64_t lo = std::clamp<int64_t>(w.begin - n0, 0, cols), hi = std::clamp<int64_t>(w.end - n0, lo, cols);
      std::fill(row, row + lo, kNegInf);
      std::fill(row + hi, row + cols, kNegInf);
    }
  }

  // Step 2d for a block whose V holds an inf or NaN: key by key, skipping zero weights.
  void pv_skipping_zeros(const void* V, int rows) {
    const bool f32 = k_.format == tiles::Format::F32;
    float* O = o_.f32();
    for (int r = 0; r < rows; ++r) {
      float* orow = O + size_t(r) * dp_;
      for (int c = 0; c < dp_; ++c) orow[c] *= alpha()[r];
      for (int t = 0; t < kBlockN; ++t) {
        const float w = f32 ? pbuf_.f32()[r * kBlockN + t]
                            : bits_to_f32(static_cast<const uint16_t*>(pbuf_.get())[r * kBlockN + t], true);
        if (w == 0.0f) continue;
        for (int c = 0; c < d_; ++c) {
          const float x = f32 ? static_cast<const float*>(V)[size_t(t) * dp_ + c]
                              : bits_to_f32(static_cast<const uint16_t*>(V)[(size_t(t / 2) * dp_ + c) * 2 + (t & 1)], true);
          orow[c] += w * x;
        }
      }
    }
  }

  void store(int b, const SeqBounds& s, int h, int m0, int rows) {
    for (int r = 0; r < rows; ++r) {
      const float lr = l()[r];
      float factor, lse;
      if (std::isnan(lr)) {  // a NaN or infinite logit
        factor = lse = std::numeric_limits<float>::quiet_NaN();
      } else if (lr == 0.0f) {  // no key seen: out 0, lse -inf
        factor = 0.0f, lse = kNegInf;
      } else {
        factor = 1.0f / lr, lse = m()[r] + std::log(lr);
      }
      void* out = static_cast<uint16_t*>(p_.out) + o_offset(p_, b, s, m0 + r, h);
      k_.store_row(o_.f32() + size_t(r) * dp_, factor, d_, bf16_, out);
      if (p_.lse) p_.lse[lse_offset(p_, b, s, m0 + r, h)] = lse;
    }
  }
};

// Work items of up to `chunk` consecutive query blocks of one (sequence, kv head), with the
// (row, key) pairs they compute, largest first.
std::vector<Item> work_items(const FlashFwdParams& p, int threads) {
  int64_t blocks = 0;
  for (int b = 0; b < p.batch; ++b) blocks += (seq_bounds(p, b).sq + kBlockM - 1) / kBlockM;
  // Enough items per thread to balance, few enough that each packs its keys for several tiles.
  const int64_t per_thread = blocks * p.num_heads_k / (8 * std::max(threads, 1));
  const int chunk = static_cast<int>(std::clamp<int64_t>(per_thread, 1, kMaxChunk));
  const int g = group_size(p);
  std::vector<Item> items;
  for (int b = 0; b < p.batch; ++b) {
    const SeqBounds s = seq_bounds(p, b);
    const int nmb = (s.sq + kBlockM - 1) / kBlockM;
    for (int mb0 = 0; mb0 < nmb; mb0 += chunk) {
      const int mb1 = std::min(nmb, mb0 + chunk);
      double cost = 0;
      for (int mb = mb0; mb < mb1; ++mb) {
        const int64_t pos0 = key_position(s, int64_t(mb) * kBlockM);
        const int64_t pos1 = key_position(s, std::min<int64_t>(int64_t(mb + 1) * kBlockM, s.sq) - 1);
        const KeyRange keys = visible_keys_of_rows<int64_t>(p, b, pos0, pos1, s.sk);
        cost += double(kBlockM) * (keys.empty() ? 1.0 : double(keys.end - keys.begin + 1));
      }
      for (int hk = 0; hk < p.num_heads_k; ++hk) items.push_back({b, hk, mb0, mb1, cost * g});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.cost > b.cost; });
  return items;
}

// Ends the kernels' per-thread state however the thread leaves.
struct ThreadScope {
  const tiles::Kernels& k;
  explicit ThreadScope(const tiles::Kernels& kk) : k(kk) {
    if (k.thread_begin) k.thread_begin();
  }
  ~ThreadScope() {
    if (k.thread_end) k.thread_end();
  }
};

}  // namespace

namespace tiles {

const Kernels& kernels_for(cpu::Isa isa, bool bf16) {
  if (!bf16 && isa > cpu::Isa::Avx512) isa = cpu::Isa::Avx512;  // f16 has no pair products here
  switch (isa) {
    case cpu::Isa::Amx: return amx_kernels();
    case cpu::Isa::Avx512Bf16: return avx512_bf16_kernels();
    case cpu::Isa::Avx512: return avx512_kernels();
    case cpu::Isa::Avx2: return avx2_kernels();
    case cpu::Isa::Generic: break;
  }
  return generic_kernels();
}

}  // namespace tiles

void cpu_flash_fwd(const FlashFwdParams& p, int num_threads) { cpu_flash_fwd(p, num_threads, cpu::best_isa()); }

void cpu_flash_fwd(const FlashFwdParams& p, int num_threads, cpu::Isa isa) {
  if (p.head_size <= 0 || p.num_heads <= 0 || p.num_heads_k <= 0) return;
  if (static_cast<int>(isa) > static_cast<int>(cpu::best_isa())) isa = cpu::best_isa();
  const tiles::Kernels& kern = tiles::kernels_for(isa, p.dtype == kernels::FlashDType::BF16);
  int threads = num_threads > 0 ? num_threads : cpu::max_threads();
  const std::vector<Item> items = work_items(p, threads);
  if (items.empty()) return;
  double work = 0;
  for (const Item& it : items) work += it.cost;
  // Small problems stay on the calling thread: a fork costs more than it saves.
  if (work * p.head_size < double(1 << 22)) threads = 1;
  threads = static_cast<int>(std::min<size_t>(threads, items.size()));
  std::atomic<size_t> next{0};
  cpu::parallel_run(threads, [&](int) {
    ThreadScope scope(kern);
    Worker w(p, kern);
    for (size_t i; (i = next.fetch_add(1)) < items.size();) w.run(items[i]);
  });
}

}  // namespace wick::attention
