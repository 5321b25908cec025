#include "autograd/accumulate.h"

#include "ops/ops.h"
#include "tensor/grad_node.h"

namespace wick::autograd {

Tensor add_grads(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.shape() != b.shape())
    throw Error("G08", "backward: cannot sum two gradients of " + what + " with shapes " + to_string(a.shape()) +
                " and " + to_string(b.shape()));
  if (a.dtype() != b.dtype())
    throw Error("G09", "backward: cannot sum two gradients of " + what + " with dtypes " + dtype_name(a.dtype()) +
                " and " + dtype_name(b.dtype()));
  if (!(a.device() == b.device()))
    throw Error("G10", "backward: cannot sum two gradients of " + what + " on " + to_string(a.device()) + " and " +
                to_string(b.device()));
  NoGradGuard no_grad;  // the sum is a value, never part of a graph
  return add(a, b);  // same-shape add: on the gradients' device, no broadcasting
}

}  // namespace wick::autograd
