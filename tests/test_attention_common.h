// Helpers shared by the attention tests: tensors from host values, cumulative lengths,
// paged caches with shuffled block tables and strided layouts, and a float64 evaluation of
// the attention semantics written as a plain loop over the contract's rules (independent
// of the tiling and online softmax of ops/attention/cpu.cpp and the kernels).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "kernels/flash/contract.h"
#include "seed.h"
#include "tensor/tensor.h"

namespace wick::attn_test {

// A tensor of `dtype` on `dev` holding `values` (rounded to dtype) in row-major order.
inline Tensor make(const std::vector<double>& values, const Shape& shape, DType dtype, Device dev) {
  return visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v(values.size());
    for (size_t i = 0; i < values.size(); ++i) v[i] = static_cast<T>(values[i]);
    return Tensor::from_vec(v, shape, dev);
  });
}

// n standard normal values from the seed `salt`, moved by WICK_TEST_SEED (tests/seed.h).
inline std::vector<double> normal(size_t n, uint64_t salt) {
  std::mt19937_64 gen(test::seed(salt));
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline Tensor randn(const Shape& shape, DType dtype, Device dev, uint64_t seed) {
  return make(normal(shape.elem_count(), seed), shape, dtype, dev);
}

inline Tensor u32_tensor(const std::vector<uint32_t>& v, Device dev) {
  return Tensor::from_vec(v, Shape{v.size()}, dev);
}

// (batch + 1) cumulative lengths starting at 0.
inline std::vector<uint32_t> cumulative(const std::vector<uint32_t>& lens) {
  std::vector<uint32_t> c(lens.size() + 1, 0);
  for (size_t i = 0; i < lens.size(); ++i) c[i + 1] = c[i] + lens[i];
  return c;
}

// ---- paged caches ------------------------------------------------------------------------

enum class CacheLayout {
  Separate,     // k, v: two (num_blocks, page, hk, d) contiguous tensors
  Interleaved,  // one (num_blocks, 2, page, hk, d) tensor narrowed into k and v (no copy)
  PaddedHeads,  // (num_blocks, page, hk, d + 8) narrowed to d: row and head strides padded
};

struct PagedKv {
  Tensor k, v;          // (num_blocks, page, hk, d) views
  Tensor block_table;   // (batch, cols) I32 or U32
  std::vector<int32_t> table;  // host copy, row-major
  size_t cols = 0;
};

// Scatters packed k/v rows (total_k, hk, d) of sequences with cumulative lengths cu_k into a
// paged cache: blocks assigned in a shuffled order, spare blocks and unused rows filled with
// random values (never zeros, so a stray read shows), the table padded with an extra column.
// `unused`, when given, is the value of every cache row no sequence uses (the rest of a
// sequence's last page, the spare blocks); otherwise they hold random values.
inline PagedKv make_paged(const Tensor& k, const Tensor& v, const std::vector<uint32_t>& cu_k,
                          size_t page, CacheLayout layout, DType table_dtype, Device dev,
                          uint64_t seed, std::optional<double> unused = std::nullopt) {
  const size_t batch = cu_k.size() - 1;
  const size_t hk = k.dim(1), d = k.dim(2);
  size_t used = 0, cols = 1;
  for (size_t b = 0; b < batch; ++b) {
    size_t pages = (cu_k[b + 1] - cu_k[b] + page - 1) / page;
    used += pages;
    cols = std::max(cols, pages + 1);
  }
  const size_t num_blocks = used + 3;
  std::vector<int32_t> order(num_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 gen(test::seed(seed));
  std::shuffle(order.begin(), order.end(), gen);

  PagedKv out;
  out.cols = cols;
  out.table.assign(batch * cols, 0);
  const size_t dp = layout == CacheLayout::PaddedHeads ? d + 8 : d;
  const size_t two = layout == CacheLayout::Interleaved ? 2 : 1;
  // element (blk, kv, row, head, c) of the backing buffer (kv = 0 for k, 1 for v)
  auto at = [&](size_t blk, size_t kv, size_t row, size_t head, size_t c) {
    return (((blk * two + kv) * page + row) * hk + head) * dp + c;
  };
  const size_t n = num_blocks * two * page * hk * dp;
  std::vector<double> kbuf = normal(n, seed + 1), vbuf = normal(n, seed + 2);
  if (unused) kbuf.assign(n, *unused), vbuf.assign(n, *unused);
  std::vector<double>& vdst = layout == CacheLayout::Interleaved ? kbuf : vbuf;
  const size_t vkv = layout == CacheLayout::Interleaved ? 1 : 0;
  const std::vector<double> kv = k.to_f64_vec(), vv = v.to_f64_vec();
  size_t next = 0;
  for (size_t b = 0; b < batch; ++b) {
    const size_t len = cu_k[b + 1] - cu_k[b];
    for (size_t pg = 0; pg * page < len; ++pg) out.table[b * cols + pg] = order[next++];
    for (size_t pg = (len + page - 1) / page; pg < cols; ++pg)
      out.table[b * cols + pg] = order[(b + pg) % num_blocks];  // unused columns: valid but ignored
    for (size_t t = 0; t < len; ++t) {
      const size_t blk = out.table[b * cols + t / page], row = t % page;
      for (size_t h = 0; h < hk; ++h)
        for (size_t c = 0; c < d; ++c) {
          const size_t src = ((cu_k[b] + t) * hk + h) * d + c;
          kbuf[at(blk, 0, row, h, c)] = kv[src];
          vdst[at(blk, vkv, row, h, c)] = vv[src];
        }
    }
  }
  const DType dt = k.dtype();
  if (layout == CacheLayout::Interleaved) {
    Tensor cache = make(kbuf, Shape{num_blocks, 2, page, hk, d}, dt, dev);
    out.k = cache.narrow(1, 0, 1).squeeze(1);
    out.v = cache.narrow(1, 1, 1).squeeze(1);
  } else {
    out.k = make(kbuf, Shape{num_blocks, page, hk, dp}, dt, dev).narrow(3, 0, d);
    out.v = make(vbuf, Shape{num_blocks, page, hk, dp}, dt, dev).narrow(3, 0, d);
  }
  if (table_dtype == DType::U32) {
    std::vector<uint32_t> t(out.table.begin(), out.table.end());
    out.block_table = Tensor::from_vec(t, Shape{batch, cols}, dev);
  } else {
    out.block_table = Tensor::from_vec(out.table, Shape{batch, cols}, dev);
  }
  return out;
}

// ---- the float64 evaluation ----------------------------------------------------------------

struct Ref64 {
  std::vector<double> out;  // like the op's out, logical order
  std::vector<double> lse;  // like the op's lse, logical order
};

template <class T>
double elem(const void* base, int64_t off) {
  return static_cast<double>(static_cast<const T*>(base)[off]);
}

// Applies the attention semantics literally, one row at a time, every key, in double
// precision, no tiling: the contract's rules (kernels/flash/contract.h: sequence bounds,
// offsets, visibility, the logit) evaluated in f64 over host pointers.
template <class T>
Ref64 ref64_t(const kernels::FlashFwdParams& p) {
  using namespace kernels::attn;
  const int H = p.num_heads, D = p.head_size;
  Ref64 r;
  r.out.assign(static_cast<size_t>(p.total_q) * H * D, 0.0);
  r.lse.assign(static_cast<size_t>(p.total_q) * H, 0.0);
  for (int b = 0; b < p.batch; ++b) {
    const SeqBounds s = seq_bounds(p, b);
    for (int h = 0; h < H; ++h) {
      const int hk = kv_head(p, h);
      const double slope = alibi_slope(p, h);
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t pos = key_position(s, i);
        std::vector<double> logits(s.sk, -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < s.sk; ++t) {
          if (!key_visible<int64_t>(p, b, pos, t, s.sk)) continue;
          const int64_t koff = k_offset(p, b, s, t, hk), qoff = q_offset(p, b, s, i, h);
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += elem<T>(p.q, qoff + c) * elem<T>(p.k, koff + c);
          logits[t] = logit<double>(dot, p.softmax_scale, p.softcap, slope, pos, t);
          mx = std::max(mx, logits[t]);
        }
        // out and lse in logical order: row q_row0 + i of (total_q, H, D) / lse (.., H, sq)
        const size_t row = static_cast<size_t>(s.q_row0 + i);
        const size_t lse_at = p.cu_seqlens_q ? h * p.total_q + row : (b * H + h) * s.sq + i;
        if (mx == -std::numeric_limits<double>::infinity()) {
          r.lse[lse_at] = mx;
          continue;  // out stays 0
        }
        double sum = 0;
        for (int64_t t = 0; t < s.sk; ++t) sum += std::exp(logits[t] - mx);
        r.lse[lse_at] = mx + std::log(sum);
        for (int64_t t = 0; t < s.sk; ++t) {
          const double w = std::exp(logits[t] - mx) / sum;
          if (w == 0) continue;
          const int64_t voff = v_offset(p, b, s, t, hk);
          for (int c = 0; c < D; ++c) r.out[(row * H + h) * D + c] += w * elem<T>(p.v, voff + c);
        }
      }
    }
  }
  return r;
}

inline Ref64 ref64(const kernels::FlashFwdParams& p) {
  return p.dtype == kernels::FlashDType::F16 ? ref64_t<f16>(p) : ref64_t<bf16>(p);
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Values rounded to dtype and back: what a same-precision computation can at best return.
inline std::vector<double> rounded(const std::vector<double>& v, DType dtype) {
  std::vector<double> out(v.size());
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(static_cast<T>(v[i]));
  });
  return out;
}

// Every element is a number (the op must write every output).
inline bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// LSE agreement: -inf exactly where the reference has -inf, else a relative tolerance.
inline void check_lse(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      REQUIRE_MESSAGE((std::isinf(got[i]) && got[i] < 0), "lse[", i, "] = ", got[i], ", want -inf");
    } else {
      REQUIRE_MESSAGE(std::abs(got[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])), "lse[", i,
                      "] = ", got[i], ", want ", want[i]);
    }
  }
}

}  // namespace wick::attn_test
