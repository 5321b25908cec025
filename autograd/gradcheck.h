// Gradient checks: an op's analytic backward rule against the truth.
//
// gradcheck: central finite differences in f64 on the CPU,
//   d<f(x), r>/dx_i ~= (<f(x + eps e_i), r> - <f(x - eps e_i), r>) / (2 eps),
// against the engine's gradient of <f(x), r> for a fixed random projection r of f's output
// (so one backward pass checks every output element at once).
//
// gradcheck_device: the same analytic gradients computed in f32 on another device (CUDA)
// against the CPU f64 ones, plus the forward values.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace wick::autograd {

// The function under test: takes the inputs in order, returns one float tensor of any shape.
using GradcheckFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

struct GradcheckResult {
  bool ok = true;
  std::string message;     // empty when ok; else the first failure: input, element, expected vs got
  double max_abs_err = 0;  // largest |analytic - reference| over every checked element
  size_t checked = 0;      // number of input elements checked
};

// inputs: float tensors of any dtype/device/layout; each is copied into a fresh contiguous
// f64 CPU leaf that requires grad, so f sees f64 CPU tensors. Every element passes when
// |analytic - numeric| <= tol * (1 + |numeric|). Throws (rather than failing) when f's
// output is not a float tensor or f does not depend on the inputs through a graph at all.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double tol = 1e-6);

// Runs f on `device` with f32 copies of the inputs and compares its output and analytic
// gradients (same projection r) with the CPU f64 run. Passes when every element satisfies
// |x32 - x64| <= tol * (1 + |x64|) (the default suits f32 rounding over a few ops).
GradcheckResult gradcheck_device(const GradcheckFn& f, const std::vector<Tensor>& inputs, Device device,
                                 double tol = 1e-3);

}  // namespace wick::autograd
