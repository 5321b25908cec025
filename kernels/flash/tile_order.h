// The order in which the Hopper forward's CTAs take their tiles (flash_fwd_sm90.cu), as plain
// host + device functions so the host can test it (tests/test_flash_tile_order.cpp).
//
// A tile is one query tile of one column, a column being one (head, sequence) pair,
// column = b * num_heads + h. Tile indices run over [0, m_blocks * columns), each naming a
// different tile. Columns come in sections of `group`; inside a section the columns run
// fastest, then the query tiles from the last to the first (under a causal mask the last
// sees the most keys), so long tiles start first. With sections whose K/V fit in L2
// together, the query tiles that read one column's K/V run close together in time, while
// that K/V is still in L2.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/common.h"  // WICK_HOST_DEVICE

namespace wick::kernels {

struct TileOrder {
  int m_blocks = 0;  // query tiles per column (of the longest sequence)
  int group = 1;     // columns per section
};

struct TileSlot {
  int column = 0;   // b * num_heads + h
  int m_block = 0;  // the tile's first query row is m_block * block_m
};

// The tile of index (0 <= index < order.m_blocks * columns).
WICK_HOST_DEVICE inline TileSlot tile_slot(TileOrder order, int columns, int index) {
  const int per_section = order.group * order.m_blocks;
  const int section = index / per_section, first = section * order.group;
  const int width = order.group < columns - first ? order.group : columns - first;  // the last may be narrower
  const int in_section = index - section * per_section;
  return {first + in_section % width, order.m_blocks - 1 - in_section / width};
}

// The order of a call: as many columns per section as have K and V (kv_bytes per K/V head)
// within budget bytes together, in whole K/V heads (per_kv query heads share one and are
// adjacent columns), at least one K/V head. budget <= 0 puts every column in one section.
inline TileOrder tile_order(int m_blocks, int64_t columns, int per_kv, int64_t kv_bytes, int64_t budget) {
  TileOrder order;
  order.m_blocks = m_blocks;
  const int64_t group = budget > 0 ? std::max<int64_t>(1, budget / std::max<int64_t>(kv_bytes, 1)) * per_kv : columns;
  order.group = static_cast<int>(std::max<int64_t>(1, std::min(group, columns)));
  return order;
}

}  // namespace wick::kernels
