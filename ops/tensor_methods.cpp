// The Tensor methods that forward to ops (tensor/tensor.h lists them): x.sum() is sum_all(x),
// x.mean({1}, true) is mean(x, {1}, true), x.matmul(w) is matmul(x, w), and so on. Inside a
// member the free function must be named wick::f, since the member itself would be found first.
#include <numeric>

#include "ops/ops.h"

namespace wick {

namespace {
DimList all_dims(const Tensor& x) {
  std::vector<size_t> d(x.rank());
  std::iota(d.begin(), d.end(), size_t{0});
  return d;
}
}  // namespace

Tensor Tensor::sum() const { return wick::sum_all(*this); }
Tensor Tensor::sum(const DimList& dims, bool keepdim) const { return wick::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return wick::mean_all(*this); }
Tensor Tensor::mean(const DimList& dims, bool keepdim) const { return wick::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return wick::max(*this, all_dims(*this)); }
Tensor Tensor::max(const DimList& dims, bool keepdim) const { return wick::max(*this, dims, keepdim); }
Tensor Tensor::min() const { return wick::min(*this, all_dims(*this)); }
Tensor Tensor::min(const DimList& dims, bool keepdim) const { return wick::min(*this, dims, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return wick::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return wick::argmin(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return wick::cumsum(*this, dim); }
Tensor Tensor::matmul(const Tensor& rhs) const { return wick::matmul(*this, rhs); }
Tensor Tensor::exp() const { return wick::exp(*this); }
Tensor Tensor::log() const { return wick::log(*this); }
Tensor Tensor::sqrt() const { return wick::sqrt(*this); }
Tensor Tensor::tanh() const { return wick::tanh(*this); }
Tensor Tensor::relu() const { return wick::relu(*this); }
Tensor Tensor::gelu() const { return wick::gelu(*this); }
Tensor Tensor::silu() const { return wick::silu(*this); }
Tensor Tensor::sigmoid() const { return wick::sigmoid(*this); }
Tensor Tensor::sin() const { return wick::sin(*this); }
Tensor Tensor::cos() const { return wick::cos(*this); }
Tensor Tensor::abs() const { return wick::abs(*this); }
Tensor Tensor::neg() const { return wick::neg(*this); }
Tensor Tensor::pow(double exponent) const { return wick::powf(*this, exponent); }
Tensor Tensor::clamp(double lo, double hi) const { return wick::clamp(*this, lo, hi); }
Tensor Tensor::softmax(int64_t dim) const { return wick::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return wick::log_softmax(*this, dim); }
Tensor Tensor::tril(int64_t diagonal) const { return wick::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return wick::triu(*this, diagonal); }

}  // namespace wick
