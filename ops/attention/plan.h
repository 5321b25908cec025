// The attention plan: every argument check of the flash-attention ops, in candle's order
// with candle's exact text, then wick's stricter checks (shared/parity/candle-flash-attn.md
// section 5), and the FlashFwdParams that the CPU path and the CUDA kernels both consume.
//
// No check lives anywhere else: the CPU path, the CUDA kernels and the reference path all
// start from a plan, so a CPU-only machine raises exactly the error a GPU run would.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/flash/flash_params.h"
#include "ops/attention/flash_attn.h"
#include "tensor/tensor.h"

namespace wick::attention {

struct AttnPlan {
  // Inputs filled by plan_*(); out/lse pointers and o_*/lse_* strides by bind_outputs().
  kernels::FlashFwdParams params;
  Device device;          // q's device (every input is on it; checked)
  DType dtype;            // q's dtype: F16 or BF16
  Shape out_shape;        // q's shape
  Shape lse_shape;        // varlen (num_heads, total_q); batched (batch, num_heads, seqlen_q)
  bool varlen = false;
  bool paged = false;
  // Host copies of the cumulative lengths (batch + 1 each; varlen only): the checks read
  // them, and the reference path uses them to cut sequences out of q, k and v.
  std::vector<uint32_t> seqlens_q, seqlens_k;
  // Host copy of the block table read as i32, row-major (batch, block_table_cols); paged only.
  std::vector<int32_t> block_table;
  int64_t block_table_cols = 0;
  // Tensors the plan made that params points into (a compact copy of strided alibi_slopes);
  // they live as long as the plan.
  std::vector<Tensor> keep_alive;
};

// "flash-attn-varlen": q (total_q, h, d); k, v (total_k, hk, d) or paged
// (num_blocks, page, hk, d). Throws wick::Error with candle's text on the first failing check.
AttnPlan plan_varlen(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v);

// "flash-attn": q (b, sq, h, d); k, v (b, sk, hk, d).
AttnPlan plan_batched(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v);

// Points the plan at the output tensors (out like q's shape, contiguous, q's dtype; lse of
// lse_shape, contiguous, f32; both on the plan's device) and fills the o_*/lse_* strides.
void bind_outputs(AttnPlan& plan, const Tensor& out, const Tensor& lse);

}  // namespace wick::attention
