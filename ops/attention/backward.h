// The backward of flash attention: gradients of the output with respect to q, k and v,
// recomputing the softmax from the forward's LSE (FlashAttention-2's backward):
//   P  = exp(logit - lse)               (0 where masked; the contract's logit and mask)
//   dV = P^T dO                          dP = dO V^T
//   D  = rowsum(dO * O)                  dL = P * (dP - D)          (gradient of the logits)
//   dS = dL * (1 - tanh^2(s / softcap))  with softcap, else dL      (s = softmax_scale * q.k)
//   dQ = softmax_scale * dS K            dK = softmax_scale * dS^T Q
// GQA: the query heads of a group add into their kv head's dK and dV. Paged: dK and dV have
// the block tensors' shape; rows no sequence uses get 0.
//
// Two implementations of the same math, both in f32; ops/attention/dispatch.cpp picks one
// by device:
//   host_backward: tiled like the forward (kBlockM query rows x kBlockN keys at a time,
//     only the key tiles a query tile can see), on the host with Eigen (for CPU tensors;
//     for CUDA tensors it copies them over and the gradients back, which tests use as the
//     reference). It reads q, k, v, out and grad_out where they lie, in their dtype and
//     layout; its extra memory is O(tokens): dq in q's dtype and f32 dK / dV accumulators
//     of k's and v's element counts, each only when that gradient is needed.
//   cuda_backward: the kernels of kernels/flash_bwd/; everything stays on the device; dQ,
//     dK, dV are summed in f32 and cast once. Step map to the host code: the kernels' step
//     1 is `dsum_`, step 2b is the P / dS of one (row, key) in query_tile, step 2c is `dQ_`,
//     `add_rows` of dK and dV, step 2d the sum over a group, step 3 `finish`.
#pragma once
#include <array>

#include "ops/attention/plan.h"

namespace wick::attention {

// plan: the checked plan of the forward's (op, q, k, v); out, lse: the forward's outputs;
// grad_out like out (any layout). Returns (dq, dk, dv) with the shapes of q, k, v
// (contiguous), q's dtype, on q's device; an entry whose `needed` flag is false is an
// undefined Tensor and costs nothing.
std::array<Tensor, 3> host_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                    std::array<bool, 3> needed = {true, true, true});

#ifdef WICK_WITH_CUDA
// The same on the device's kernels (CUDA tensors).
std::array<Tensor, 3> cuda_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                    std::array<bool, 3> needed = {true, true, true});
#endif

}  // namespace wick::attention
