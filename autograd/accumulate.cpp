#include "autograd/accumulate.h"

#include <vector>

#include "autograd/node.h"

namespace wick::autograd {

namespace {
// Host-side sum in double, stored back as the gradients' dtype on their device.
Tensor host_sum(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.to_f64_vec();
  std::vector<double> vb = b.to_f64_vec();
  for (size_t i = 0; i < va.size(); ++i) va[i] += vb[i];
  return visit_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> out(va.size());
    for (size_t i = 0; i < va.size(); ++i) out[i] = static_cast<T>(va[i]);
    return Tensor::from_vec<T>(out, a.shape(), a.device());
  });
}
}  // namespace

Tensor add_grads(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.shape() != b.shape())
    throw Error("backward: cannot sum two gradients of " + what + " with shapes " + to_string(a.shape()) +
                " and " + to_string(b.shape()));
  if (a.dtype() != b.dtype())
    throw Error("backward: cannot sum two gradients of " + what + " with dtypes " + dtype_name(a.dtype()) +
                " and " + dtype_name(b.dtype()));
  if (!(a.device() == b.device()))
    throw Error("backward: cannot sum two gradients of " + what + " on " + to_string(a.device()) + " and " +
                to_string(b.device()));
  NoGradGuard no_grad;  // the sum is a value, never part of a graph
  return host_sum(a, b);
}

}  // namespace wick::autograd
