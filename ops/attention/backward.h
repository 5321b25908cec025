// The backward of flash attention: gradients of the output with respect to q, k and v,
// recomputing the softmax from the forward's LSE (FlashAttention-2's backward, untiled):
//   P  = exp(logits - lse)               (0 where masked; logits as in the forward)
//   dV = P^T dO                          dP = dO V^T
//   D  = rowsum(dO * O)                  dL = P * (dP - D)          (gradient of the logits)
//   dS = dL * (1 - tanh^2(s / softcap))  with softcap, else dL      (s = softmax_scale * q.k)
//   dQ = softmax_scale * dS K            dK = softmax_scale * dS^T Q
// GQA: the query heads of a group add into their kv head's dK and dV. Paged: dK and dV have
// the block tensors' shape; rows no sequence uses get 0.
//
// Runs on the host in f32 (CUDA tensors are copied over and the gradients copied back): a
// correct reference for training loops and tests, not a fast path.
#pragma once
#include <array>

#include "ops/attention/plan.h"

namespace wick::attention {

// plan: the checked plan of the forward's (op, q, k, v); slopes: the ALiBi slopes (num_heads)
// or empty; out, lse: the forward's outputs; grad_out like out. Returns (dq, dk, dv) with
// the shapes of q, k, v (contiguous), q's dtype, on q's device.
std::array<Tensor, 3> flash_bwd(const AttnPlan& plan, const std::vector<float>& slopes,
                                const std::vector<std::vector<std::array<int32_t, 2>>>& mm_ranges,
                                const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& lse, const Tensor& grad_out);

}  // namespace wick::attention
