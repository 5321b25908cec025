// PagedKvCache: the K/V memory of many sequences in fixed-size blocks (vLLM's paged
// attention layout), plus the block allocator and the bookkeeping that produces the
// block_table and seqlens_k tensors of flash_attn_varlen_paged_windowed.
//
// It is the one place that decides the page size: the op's page_block_size comes from
// here (bind()), so the cache and the op cannot disagree.
//
//   k(), v(): (num_blocks, page_block_size, num_heads_k, head_size) views. Separate layout:
//             two contiguous tensors. Interleaved layout: one (num_blocks, 2, page, hk, d)
//             tensor narrowed into k and v (no copy; block stride 2 * page * hk * d).
//   token t of a sequence lives in block blocks[t / page] at row t % page.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "ops/attention/op.h"
#include "ops/attention/step.h"
#include "tensor/tensor.h"

namespace wick {

class PagedKvCache {
 public:
  enum class Layout { Separate, Interleaved };

  // page_block_size: a positive multiple of 32 (the paged kernels' requirement), checked here.
  // num_blocks >= 1, num_heads_k >= 1, head_size >= 1. Block contents start as zeros.
  PagedKvCache(size_t num_blocks, size_t page_block_size, size_t num_heads_k, size_t head_size,
               DType dtype, Device device, Layout layout = Layout::Separate);

  size_t page_block_size() const { return page_; }
  size_t num_blocks() const { return num_blocks_; }
  size_t free_blocks() const { return free_.size(); }
  const Tensor& k() const { return k_; }  // (num_blocks, page, num_heads_k, head_size)
  const Tensor& v() const { return v_; }  // same shape as k()

  // Appends n tokens to sequence seq_id (created on first use). k_new, v_new:
  // (n, num_heads_k, head_size), the cache's dtype and device, any layout. Takes new blocks
  // from the free list as needed; when too few are free it throws and changes nothing.
  void append(uint64_t seq_id, const Tensor& k_new, const Tensor& v_new);
  // Returns the sequence's blocks to the free list (they are reused by later appends).
  void free(uint64_t seq_id);
  bool contains(uint64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  size_t seq_len(uint64_t seq_id) const;                       // tokens stored
  const std::vector<int32_t>& blocks(uint64_t seq_id) const;   // block ids in token order

  // The block allocator itself, for callers that manage blocks directly: one block off the
  // free list (throws when none is free), and back. release_block refuses a block a live
  // sequence holds (P16: the next allocation would hand it to another sequence, which would
  // overwrite the first one's keys); free(seq_id) returns those.
  int32_t allocate_block();
  void release_block(int32_t block);

  // (batch, max_blocks) table for these sequences, in this order, I32 or U32, on the cache's
  // device; rows padded with block 0 (never read: past the sequence's length).
  Tensor block_table(const std::vector<uint64_t>& seq_ids, DType dtype = DType::I32) const;
  // (batch + 1) cumulative key lengths, U32, on the cache's device.
  Tensor seqlens_k(const std::vector<uint64_t>& seq_ids) const;
  // Sets op.block_table, op.seqlens_k, op.page_block_size and op.max_seqlen_k for these
  // sequences; the caller sets seqlens_q, max_seqlen_q and the mask.
  void bind(FlashAttnVarLen& op, const std::vector<uint64_t>& seq_ids,
            DType table_dtype = DType::I32) const;

  // Plan once, run many (ops/attention/step.h). Makes room for n new tokens of seq_id
  // (created on first use; blocks as for append) without writing them, and returns their
  // slots: token t of the sequence is slot block * page_block_size + t % page_block_size.
  // write_kv_slots writes the rows there, on the device, from a slots tensor; so one set of
  // block ids can serve a K/V pair per layer (each of k()'s shape).
  std::vector<int64_t> reserve(uint64_t seq_id, size_t n);
  // The host-side layout of a step over these sequences (their current lengths as keys,
  // query_lens[b] new queries each, all already reserved or appended): the input of
  // plan_step / update_step, with no device read. Room for graphs that replay it with other
  // lengths: at least min_cols block-table columns, max_seqlen_k at least min_max_seqlen_k,
  // max_seqlen_q at least min_max_seqlen_q.
  StepLayout step_layout(const std::vector<uint64_t>& seq_ids, const std::vector<size_t>& query_lens,
                         size_t min_cols = 0, size_t min_max_seqlen_k = 0, size_t min_max_seqlen_q = 0) const;

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    size_t len = 0;
  };
  const Seq& seq(const char* fn, uint64_t seq_id) const;
  Seq& make_room(const char* fn, uint64_t seq_id, size_t n);
  int32_t take_block(uint64_t seq_id);  // allocate_block() for a sequence (make_room)
  void write_rows(const Tensor& cache_view, const Tensor& src, int32_t block, size_t row,
                  size_t src_row, size_t n);

  size_t num_blocks_, page_, num_heads_k_, head_size_;
  DType dtype_;
  Device device_;
  Tensor storage_tensor_;  // the backing tensor (two for Separate: k_ holds its own)
  Tensor k_, v_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  // Per block: who holds it. kFree blocks are on free_; a sequence's blocks name it in owner_.
  enum class BlockState : uint8_t { kFree, kCaller, kSequence };
  std::vector<BlockState> state_;
  std::vector<uint64_t> owner_;  // the sequence of a kSequence block
  std::map<uint64_t, Seq> seqs_;
};

// Writes n new K/V rows (k_new, v_new: (n, num_heads_k, head_size), the caches' dtype and
// device, channel stride 1) into the paged caches k_cache, v_cache ((num_blocks, page,
// num_heads_k, head_size), channel stride 1) at slots (n) I64 on their device: row i goes to
// row slots[i] % page of block slots[i] / page. A slot outside [0, num_blocks * page) is P13,
// raised at the call for CPU tensors and at the next waiting call for CUDA ones (that row is
// not written). Asynchronous on CUDA; not recorded by autograd.
void write_kv_slots(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                    const Tensor& slots);

}  // namespace wick
