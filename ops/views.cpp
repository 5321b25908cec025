// View ops: a new Layout over the same storage. No data moves.
// Backward rules (the gradient of a view is the view's inverse applied to grad_out)
// sit beside each forward.
#include "autograd/node.h"
#include "tensor/tensor.h"

namespace wick {

namespace {
Tensor view(const Tensor& t, Layout l) { return Tensor(t.storage(), std::move(l), t.dtype()); }
}  // namespace

Tensor Tensor::narrow(size_t dim, size_t start, size_t len) const {
  return view(*this, layout().narrow(dim, start, len));
}

Tensor Tensor::transpose(size_t dim0, size_t dim1) const {
  return view(*this, layout().transpose(dim0, dim1));
}

Tensor Tensor::t() const {
  if (rank() < 2) throw Error("t: shape " + to_string(shape()) + " has rank < 2");
  return transpose(rank() - 2, rank() - 1);
}

Tensor Tensor::permute(const std::vector<size_t>& dims) const {
  return view(*this, layout().permute(dims));
}

Tensor Tensor::reshape(const Shape& shape) const { return view(*this, layout().reshape(shape)); }
Tensor Tensor::squeeze(size_t dim) const { return view(*this, layout().squeeze(dim)); }
Tensor Tensor::unsqueeze(size_t dim) const { return view(*this, layout().unsqueeze(dim)); }
Tensor Tensor::broadcast_as(const Shape& shape) const {
  return view(*this, layout().broadcast_as(shape));
}

}  // namespace wick
