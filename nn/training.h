// Training helpers: gradient clipping by global norm and a cosine learning-rate schedule
// with linear warm-up.
#pragma once
#include <cstddef>
#include <vector>

#include "autograd/optim.h"
#include "tensor/tensor.h"

namespace wick::nn {

// The L2 norm of all the parameters' gradients together (parameters without a gradient are
// skipped) and, when it exceeds max_norm, every gradient replaced by itself times
// max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_ does. Returns the norm before
// clipping. The squares are summed on each device (f32, f64 for f64 gradients) and read once
// per device (a wait for a CUDA device).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// lr(step), step counted from 0:
//   step < warmup_steps:            base_lr * (step + 1) / warmup_steps
//   warmup_steps <= step < total:   min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2,
//                                   t = (step - warmup_steps) / (total_steps - warmup_steps)
//   step >= total_steps:            min_lr
class CosineSchedule {
 public:
  // Needs total_steps > 0 and warmup_steps <= total_steps.
  CosineSchedule(double base_lr, size_t total_steps, size_t warmup_steps = 0, double min_lr = 0.0);
  double lr(size_t step) const;
  // opt.set_lr(lr(step)).
  void apply(autograd::Optimizer& opt, size_t step) const { opt.set_lr(lr(step)); }

 private:
  double base_lr_, min_lr_;
  size_t total_, warmup_;
};

}  // namespace wick::nn
