#include "nn/layers.h"

#include <cmath>

#include "tensor/grad_node.h"
#include "ops/ops.h"

namespace wick::nn {

namespace {

Tensor leaf(Tensor t) {
  t.requires_grad(true);
  return t;
}

// U(-bound, bound) from the counter-based generator.
Tensor uniform(const Shape& s, double bound, DType dtype, Device device, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  return leaf(affine(Tensor::rand(s, dtype, device, seed), 2 * bound, -bound));
}

}  // namespace

Linear::Linear(size_t in, size_t out, bool with_bias, DType dtype, Device device, uint64_t seed) {
  const double bound = in ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
  weight = uniform({out, in}, bound, dtype, device, seed);
  if (with_bias) bias = uniform({out}, bound, dtype, device, seed ^ 0x5bd1e995u);
}

Tensor Linear::forward(const Tensor& x) const {
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? add(y, bias) : y;
}

void Linear::visit(Params& p) {
  p("weight", weight);
  p("bias", bias);
}

Embedding::Embedding(size_t num, size_t dim, DType dtype, Device device, uint64_t seed)
    : weight(leaf(Tensor::randn({num, dim}, dtype, device, seed))) {}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(ids, weight); }

void Embedding::visit(Params& p) { p("weight", weight); }

RMSNorm::RMSNorm(size_t dim, double eps_, DType dtype, Device device)
    : weight(leaf(Tensor::ones({dim}, dtype, device))), eps(eps_) {}

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, weight, eps); }

void RMSNorm::visit(Params& p) { p("weight", weight); }

LayerNorm::LayerNorm(size_t dim, double eps_, DType dtype, Device device)
    : weight(leaf(Tensor::ones({dim}, dtype, device))), bias(leaf(Tensor::zeros({dim}, dtype, device))), eps(eps_) {}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

void LayerNorm::visit(Params& p) {
  p("weight", weight);
  p("bias", bias);
}

}  // namespace wick::nn
