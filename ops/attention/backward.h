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
// Two implementations of the same math, both in f32:
//   flash_bwd_host: untiled, on the host with Eigen (CUDA tensors are copied over and the
//     gradients copied back); the reference the tests compare against.
//   CUDA kernels (kernels/flash_bwd/flash_bwd.cu): everything stays on the device; dQ, dK,
//     dV are summed in f32 and cast once. Step map to the host code: the kernels' step 1
//     is `Dsum`, step 2b is `S`/`T`/`P`/`dP`/`dS` of one (row, key), step 2c is `dV`, `dK`
//     and `dQ`, step 2d the `dk +=`/`dv +=` over a group, step 3 `to_tensor`.
// flash_bwd picks the kernels for CUDA tensors and the host code for CPU tensors.
#pragma once
#include <array>

#include "ops/attention/plan.h"

namespace wick::attention {

// plan: the checked plan of the forward's (op, q, k, v); slopes: the ALiBi slopes (num_heads)
// or empty; out, lse: the forward's outputs; grad_out like out. Returns (dq, dk, dv) with
// the shapes of q, k, v (contiguous), q's dtype, on q's device.
// slopes and mm_ranges are read only by the host path (the kernels read the plan's pointers).
std::array<Tensor, 3> flash_bwd(const AttnPlan& plan, const std::vector<float>& slopes,
                                const std::vector<std::vector<std::array<int32_t, 2>>>& mm_ranges,
                                const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& lse, const Tensor& grad_out);

// The host reference, on any device (same arguments and results as flash_bwd).
std::array<Tensor, 3> flash_bwd_host(const AttnPlan& plan, const std::vector<float>& slopes,
                                     const std::vector<std::vector<std::array<int32_t, 2>>>& mm_ranges,
                                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                     const Tensor& lse, const Tensor& grad_out);

}  // namespace wick::attention
