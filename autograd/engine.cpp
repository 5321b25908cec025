#include "autograd/engine.h"

#include <string>
#include <unordered_set>

#include "autograd/accumulate.h"
#include "tensor/grad_node.h"

namespace wick::autograd {

namespace {

std::string describe(const Tensor& t) {
  return to_string(t.shape()) + " " + dtype_name(t.dtype()) + " on " + to_string(t.device());
}

[[noreturn]] void throw_released(const Node& node) {
  throw Error("G04", "backward: the graph through '" + node.name +
              "' was freed by an earlier backward pass; pass retain_graph = true to the first "
              "pass to run backward through the same graph twice");
}

// Tensors reachable from root that require grad, each listed after every tensor computed
// from it (reverse post-order of a depth-first walk). The walk keeps an explicit stack so
// a graph 100,000 ops deep does not overflow the call stack.
std::vector<Tensor> topological_order(const Tensor& root) {
  struct Frame {
    Tensor tensor;
    size_t next_input;  // index of the next grad_fn input to visit
  };
  std::vector<Tensor> post_order;
  std::unordered_set<uint64_t> visited{root.id()};
  std::vector<Frame> stack{{root, 0}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    const std::shared_ptr<Node>& node = top.tensor.grad_fn();
    if (node && node->released) throw_released(*node);
    if (node && top.next_input < node->inputs.size()) {
      const Tensor& in = node->inputs[top.next_input++];
      if (in.defined() && in.requires_grad() && visited.insert(in.id()).second)
        stack.push_back({in, 0});  // invalidates `top`; the loop re-reads the back
      continue;
    }
    post_order.push_back(std::move(top.tensor));
    stack.pop_back();
  }
  return {post_order.rbegin(), post_order.rend()};
}

// Checks a node's output gradients against its inputs, naming the op on any mismatch.
void check_input_grads(const Node& node, const std::vector<Tensor>& grads) {
  if (grads.size() != node.inputs.size())
    throw Error("G05", "backward of '" + node.name + "': the rule returned " + std::to_string(grads.size()) +
                " gradients for " + std::to_string(node.inputs.size()) + " inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& in = node.inputs[i];
    const Tensor& g = grads[i];
    if (!g.defined() || !in.defined() || !in.requires_grad()) continue;
    if (g.shape() != in.shape() || g.dtype() != in.dtype() || !(g.device() == in.device()))
      throw Error("G06", "backward of '" + node.name + "': gradient for input " + std::to_string(i) + " is " +
                  describe(g) + " but the input is " + describe(in));
  }
}

// G29: a tensor the rule reads was written after the forward saved it (its storage's
// version moved), so the rule would compute the gradient of other values.
void check_saved_versions(const Node& node) {
  for (const SavedVersion& s : node.saved) {
    const uint64_t now = s.storage->version();
    if (now != s.version)
      throw Error("G29", "backward of '" + node.name + "': a tensor it saved (" + to_string(s.shape) + " " +
                             dtype_name(s.dtype) + ") was modified in place after the forward (its storage is at "
                             "version " + std::to_string(now) + ", the forward saw version " +
                             std::to_string(s.version) + "); modify a copy, or run the forward again after the change");
  }
}

void release(Node& node) {
  node.saved.clear();
  node.inputs.clear();
  node.backward = nullptr;
  node.released = true;
}

void add_into_leaf(const Tensor& leaf, const Tensor& g) {
  Tensor old = leaf.grad();
  leaf.set_grad(old.defined() ? add_grads(old, g, "leaf " + to_string(leaf.shape())) : g);
}

}  // namespace

GradStore grad(const Tensor& root, const Tensor& seed, const BackwardOptions& options) {
  if (!root.defined()) throw Error("L12", "backward: the output is an empty (default-constructed) tensor");
  if (!root.requires_grad())
    throw Error("G01", "backward: the tensor " + to_string(root.shape()) +
                " does not require grad and has no graph (computed under NoGradGuard, detached, or "
                "from inputs none of which requires grad)");
  if (!seed.defined() || seed.shape() != root.shape() || seed.dtype() != root.dtype() ||
      !(seed.device() == root.device()))
    throw Error("G02", "backward: the seed gradient must match the output " + describe(root) + ", got " +
                (seed.defined() ? describe(seed) : std::string("an empty (default-constructed) tensor")));

  NoGradGuard no_grad;  // backward rules compute values, never new graph
  std::vector<Tensor> order = topological_order(root);
  GradStore store;
  store.insert(root.id(), seed);
  for (Tensor& t : order) {
    const std::shared_ptr<Node> node = t.grad_fn();
    if (!node) {  // a leaf
      if (options.accumulate_into_leaves) {
        Tensor g = store.get(t);
        if (g.defined()) add_into_leaf(t, g);
      }
      continue;
    }
    Tensor g = options.keep_intermediate ? store.get(t) : store.take(t.id());
    if (!g.defined()) continue;  // every path from the root here had no gradient
    if (!node->backward) throw Error("G07", "backward of '" + node->name + "': the node has no backward rule");
    check_saved_versions(*node);
    std::vector<Tensor> input_grads = node->backward(g);
    check_input_grads(*node, input_grads);
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Tensor& in = node->inputs[i];
      if (input_grads[i].defined() && in.defined() && in.requires_grad())
        store.accumulate(in.id(), input_grads[i]);
    }
    if (!options.retain_graph) release(*node);
    t = Tensor();  // drop our handle early so the tensor can be freed during the pass
  }
  return store;
}

GradStore grad(const Tensor& root, const BackwardOptions& options) {
  if (!root.defined()) throw Error("L12", "backward: the output is an empty (default-constructed) tensor");
  if (root.elem_count() != 1)
    throw Error("G03", "backward: the output has shape " + to_string(root.shape()) + " (" +
                std::to_string(root.elem_count()) +
                " elements); without a seed only a single-element loss can be differentiated, "
                "pass a seed gradient of the output's shape: backward(seed)");
  // The seed is filled on the output's device (Tensor::full launches a fill kernel on a GPU),
  // so a backward() does not wait for the device before its first rule runs.
  return grad(root, Tensor::ones(root.shape(), root.dtype(), root.device()), options);
}

std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs) {
  GradStore store = grad(root);
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(store.get(t));
  return out;
}

void zero_grad(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined()) t.set_grad(Tensor());
}

}  // namespace wick::autograd

namespace wick {

namespace {
autograd::BackwardOptions tensor_backward_options() {
  autograd::BackwardOptions o;
  o.keep_intermediate = false;
  o.accumulate_into_leaves = true;
  return o;
}
}  // namespace

void Tensor::backward() const { autograd::grad(*this, tensor_backward_options()); }
void Tensor::backward(const Tensor& seed) const { autograd::grad(*this, seed, tensor_backward_options()); }

}  // namespace wick
