// CustomOp: how an operator defined outside ops/ (a plugin such as the attention op) joins
// the autograd graph exactly as built-in ops do.
//
//   CustomOp op;
//   op.name = "scaled_square";
//   op.cpu_forward = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{...}; };
//   op.cuda_forward = ...;                   // optional; missing -> clear error on CUDA inputs
//   op.backward = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
//                    const Tensor& grad_out) { return std::vector<Tensor>{...}; };
//   Tensor y = op(x);                        // or op.apply({x, w}) for all outputs
//
// Forward runs with grad mode off (whatever it computes is not recorded); the op itself is
// recorded as one node named `name` whose rule is `backward`. See docs/autograd.md.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace wick::autograd {

struct CustomOp {
  // Inputs as passed to apply() (any layout, all on one device) -> one or more outputs.
  // Output 0 is the differentiable result; any further outputs (statistics such as an
  // attention op's log-sum-exp) are returned without a graph and handed to backward.
  using Forward = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
  // (inputs, outputs of forward, gradient of output 0 with output 0's shape) -> one gradient
  // per input in input order, each with that input's shape, dtype and device; an undefined
  // Tensor for inputs that need none (integer indices, inputs not requiring grad).
  using Backward = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                                     const std::vector<Tensor>& outputs, const Tensor& grad_out)>;

  std::string name;      // used in every error and as the graph node's name
  Forward cpu_forward;   // used when the inputs are on the CPU
  Forward cuda_forward;  // used when the inputs are on a CUDA device
  Backward backward;     // needed only when an input requires grad (and grad mode is on)

  // Runs the forward for the inputs' device and records the node. Throws wick::Error naming
  // the op when: it has no name, it has no inputs or an input is empty, the inputs are on
  // different devices, the forward for their device is missing, an input requires grad but
  // there is no backward, or the forward returns no outputs or an output on another device.
  std::vector<Tensor> apply(const std::vector<Tensor>& inputs) const;
  // apply(inputs)[0].
  Tensor operator()(const std::vector<Tensor>& inputs) const { return apply(inputs)[0]; }
};

}  // namespace wick::autograd
