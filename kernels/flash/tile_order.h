// The order in which the Hopper forward's CTAs take their tiles (flash_fwd_sm90.cu), as plain
// host + device functions so the host can test it (tests/test_flash_tile_order.cpp).
//
// A tile is one query tile of one column, a column being one (head, sequence) pair,
// column = b * num_heads + h. Tile indices run over [0, m_blocks * columns), each naming a
// different tile, and a persistent CTA c of g takes indices c, 2g - 1 - c, 2g + c,
// 4g - 1 - c, ... (forwards in even rounds, backwards in odd ones).
//
// Columns come in sections of `group`, whose K/V fit in L2 together: the query tiles that
// read one column's K/V run close together in time, while that K/V is still in L2.
// Inside a section the columns run fastest. Then
//  - when every query tile of a column sees as many keys (no causal mask), the query tiles
//    go from the last to the first;
//  - under a causal mask over sequences of one length (the caller's choice, `paired`),
//    where tile m of M sees m + 1 key tiles (plus a constant when there are more keys than
//    queries), tiles m and M - 1 - m form a pair with M + 1 key
//    tiles between them. Pairs fill windows of 2g indices, the long tiles forwards from the
//    window's start and their short partners backwards from its end, so each CTA's two
//    rounds of a window take one pair and every CTA gets the same work. The middle tiles
//    of an odd M come after all pairs.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/common.h"  // WICK_HOST_DEVICE

namespace wick::kernels {

struct TileOrder {
  int m_blocks = 0;  // query tiles per column (of the longest sequence)
  int group = 1;     // columns per section
  int paired = 0;    // CTAs g of the causal pair order; 0: the query tiles from last to first
};

struct TileSlot {
  int column = 0;   // b * num_heads + h
  int m_block = 0;  // the tile's first query row is m_block * block_m
};

// The index persistent CTA c of g takes in round r: forwards in even rounds, backwards in
// odd ones.
WICK_HOST_DEVICE inline int walk_index(int r, int c, int g) { return r * g + ((r & 1) ? g - 1 - c : c); }

// Entry n of a walk over sections of `group` columns (the last may be narrower), each
// column per_column entries long, the columns fastest inside a section: the entry's column
// and its rank within that column.
struct SectionEntry {
  int column, rank;
};
WICK_HOST_DEVICE inline SectionEntry section_entry(int per_column, int group, int columns, int n) {
  const int per_section = group * per_column;
  const int section = n / per_section, first = section * group;
  const int width = group < columns - first ? group : columns - first;  // the last may be narrower
  const int in = n - section * per_section;
  return {first + in % width, in / width};
}

// The tile of index (0 <= index < order.m_blocks * columns).
WICK_HOST_DEVICE inline TileSlot tile_slot(TileOrder order, int columns, int index) {
  const int m = order.m_blocks;
  if (order.paired <= 0) {
    const SectionEntry e = section_entry(m, order.group, columns, index);
    return {e.column, m - 1 - e.rank};
  }
  const int half = m / 2, pairs = columns * half, g = order.paired;
  if (index >= 2 * pairs) return {index - 2 * pairs, half};  // the middle tiles of an odd m
  const int window = index / (2 * g), at = index % (2 * g);
  const int in_window = g < pairs - window * g ? g : pairs - window * g;  // the last may hold fewer
  const bool long_tile = at < in_window;
  const int pair = window * g + (long_tile ? at : 2 * in_window - 1 - at);
  const SectionEntry e = section_entry(half, order.group, columns, pair);
  return {e.column, long_tile ? m - 1 - e.rank : e.rank};
}

// The order of a call of `ctas` persistent CTAs: as many columns per section as have K and
// V (kv_bytes per K/V head) within budget bytes together, in whole K/V heads (per_kv query
// heads share one and are adjacent columns), at least one K/V head; budget <= 0 puts every
// column in one section. `paired`: the pair order (causal, every column m_blocks tiles).
inline TileOrder tile_order(int m_blocks, int64_t columns, int per_kv, int64_t kv_bytes, int64_t budget, bool paired,
                            int ctas) {
  TileOrder order;
  order.m_blocks = m_blocks;
  const int64_t group = budget > 0 ? std::max<int64_t>(1, budget / std::max<int64_t>(kv_bytes, 1)) * per_kv : columns;
  order.group = static_cast<int>(std::max<int64_t>(1, std::min(group, columns)));
  order.paired = paired ? std::max(ctas, 1) : 0;
  return order;
}

}  // namespace wick::kernels
