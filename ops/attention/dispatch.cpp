#include "ops/attention/dispatch.h"

#include "ops/attention/cpu.h"
#ifdef WICK_WITH_CUDA
#include "kernels/flash/flash_fwd.h"
#endif

namespace wick::attention {

void run_plan(const AttnPlan& plan) {
  const auto& p = plan.params;
  if (p.total_q == 0 || p.num_heads == 0) return;  // nothing to write
  if (plan.device.is_cpu()) {
    cpu_flash_fwd(p);
    return;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(plan.device);
  kernels::flash_fwd(p, nullptr);
#else
  throw Error("flash-attn: q is on " + to_string(plan.device) + " but this build of wick has no CUDA support");
#endif
}

std::pair<Tensor, Tensor> run_plan_alloc(AttnPlan& plan) {
  Tensor out = Tensor::empty(plan.out_shape, plan.dtype, plan.device);
  Tensor lse = Tensor::empty(plan.lse_shape, DType::F32, plan.device);
  bind_outputs(plan, out, lse);
  run_plan(plan);
  return {out, lse};
}

}  // namespace wick::attention
