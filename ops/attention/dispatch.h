// Running a checked plan on its device: the one place that chooses between the CPU path and
// the CUDA kernels, for the forward and for the backward. Tests use it directly to run into
// NaN-filled outputs.
#pragma once
#include <array>
#include <utility>

#include "ops/attention/plan.h"

namespace wick::attention {

// Runs the forward for a plan whose outputs are bound (bind_outputs): the CPU path
// (cpu.h) for CPU tensors, kernels::flash_fwd on the legacy default stream for CUDA tensors.
void run_forward(const AttnPlan& plan);

// Allocates out (plan.out_shape, contiguous, plan.dtype) and lse (plan.lse_shape, f32) on the
// plan's device, binds them into a copy of the plan and runs it. Returns (out, lse).
std::pair<Tensor, Tensor> run_forward_alloc(const AttnPlan& plan);

// The backward of a forward run from `plan` (backward.h): host_backward for CPU tensors,
// cuda_backward for CUDA tensors. Returns (dq, dk, dv); those not `needed` are undefined.
std::array<Tensor, 3> run_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                   std::array<bool, 3> needed = {true, true, true});

}  // namespace wick::attention
