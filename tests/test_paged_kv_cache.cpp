// PagedKvCache: page-size validation, the block allocator (allocate, free, reuse), appends
// that cross block boundaries, all-or-nothing failure, and the op fed from the cache giving
// the same numbers as the op on the packed K/V.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "devices.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("paged kv cache: page size is validated once, here") {
  auto make_cache = [](size_t page) {
    return [page] { PagedKvCache c(4, page, 2, 8, DType::BF16, Device::cpu()); };
  };
  CHECK(error_of(make_cache(0)) == "PagedKvCache: page_block_size must be a positive multiple of 32 (got 0)");
  CHECK(error_of(make_cache(48)) == "PagedKvCache: page_block_size must be a positive multiple of 32 (got 48)");
  CHECK(error_of(make_cache(64)) == "<no error>");
  CHECK(error_of([] { PagedKvCache c(0, 32, 2, 8, DType::BF16, Device::cpu()); }) ==
        "PagedKvCache: num_blocks must be in [1, 2^31) (got 0)");
  CHECK(error_of([] { PagedKvCache c(2, 32, 0, 8, DType::BF16, Device::cpu()); }) ==
        "PagedKvCache: num_heads_k and head_size must be positive (got 0 and 8)");
  PagedKvCache c(4, 32, 2, 8, DType::BF16, Device::cpu(), PagedKvCache::Layout::Interleaved);
  CHECK(c.k().dims() == std::vector<size_t>{4, 32, 2, 8});
  CHECK(c.k().stride() == std::vector<int64_t>{2 * 32 * 2 * 8, 16, 8, 1});
  CHECK(c.v().layout().start_offset() == 32 * 2 * 8);
}

TEST_CASE("paged kv cache: allocate, free and reuse blocks") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    PagedKvCache c(4, 32, 1, 8, DType::F16, dev);
    c.append(1, randn({40, 1, 8}, DType::F16, dev, 1), randn({40, 1, 8}, DType::F16, dev, 2));
    c.append(2, randn({10, 1, 8}, DType::F16, dev, 3), randn({10, 1, 8}, DType::F16, dev, 4));
    CHECK(c.blocks(1) == std::vector<int32_t>{0, 1});
    CHECK(c.blocks(2) == std::vector<int32_t>{2});
    CHECK(c.free_blocks() == 1);
    c.free(1);
    CHECK(c.free_blocks() == 3);
    CHECK_FALSE(c.contains(1));
    // Freed blocks are reused, the first block of the freed sequence first.
    c.append(3, randn({33, 1, 8}, DType::F16, dev, 5), randn({33, 1, 8}, DType::F16, dev, 6));
    CHECK(c.blocks(3) == std::vector<int32_t>{0, 1});
    CHECK(c.seq_len(3) == 33);
    const int32_t b = c.allocate_block();
    CHECK(b == 3);
    CHECK(error_of([&] { c.allocate_block(); }) == "PagedKvCache::allocate_block: all 4 blocks are in use");
    c.release_block(b);
    CHECK(error_of([&] { c.release_block(b); }) == "PagedKvCache::release_block: block 3 is already free");
    CHECK(error_of([&] { c.release_block(9); }) == "PagedKvCache::release_block: block 9 is outside [0, 4)");
    CHECK(error_of([&] { c.seq_len(7); }) == "PagedKvCache::seq_len: unknown sequence 7");
  }
}

TEST_CASE("paged kv cache: running out of blocks is an error that changes nothing") {
  PagedKvCache c(3, 32, 1, 8, DType::BF16, Device::cpu());
  Tensor k = randn({50, 1, 8}, DType::BF16, Device::cpu(), 7);
  c.append(5, k, k);  // 2 blocks
  Tensor more = randn({80, 1, 8}, DType::BF16, Device::cpu(), 8);
  CHECK(error_of([&] { c.append(5, more, more); }) ==
        "PagedKvCache::append: sequence 5 needs 3 more blocks of 32 rows for 80 new tokens but only 1 "
        "of 3 blocks are free; free finished sequences or make the cache larger");
  CHECK(error_of([&] { c.append(6, more.narrow(0, 0, 33), more.narrow(0, 0, 33)); }) ==
        "PagedKvCache::append: sequence 6 needs 2 more blocks of 32 rows for 33 new tokens but only 1 "
        "of 3 blocks are free; free finished sequences or make the cache larger");
  CHECK(c.seq_len(5) == 50);
  CHECK(c.free_blocks() == 1);
  CHECK_FALSE(c.contains(6));
  CHECK(error_of([&] { c.append(5, more, more.to_dtype(DType::F16)); }) ==
        "PagedKvCache::append: v_new is F16 but the cache holds BF16");
  CHECK(error_of([&] { c.append(5, randn({4, 2, 8}, DType::BF16, Device::cpu(), 9), more); }) ==
        "PagedKvCache::append: k_new has shape [4, 2, 8], expected [4, 1, 8] (n_new, num_heads_k, head_size)");
  CHECK(error_of([&] { c.block_table({5}, DType::I64); }) ==
        "PagedKvCache::block_table: dtype must be I32 or U32, got I64");
  // a step's query lengths are U32 cumulative lengths too: past 2^32 - 1 they would wrap
  c.append(6, k.narrow(0, 0, 4), k.narrow(0, 0, 4));
  CHECK(error_of([&] { c.step_layout({5, 6}, {size_t{1} << 31, size_t{1} << 31}); }) ==
        "PagedKvCache::step_layout: the first 2 sequences hold 4294967296 tokens, more than U32 cumulative lengths "
        "count (2^32 - 1); bind fewer sequences per call");
  CHECK(error_of([&] { c.step_layout({5}, {SIZE_MAX}); }).find("hold 18446744073709551615 tokens") != std::string::npos);
  CHECK(c.step_layout({5, 6}, {3, 4}).seqlens_q == std::vector<uint32_t>{0, 3, 7});
}

TEST_CASE("paged kv cache: the op fed from the cache equals the op on packed K/V") {
  for (Device dev : test::test_devices()) {
    for (auto layout : {PagedKvCache::Layout::Separate, PagedKvCache::Layout::Interleaved}) {
      DEVICE_CONTEXT(dev);
      const std::vector<uint32_t> lens_k{70, 0, 33, 5}, lens_q{3, 1, 33, 5};
      const auto ck = cumulative(lens_k), cq = cumulative(lens_q);
      const size_t hk = 2, h = 4, d = 64;
      Tensor k = randn({ck.back(), hk, d}, DType::BF16, dev, 11);
      Tensor v = randn({ck.back(), hk, d}, DType::BF16, dev, 12);
      Tensor q = randn({cq.back(), h, d}, DType::BF16, dev, 13);
      PagedKvCache cache(12, 32, hk, d, DType::BF16, dev, layout);
      cache.append(100, k.narrow(0, 0, 1), v.narrow(0, 0, 1));  // a decoy sequence, freed below
      // Append each sequence in two chunks, interleaved between sequences.
      const std::vector<uint64_t> ids{7, 8, 9, 10};
      for (int half = 0; half < 2; ++half)
        for (size_t b = 0; b < ids.size(); ++b) {
          const size_t cut = lens_k[b] / 2, start = half ? cut : 0, n = half ? lens_k[b] - cut : cut;
          if (n == 0 && cache.contains(ids[b])) continue;
          cache.append(ids[b], k.narrow(0, ck[b] + start, n), v.narrow(0, ck[b] + start, n));
        }
      cache.free(100);
      FlashAttnVarLen paged;
      paged.softmax_scale = 0.125f;
      paged.seqlens_q = u32_tensor(cq, dev);
      paged.max_seqlen_q = 33;
      paged.window_size_right = 0;
      cache.bind(paged, ids, DType::U32);
      CHECK(paged.page_block_size == size_t{32});
      CHECK(paged.max_seqlen_k == size_t{70});
      Tensor out_paged = paged.forward(q, cache.k(), cache.v());
      Tensor out_flat = flash_attn_varlen(q, k, v, paged.seqlens_q, u32_tensor(ck, dev), 33, 70, 0.125f, true);
      std::vector<double> a = out_paged.to_f64_vec(), b = out_flat.to_f64_vec();
      CHECK(all_finite(a));
      // The CPU path does the same arithmetic either way; CUDA may pick different kernels.
      CHECK(max_abs_diff(a, b) <= (dev.is_cpu() ? 0.0 : 1.6e-2));
    }
  }
}
