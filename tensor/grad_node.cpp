#include "tensor/grad_node.h"

namespace wick::autograd {

namespace {
thread_local bool t_grad_enabled = true;

// Deleting a node drops its inputs, which may drop the last handle to an input whose own
// node is then deleted, and so on down the chain: plain recursion as deep as the graph.
// This deleter queues nodes released while another is being deleted and deletes them in a
// loop instead, so the depth stays constant. It runs inside shared_ptr's destructor and so
// must not throw: if the queue cannot grow (out of memory), the node is deleted right away,
// one level deeper.
void delete_node(Node* node) noexcept {
  thread_local bool draining = false;
  thread_local std::vector<Node*> pending;
  try {
    pending.push_back(node);
  } catch (...) {
    delete node;
    return;
  }
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    Node* next = pending.back();
    pending.pop_back();
    delete next;  // may call delete_node again, which only queues
  }
  draining = false;
}
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

Tensor record(Tensor out, std::string name, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved) {
  if (!t_grad_enabled || !is_float(out.dtype())) return out;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;
  // An op that hands back one of its inputs unchanged (contiguous() on a contiguous tensor)
  // is the identity: gradients already reach that input, and a node here would be a cycle.
  for (const Tensor& t : inputs)
    if (t.defined() && t.id() == out.id()) return out;
  std::shared_ptr<Node> node(new Node{std::move(name), std::move(inputs), std::move(backward), {}}, delete_node);
  node->saved.reserve(saved.size());
  for (const Tensor& t : saved)
    if (t.defined()) node->saved.push_back({t.storage(), t.storage()->version(), t.shape(), t.dtype()});
  out.set_grad_fn(std::move(node));
  return out;
}

}  // namespace wick::autograd
