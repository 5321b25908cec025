// View ops: a new Layout over the same storage. No data moves.
// Backward rules (the gradient of a view is the view's inverse applied to grad_out)
// sit beside each forward:
//   narrow: zeros of the input's shape with g written into the narrowed window
//   transpose: transpose back     permute: the inverse permutation
//   reshape: reshape back         squeeze/unsqueeze: each other
//   broadcast_as: sum over the broadcast dims (sum_to)
#include "ops/ops.h"
#include "tensor/grad_node.h"
#include "tensor/tensor.h"

namespace wick {

namespace {
using Grads = std::vector<Tensor>;
Tensor view(const Tensor& t, Layout l) { return Tensor(t.storage(), std::move(l), t.dtype()); }
}  // namespace

Tensor Tensor::narrow(size_t dim, size_t start, size_t len) const {
  Shape s = shape();
  return autograd::record(view(*this, layout().narrow(dim, start, len)), "narrow", {*this},
                          [s, dim, start, len](const Tensor& g) {
                            Tensor dx = Tensor::zeros(s, g.dtype(), g.device());
                            copy_into(dx.narrow(dim, start, len), g);
                            return Grads{dx};
                          });
}

Tensor Tensor::transpose(size_t dim0, size_t dim1) const {
  return autograd::record(view(*this, layout().transpose(dim0, dim1)), "transpose", {*this},
                          [dim0, dim1](const Tensor& g) { return Grads{g.transpose(dim0, dim1)}; });
}

Tensor Tensor::t() const {
  if (rank() < 2) throw Error("L08", "t: shape " + to_string(shape()) + " has rank < 2");
  return transpose(rank() - 2, rank() - 1);
}

Tensor Tensor::permute(const std::vector<size_t>& dims) const {
  Layout l = layout().permute(dims);  // validates dims
  std::vector<size_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = i;
  return autograd::record(view(*this, std::move(l)), "permute", {*this},
                          [inverse](const Tensor& g) { return Grads{g.permute(inverse)}; });
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape s = this->shape();
  return autograd::record(view(*this, layout().reshape(shape)), "reshape", {*this},
                          [s](const Tensor& g) { return Grads{g.contiguous().reshape(s)}; });
}

Tensor Tensor::squeeze(size_t dim) const {
  return autograd::record(view(*this, layout().squeeze(dim)), "squeeze", {*this},
                          [dim](const Tensor& g) { return Grads{g.unsqueeze(dim)}; });
}

Tensor Tensor::unsqueeze(size_t dim) const {
  return autograd::record(view(*this, layout().unsqueeze(dim)), "unsqueeze", {*this},
                          [dim](const Tensor& g) { return Grads{g.squeeze(dim)}; });
}

Tensor Tensor::broadcast_as(const Shape& shape) const {
  Shape s = this->shape();
  return autograd::record(view(*this, layout().broadcast_as(shape)), "broadcast_as", {*this},
                          [s](const Tensor& g) { return Grads{sum_to(g, s)}; });
}

}  // namespace wick
