// attention_reference: attention computed the obvious way from wick's own ops, for tests
// and for anyone who wants to see the plain computation:
//   gather the sequence's keys (through the block table when paged) -> S = Q K^T (matmul)
//   -> scale, softcap, ALiBi -> mask (where) -> softmax -> O = P V (matmul),
// all in f32 (Eigen on the CPU, cuBLAS on CUDA, through ops/matmul), output rounded to q's
// dtype. It materialises every (sq x sk) score matrix: fine for tests, not for long contexts.
//
// Same arguments, same checks (it runs the same plan, so it raises the same errors) and the
// same output shape as the op's forward().
#pragma once
#include "ops/attention/flash_attn.h"

namespace wick {

// out (total_q, num_heads, head_size), q's dtype and device.
Tensor attention_reference(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v);
// out (batch, seqlen_q, num_heads, head_size), q's dtype and device.
Tensor attention_reference(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace wick
