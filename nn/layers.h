// The common layers as Modules (nn/module.h), with PyTorch's parameter names, shapes and
// initialisation. Each takes the dtype and device of its parameters and a seed for its
// random initialisation (give each layer its own). Parameters are leaves that require grad.
#pragma once
#include <cstdint>

#include "nn/module.h"

namespace wick::nn {

// y = x W^T + b. weight (out, in), bias (out); both ~ U(-1/sqrt(in), 1/sqrt(in)).
// x (..., in) -> (..., out).
struct Linear : Module {
  Tensor weight, bias;  // bias undefined when built without one
  Linear() = default;
  Linear(size_t in_features, size_t out_features, bool with_bias = true, DType dtype = DType::F32,
         Device device = Device::cpu(), uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  void visit(Params& p) override;
};

// Rows of a (num_embeddings, dim) table, ~ N(0, 1). ids (any shape, U32/I32/I64) -> ids.shape + (dim).
struct Embedding : Module {
  Tensor weight;
  Embedding() = default;
  Embedding(size_t num_embeddings, size_t dim, DType dtype = DType::F32, Device device = Device::cpu(),
            uint64_t seed = 0);
  Tensor forward(const Tensor& ids) const;
  void visit(Params& p) override;
};

// x / sqrt(mean(x^2) + eps) * weight over the last dim; weight (dim) starts at ones.
struct RMSNorm : Module {
  Tensor weight;
  double eps = 1e-6;
  RMSNorm() = default;
  RMSNorm(size_t dim, double eps = 1e-6, DType dtype = DType::F32, Device device = Device::cpu());
  Tensor forward(const Tensor& x) const;
  void visit(Params& p) override;
};

// (x - mean) / sqrt(var + eps) * weight + bias over the last dim; weight ones, bias zeros.
struct LayerNorm : Module {
  Tensor weight, bias;
  double eps = 1e-5;
  LayerNorm() = default;
  LayerNorm(size_t dim, double eps = 1e-5, DType dtype = DType::F32, Device device = Device::cpu());
  Tensor forward(const Tensor& x) const;
  void visit(Params& p) override;
};

}  // namespace wick::nn
