// The graph node an op records when one of its inputs requires grad. Ops include this
// header and call record(); the engine that walks the nodes lives in autograd/engine.cpp.
// It sits in tensor/ because a Tensor holds the node that produced it (grad_fn): ops/
// records into it without knowing the engine, and autograd/ sits above ops/.
//
// Rule for backward closures: never capture the op's output Tensor itself (the output
// owns the node, so that would be a cycle); capture out.detach() instead.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace wick::autograd {

// Maps the gradient of the op's output to one gradient per input, in input order.
// An undefined Tensor means "no gradient for this input".
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

// A tensor a backward rule reads (an input or the output of the forward, kept by the rule's
// closure) and the version its storage had when the node was recorded. Writes into a
// storage (copy_into, an optimizer step, Storage's copies) advance its version; the engine
// compares before it runs the rule, as PyTorch's version counters do.
struct SavedVersion {
  std::shared_ptr<Storage> storage;
  uint64_t version = 0;
  Shape shape;  // for the message
  DType dtype = DType::F32;
};

struct Node {
  std::string name;            // the op's name, for error messages and graph dumps
  std::vector<Tensor> inputs;  // as passed to the op
  BackwardFn backward;
  std::vector<SavedVersion> saved;  // what backward reads besides grad_out (checked, G29)
  // Set when a backward pass without retain_graph has run through this node: inputs and
  // backward are then dropped (freeing the saved tensors), and a second pass raises an error.
  bool released = false;
};

// False inside a NoGradGuard (per thread).
bool grad_enabled();

// Disables recording for its lifetime (per thread), like torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when record() would attach a node for these inputs: grad mode is on and one of them
// requires grad. Ops test it before saving tensors and building a backward closure, so a
// call that records nothing (inference, NoGradGuard) pays for neither.
template <class... Ts>
bool should_record(const Ts&... inputs) {
  return grad_enabled() && (inputs.requires_grad() || ...);
}

// Attaches a node to `out` when grad mode is on, any input requires grad and out has a float
// dtype (an integer result has no gradient, so it gets no node: a cast to an integer type
// ends the graph); returns out. `saved`: the tensors the backward closure captured and reads
// (e.g. x.detach(), out.detach()); if one of their storages is modified before the backward
// runs, the backward raises G29 instead of computing a wrong gradient. The backward closure
// is not called here, so building it is cheap.
// Nodes made here are destroyed iteratively (a chain of 100,000 ops dropped without a
// backward pass does not recurse 100,000 deep), so ops should always go through record().
Tensor record(Tensor out, std::string name, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved = {});

}  // namespace wick::autograd
