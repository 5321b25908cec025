// The Hopper forward's tile order (kernels/flash/tile_order.h) on the host: every index
// names a different tile, sections hold whole K/V heads within the budget, and inside a
// section the query tiles come from the last to the first.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/flash/tile_order.h"

using wick::kernels::tile_order;
using wick::kernels::tile_slot;
using wick::kernels::TileOrder;
using wick::kernels::TileSlot;

TEST_CASE("flash tile order: sections of columns whose K/V fit the budget") {
  constexpr int64_t kMiB = int64_t{1} << 20;
  // 512 KiB of K/V per head: 48 heads in 24 MiB; with 2 query heads per K/V head, 96 columns.
  CHECK(tile_order(8, 256, 1, kMiB / 2, 24 * kMiB).group == 48);
  CHECK(tile_order(8, 256, 2, kMiB / 2, 24 * kMiB).group == 96);
  // A K/V head larger than the budget: one K/V head (its query heads) per section.
  CHECK(tile_order(128, 16, 1, 40 * kMiB, 24 * kMiB).group == 1);
  CHECK(tile_order(128, 16, 4, 40 * kMiB, 24 * kMiB).group == 4);
  // Never more than the columns there are; no budget: one section.
  CHECK(tile_order(8, 10, 1, 1, 24 * kMiB).group == 10);
  CHECK(tile_order(8, 10, 1, kMiB, 0).group == 10);
  CHECK(tile_order(8, 10, 1, 0, 24 * kMiB).group == 10);
  CHECK(tile_order(3, 7, 1, kMiB, 0).m_blocks == 3);
}

TEST_CASE("flash tile order: each tile once, the last query tile first within a section") {
  // (m_blocks, columns, group): one section, even sections, a narrower last section,
  // one column per section, a single query tile.
  const int shapes[][3] = {{8, 256, 256}, {8, 256, 64}, {32, 64, 12}, {5, 7, 1}, {1, 9, 4}, {3, 10, 4}};
  for (const auto& s : shapes) {
    const TileOrder order{s[0], s[2]};
    const int columns = s[1];
    CAPTURE(order.m_blocks);
    CAPTURE(columns);
    CAPTURE(order.group);
    std::vector<int> seen(static_cast<size_t>(order.m_blocks) * columns, 0);
    int last_section = -1, last_m = 0;
    for (int i = 0; i < order.m_blocks * columns; ++i) {
      const TileSlot t = tile_slot(order, columns, i);
      REQUIRE(t.column >= 0);
      REQUIRE(t.column < columns);
      REQUIRE(t.m_block >= 0);
      REQUIRE(t.m_block < order.m_blocks);
      ++seen[static_cast<size_t>(t.m_block) * columns + t.column];
      const int section = t.column / order.group;
      CHECK(section >= last_section);  // sections in order
      if (section == last_section) CHECK(t.m_block <= last_m);
      else CHECK(t.m_block == order.m_blocks - 1);  // a section starts at its last query tile
      last_section = section, last_m = t.m_block;
    }
    for (int n : seen) CHECK(n == 1);
  }
  // By hand: 2 query tiles, 3 columns, sections of 2: columns {0, 1} then {2}.
  const TileOrder order{2, 2};
  const int want[][2] = {{0, 1}, {1, 1}, {0, 0}, {1, 0}, {2, 1}, {2, 0}};
  for (int i = 0; i < 6; ++i) {
    CHECK(tile_slot(order, 3, i).column == want[i][0]);
    CHECK(tile_slot(order, 3, i).m_block == want[i][1]);
  }
}
