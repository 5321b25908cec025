// GradStore: gradients keyed by tensor id, as one backward pass produced them.
// autograd::backward() returns one, so the gradient of any tensor in the graph (leaf or
// intermediate) can be read after the pass; Tensor::backward() instead folds the leaf
// entries into each leaf's grad() and drops the store.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tensor/tensor.h"

namespace wick::autograd {

class GradStore {
 public:
  // The gradient of t (same shape as t), or an undefined Tensor when the pass produced none
  // (t was not reached from the root or does not require grad).
  Tensor get(const Tensor& t) const;
  Tensor get(uint64_t id) const;
  bool contains(const Tensor& t) const { return grads_.count(t.id()) != 0; }
  // Sets or replaces the gradient for id.
  void insert(uint64_t id, Tensor grad) { grads_[id] = std::move(grad); }
  // Adds grad to the stored gradient for id (or stores it when there is none yet).
  // Both must have the same shape; the sum is a new tensor, the old one is untouched.
  void accumulate(uint64_t id, const Tensor& grad);
  // Removes and returns the gradient for id (undefined when absent).
  Tensor take(uint64_t id);
  void erase(uint64_t id) { grads_.erase(id); }
  size_t size() const { return grads_.size(); }
  std::vector<uint64_t> ids() const;

 private:
  std::unordered_map<uint64_t, Tensor> grads_;
};

}  // namespace wick::autograd
