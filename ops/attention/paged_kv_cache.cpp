#include "ops/attention/paged_kv_cache.h"

#include <algorithm>
#include <string>

namespace wick {

namespace {
// code: the message's docs/errors.md id.
[[noreturn]] void fail(const char* code, const std::string& msg) { throw Error(code, msg); }

// The cumulative key length after sequence b (total tokens of sequences 0..b) as U32, the
// dtype of seqlens_k; P17 past 2^32 - 1 instead of wrapping.
uint32_t cumulative_u32(const char* fn, size_t b, uint64_t total) {
  if (total > UINT32_MAX)
    fail("P17", std::string("PagedKvCache::") + fn + ": the first " + std::to_string(b + 1) + " sequences hold " +
                    std::to_string(total) +
                    " tokens, more than U32 cumulative lengths count (2^32 - 1); bind fewer sequences per call");
  return static_cast<uint32_t>(total);
}
}  // namespace

PagedKvCache::PagedKvCache(size_t num_blocks, size_t page_block_size, size_t num_heads_k,
                           size_t head_size, DType dtype, Device device, Layout layout)
    : num_blocks_(num_blocks), page_(page_block_size), num_heads_k_(num_heads_k),
      head_size_(head_size), dtype_(dtype), device_(device) {
  if (page_block_size == 0 || page_block_size % 32 != 0)
    fail("P01", "PagedKvCache: page_block_size must be a positive multiple of 32 (got " +
         std::to_string(page_block_size) + ")");
  if (num_blocks == 0 || num_blocks > static_cast<size_t>(INT32_MAX))
    fail("P02", "PagedKvCache: num_blocks must be in [1, 2^31) (got " + std::to_string(num_blocks) + ")");
  if (num_heads_k == 0 || head_size == 0)
    fail("P03", "PagedKvCache: num_heads_k and head_size must be positive (got " + std::to_string(num_heads_k) +
         " and " + std::to_string(head_size) + ")");
  if (layout == Layout::Interleaved) {
    storage_tensor_ = Tensor::zeros({num_blocks, 2, page_, num_heads_k, head_size}, dtype, device);
    k_ = storage_tensor_.narrow(1, 0, 1).squeeze(1);
    v_ = storage_tensor_.narrow(1, 1, 1).squeeze(1);
  } else {
    k_ = Tensor::zeros({num_blocks, page_, num_heads_k, head_size}, dtype, device);
    v_ = Tensor::zeros({num_blocks, page_, num_heads_k, head_size}, dtype, device);
  }
  free_.reserve(num_blocks);
  for (size_t b = num_blocks; b-- > 0;) free_.push_back(static_cast<int32_t>(b));  // block 0 first
  state_.assign(num_blocks, BlockState::kFree);
  owner_.assign(num_blocks, 0);
}

int32_t PagedKvCache::allocate_block() {
  if (free_.empty())
    fail("P08", "PagedKvCache::allocate_block: all " + std::to_string(num_blocks_) + " blocks are in use");
  int32_t b = free_.back();
  free_.pop_back();
  state_[static_cast<size_t>(b)] = BlockState::kCaller;
  return b;
}

int32_t PagedKvCache::take_block(uint64_t seq_id) {
  const int32_t b = allocate_block();
  state_[static_cast<size_t>(b)] = BlockState::kSequence;
  owner_[static_cast<size_t>(b)] = seq_id;
  return b;
}

void PagedKvCache::release_block(int32_t block) {
  if (block < 0 || static_cast<size_t>(block) >= num_blocks_)
    fail("P09", "PagedKvCache::release_block: block " + std::to_string(block) + " is outside [0, " +
         std::to_string(num_blocks_) + ")");
  const size_t b = static_cast<size_t>(block);
  if (state_[b] == BlockState::kFree)
    fail("P10", "PagedKvCache::release_block: block " + std::to_string(block) + " is already free");
  if (state_[b] == BlockState::kSequence)
    fail("P16", "PagedKvCache::release_block: block " + std::to_string(block) + " belongs to sequence " +
                    std::to_string(owner_[b]) + ", which still reads it; free(" + std::to_string(owner_[b]) +
                    ") returns a sequence's blocks");
  state_[b] = BlockState::kFree;
  free_.push_back(block);
}

const PagedKvCache::Seq& PagedKvCache::seq(const char* fn, uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end())
    fail("P11", std::string("PagedKvCache::") + fn + ": unknown sequence " + std::to_string(seq_id));
  return it->second;
}

size_t PagedKvCache::seq_len(uint64_t seq_id) const { return seq("seq_len", seq_id).len; }
const std::vector<int32_t>& PagedKvCache::blocks(uint64_t seq_id) const {
  return seq("blocks", seq_id).blocks;
}

// Rows [row, row + n) of one block are contiguous in both layouts, as are rows of a
// contiguous src: one byte copy per (block, tensor).
void PagedKvCache::write_rows(const Tensor& cache_view, const Tensor& src, int32_t block, size_t row,
                              size_t src_row, size_t n) {
  const size_t es = dtype_size(dtype_), row_elems = num_heads_k_ * head_size_;
  const auto& st = cache_view.stride();
  const size_t dst_off = cache_view.layout().start_offset() + block * st[0] + row * st[1];
  const size_t src_off = src.layout().start_offset() + src_row * row_elems;
  Storage::copy(*src.storage(), src_off * es, *cache_view.storage(), dst_off * es, n * row_elems * es);
}

void PagedKvCache::append(uint64_t seq_id, const Tensor& k_new, const Tensor& v_new) {
  for (const Tensor* t : {&k_new, &v_new})
    if (!t->defined())
      fail("L12", std::string("PagedKvCache::append: ") + (t == &k_new ? "k_new" : "v_new") +
                      " is an empty (default-constructed) tensor");
  const Shape want{k_new.rank() == 3 ? k_new.dim(0) : 0, num_heads_k_, head_size_};
  for (const Tensor* t : {&k_new, &v_new}) {
    const char* name = t == &k_new ? "k_new" : "v_new";
    if (t->rank() != 3 || !(t->shape() == want))
      fail("P05", std::string("PagedKvCache::append: ") + name + " has shape " + to_string(t->shape()) +
           ", expected " + to_string(want) + " (n_new, num_heads_k, head_size)");
    if (t->dtype() != dtype_)
      fail("P06", std::string("PagedKvCache::append: ") + name + " is " + dtype_name(t->dtype()) +
           " but the cache holds " + dtype_name(dtype_));
    if (!(t->device() == device_))
      fail("P07", std::string("PagedKvCache::append: ") + name + " is on " + to_string(t->device()) +
           " but the cache is on " + to_string(device_));
  }
  const size_t n = k_new.dim(0);
  const Tensor kc = k_new.contiguous(), vc = v_new.contiguous();
  Seq& s = make_room("append", seq_id, n);
  for (size_t done = 0; done < n;) {
    const size_t t = s.len + done, row = t % page_;
    const size_t chunk = std::min(n - done, page_ - row);
    const int32_t block = s.blocks[t / page_];
    write_rows(k_, kc, block, row, done, chunk);
    write_rows(v_, vc, block, row, done, chunk);
    done += chunk;
  }
  s.len += n;
}

// The blocks for n more tokens of seq_id (created on first use), all or nothing: the count
// comes first, so running out leaves the cache as it was. The length is the caller's to bump.
PagedKvCache::Seq& PagedKvCache::make_room(const char* fn, uint64_t seq_id, size_t n) {
  auto it = seqs_.find(seq_id);
  const size_t len = it == seqs_.end() ? 0 : it->second.len;
  const size_t have = it == seqs_.end() ? 0 : it->second.blocks.size();
  const size_t need = (len + n + page_ - 1) / page_;
  if (need - have > free_.size())
    fail("P04", std::string("PagedKvCache::") + fn + ": sequence " + std::to_string(seq_id) + " needs " +
         std::to_string(need - have) + " more blocks of " + std::to_string(page_) + " rows for " +
         std::to_string(n) + " new tokens but only " + std::to_string(free_.size()) + " of " +
         std::to_string(num_blocks_) + " blocks are free; free finished sequences or make the cache larger");
  Seq& s = seqs_[seq_id];
  while (s.blocks.size() < need) s.blocks.push_back(take_block(seq_id));
  return s;
}

std::vector<int64_t> PagedKvCache::reserve(uint64_t seq_id, size_t n) {
  Seq& s = make_room("reserve", seq_id, n);
  std::vector<int64_t> slots(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t t = s.len + i;
    slots[i] = static_cast<int64_t>(s.blocks[t / page_]) * static_cast<int64_t>(page_) + static_cast<int64_t>(t % page_);
  }
  s.len += n;
  return slots;
}

StepLayout PagedKvCache::step_layout(const std::vector<uint64_t>& seq_ids, const std::vector<size_t>& query_lens,
                                     size_t min_cols, size_t min_max_seqlen_k, size_t min_max_seqlen_q) const {
  if (query_lens.size() != seq_ids.size())
    fail("P15", "PagedKvCache::step_layout: " + std::to_string(query_lens.size()) + " query lengths for " +
         std::to_string(seq_ids.size()) + " sequences");
  StepLayout l;
  l.seqlens_q.assign(seq_ids.size() + 1, 0);
  l.seqlens_k.assign(seq_ids.size() + 1, 0);
  l.max_seqlen_q = min_max_seqlen_q;
  l.max_seqlen_k = min_max_seqlen_k;
  size_t cols = std::max<size_t>(min_cols, 1);
  for (size_t b = 0; b < seq_ids.size(); ++b) {
    const Seq& s = seq("step_layout", seq_ids[b]);
    uint64_t queries = 0;  // saturates: a sum past 2^64 is past 2^32 too
    if (__builtin_add_overflow(uint64_t{l.seqlens_q[b]}, uint64_t{query_lens[b]}, &queries)) queries = UINT64_MAX;
    l.seqlens_q[b + 1] = cumulative_u32("step_layout", b, queries);
    l.seqlens_k[b + 1] = cumulative_u32("step_layout", b, uint64_t{l.seqlens_k[b]} + s.len);
    l.max_seqlen_q = std::max(l.max_seqlen_q, query_lens[b]);
    l.max_seqlen_k = std::max(l.max_seqlen_k, s.len);
    cols = std::max(cols, s.blocks.size());
  }
  l.block_table_cols = cols;
  l.block_table.assign(seq_ids.size() * cols, 0);  // padding names block 0, never read
  for (size_t b = 0; b < seq_ids.size(); ++b) {
    const auto& blocks = seqs_.at(seq_ids[b]).blocks;
    std::copy(blocks.begin(), blocks.end(), l.block_table.begin() + b * cols);
  }
  l.page_block_size = page_;
  return l;
}

void PagedKvCache::free(uint64_t seq_id) {
  const Seq& s = seq("free", seq_id);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
    state_[static_cast<size_t>(*it)] = BlockState::kFree;
    free_.push_back(*it);
  }
  seqs_.erase(seq_id);
}

Tensor PagedKvCache::block_table(const std::vector<uint64_t>& seq_ids, DType dtype) const {
  if (dtype != DType::I32 && dtype != DType::U32)
    fail("P12", std::string("PagedKvCache::block_table: dtype must be I32 or U32, got ") + dtype_name(dtype));
  size_t cols = 1;
  for (uint64_t id : seq_ids) cols = std::max(cols, seq("block_table", id).blocks.size());
  std::vector<int32_t> table(seq_ids.size() * cols, 0);
  for (size_t b = 0; b < seq_ids.size(); ++b) {
    const auto& blocks = seqs_.at(seq_ids[b]).blocks;
    std::copy(blocks.begin(), blocks.end(), table.begin() + b * cols);
  }
  const Shape shape{seq_ids.size(), cols};
  if (dtype == DType::U32)
    return Tensor::from_vec(std::vector<uint32_t>(table.begin(), table.end()), shape, device_);
  return Tensor::from_vec(table, shape, device_);
}

Tensor PagedKvCache::seqlens_k(const std::vector<uint64_t>& seq_ids) const {
  std::vector<uint32_t> cu(seq_ids.size() + 1, 0);
  uint64_t total = 0;
  for (size_t b = 0; b < seq_ids.size(); ++b) {
    total += seq("seqlens_k", seq_ids[b]).len;  // at most num_blocks * page per sequence: no wrap
    cu[b + 1] = cumulative_u32("seqlens_k", b, total);
  }
  return Tensor::from_vec(cu, Shape{cu.size()}, device_);
}

void PagedKvCache::bind(FlashAttnVarLen& op, const std::vector<uint64_t>& seq_ids, DType table_dtype) const {
  op.block_table = block_table(seq_ids, table_dtype);
  op.seqlens_k = seqlens_k(seq_ids);
  op.page_block_size = page_;
  size_t max_len = 0;
  for (uint64_t id : seq_ids) max_len = std::max(max_len, seqs_.at(id).len);
  op.max_seqlen_k = max_len;
}

}  // namespace wick
