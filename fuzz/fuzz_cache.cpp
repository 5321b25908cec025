// The paged-cache session of the compute part: a PagedKvCache (sizes, page, dtype and layout
// as the input picks, sometimes invalid) through a chain of the calls a serving loop makes:
// append, reserve + write_kv_slots (now and then with a slot outside the cache), free,
// allocate_block and release_block (sometimes of a block the caller does not hold), then the
// tables and step layout. Beside it a model keeps each sequence's rows and which blocks are
// free or the caller's. Every call must run when the model says it can and raise a wick::Error
// otherwise, leaving the cache as it was; after each call every sequence's length, blocks,
// rows (read back through k() and v()), the free count and the tables must be the model's.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fuzz_wick.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/ops.h"

namespace wick::fuzz {

namespace {

struct SeqModel {
  std::vector<std::vector<double>> k, v;  // per token, num_heads_k * head_size values
  std::vector<bool> known;                // false: reserved, and its write was refused
};

struct Session {
  size_t num_blocks, page, heads, head_size;
  DType dtype;
  PagedKvCache* cache;
  std::map<uint64_t, SeqModel> seqs;
  std::set<int32_t> caller;  // blocks the caller holds (allocate_block)
  size_t row() const { return heads * head_size; }
};

// n rows of small integers (exact in every dtype), as an (n, heads, head_size) tensor.
Tensor rows(FuzzedDataProvider& in, size_t n, size_t heads, size_t head_size, DType dt) {
  std::vector<double> values(n * heads * head_size);
  for (auto& x : values) x = in.ConsumeIntegralInRange<int>(0, 9);
  return cast(Tensor::from_vec(values, Shape{n, heads, head_size}, kCpu), dt);
}

std::vector<std::vector<double>> split_rows(const Tensor& t, size_t row) {
  const std::vector<double> v = t.to_f64_vec();
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i + row <= v.size() && row > 0; i += row) out.emplace_back(v.begin() + i, v.begin() + i + row);
  return out;
}

// Blocks a sequence of `len` tokens holds.
size_t blocks_for(size_t len, size_t page) { return (len + page - 1) / page; }

size_t held(const Session& s) {
  size_t n = s.caller.size();
  for (const auto& [id, m] : s.seqs) n += blocks_for(m.k.size(), s.page);
  return n;
}

// The cache against the model: lengths, blocks (distinct, none free or the caller's), rows,
// free count, block table, cumulative lengths and the step layout.
void check(const Session& s, const char* after) {
  const std::string at = std::string(" after ") + after;
  PagedKvCache& c = *s.cache;
  if (c.free_blocks() != s.num_blocks - held(s)) fail("paged cache: free_blocks() differs from the model's" + at);
  const std::vector<double> kc = c.k().to_f64_vec(), vc = c.v().to_f64_vec();
  std::set<int32_t> used(s.caller);
  std::vector<uint64_t> ids;
  for (const auto& [id, m] : s.seqs) {
    ids.push_back(id);
    if (!c.contains(id) || c.seq_len(id) != m.k.size())
      fail("paged cache: a sequence's length differs from the model's" + at);
    const std::vector<int32_t>& blocks = c.blocks(id);
    if (blocks.size() != blocks_for(m.k.size(), s.page))
      fail("paged cache: a sequence holds the wrong number of blocks" + at);
    for (int32_t b : blocks)
      if (b < 0 || static_cast<size_t>(b) >= s.num_blocks || !used.insert(b).second)
        fail("paged cache: a block is outside the cache or held twice" + at);
    for (size_t t = 0; t < m.k.size(); ++t) {
      if (!m.known[t]) continue;
      const size_t base = (static_cast<size_t>(blocks[t / s.page]) * s.page + t % s.page) * s.row();
      for (size_t j = 0; j < s.row(); ++j)
        if (kc[base + j] != m.k[t][j] || vc[base + j] != m.v[t][j])
          fail("paged cache: token " + std::to_string(t) + " of sequence " + std::to_string(id) + " reads back wrong" +
               at);
    }
  }
  const Tensor table = c.block_table(ids), cu = c.seqlens_k(ids);
  const std::vector<double> tv = table.to_f64_vec(), cv = cu.to_f64_vec();
  const size_t cols = table.dim(1);
  double total = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    const std::vector<int32_t>& blocks = c.blocks(ids[b]);
    for (size_t j = 0; j < cols; ++j)
      if (tv[b * cols + j] != (j < blocks.size() ? blocks[j] : 0))
        fail("paged cache: block_table differs from blocks()" + at);
    total += static_cast<double>(c.seq_len(ids[b]));
    if (cv[b + 1] != total) fail("paged cache: seqlens_k is not the cumulative lengths" + at);
  }
  std::vector<size_t> query_lens(ids.size(), 1);
  const StepLayout l = c.step_layout(ids, query_lens);
  if (l.block_table_cols != cols || l.seqlens_k.size() != ids.size() + 1 || l.seqlens_k.back() != total ||
      l.page_block_size != s.page)
    fail("paged cache: step_layout differs from the tables" + at);
}

}  // namespace

void fuzz_paged_cache(FuzzedDataProvider& in) {
  Session s{};
  s.num_blocks = in.ConsumeIntegralInRange<size_t>(0, 6);
  s.page = in.ConsumeIntegralInRange<int>(0, 7) == 7 ? in.PickValueInArray({0, 16, 48}) : in.PickValueInArray({32, 64});
  s.heads = in.ConsumeIntegralInRange<size_t>(0, 2);
  s.head_size = in.ConsumeIntegralInRange<size_t>(0, 3);
  s.dtype = in.PickValueInArray({DType::F32, DType::BF16, DType::F16, DType::F64, DType::I32, DType::U8});
  const auto layout = in.ConsumeBool() ? PagedKvCache::Layout::Interleaved : PagedKvCache::Layout::Separate;
  const bool valid = s.page > 0 && s.page % 32 == 0 && s.num_blocks > 0 && s.heads > 0 && s.head_size > 0;
  std::unique_ptr<PagedKvCache> cache;
  if (runs([&] {
        cache = std::make_unique<PagedKvCache>(s.num_blocks, s.page, s.heads, s.head_size, s.dtype, kCpu, layout);
      }) != valid)
    fail(valid ? "paged cache: a valid cache was refused" : "paged cache: an invalid cache was made");
  if (!cache) return;
  s.cache = cache.get();
  check(s, "construction");
  const int steps = in.ConsumeIntegralInRange<int>(1, 12);
  for (int step = 0; step < steps && in.remaining_bytes() > 0; ++step) {
    const uint64_t id =
        in.ConsumeIntegralInRange<int>(0, 9) == 9 ? UINT64_MAX : in.ConsumeIntegralInRange<uint64_t>(0, 3);
    const auto it = s.seqs.find(id);
    const size_t len = it == s.seqs.end() ? 0 : it->second.k.size();
    const size_t free_now = s.num_blocks - held(s);
    const int call = in.ConsumeIntegralInRange<int>(0, 4);
    switch (call) {
      case 0:    // append, sometimes rows of the wrong shape or dtype
      case 1: {  // reserve, then write_kv_slots at the slots it gave (sometimes one outside the cache)
        const bool append = call == 0;
        const size_t n = in.ConsumeIntegralInRange<size_t>(0, 70);
        const size_t bad_heads = append && in.ConsumeIntegralInRange<int>(0, 9) == 9;
        const DType dt = append && in.ConsumeIntegralInRange<int>(0, 9) == 9 ? DType::I64 : s.dtype;
        const Tensor k_new = rows(in, n, s.heads + bad_heads, s.head_size, dt),
                     v_new = rows(in, n, s.heads, s.head_size, dt);
        const bool room = blocks_for(len + n, s.page) - blocks_for(len, s.page) <= free_now;
        SeqModel grown = it == s.seqs.end() ? SeqModel{} : it->second;
        const auto kr = split_rows(k_new, s.row()), vr = split_rows(v_new, s.row());
        if (append) {
          if (runs([&] { s.cache->append(id, k_new, v_new); }) != (room && bad_heads == 0 && dt == s.dtype))
            fail("paged cache: append accepted or refused against the model");
          if (room && bad_heads == 0 && dt == s.dtype) {
            grown.k.insert(grown.k.end(), kr.begin(), kr.end());
            grown.v.insert(grown.v.end(), vr.begin(), vr.end());
            grown.known.resize(grown.k.size(), true);
            s.seqs[id] = grown;
          }
          check(s, "append");
          break;
        }
        std::vector<int64_t> slots;
        if (runs([&] { slots = s.cache->reserve(id, n); }) != room)
          fail("paged cache: reserve accepted or refused against the model");
        if (!room) {
          check(s, "a refused reserve");
          break;
        }
        const std::vector<int32_t>& blocks = s.cache->blocks(id);
        for (size_t i = 0; i < n; ++i) {
          const size_t t = len + i;
          if (slots[i] != static_cast<int64_t>(blocks[t / s.page]) * static_cast<int64_t>(s.page) +
                              static_cast<int64_t>(t % s.page))
            fail("paged cache: reserve gave a slot other than the token's place");
        }
        const bool tamper = n > 0 && in.ConsumeIntegralInRange<int>(0, 7) == 7;
        if (tamper)
          slots[in.ConsumeIntegralInRange<size_t>(0, n - 1)] = in.ConsumeBool() ? -1 : int64_t(s.num_blocks * s.page);
        const bool wrote = runs(
            [&] { write_kv_slots(s.cache->k(), s.cache->v(), k_new, v_new, Tensor::from_vec(slots, Shape{n}, kCpu)); });
        if (wrote == tamper) fail("paged cache: write_kv_slots accepted or refused against the model");
        grown.k.insert(grown.k.end(), kr.begin(), kr.end());
        grown.v.insert(grown.v.end(), vr.begin(), vr.end());
        grown.known.resize(grown.k.size(), wrote);  // a refused write leaves the reserved rows unspecified
        s.seqs[id] = grown;
        check(s, wrote ? "reserve and write_kv_slots" : "a refused write_kv_slots");
        break;
      }
      case 2: {  // free
        if (runs([&] { s.cache->free(id); }) != (it != s.seqs.end()))
          fail("paged cache: free accepted or refused against the model");
        s.seqs.erase(id);
        check(s, "free");
        break;
      }
      case 3: {  // allocate_block
        int32_t b = -1;
        if (runs([&] { b = s.cache->allocate_block(); }) != (free_now > 0))
          fail("paged cache: allocate_block accepted or refused against the model");
        if (free_now > 0 && !s.caller.insert(b).second)
          fail("paged cache: allocate_block gave a block the caller holds");
        check(s, "allocate_block");
        break;
      }
      default: {  // release_block: one the caller holds, or any id
        int32_t b = in.ConsumeIntegralInRange<int32_t>(-1, static_cast<int32_t>(s.num_blocks));
        if (!s.caller.empty() && in.ConsumeBool()) b = *s.caller.begin();
        if (runs([&] { s.cache->release_block(b); }) != (s.caller.count(b) == 1))
          fail("paged cache: release_block accepted or refused against the model");
        s.caller.erase(b);
        check(s, "release_block");
        break;
      }
    }
  }
}

}  // namespace wick::fuzz
