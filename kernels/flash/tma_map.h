// Host side of the tensor memory accelerator (hopper.cuh, tma_load_4d): the description of
// a 4-d tensor of 16-bit elements that a kernel copies boxes of. Made on the host for each
// call (no device work, no allocation) through the driver's cuTensorMapEncodeTiled, found at
// run time through the CUDA runtime, so wick links no driver library.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/flash/flash_params.h"

namespace wick::kernels::flash {

// Describes a tensor of 16-bit elements of `rank` (at most 5) dimensions with extents
// dims[0..rank-1] (dims[0] innermost and contiguous) and byte strides strides[0..rank-2] of
// dims 1.., read in boxes of box[0..rank-1] elements into shared memory with the 128-byte
// swizzle (box[0] * 2 must be 128), zeros outside the extents; `l2_fill`: the size of the
// L2's fills for what a box row misses.
// False when the driver has no encoder or refuses the description (strides not multiples of
// 16 bytes, extents past 2^32, a misaligned base): the caller then takes a path that does
// not use the copy engine.
inline bool encode_map(CUtensorMap& map, const void* base, int rank, const uint64_t* dims, const uint64_t* strides,
                       const uint32_t* box, CUtensorMapL2promotion l2_fill) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    (void)cudaGetLastError();
    return reinterpret_cast<Encode>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint32_t unit[5] = {1, 1, 1, 1, 1};
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, rank, const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, l2_fill,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Rows of one paged copy for tiles of block_n keys: 64 when pages and tiles are multiples of
// 64 (half the copies and block-table reads of 32-row pieces: paged d128 prefill +5% on the
// H200), else 32. Returned as a shift (6 or 5); make_kv_maps' box and the kernel's copies use
// the same one.
inline int paged_piece_shift(const FlashFwdParams& p, int block_n) {
  return p.page_block_size % 64 == 0 && block_n % 64 == 0 ? 6 : 5;
}

// The copy engine's descriptions of a call's K and V, 4-d (channels, rows, heads, and
// sequences or blocks), in boxes of 64 channels x block_n rows (paged: one piece of
// 2^piece_shift rows, each inside one page). With `joint`, 5-d: each 64-channel panel of a
// row is an index of its own (channels, rows, panels at a 128-byte stride, heads, sequences
// or blocks), and a box holds all of a tile's panels, one after another, as the kernels lay
// them out in shared memory: one copy where there were one per panel. Only where the head
// size is whole panels (a panel past it would read the next head's channels, not zeros).
// Varlen K/V are one sequence of p.kv_rows rows; batched K/V have seqlen_k rows per
// sequence, so rows past a sequence's keys read as zeros; paged K/V are num_blocks blocks of
// page_block_size rows. False when a call cannot be described (coordinates are 32-bit;
// strides multiples of 16 bytes): the caller takes a path without the copy engine.
// `once`: each K/V byte is read once per call (the decode). Its L2 fills are 128 bytes, a
// box row: on the H200 (bench/RESULTS.md, 2026-12-03 16:10-16:20) the paged decode streamed
// K/V 4-7% faster than with 256-byte fills (B = 64 ctx 4096 4.32 against 4.11 TB/s, B = 128
// ctx 8192 4.42 against 4.14, B = 1 ctx 32768 3.35-3.37 against 3.19-3.23); 64-byte fills
// and none measured the same as 128. The prefill reads each K/V tile for many query tiles
// and keeps 256-byte fills: with 128 its S4k d256 causal calls ran 5% slower, the others
// within 1%.
inline bool make_kv_maps(const FlashFwdParams& p, int block_n, int piece_shift, bool once, CUtensorMap& map_k,
                         CUtensorMap& map_v, bool joint = false) {
  const bool paged = p.block_table != nullptr, varlen = p.cu_seqlens_k != nullptr;
  const int64_t rows = paged ? p.page_block_size : varlen ? p.kv_rows : p.seqlen_k;
  const int64_t outer = paged ? p.num_blocks : varlen ? 1 : p.batch;
  const int64_t limit = (int64_t{1} << 31) - block_n;
  if (rows <= 0 || rows >= limit || outer <= 0 || outer >= limit) return false;
  if (joint && p.head_size % 64 != 0) return false;
  const uint32_t box_rows = paged ? 1u << piece_shift : static_cast<uint32_t>(block_n);
  const auto l2_fill = once ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  auto one = [&](CUtensorMap& map, const void* ptr, int64_t row, int64_t head, int64_t batch) {
    if (outer == 1) batch = row;  // any valid stride: the coordinate is always 0
    if (row <= 0 || head <= 0 || batch <= 0) return false;
    const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
    if (joint) {
      const uint64_t dims[5] = {64, u(rows), u(p.head_size / 64), u(p.num_heads_k), u(outer)};
      const uint64_t strides[4] = {u(row) * 2, 128, u(head) * 2, u(batch) * 2};
      const uint32_t box[5] = {64, box_rows, static_cast<uint32_t>(p.head_size / 64), 1, 1};
      return encode_map(map, ptr, 5, dims, strides, box, l2_fill);
    }
    const uint64_t dims[4] = {u(p.head_size), u(rows), u(p.num_heads_k), u(outer)};
    const uint64_t strides[3] = {u(row) * 2, u(head) * 2, u(batch) * 2};
    const uint32_t box[4] = {64, box_rows, 1, 1};
    return encode_map(map, ptr, 4, dims, strides, box, l2_fill);
  };
  return one(map_k, p.k, p.k_row_stride, p.k_head_stride, p.k_batch_stride) &&
         one(map_v, p.v, p.v_row_stride, p.v_head_stride, p.v_batch_stride);
}

}  // namespace wick::kernels::flash
