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

Tensor Tensor::narrow(int64_t dim_arg, size_t start, size_t len) const {
  const size_t dim = resolve_dim("narrow", dim_arg, shape(), rank());
  Shape s = shape();
  return autograd::record(view(*this, layout().narrow(dim, start, len)), "narrow", {*this},
                          [s, dim, start, len](const Tensor& g) {
                            Tensor dx = Tensor::zeros(s, g.dtype(), g.device());
                            copy_into(dx.narrow(dim, start, len), g);
                            return Grads{dx};
                          });
}

Tensor Tensor::transpose(int64_t dim0_arg, int64_t dim1_arg) const {
  const size_t dim0 = resolve_dim("transpose", dim0_arg, shape(), rank());
  const size_t dim1 = resolve_dim("transpose", dim1_arg, shape(), rank());
  return autograd::record(view(*this, layout().transpose(dim0, dim1)), "transpose", {*this},
                          [dim0, dim1](const Tensor& g) { return Grads{g.transpose(dim0, dim1)}; });
}

Tensor Tensor::t() const {
  if (rank() < 2) throw Error("L08", "t: shape " + to_string(shape()) + " has rank < 2");
  return transpose(rank() - 2, rank() - 1);
}

Tensor Tensor::permute(const DimList& dim_list) const {
  // Negative entries count from the end. An entry outside [-rank, rank) fails the permutation
  // check; its message shows the list as given.
  const int64_t r = static_cast<int64_t>(rank());
  std::vector<size_t> dims;
  for (int64_t d : dim_list.values()) {
    if (d < -r || d >= r)
      throw Error("L03", "permute: shape " + to_string(shape()) + ", dims " + to_string(dim_list.values()) +
                  " is not a permutation of 0.." + std::to_string(rank()));
    dims.push_back(static_cast<size_t>(d < 0 ? d + r : d));
  }
  Layout l = layout().permute(dims);  // validates that dims is a permutation
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

Tensor Tensor::reshape(std::initializer_list<Dim> dims) const {
  std::vector<int64_t> v;
  for (Dim d : dims) v.push_back(d.value);
  return reshape(v);
}

Tensor Tensor::reshape(const std::vector<int64_t>& dims) const {
  size_t known = 1, infer = dims.size();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && infer == dims.size()) infer = i;
    else if (dims[i] < 0)
      throw Error("L19", "reshape: " + to_string(dims) + " may hold one -1 (the size to infer) and no other negative size");
    else known *= static_cast<size_t>(dims[i]);
  }
  std::vector<size_t> out(dims.begin(), dims.end());
  if (infer < dims.size()) {
    if (known == 0 || elem_count() % known != 0)
      throw Error("L20", "reshape: cannot infer the -1 in " + to_string(dims) + " for shape " + to_string(shape()) +
                             " (" + std::to_string(elem_count()) + " elements)");
    out[infer] = elem_count() / known;
  }
  return reshape(Shape(out));
}

Tensor Tensor::flatten(int64_t start_arg, int64_t end_arg) const {
  if (rank() == 0) return reshape(Shape{1});
  const size_t start = resolve_dim("flatten", start_arg, shape(), rank());
  const size_t end = resolve_dim("flatten", end_arg, shape(), rank());
  if (start > end)
    throw Error("L21", "flatten: start_dim " + std::to_string(start_arg) + " comes after end_dim " +
                           std::to_string(end_arg) + " for shape " + to_string(shape()));
  std::vector<size_t> d;
  size_t merged = 1;
  for (size_t i = 0; i < rank(); ++i) {
    if (i < start || i > end) d.push_back(dims()[i]);
    else merged *= dims()[i];
    if (i == end) d.push_back(merged);
  }
  return is_contiguous() ? reshape(Shape(d)) : contiguous().reshape(Shape(d));
}

Tensor Tensor::select(int64_t dim_arg, int64_t index) const {
  const size_t dim = resolve_dim("select", dim_arg, shape(), rank());
  const int64_t size = static_cast<int64_t>(dims()[dim]);
  if (index < -size || index >= size)
    throw Error("L22", "select: index " + std::to_string(index) + " out of range for dim " + std::to_string(dim_arg) +
                           " of size " + std::to_string(size) + " (shape " + to_string(shape()) + ")");
  return narrow(static_cast<int64_t>(dim), static_cast<size_t>(index < 0 ? index + size : index), 1)
      .squeeze(static_cast<int64_t>(dim));
}

Tensor Tensor::squeeze(int64_t dim_arg) const {
  const size_t dim = resolve_dim("squeeze", dim_arg, shape(), rank());
  return autograd::record(view(*this, layout().squeeze(dim)), "squeeze", {*this},
                          [dim](const Tensor& g) { return Grads{g.unsqueeze(dim)}; });
}

Tensor Tensor::unsqueeze(int64_t dim_arg) const {
  const size_t dim = resolve_dim("unsqueeze", dim_arg, shape(), rank() + 1);
  return autograd::record(view(*this, layout().unsqueeze(dim)), "unsqueeze", {*this},
                          [dim](const Tensor& g) { return Grads{g.squeeze(dim)}; });
}

Tensor Tensor::broadcast_as(const Shape& shape) const {
  Shape s = this->shape();
  return autograd::record(view(*this, layout().broadcast_as(shape)), "broadcast_as", {*this},
                          [s](const Tensor& g) { return Grads{sum_to(g, s)}; });
}

}  // namespace wick
