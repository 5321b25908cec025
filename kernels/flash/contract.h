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
// 5. Non-finite values propagate, as in the reference and PyTorch: a NaN or +inf logit among
//    the keys a query sees (a NaN or inf in its q row, in a visible key, a softcap of inf)
//    makes the query's out and lse NaN; a NaN or inf in V reaches the out channels it
//    touches. Keys a query does not see never reach its logits, but a NaN or inf in such a
//    key's V row may still reach its out when a tile holds both (the P V product multiplies
//    it by an exact 0, and 0 x NaN is NaN), as in a matmul-based reference. Only a query
//    that sees no key gets 0 and -inf (row_saw_keys below).
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
// Not paged, the token is row k_start + t of the sequence's entry:
WICK_HOST_DEVICE inline int64_t packed_kv_offset(int b, const SeqBounds& s, int64_t t, int64_t batch_stride,
                                                 int64_t row_stride) {
  return b * batch_stride + (s.k_start + t) * row_stride;
}
// and paged, row t % page of block block_table[b][t / page]. I is t's type: the division is
// 32-bit in the kernels (int), 64-bit on the host.
template <class I>
WICK_HOST_DEVICE inline int64_t kv_offset(const FlashFwdParams& p, int b, const SeqBounds& s, I t,
                                          int64_t batch_stride, int64_t row_stride) {
  if (!p.block_table) return packed_kv_offset(b, s, t, batch_stride, row_stride);
  const I page = t / p.page_block_size;
  return page_block(p, b, page) * batch_stride + static_cast<int64_t>(t - page * p.page_block_size) * row_stride;
}
template <class I>
WICK_HOST_DEVICE inline int64_t k_offset(const FlashFwdParams& p, int b, const SeqBounds& s, I t, int hk) {
  return kv_offset<I>(p, b, s, t, p.k_batch_stride, p.k_row_stride) + hk * p.k_head_stride;
}
template <class I>
WICK_HOST_DEVICE inline int64_t v_offset(const FlashFwdParams& p, int b, const SeqBounds& s, I t, int hk) {
  return kv_offset<I>(p, b, s, t, p.v_batch_stride, p.v_row_stride) + hk * p.v_head_stride;
}
// Row of key token t in k's leading dims flattened: (num_blocks * page), (total_k) or
// (batch * seqlen_k). The backward's dK/dV buffers are indexed by it.
template <class I>
WICK_HOST_DEVICE inline int64_t kv_row(const FlashFwdParams& p, int b, const SeqBounds& s, I t) {
  const int64_t rows_per_entry = p.block_table ? p.page_block_size : (p.cu_seqlens_k ? 0 : p.seqlen_k);
  return kv_offset<I>(p, b, s, t, rows_per_entry, 1);
}

// ---- 3. visibility -------------------------------------------------------------------------
// Positions and key indices are of type I: int64_t on the host, int in the kernels (the plan
// checks that max_seqlen_q + 2 * max_seqlen_k fits an int, so no sum below overflows).

// [begin, end) in key positions; empty when begin >= end.
template <class I>
struct Range {
  I begin, end;
  WICK_HOST_DEVICE bool contains(I t) const { return begin <= t && t < end; }
  WICK_HOST_DEVICE bool empty() const { return begin >= end; }
};
using KeyRange = Range<int64_t>;

template <class I>
WICK_HOST_DEVICE inline I clamp_to(I x, I lo, I hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// THE window rule: the existing keys (of sk) that the query at position pos sees through its
// window, [pos - window_left, pos + window_right] intersected with [0, sk); a negative side
// is unbounded. Both ends are clamped to [0, sk] on their own, so the ends of two rows
// compare as the rows' windows do.
template <class I>
WICK_HOST_DEVICE inline Range<I> window_keys(int window_left, int window_right, I pos, I sk) {
  return {window_left < 0 ? I(0) : clamp_to<I>(pos - window_left, 0, sk),
          window_right < 0 ? sk : clamp_to<I>(pos + window_right + 1, 0, sk)};
}
template <class I>
WICK_HOST_DEVICE inline Range<I> window_keys(const FlashFwdParams& p, I pos, I sk) {
  return window_keys<I>(p.window_left, p.window_right, pos, sk);
}

// The window keys some query at a position in [pos_first, pos_last] sees: both ends of a
// window move right with pos, so the union is one range from the first row's begin to the
// last row's end.
template <class I>
WICK_HOST_DEVICE inline Range<I> window_keys_of_rows(const FlashFwdParams& p, I pos_first, I pos_last, I sk) {
  return {window_keys<I>(p, pos_first, sk).begin, window_keys<I>(p, pos_last, sk).end};
}

// The window keys every query at a position in [pos_first, pos_last] sees: the last row's
// begin to the first row's end (empty when the rows share none).
template <class I>
WICK_HOST_DEVICE inline Range<I> window_keys_of_all_rows(const FlashFwdParams& p, I pos_first, I pos_last, I sk) {
  return {window_keys<I>(p, pos_last, sk).begin, window_keys<I>(p, pos_first, sk).end};
}

// True when every query at a position in [pos_first, pos_last] sees every key in
// [t_first, t_last] through its window (so all of them exist): a tile that needs no mask.
template <class I>
WICK_HOST_DEVICE inline bool window_covers(const FlashFwdParams& p, I pos_first, I pos_last, I t_first, I t_last,
                                           I sk) {
  const Range<I> all = window_keys_of_all_rows<I>(p, pos_first, pos_last, sk);
  return all.begin <= t_first && t_last < all.end;
}

// The inverse of the rule: the positions in [pos_lo, pos_hi) whose window reaches a key in
// [t_first, t_last], which are pos in [t_first - window_right, t_last + window_left].
template <class I>
WICK_HOST_DEVICE inline Range<I> window_rows(const FlashFwdParams& p, I t_first, I t_last, I pos_lo, I pos_hi) {
  return {p.window_right < 0 ? pos_lo : clamp_to<I>(t_first - p.window_right, pos_lo, pos_hi),
          p.window_left < 0 ? pos_hi : clamp_to<I>(t_last + p.window_left + 1, pos_lo, pos_hi)};
}

// mm-prefix ranges of sequence b: (mm_max_ranges) rows of [start, end) in key positions, or
// null when the op has none. An empty pair (start >= end) is padding.
WICK_HOST_DEVICE inline const int32_t* mm_ranges_of(const FlashFwdParams& p, int b) {
  return p.mm_prefix_ranges && p.mm_max_ranges > 0 ? p.mm_prefix_ranges + b * p.mm_batch_stride : nullptr;
}
WICK_HOST_DEVICE inline Range<int> mm_range(const int32_t* ranges, int64_t range_stride, int r) {
  return {ranges[r * range_stride], ranges[r * range_stride + 1]};
}
// True when pos and t lie in one of the n ranges: a multimodal prefix is attended both ways.
template <class I>
WICK_HOST_DEVICE inline bool in_shared_range(const int32_t* ranges, int64_t range_stride, int n, I pos, I t) {
  for (int r = 0; r < n; ++r) {
    const Range<int> g = mm_range(ranges, range_stride, r);
    if (g.begin <= pos && pos < g.end && g.begin <= t && t < g.end) return true;
  }
  return false;
}

// THE visibility rule (section 3 above) for key t < sk of sequence b.
template <class I>
WICK_HOST_DEVICE inline bool key_visible(const FlashFwdParams& p, int b, I pos, I t, I sk) {
  if (window_keys<I>(p, pos, sk).contains(t)) return true;
  const int32_t* ranges = mm_ranges_of(p, b);
  return ranges && in_shared_range<I>(ranges, p.mm_range_stride, p.mm_max_ranges, pos, t);
}

// The keys the query at pos sees through mm-prefix ranges of sequence b: those of every range
// that holds pos. The ranges holding pos all overlap there, so their union is one interval
// (empty when no range holds pos; clipped to [0, sk)). So a row's visible keys are two
// intervals, this and its window's: key_visible(p, b, pos, t, sk) == window_keys(p, pos,
// sk).contains(t) || mm_keys_of_row(p, b, pos, sk).contains(t).
template <class I>
WICK_HOST_DEVICE inline Range<I> mm_keys_of_row(const FlashFwdParams& p, int b, I pos, I sk) {
  Range<I> u{0, 0};
  bool any = false;
  const int32_t* ranges = mm_ranges_of(p, b);
  for (int k = 0; ranges && k < p.mm_max_ranges; ++k) {
    const Range<int> g = mm_range(ranges, p.mm_range_stride, k);
    if (!(g.begin <= pos && pos < g.end)) continue;
    u.begin = any && u.begin < g.begin ? u.begin : I(g.begin);
    u.end = any && u.end > g.end ? u.end : I(g.end);
    any = true;
  }
  return {clamp_to<I>(u.begin, 0, sk), clamp_to<I>(u.end, 0, sk)};
}

// True when some row of [pos_first, pos_last] lies in an mm-prefix range: those rows need
// the per-key rule instead of their window interval.
template <class I>
WICK_HOST_DEVICE inline bool rows_touch_ranges(const FlashFwdParams& p, int b, I pos_first, I pos_last) {
  const int32_t* ranges = mm_ranges_of(p, b);
  for (int k = 0; ranges && k < p.mm_max_ranges; ++k) {
    const Range<int> g = mm_range(ranges, p.mm_range_stride, k);
    if (g.begin < g.end && g.begin <= pos_last && g.end > pos_first) return true;
  }
  return false;
}

// The keys some query at a position in [pos_first, pos_last] may see: the window keys of
// those rows, widened by every mm-prefix range that one of the rows falls into (clipped to
// [0, sk)). Keys outside it are invisible to every row of the block, so a tiled kernel
// skips them. Empty: begin >= end.
template <class I>
WICK_HOST_DEVICE inline Range<I> visible_keys_of_rows(const FlashFwdParams& p, int b, I pos_first, I pos_last, I sk) {
  Range<I> r = window_keys_of_rows<I>(p, pos_first, pos_last, sk);
  if (r.empty()) r = {sk, 0};  // a range may still show keys
  const int32_t* ranges = mm_ranges_of(p, b);
  for (int k = 0; ranges && k < p.mm_max_ranges; ++k) {
    const Range<int> g = mm_range(ranges, p.mm_range_stride, k);
    if (g.begin >= g.end || g.begin > pos_last || g.end <= pos_first) continue;  // no row inside
    r.begin = clamp_to<I>(g.begin < r.begin ? g.begin : r.begin, 0, sk);
    r.end = clamp_to<I>(g.end > r.end ? g.end : r.end, 0, sk);
  }
  return r;
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

// Whether a call's scores need more than softmax_scale * q.k under its window: softcap,
// ALiBi, a softmax scale that is not positive, or mm-prefix ranges (kernels that fold the
// scale into the exponent and mask by one interval per row take the others).
WICK_HOST_DEVICE inline bool has_general_logits(const FlashFwdParams& p) {
  return p.alibi_slopes != nullptr || p.softcap > 0.f || !(p.softmax_scale > 0.f) || p.mm_prefix_ranges != nullptr;
}

// ---- 5. the end of a row ---------------------------------------------------------------------

// The online softmax ends a query row with l = sum of exp(logit - m) over the keys it saw.
// l == 0 exactly when the row saw no key (the running max stayed -inf): out = 0, lse = -inf.
// Otherwise l >= 1 (the max key adds exp(0)), unless a NaN or +inf logit reached the row,
// which makes l NaN: dividing by it and taking its log then give NaN out and NaN lse, so
// 1 / l and log(l) are used whenever l != 0 (never a test l > 0, which would turn NaN into
// the "no key" result).
WICK_HOST_DEVICE inline bool row_saw_keys(float l) { return l != 0.f; }
WICK_HOST_DEVICE inline float row_inv_sum(float l) { return row_saw_keys(l) ? 1.f / l : 0.f; }

// ALiBi slope of query head h (0 without ALiBi).
WICK_HOST_DEVICE inline float alibi_slope(const FlashFwdParams& p, int h) {
  return p.alibi_slopes ? p.alibi_slopes[h] : 0.f;
}

}  // namespace wick::kernels::attn
