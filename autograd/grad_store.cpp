#include "autograd/grad_store.h"

#include "autograd/accumulate.h"

namespace wick::autograd {

Tensor GradStore::get(const Tensor& t) const { return get(t.id()); }

Tensor GradStore::get(uint64_t id) const {
  auto it = grads_.find(id);
  return it == grads_.end() ? Tensor() : it->second;
}

void GradStore::accumulate(uint64_t id, const Tensor& grad) {
  auto it = grads_.find(id);
  if (it == grads_.end()) {
    grads_.emplace(id, grad);
  } else {
    it->second = add_grads(it->second, grad);
  }
}

Tensor GradStore::take(uint64_t id) {
  auto it = grads_.find(id);
  if (it == grads_.end()) return Tensor();
  Tensor g = std::move(it->second);
  grads_.erase(it);
  return g;
}

std::vector<uint64_t> GradStore::ids() const {
  std::vector<uint64_t> out;
  out.reserve(grads_.size());
  for (const auto& [id, g] : grads_) out.push_back(id);
  return out;
}

}  // namespace wick::autograd
