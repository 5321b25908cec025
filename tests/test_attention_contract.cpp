// The attention contract (kernels/flash/contract.h), pinned on hand-worked cases: every
// function the CPU path, the reference, the backward and the kernels share.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/flash/contract.h"

using namespace wick::kernels;
using namespace wick::kernels::attn;

namespace {

// Two varlen sequences: 3 queries over 5 keys, then 2 queries over 0 keys.
struct Varlen {
  std::vector<uint32_t> cu_q{0, 3, 5}, cu_k{0, 5, 5};
  FlashFwdParams p;
  Varlen() {
    p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data();
    p.batch = 2, p.num_heads = 4, p.num_heads_k = 2, p.head_size = 8;
    p.q_row_stride = 100, p.q_head_stride = 10;
    p.o_row_stride = 32, p.o_head_stride = 8;
    p.k_row_stride = 50, p.k_head_stride = 20;
    p.v_row_stride = 60, p.v_head_stride = 30;
    p.lse_head_stride = 5;
    p.total_q = 5;
  }
};

FlashFwdParams window(int left, int right) {
  FlashFwdParams p;
  p.window_left = left, p.window_right = right;
  return p;
}

}  // namespace

TEST_CASE("contract: sequence bounds and bottom-right alignment") {
  Varlen v;
  const SeqBounds s0 = seq_bounds(v.p, 0), s1 = seq_bounds(v.p, 1);
  CHECK(s0.q_start == 0);
  CHECK(s0.sq == 3);
  CHECK(s0.sk == 5);
  CHECK(s1.q_start == 3);
  CHECK(s1.k_start == 5);
  CHECK(s1.sq == 2);
  CHECK(s1.sk == 0);
  CHECK(s1.q_row0 == 3);
  // 3 queries over 5 keys: query 0 sits at key 2, the last query at the last key.
  CHECK(key_position(s0, 0) == 2);
  CHECK(key_position(s0, 2) == 4);
  // more queries than keys: positions go negative
  CHECK(key_position(s1, 0) == -2);

  FlashFwdParams b;  // batched: 2 x (4 queries, 6 keys)
  b.batch = 2, b.seqlen_q = 4, b.seqlen_k = 6;
  const SeqBounds t = seq_bounds(b, 1);
  CHECK(t.q_start == 0);
  CHECK(t.k_start == 0);
  CHECK(t.sq == 4);
  CHECK(t.sk == 6);
  CHECK(t.q_row0 == 4);
  CHECK(key_position(t, 0) == 2);
}

TEST_CASE("contract: GQA head map and row offsets") {
  Varlen v;
  CHECK(group_size(v.p) == 2);
  CHECK(kv_head(v.p, 0) == 0);
  CHECK(kv_head(v.p, 1) == 0);
  CHECK(kv_head(v.p, 3) == 1);
  const SeqBounds s1 = seq_bounds(v.p, 1);
  CHECK(q_offset(v.p, 1, s1, 1, 2) == (3 + 1) * 100 + 2 * 10);
  CHECK(o_offset(v.p, 1, s1, 1, 2) == (3 + 1) * 32 + 2 * 8);
  CHECK(lse_offset(v.p, 1, s1, 1, 2) == 2 * 5 + 3 + 1);
  const SeqBounds s0 = seq_bounds(v.p, 0);
  CHECK(k_offset(v.p, 0, s0, 4, 1) == 4 * 50 + 20);
  CHECK(v_offset(v.p, 0, s0, 4, 1) == 4 * 60 + 30);
  CHECK(kv_row(v.p, 0, s0, 4) == 4);

  FlashFwdParams b;  // batched: the batch strides move between sequences
  b.batch = 2, b.seqlen_q = 4, b.seqlen_k = 6, b.num_heads = b.num_heads_k = 1;
  b.q_batch_stride = 1000, b.q_row_stride = 10, b.k_batch_stride = 700, b.k_row_stride = 7;
  const SeqBounds t = seq_bounds(b, 1);
  CHECK(q_offset(b, 1, t, 3, 0) == 1000 + 30);
  CHECK(k_offset(b, 1, t, 5, 0) == 700 + 35);
  CHECK(kv_row(b, 1, t, 5) == 6 + 5);  // row of (batch * seqlen_k)
}

TEST_CASE("contract: paged rows go through the block table") {
  // 2 sequences, page 4, table rows of 3 entries: sequence 1's tokens 0..3 in block 7,
  // 4..7 in block 2.
  std::vector<int32_t> table{5, 0, 0, 7, 2, 9};
  std::vector<uint32_t> cu_q{0, 1, 2}, cu_k{0, 3, 9};
  FlashFwdParams p;
  p.cu_seqlens_q = cu_q.data(), p.cu_seqlens_k = cu_k.data();
  p.block_table = table.data(), p.block_table_batch_stride = 3, p.page_block_size = 4;
  p.num_heads = p.num_heads_k = 1;
  p.k_batch_stride = 400, p.k_row_stride = 100, p.k_head_stride = 10;
  const SeqBounds s = seq_bounds(p, 1);
  CHECK(s.sk == 6);
  CHECK(page_block(p, 1, 1) == 2);
  CHECK(k_offset(p, 1, s, 0, 0) == 7 * 400);
  CHECK(k_offset(p, 1, s, 5, 0) == 2 * 400 + 1 * 100);  // token 5: block 2, row 1
  CHECK(kv_row(p, 1, s, 5) == 2 * 4 + 1);
  CHECK(kv_row(p, 0, seq_bounds(p, 0), 2) == 5 * 4 + 2);
}

TEST_CASE("contract: the window rule") {
  using R = Range<int64_t>;
  auto keys = [](const FlashFwdParams& p, int64_t pos, int64_t sk) { return window_keys<int64_t>(p, pos, sk); };
  // causal after candle's conversion: left = max_seqlen_k (8), right = 0
  const FlashFwdParams causal = window(8, 0);
  CHECK(keys(causal, 3, 6).contains(0));
  CHECK(keys(causal, 3, 6).contains(3));
  CHECK_FALSE(keys(causal, 3, 6).contains(4));
  CHECK(keys(causal, 3, 6).begin == 0);
  CHECK(keys(causal, 3, 6).end == 4);
  CHECK(keys(causal, -1, 6).empty());  // a query before the first key sees nothing

  // sliding window: left 2, right 1 -> keys pos-2 .. pos+1
  const FlashFwdParams sw = window(2, 1);
  CHECK(keys(sw, 5, 10).begin == 3);
  CHECK(keys(sw, 5, 10).end == 7);
  CHECK(keys(sw, 9, 10).end == 10);   // clipped to sk
  CHECK(keys(sw, 0, 10).begin == 0);  // clipped to 0
  CHECK(keys(sw, 20, 10).empty());
  CHECK(keys(sw, 20, 10).begin == 10);  // both ends stay inside [0, sk]

  // both sides open: every key
  const FlashFwdParams full = window(-1, -1);
  CHECK(keys(full, -5, 7).begin == 0);
  CHECK(keys(full, -5, 7).end == 7);

  // the same rule in 32 bits (what the kernels use)
  CHECK(window_keys<int>(sw, 5, 10).begin == 3);
  CHECK(window_keys<int>(sw, 5, 10).end == 7);

  // rows 4..6 of the sliding window see keys 2..7 together
  const R rows = window_keys_of_rows<int64_t>(sw, 4, 6, 10);
  CHECK(rows.begin == 2);
  CHECK(rows.end == 8);
  // a tile of keys 4..5 is seen whole by rows 4..6 (row 4: 2..5, row 6: 4..7)
  CHECK(window_covers<int64_t>(sw, 4, 6, 4, 5, 10));
  CHECK_FALSE(window_covers<int64_t>(sw, 4, 6, 3, 5, 10));  // row 6 does not see key 3
  CHECK_FALSE(window_covers<int64_t>(sw, 4, 6, 4, 6, 10));  // row 4 does not see key 6
  CHECK(window_covers<int64_t>(full, 0, 100, 0, 999, 1000));
  CHECK_FALSE(window_covers<int64_t>(full, 0, 100, 0, 1000, 1000));  // key 1000 does not exist
  // the inverse: positions whose window reaches keys 4..5 are 3..7
  const R back = window_rows<int64_t>(sw, 4, 5, 0, 12);
  CHECK(back.begin == 3);
  CHECK(back.end == 8);
  for (int64_t pos = 0; pos < 12; ++pos) {
    const bool reaches = keys(sw, pos, 12).contains(4) || keys(sw, pos, 12).contains(5);
    CHECK(back.contains(pos) == reaches);
  }
  CHECK(window_rows<int64_t>(full, 4, 5, -3, 9).begin == -3);  // open sides keep the bounds
  CHECK(window_rows<int64_t>(full, 4, 5, -3, 9).end == 9);
}

TEST_CASE("contract: mm-prefix ranges see each other both ways") {
  // one sequence, causal, ranges [1, 4) and an empty pad [5, 5)
  std::vector<int32_t> ranges{1, 4, 5, 5};
  FlashFwdParams p = window(8, 0);
  p.mm_prefix_ranges = ranges.data(), p.mm_batch_stride = 4, p.mm_range_stride = 2, p.mm_max_ranges = 2;
  auto vis = [&](const FlashFwdParams& q, int64_t pos, int64_t t) { return key_visible<int64_t>(q, 0, pos, t, 8); };
  CHECK(vis(p, 1, 3));        // inside the range: a later key is visible
  CHECK_FALSE(vis(p, 0, 2));  // query 0 is outside the range: causal only
  CHECK(vis(p, 4, 2));        // causal
  CHECK_FALSE(vis(p, 4, 5));
  CHECK_FALSE(vis(p, 5, 6));  // [5, 5) is empty
  CHECK(rows_touch_ranges<int64_t>(p, 0, 0, 1));
  CHECK_FALSE(rows_touch_ranges<int64_t>(p, 0, 4, 6));
  // rows 1..2 may see keys 0..3 (causal 0..2, widened by the range to 3)
  CHECK(visible_keys_of_rows<int64_t>(p, 0, 1, 2, 8).begin == 0);
  CHECK(visible_keys_of_rows<int64_t>(p, 0, 1, 2, 8).end == 4);
  // a window that shows nothing still shows the range to rows inside it
  FlashFwdParams narrow = window(0, 0);
  narrow.window_left = -1;  // left open, right 0: through the window alone row -1 sees nothing
  narrow.mm_prefix_ranges = ranges.data(), narrow.mm_batch_stride = 4, narrow.mm_range_stride = 2,
  narrow.mm_max_ranges = 2;
  CHECK(visible_keys_of_rows<int64_t>(narrow, 0, -1, -1, 8).empty());
  FlashFwdParams none = window(0, 0);  // a window of the query's own key only
  none.mm_prefix_ranges = ranges.data(), none.mm_batch_stride = 4, none.mm_range_stride = 2, none.mm_max_ranges = 2;
  CHECK(visible_keys_of_rows<int64_t>(none, 0, 2, 2, 8).begin == 1);
  CHECK(visible_keys_of_rows<int64_t>(none, 0, 2, 2, 8).end == 4);
  // every visible key lies in visible_keys_of_rows, for single rows and for blocks
  for (const FlashFwdParams* q : {&p, &none})
    for (int64_t pos = -2; pos < 8; ++pos)
      for (int64_t t = 0; t < 8; ++t)
        if (vis(*q, pos, t)) {
          CHECK(visible_keys_of_rows<int64_t>(*q, 0, pos, pos, 8).contains(t));
          CHECK(visible_keys_of_rows<int64_t>(*q, 0, -2, 7, 8).contains(t));
        }
}

TEST_CASE("contract: a row's mm-prefix keys are one interval") {
  // overlapping ranges [1, 5) and [3, 9), a separate [10, 12), an empty pad, and one past sk
  std::vector<int32_t> ranges{1, 5, 3, 9, 10, 12, 6, 6, 11, 20};
  FlashFwdParams p = window(8, 0);
  p.mm_prefix_ranges = ranges.data(), p.mm_batch_stride = 10, p.mm_range_stride = 2, p.mm_max_ranges = 5;
  const int64_t sk = 14;
  auto keys = [&](int64_t pos) { return mm_keys_of_row<int64_t>(p, 0, pos, sk); };
  CHECK(keys(0).empty());                          // no range holds 0
  CHECK((keys(2).begin == 1 && keys(2).end == 5));   // [1, 5) alone
  CHECK((keys(4).begin == 1 && keys(4).end == 9));   // both overlapping ranges: their union
  CHECK((keys(7).begin == 3 && keys(7).end == 9));
  CHECK(keys(9).empty());                           // between ranges
  CHECK((keys(11).begin == 10 && keys(11).end == 14));  // [10, 12) and [11, 20) clipped to sk
  // the two intervals give key_visible exactly, on every (pos, t)
  p.window_left = 2, p.window_right = 0;
  for (int64_t pos = -1; pos < sk + 2; ++pos)
    for (int64_t t = 0; t < sk; ++t)
      CHECK(key_visible<int64_t>(p, 0, pos, t, sk) ==
            (window_keys<int64_t>(p, pos, sk).contains(t) || mm_keys_of_row<int64_t>(p, 0, pos, sk).contains(t)));
}

TEST_CASE("contract: the logit") {
  // no softcap, no ALiBi: scale * qk
  CHECK(logit(2.0, 0.5, 0.0, 0.0, 3, 1) == 1.0);
  // softcap 4: 4 * tanh(scale * qk / 4)
  CHECK(logit(8.0, 0.5, 4.0, 0.0, 3, 3) == doctest::Approx(4.0 * std::tanh(1.0)));
  // ALiBi slope 0.25 at distance |3 - 7| = 4: -1
  CHECK(logit(2.0, 0.5, 0.0, 0.25, 3, 7) == doctest::Approx(0.0));
  CHECK(alibi_bias(0.25, 7, 3) == -1.0);
  CHECK(soft_cap(1e9, 2.0) == doctest::Approx(2.0));
  std::vector<float> slopes{0.5f, 0.25f};
  FlashFwdParams p;
  CHECK(alibi_slope(p, 1) == 0.0f);
  p.alibi_slopes = slopes.data();
  CHECK(alibi_slope(p, 1) == 0.25f);
}
