// Summing two gradients of one tensor (a tensor used twice, or a leaf's grad() across
// backward calls). Kept apart from the engine so the one place that adds gradients is easy
// to find and to swap for a faster kernel.
#pragma once
#include <string>

#include "tensor/tensor.h"

namespace wick::autograd {

// a + b as a new tensor; a and b are not modified. Both must have the same shape, dtype
// and device; `what` names the tensor in the error otherwise.
Tensor add_grads(const Tensor& a, const Tensor& b, const std::string& what = "gradient");

}  // namespace wick::autograd
