#include "autograd/node.h"

namespace wick::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

Tensor record(Tensor out, std::string name, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!t_grad_enabled) return out;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;
  out.set_grad_fn(std::make_shared<Node>(Node{std::move(name), std::move(inputs), std::move(backward)}));
  return out;
}

}  // namespace wick::autograd
