// The reverse-mode engine: walks the graph recorded by ops (tensor/grad_node.h) from a root
// tensor back to its leaves, calling each node's backward rule once, in reverse
// topological order.
//
// Tensor::backward() / backward(seed) (declared in tensor/tensor.h, defined in engine.cpp)
// run a pass and add each leaf's gradient into leaf.grad(). autograd::grad() runs the same
// pass and returns every gradient it computed in a GradStore, leaves untouched.
#pragma once
#include <vector>

#include "autograd/grad_store.h"
#include "tensor/tensor.h"

namespace wick::autograd {

struct BackwardOptions {
  // Keep every node's saved inputs and closure so another pass can run through the graph.
  // Off by default: the pass frees the graph as it goes, like torch's retain_graph=False.
  bool retain_graph = false;
  // Keep the gradients of intermediate (non-leaf) tensors in the returned GradStore.
  // Off, each is dropped as soon as its node has used it (lower peak memory).
  bool keep_intermediate = true;
  // Add the leaves' gradients into Tensor::grad() (what Tensor::backward() does).
  bool accumulate_into_leaves = false;
};

// Runs one backward pass from root with the gradient `seed` (same shape, dtype and device
// as root). Returns the gradients of every tensor reached that requires grad, keyed by id.
// Throws when root has no graph and is not a leaf requiring grad, when seed does not match
// root, when a node's rule returns a gradient whose shape differs from its input's, or when
// the pass reaches a node an earlier pass already freed.
GradStore grad(const Tensor& root, const Tensor& seed, const BackwardOptions& options = {});
// As above with seed 1; root must hold exactly one element.
GradStore grad(const Tensor& root, const BackwardOptions& options = {});

// Convenience: the gradients of root with respect to each of `inputs`, in order
// (undefined where root does not depend on an input). root must be a single element.
std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs);

// Clears the accumulated gradient of each tensor (grad() becomes undefined, like
// torch's zero_grad(set_to_none=True)); the next backward() starts from nothing.
void zero_grad(const std::vector<Tensor>& tensors);

}  // namespace wick::autograd
