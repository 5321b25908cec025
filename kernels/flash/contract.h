// The attention contract: every rule of flash-attention that more than one code path needs,
// written once as plain host + device functions over FlashFwdParams (flash_params.h).
// The CPU path (ops/attention/cpu.cpp), the reference (ops/attention/reference.cpp), the
// host backward (ops/attention/backward.cpp), every CUDA kernel (kernels/flash/,
// kernels/flash_bwd/) and the tests' float64 evaluation call these functions, so the
// devices cannot disagree about which key a query sees or how a logit is formed.
// tests/test_attention_contract.cpp pins each function on hand-worked cases.
//
// 1. Sequences. Sequence b owns query rows [q_start, q_start + sq) and key tokens [0, sk):
//      varlen:  q_start = cu_seqlens_q[b], sq = cu_seqlens_q[b+1] - cu_seqlens_q[b] (keys alike)
//      batched: q_start = 0 (the batch strides move between sequences), sq = seqlen_q
//    Query row i sits at key position pos(i) = i + sk - sq: the queries are aligned with the
//    LAST sq keys (bottom-right), so a chunk of new tokens sees the whole cache before it.
// 2. Where rows live (element offsets; strides in elements; pointers already advanced):
//      q[b*q_batch_stride + (q_start + i)*q_row_stride + h*q_head_stride + c]   (out alike)
//      lse[b*lse_batch_stride + h*lse_head_stride + q_start + i]
//      key token t, kv head hk = h / (num_heads / num_heads_k):
//        not paged: k[b*k_batch_stride + (k_start + t)*k_row_stride + hk*k_head_stride + c]
//        paged:     k[blk*k_batch_stride + (t % page)*k_row_stride + hk*k_head_stride + c],
//                   blk = block_table[b*block_table_batch_stride + t / page]
//      (v likewise with the v_* strides).
// 3. Visibility. Key t (0 <= t < sk) is visible to the query at position pos when
//      it lies in the query's window [pos - window_left, pos + window_right]
//      (a negative side is unbounded; causal is window_left < 0, window_right = 0),
//      or pos and t lie in one mm-prefix range [start, end) of the sequence.
//    A query that sees no key gets out = 0 and lse = -inf.
// 4. The logit of a visible key: cap(softmax_scale * q.k) - slope[h] * |pos - t|,
//    cap(x) = softcap * tanh(x / softcap) when softcap > 0, else x.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common.h"  // WICK_HOST_DEVICE
#include "kernels/flash/flash_params.h"

namespace wick::kernels::attn {

// ---- 1. sequences ------------------------------------------------------------------------

struct SeqBounds {
  int64_t q_start;  // first row of the sequence in q / out / lse (0 for the batched op)
  int64_t k_start;  // first key row in packed k / v (0 for the batched op; unused when paged)
  int sq, sk;       // query rows, key tokens
  int64_t q_row0;   // the sequence's first row in the (total_q, ...) index space of scratch
};

WICK_HOST_DEVICE inline SeqBounds seq_bounds(const FlashFwdParams& p, int b) {
  SeqBounds s;
  if (p.cu_seqlens_q) {
    s.q_start = p.cu_seqlens_q[b];
    s.sq = static_cast<int>(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b]);
    s.q_row0 = s.q_start;
  } else {
    s.q_start = 0;
    s.sq = p.seqlen_q;
    s.q_row0 = static_cast<int64_t>(b) * p.seqlen_q;
  }
  if (p.cu_seqlens_k) {
    s.k_start = p.cu_seqlens_k[b];
    s.sk = static_cast<int>(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]);
  } else {
    s.k_start = 0;
    s.sk = p.seqlen_k;
  }
  return s;
}

// pos(i): the key position of query row i (bottom-right alignment). Negative when the
// sequence has more queries than keys: such rows see nothing through a causal window.
WICK_HOST_DEVICE inline int64_t key_position(const SeqBounds& s, int64_t i) { return i + s.sk - s.sq; }

// Query heads per kv head, and the kv head a query head reads.
WICK_HOST_DEVICE inline int group_size(const FlashFwdParams& p) { return p.num_heads / p.num_heads_k; }
WICK_HOST_DEVICE inline int kv_head(const FlashFwdParams& p, int h) { return h / group_size(p); }

// ---- 2. where rows live --------------------------------------------------------------------

// Element offset of (sequence b, query row i, head h, channel 0) in q, out and lse.
WICK_HOST_DEVICE inline int64_t q_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t i, int h) {
  return b * p.q_batch_stride + (s.q_start + i) * p.q_row_stride + h * p.q_head_stride;
}
WICK_HOST_DEVICE inline int64_t o_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t i, int h) {
  return b * p.o_batch_stride + (s.q_start + i) * p.o_row_stride + h * p.o_head_stride;
}
WICK_HOST_DEVICE inline int64_t lse_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t i, int h) {
  return b * p.lse_batch_stride + h * p.lse_head_stride + s.q_start + i;
}

// Paged K/V: the block-table entry of page `page` (= t / page_block_size) of sequence b.
WICK_HOST_DEVICE inline int32_t page_block(const FlashFwdParams& p, int b, int64_t page) {
  return p.block_table[b * p.block_table_batch_stride + page];
}

// Element offset of key token t of sequence b (kv head 0, channel 0) for a tensor with the
// given batch and row strides (the batch stride is the block stride when paged). With
// batch_stride = rows per batch entry (page_block_size when paged, seqlen_k when batched,
// 0 for varlen) and row_stride = 1 it is the token's row in k's leading dims flattened.
WICK_HOST_DEVICE inline int64_t kv_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t t,
                                          int64_t batch_stride, int64_t row_stride) {
  if (p.block_table) {
    const int64_t page = t / p.page_block_size;
    return page_block(p, b, page) * batch_stride + (t - page * p.page_block_size) * row_stride;
  }
  return b * batch_stride + (s.k_start + t) * row_stride;
}
WICK_HOST_DEVICE inline int64_t k_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t t, int hk) {
  return kv_offset(p, b, s, t, p.k_batch_stride, p.k_row_stride) + hk * p.k_head_stride;
}
WICK_HOST_DEVICE inline int64_t v_offset(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t t, int hk) {
  return kv_offset(p, b, s, t, p.v_batch_stride, p.v_row_stride) + hk * p.v_head_stride;
}
// Row of key token t in k's leading dims flattened: (num_blocks * page), (total_k) or
// (batch * seqlen_k). The backward's dK/dV buffers are indexed by it.
WICK_HOST_DEVICE inline int64_t kv_row(const FlashFwdParams& p, int b, const SeqBounds& s, int64_t t) {
  const int64_t rows_per_entry = p.block_table ? p.page_block_size : (p.cu_seqlens_k ? 0 : p.seqlen_k);
  return kv_offset(p, b, s, t, rows_per_entry, 1);
}

// ---- 3. visibility -------------------------------------------------------------------------

// [begin, end) in key positions; empty when begin >= end.
struct KeyRange {
  int64_t begin, end;
  WICK_HOST_DEVICE bool contains(int64_t t) const { return begin <= t && t < end; }
  WICK_HOST_DEVICE bool empty() const { return begin >= end; }
};

constexpr int64_t kUnbounded = int64_t{1} << 62;  // an open side of a window

// THE window rule: the keys the query at position pos sees through the window,
// [pos - window_left, pos + window_right] with a negative side unbounded. Not clipped.
WICK_HOST_DEVICE inline KeyRange window_of(int window_left, int window_right, int64_t pos) {
  return {window_left < 0 ? -kUnbounded : pos - window_left, window_right < 0 ? kUnbounded : pos + window_right + 1};
}
WICK_HOST_DEVICE inline KeyRange window_of(const FlashFwdParams& p, int64_t pos) {
  return window_of(p.window_left, p.window_right, pos);
}

// r intersected with [0, sk); an empty result keeps 0 <= begin == end <= sk.
WICK_HOST_DEVICE inline KeyRange clip(KeyRange r, int64_t sk) {
  r.begin = r.begin < 0 ? 0 : (r.begin > sk ? sk : r.begin);
  r.end = r.end > sk ? sk : r.end;
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

// The window keys of the query at position pos that exist: window_of clipped to [0, sk).
WICK_HOST_DEVICE inline KeyRange window_keys(const FlashFwdParams& p, int64_t pos, int64_t sk) {
  return clip(window_of(p, pos), sk);
}

// The window keys some query at a position in [pos_first, pos_last] sees: both ends of a
// window move right with pos, so the union is one range from the first row's begin to the
// last row's end.
WICK_HOST_DEVICE inline KeyRange window_keys_of_rows(const FlashFwdParams& p, int64_t pos_first, int64_t pos_last,
                                                     int64_t sk) {
  return clip({window_of(p, pos_first).begin, window_of(p, pos_last).end}, sk);
}

// True when every query at a position in [pos_first, pos_last] sees every key in
// [t_first, t_last] through its window (a tile that needs no mask, keys past sk aside).
WICK_HOST_DEVICE inline bool window_covers(const FlashFwdParams& p, int64_t pos_first, int64_t pos_last,
                                           int64_t t_first, int64_t t_last) {
  return window_of(p, pos_last).begin <= t_first && t_last < window_of(p, pos_first).end;
}

// The inverse of window_of: the query positions whose window reaches a key in
// [t_first, t_last], as [begin, end) in positions (unbounded sides stay open).
WICK_HOST_DEVICE inline KeyRange window_rows(const FlashFwdParams& p, int64_t t_first, int64_t t_last) {
  return {p.window_right < 0 ? -kUnbounded : t_first - p.window_right,
          p.window_left < 0 ? kUnbounded : t_last + p.window_left + 1};
}

// mm-prefix ranges of sequence b: (mm_max_ranges) rows of [start, end) in key positions, or
// null when the op has none. An empty pair (start >= end) is padding.
WICK_HOST_DEVICE inline const int32_t* mm_ranges_of(const FlashFwdParams& p, int b) {
  return p.mm_prefix_ranges && p.mm_max_ranges > 0 ? p.mm_prefix_ranges + b * p.mm_batch_stride : nullptr;
}
WICK_HOST_DEVICE inline KeyRange mm_range(const int32_t* ranges, int64_t range_stride, int r) {
  return {ranges[r * range_stride], ranges[r * range_stride + 1]};
}
// True when pos and t lie in one of the n ranges: a multimodal prefix is attended both ways.
WICK_HOST_DEVICE inline bool in_shared_range(const int32_t* ranges, int64_t range_stride, int n, int64_t pos,
                                             int64_t t) {
  for (int r = 0; r < n; ++r) {
    const KeyRange g = mm_range(ranges, range_stride, r);
    if (g.contains(pos) && g.contains(t)) return true;
  }
  return false;
}

// THE visibility rule (section 3 above) for key t < sk of sequence b.
WICK_HOST_DEVICE inline bool key_visible(const FlashFwdParams& p, int b, int64_t pos, int64_t t) {
  if (window_of(p, pos).contains(t)) return true;
  const int32_t* ranges = mm_ranges_of(p, b);
  return ranges && in_shared_range(ranges, p.mm_range_stride, p.mm_max_ranges, pos, t);
}

// The keys some query at a position in [pos_first, pos_last] may see: the window keys of
// those rows, widened by every mm-prefix range that one of the rows falls into. Keys
// outside it are invisible to every row of the block, so a tiled kernel skips them.
WICK_HOST_DEVICE inline KeyRange visible_keys_of_rows(const FlashFwdParams& p, int b, int64_t pos_first,
                                                      int64_t pos_last, int64_t sk) {
  KeyRange r = window_keys_of_rows(p, pos_first, pos_last, sk);
  if (r.empty()) r = {sk, 0};  // a range may still show keys
  const int32_t* ranges = mm_ranges_of(p, b);
  for (int k = 0; ranges && k < p.mm_max_ranges; ++k) {
    const KeyRange g = mm_range(ranges, p.mm_range_stride, k);
    if (g.empty() || g.begin > pos_last || g.end <= pos_first) continue;  // no row of the block inside
    r.begin = g.begin < r.begin ? g.begin : r.begin;
    r.end = g.end > r.end ? g.end : r.end;
  }
  return clip(r, sk);
}

// True when some row of [pos_first, pos_last] lies in an mm-prefix range: those rows need
// the per-key rule instead of their window interval.
WICK_HOST_DEVICE inline bool rows_touch_ranges(const FlashFwdParams& p, int b, int64_t pos_first, int64_t pos_last) {
  const int32_t* ranges = mm_ranges_of(p, b);
  for (int k = 0; ranges && k < p.mm_max_ranges; ++k) {
    const KeyRange g = mm_range(ranges, p.mm_range_stride, k);
    if (!g.empty() && g.begin <= pos_last && g.end > pos_first) return true;
  }
  return false;
}

// ---- 4. the logit --------------------------------------------------------------------------

// cap(x): softcap * tanh(x / softcap) when softcap > 0, else x.
template <class T>
WICK_HOST_DEVICE inline T soft_cap(T x, T softcap) {
  using std::tanh;
  return softcap > T(0) ? softcap * tanh(x / softcap) : x;
}

// ALiBi's bias: -slope * |pos - t| (slope 0 without ALiBi).
template <class T>
WICK_HOST_DEVICE inline T alibi_bias(T slope, int64_t pos, int64_t t) {
  const int64_t d = pos > t ? pos - t : t - pos;
  return -slope * static_cast<T>(d);
}

// The logit of key t for the query at position pos, from the dot product qk = q.k.
template <class T>
WICK_HOST_DEVICE inline T logit(T qk, T softmax_scale, T softcap, T slope, int64_t pos, int64_t t) {
  return soft_cap(softmax_scale * qk, softcap) + alibi_bias(slope, pos, t);
}

// ALiBi slope of query head h (0 without ALiBi).
WICK_HOST_DEVICE inline float alibi_slope(const FlashFwdParams& p, int h) {
  return p.alibi_slopes ? p.alibi_slopes[h] : 0.f;
}

}  // namespace wick::kernels::attn
