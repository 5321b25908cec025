#include "ops/attention/dispatch.h"

#include "ops/attention/backward.h"
#include "ops/attention/cpu.h"
#include "tensor/stream.h"
#ifdef WICK_WITH_CUDA
#include "kernels/flash/flash_fwd.h"
#endif

namespace wick::attention {

namespace {

#ifndef WICK_WITH_CUDA
[[noreturn]] void no_cuda(const Device& device) {
  throw Error("X01", "flash-attn: q is on " + to_string(device) + " but this build of wick has no CUDA support");
}
#endif

}  // namespace

void run_forward(const AttnPlan& plan) {
  const auto& p = plan.params;
  if (p.total_q == 0 || p.num_heads == 0) return;  // nothing to write
  if (plan.device.is_cpu()) {
    cpu_flash_fwd(p);
    return;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(plan.device);
  if (plan.device_checks) {
    kernels::DeviceChecks c = *plan.device_checks;
    c.sink = fault_sink(plan.device);
    kernels::flash_fwd(p, current_stream(plan.device).handle, &c);
  } else {
    kernels::flash_fwd(p, current_stream(plan.device).handle);
  }
#else
  no_cuda(plan.device);
#endif
}

std::pair<Tensor, Tensor> run_forward_alloc(const AttnPlan& plan) {
  AttnPlan run = plan;
  Tensor out = Tensor::empty(run.out_shape, run.dtype, run.device);
  Tensor lse = Tensor::empty(run.lse_shape, DType::F32, run.device);
  bind_outputs(run, out, lse);
  run_forward(run);
  return {out, lse};
}

std::array<Tensor, 3> run_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                   std::array<bool, 3> needed) {
  if (plan.device.is_cpu()) return host_backward(plan, q, k, v, out, lse, grad_out, needed);
#ifdef WICK_WITH_CUDA
  set_current_device(plan.device);
  return cuda_backward(plan, q, k, v, out, lse, grad_out, needed);
#else
  no_cuda(plan.device);
#endif
}

}  // namespace wick::attention
