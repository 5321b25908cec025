// FlashBwdParams: everything the CUDA flash-attention backward needs, as plain data.
// ops/attention/backward.cpp fills it from the forward's checked plan; the kernels in
// kernels/flash_bwd/flash_bwd.cu read it.
//
// Index maps: q, k, v, out, lse and the geometry (lengths, paging, masks, ALiBi, softcap)
// are read through `fwd` exactly as the forward reads them (kernels/flash/contract.h).
// The gradient of the output, dO, has out's logical shape with its own strides:
//   dout[b*do_batch_stride + (q_start(b) + i)*do_row_stride + h*do_head_stride + d]
// The scratch and output buffers are contiguous, in the logical shapes of q and k:
//   q row  r_q(b, i) = q_start(b) + i (varlen) or b*seqlen_q + i (batched)
//   kv row r_k(b, t) = k_start(b) + t (varlen), b*seqlen_k + t (batched),
//                      blk*page_block_size + t % page_block_size (paged, blk from block_table)
//   dsum     [h*total_q + r_q]                           D = rowsum(dO * O), f32 (head-major:
//                                                        a tile's rows are adjacent)
//   dq_accum [(r_q*num_heads + h)*head_size + d]         f32, summed over key tiles
//   dk_accum, dv_accum [(r_k*num_heads_k + hk)*head_size + d]   f32, summed over the group
//   dq, dk, dv: the same maps in the output dtype (fwd.dtype); rows no sequence uses are 0.
#pragma once
#include <cstdint>

#include "kernels/common.h"  // WICK_HOST_DEVICE
#include "kernels/flash/contract.h"
#include "kernels/flash/flash_params.h"

namespace wick::kernels {

struct FlashBwdParams {
  FlashFwdParams fwd;  // q, k, v, out, lse (all read) with their strides and the geometry

  const void* dout = nullptr;  // out's logical shape, fwd.dtype, channel stride 1
  int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;

  float* dsum = nullptr;       // (total_q, num_heads) scratch
  float* dq_accum = nullptr;   // (total_q, num_heads, head_size) scratch
  float* dk_accum = nullptr;   // (kv_rows, num_heads_k, head_size) scratch, when flash_bwd_accumulates_kv
  float* dv_accum = nullptr;   // (kv_rows, num_heads_k, head_size) scratch, when flash_bwd_accumulates_kv
  int64_t kv_rows = 0;         // rows of k's (and v's) leading dims flattened

  void* dq = nullptr;  // (total_q, num_heads, head_size), fwd.dtype, contiguous
  void* dk = nullptr;  // (kv_rows, num_heads_k, head_size), fwd.dtype, contiguous
  void* dv = nullptr;  // like dk

  // Sum dQ in a fixed order (a second kernel: gradients bitwise identical run to run)
  // instead of the fused kernel, whose dQ is added with atomics in the order CTAs arrive.
  bool deterministic = false;

  // Set by flash_bwd (not by callers): the key-tile kernel writes dk, dv directly instead of
  // adding into dk_accum, dv_accum (not paged: each row belongs to one CTA).
  bool kv_direct = false;

  // Force the scalar kernels (the tensor-core ones run when head_size <= 256 and every row
  // of q, k, v and dO is 16-byte aligned): for tests and benchmarks that compare them.
  bool scalar = false;
};

// dsum's index of query row r_q (the scratch row index above) and head h.
WICK_HOST_DEVICE inline int64_t dsum_index(const FlashFwdParams& p, int64_t r_q, int h) {
  return h * p.total_q + r_q;
}

// dO's element offset of (sequence b, query row i, head h, channel 0): the map above.
WICK_HOST_DEVICE inline int64_t do_offset(const FlashBwdParams& bp, int b, const attn::SeqBounds& s, int64_t i,
                                          int h) {
  return b * bp.do_batch_stride + (s.q_start + i) * bp.do_row_stride + h * bp.do_head_stride;
}

}  // namespace wick::kernels
