// The Hopper forward's tile order (kernels/flash/tile_order.h) on the host: every index
// names a different tile, sections hold whole K/V heads within the budget, inside a section
// the query tiles come from the last to the first, and under a causal mask the persistent
// CTAs' work comes out even.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/flash/tile_order.h"

using wick::kernels::tile_order;
using wick::kernels::tile_slot;
using wick::kernels::TileOrder;
using wick::kernels::TileSlot;
using wick::kernels::walk_index;

TEST_CASE("flash tile order: sections of columns whose K/V fit the budget") {
  constexpr int64_t kMiB = int64_t{1} << 20;
  // 512 KiB of K/V per head: 48 heads in 24 MiB; with 2 query heads per K/V head, 96 columns.
  CHECK(tile_order(8, 256, 1, kMiB / 2, 24 * kMiB, false, 132).group == 48);
  CHECK(tile_order(8, 256, 2, kMiB / 2, 24 * kMiB, false, 132).group == 96);
  // A K/V head larger than the budget: one K/V head (its query heads) per section.
  CHECK(tile_order(128, 16, 1, 40 * kMiB, 24 * kMiB, false, 132).group == 1);
  CHECK(tile_order(128, 16, 4, 40 * kMiB, 24 * kMiB, false, 132).group == 4);
  // Never more than the columns there are; no budget: one section.
  CHECK(tile_order(8, 10, 1, 1, 24 * kMiB, false, 132).group == 10);
  CHECK(tile_order(8, 10, 1, kMiB, 0, false, 132).group == 10);
  CHECK(tile_order(8, 10, 1, 0, 24 * kMiB, false, 132).group == 10);
  CHECK(tile_order(3, 7, 1, kMiB, 0, false, 132).m_blocks == 3);
}

TEST_CASE("flash tile order: each tile once, the last query tile first within a section") {
  // (m_blocks, columns, group): one section, even sections, a narrower last section,
  // one column per section, a single query tile.
  const int shapes[][3] = {{8, 256, 256}, {8, 256, 64}, {32, 64, 12}, {5, 7, 1}, {1, 9, 4}, {3, 10, 4}};
  for (const auto& s : shapes) {
    const TileOrder order{s[0], s[2], 0};
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
  const TileOrder order{2, 2, 0};
  const int want[][2] = {{0, 1}, {1, 1}, {0, 0}, {1, 0}, {2, 1}, {2, 0}};
  for (int i = 0; i < 6; ++i) {
    CHECK(tile_slot(order, 3, i).column == want[i][0]);
    CHECK(tile_slot(order, 3, i).m_block == want[i][1]);
  }
}

TEST_CASE("flash tile order: causal pairs give every persistent CTA the same work") {
  // (m_blocks, columns, group, CTAs): the benchmark's 1k, 4k and 16k shapes on 132 SMs,
  // an odd m_blocks (middle tiles), a last window with fewer pairs, fewer tiles than CTAs,
  // and the two batched causal cases of tests/test_flash_kernels.cpp.
  const int shapes[][4] = {{8, 256, 48, 132}, {32, 64, 12, 132}, {128, 16, 3, 132}, {86, 32, 1, 132},
                           {7, 5, 2, 4},      {9, 30, 7, 16},     {3, 2, 1, 6},     {2, 144, 128, 132},
                           {3, 96, 96, 132}};
  for (const auto& s : shapes) {
    const TileOrder order{s[0], s[2], s[3]};
    const int columns = s[1], g = s[3], m = order.m_blocks, tiles = m * columns;
    CAPTURE(m);
    CAPTURE(columns);
    CAPTURE(order.group);
    CAPTURE(g);
    std::vector<int> seen(static_cast<size_t>(tiles), 0);
    std::vector<int64_t> work(static_cast<size_t>(g), 0);  // key tiles of causal tile m: m + 1
    for (int r = 0; r * g < tiles; ++r) {
      for (int c = 0; c < g; ++c) {
        const int i = walk_index(r, c, g);
        if (i >= tiles) continue;
        const TileSlot t = tile_slot(order, columns, i);
        REQUIRE(t.column >= 0);
        REQUIRE(t.column < columns);
        REQUIRE(t.m_block >= 0);
        REQUIRE(t.m_block < m);
        ++seen[static_cast<size_t>(t.m_block) * columns + t.column];
        work[static_cast<size_t>(c)] += t.m_block + 1;
      }
    }
    for (int n : seen) CHECK(n == 1);
    // In every full window of 2g indices CTA c's two tiles are one pair: m + m' = M - 1.
    const int pairs = columns * (m / 2);
    for (int w = 0; (w + 1) * g <= pairs; ++w) {
      for (int c = 0; c < g; ++c) {
        const TileSlot a = tile_slot(order, columns, 2 * w * g + c);
        const TileSlot b = tile_slot(order, columns, 2 * w * g + 2 * g - 1 - c);
        CHECK(a.column == b.column);
        CHECK(a.m_block + b.m_block == m - 1);
      }
    }
    if (m % 2 == 0 && tiles >= 8 * g) {  // no middle tiles, many rounds: within 8% of the mean
      const int64_t most = *std::max_element(work.begin(), work.end());
      int64_t sum = 0;
      for (int64_t x : work) sum += x;
      CHECK(static_cast<double>(most) * g <= 1.08 * static_cast<double>(sum));
    }
  }
}
