// Running a checked plan on its device: the one place that chooses between the CPU path
// and the CUDA kernels. Tests use it directly to run into NaN-filled outputs.
#pragma once
#include "ops/attention/plan.h"

namespace wick::attention {

// Runs the forward for a plan whose outputs are bound (bind_outputs): the CPU path for CPU
// tensors, kernels::flash_fwd on the legacy default stream for CUDA tensors.
void run_plan(const AttnPlan& plan);

// Allocates out (plan.out_shape, contiguous, plan.dtype) and lse (plan.lse_shape, f32) on the
// plan's device, binds them and runs the plan. Returns (out, lse).
std::pair<Tensor, Tensor> run_plan_alloc(AttnPlan& plan);

}  // namespace wick::attention
