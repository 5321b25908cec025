// The device side of the value checks (validate.h): what one CTA runs, in the check kernel
// (validate.cu) or at the start of every CTA of the tensor-core forward
// (flash_fwd_kernel.cuh). Every thread of the block must call first_fault_in_block.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_fault.cuh"
#include "kernels/flash/validate.h"

namespace wick::kernels::checks {

constexpr unsigned long long kNone = ~0ull;

__device__ __forceinline__ unsigned long long make_key(SeqlensCheck check, int64_t index) {
  return (static_cast<unsigned long long>(check) << 56) | static_cast<unsigned long long>(index);
}

__device__ __forceinline__ int64_t table_entry(const FlashFwdParams& p, const DeviceChecks& c, int64_t b, int64_t col) {
  const int32_t raw = p.block_table[b * p.block_table_batch_stride + col];
  return c.table_unsigned ? static_cast<int64_t>(static_cast<uint32_t>(raw)) : static_cast<int64_t>(raw);
}

// Keys of sequence b as the table checks read them (the difference taken as unsigned, so
// seqlens out of order read as a length no table covers), and the pages they take.
__device__ __forceinline__ uint32_t keys_of(const FlashFwdParams& p, int64_t b) {
  return p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
}
__device__ __forceinline__ int64_t pages_of(const FlashFwdParams& p, int64_t b) {
  return (static_cast<int64_t>(keys_of(p, b)) + p.page_block_size - 1) / p.page_block_size;
}

// The table cells (b, col) for col <= cols this thread reads, flattened as f = b * (cols + 1)
// + col; col == cols stands for the column count of b. I: a 32-bit index when the cells fit
// (no 64-bit division in the loop). Every entry is inside the table (the host checked its
// shape), so each is read before knowing whether its sequence uses it: one round trip of
// loads per cell, not two, and unrolled so several cells' loads are in flight together.
template <class I>
__device__ __forceinline__ void scan_table(const FlashFwdParams& p, const DeviceChecks& c, I cells,
                                           unsigned long long& key) {
  const I per_seq = static_cast<I>(c.table_cols + 1);
#pragma unroll 4
  for (I f = threadIdx.x; f < cells; f += blockDim.x) {
    const I b = f / per_seq, col = f % per_seq;
    const int64_t e = col < c.table_cols ? table_entry(p, c, b, col) : 0;
    // col < pages_of(p, b), i.e. col < ceil(keys / page), is col * page < keys: no division
    const bool used = static_cast<int64_t>(col) * p.page_block_size < static_cast<int64_t>(keys_of(p, b));
    unsigned long long k2 = kNone;
    if (col == c.table_cols) {
      if (used) k2 = make_key(SeqlensCheck::Table, static_cast<int64_t>(b) * per_seq);  // pages > cols
    } else if (used && (e < 0 || e >= p.num_blocks)) {
      k2 = make_key(SeqlensCheck::Table, static_cast<int64_t>(b) * per_seq + 1 + col);
    }
    key = k2 < key ? k2 : key;
  }
}

// The smallest key of a failing check among the cells this thread reads.
__device__ inline unsigned long long scan(const FlashFwdParams& p, const DeviceChecks& c) {
  const uint32_t* q = p.cu_seqlens_q;
  const uint32_t* k = p.cu_seqlens_k;
  const int64_t B = p.batch;
  unsigned long long key = kNone;
  auto take = [&](unsigned long long k2) { key = k2 < key ? k2 : key; };
  for (int64_t b = threadIdx.x; b <= B; b += blockDim.x) {
    if (b == 0 && q[0] != 0) take(make_key(SeqlensCheck::QStart, 0));
    if (b > 0 && q[b] < q[b - 1]) take(make_key(SeqlensCheck::QOrder, b));
    if (b > 0 && k[b] < k[b - 1]) take(make_key(SeqlensCheck::KOrder, b));
    if (b == B && q[B] != static_cast<uint64_t>(p.total_q)) take(make_key(SeqlensCheck::QEnd, 0));
    if (b == B && !p.block_table && k[B] > static_cast<uint64_t>(c.total_k)) take(make_key(SeqlensCheck::KEnd, 0));
    if (b < B && q[b + 1] - q[b] > static_cast<uint32_t>(p.max_seqlen_q)) take(make_key(SeqlensCheck::QLength, b));
    if (b < B && k[b + 1] - k[b] > static_cast<uint32_t>(p.max_seqlen_k)) take(make_key(SeqlensCheck::KLength, b));
  }
  if (p.block_table) {
    const int64_t cells = B * (c.table_cols + 1);
    if (cells <= 0x7fffffff)
      scan_table<int32_t>(p, c, static_cast<int32_t>(cells), key);
    else
      scan_table<int64_t>(p, c, cells, key);
  }
  return key;
}

// The block's smallest failing key (kNone: every check passed), the same in every thread.
// `shared` is one word of the block's shared memory.
__device__ inline unsigned long long first_fault_in_block(const FlashFwdParams& p, const DeviceChecks& c,
                                                          unsigned long long& shared) {
  if (threadIdx.x == 0) shared = kNone;
  __syncthreads();
  unsigned long long key = scan(p, c);
  for (int o = 16; o > 0; o /= 2) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
    key = other < key ? other : key;
  }
  if (threadIdx.x % 32 == 0 && key != kNone) atomicMin(&shared, key);
  __syncthreads();
  return shared;
}

// Writes the verdict and, for a failing key, records the fault with its values (read again
// by this one thread). Called by one thread of the call. (Inline: out of line, the params it
// reads would be copied to each thread's stack.)
__device__ inline void report(const FlashFwdParams& p, const DeviceChecks& c, unsigned long long key) {
  *c.verdict = key == kNone ? 0u : 1u;
  if (key == kNone) return;
  const auto check = static_cast<SeqlensCheck>(key >> 56);
  const int64_t index = static_cast<int64_t>(key & ((1ull << 56) - 1));
  const uint32_t* s = check == SeqlensCheck::KOrder || check == SeqlensCheck::KLength ? p.cu_seqlens_k : p.cu_seqlens_q;
  int64_t v[7] = {static_cast<int64_t>(check), 0, 0, 0, 0, 0, 0};
  switch (check) {
    case SeqlensCheck::QStart: v[1] = s[0]; break;
    case SeqlensCheck::QOrder:
    case SeqlensCheck::KOrder: v[1] = index, v[2] = s[index], v[3] = s[index - 1]; break;
    case SeqlensCheck::QEnd: v[1] = s[p.batch], v[2] = p.total_q; break;
    case SeqlensCheck::KEnd: v[1] = p.cu_seqlens_k[p.batch], v[2] = c.total_k; break;
    case SeqlensCheck::QLength:
    case SeqlensCheck::KLength:
      v[1] = index, v[2] = s[index + 1] - s[index];
      v[3] = check == SeqlensCheck::QLength ? p.max_seqlen_q : p.max_seqlen_k;
      break;
    case SeqlensCheck::Table: {
      const int64_t per_seq = c.table_cols + 1, b = index / per_seq, col = index % per_seq - 1;
      if (col < 0) {  // W10: too few columns
        v[1] = b, v[2] = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b], v[3] = pages_of(p, b);
        v[4] = p.page_block_size, v[5] = c.table_cols, v[6] = 0;
      } else {  // W11: an entry out of range
        v[1] = b, v[2] = col, v[3] = table_entry(p, c, b, col), v[4] = p.num_blocks, v[6] = 1;
      }
      break;
    }
  }
  record_fault(c.sink, FaultKind::Attention, key, v, 7);
}

}  // namespace wick::kernels::checks
