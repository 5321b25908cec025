// attention_reference: attention computed the obvious way from wick's own ops, for tests
// and for anyone who wants to see the plain computation:
//   gather the sequence's keys (through the block table when paged) -> S = Q K^T (matmul)
//   -> scale, softcap, ALiBi -> mask (where) -> softmax -> O = P V (matmul),
// all in f32 (Eigen on the CPU, cuBLAS on CUDA, through ops/matmul), output rounded to q's
// dtype. It materialises every (sq x sk) score matrix: fine for tests, not for long contexts.
//
// Same arguments, same checks (it runs the same plan, so it raises the same errors) and the
// same output shape as the op's forward(). The value checks always run on the host at the
// call (strict mode), also for CUDA tensors: the reference reads the tables there anyway.
#pragma once
#include "ops/attention/op.h"

namespace wick {

// How the reference rounds on the way.
//   F32:   every intermediate in f32; only the output is rounded to q's dtype.
//   Input: the scores S = Q K^T and the probabilities P are rounded to q's dtype (f16/bf16)
//          before they are used, as a computation done in the input precision would (the
//          "same-precision reference" of FlashAttention's accuracy rule; a flash kernel
//          also feeds P to its second matmul in the input dtype).
enum class ReferencePrecision { F32, Input };

// out (total_q, num_heads, head_size), q's dtype and device.
Tensor attention_reference(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision = ReferencePrecision::F32);
// out (batch, seqlen_q, num_heads, head_size), q's dtype and device.
Tensor attention_reference(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           ReferencePrecision precision = ReferencePrecision::F32);

}  // namespace wick
