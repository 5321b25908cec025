#include "autograd/custom_op.h"

#include "tensor/grad_node.h"

namespace wick::autograd {

namespace {

std::string op_label(const CustomOp& op) { return "custom op '" + op.name + "'"; }

const CustomOp::Forward& forward_for(const CustomOp& op, const Device& device) {
  const CustomOp::Forward& fwd = device.is_cpu() ? op.cpu_forward : op.cuda_forward;
  if (!fwd)
    throw Error("G14", op_label(op) + ": no " + (device.is_cpu() ? "cpu" : "cuda") + " forward, so it cannot run on " +
                to_string(device) + " inputs");
  return fwd;
}

void check_inputs(const CustomOp& op, const std::vector<Tensor>& inputs) {
  if (op.name.empty()) throw Error("G11", "custom op: the op has no name (set CustomOp::name)");
  if (inputs.empty()) throw Error("G12", op_label(op) + ": called with no inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw Error("G13", op_label(op) + ": input " + std::to_string(i) + " is an empty (default-constructed) tensor");
    if (!(inputs[i].device() == inputs[0].device()))
      throw Error("A01", "device mismatch in " + op.name + ", lhs: " + to_string(inputs[0].device()) +
                  ", rhs: " + to_string(inputs[i].device()));
  }
}

}  // namespace

std::vector<Tensor> CustomOp::apply(const std::vector<Tensor>& inputs) const {
  check_inputs(*this, inputs);
  const Device device = inputs[0].device();
  const Forward& fwd = forward_for(*this, device);

  bool needs_grad = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!grad_enabled() || !inputs[i].requires_grad()) continue;
    needs_grad = true;
    if (!backward)
      throw Error("G15", op_label(*this) + ": input " + std::to_string(i) +
                  " requires grad but the op has no backward; set CustomOp::backward, run it under "
                  "NoGradGuard, or pass detached inputs");
  }

  // Forward sees detached inputs with grad mode off: whatever ops it uses inside are an
  // implementation detail, and the graph gets exactly one node for this op.
  std::vector<Tensor> detached;
  for (const Tensor& t : inputs) detached.push_back(t.detach());
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fwd(detached);
  }
  if (outputs.empty() || !outputs[0].defined())
    throw Error("G16", op_label(*this) + ": the " + (device.is_cpu() ? "cpu" : "cuda") + " forward returned no output");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].defined() && !(outputs[i].device() == device))
      throw Error("G17", op_label(*this) + ": forward output " + std::to_string(i) + " is on " +
                  to_string(outputs[i].device()) + " but the inputs are on " + to_string(device));
  if (!needs_grad) return outputs;

  std::vector<Tensor> saved_outputs;
  for (const Tensor& t : outputs) saved_outputs.push_back(t.defined() ? t.detach() : t);
  // The closure holds detached copies only: the node's own inputs carry the graph, and
  // capturing output 0 itself would make it own its own node.
  // The rule may read any input or output: all are saved (their versions checked, G29).
  std::vector<Tensor> saved = detached;
  saved.insert(saved.end(), saved_outputs.begin(), saved_outputs.end());
  outputs[0] = record(outputs[0], name, inputs,
                      [rule = backward, detached, saved_outputs](const Tensor& grad_out) {
                        return rule(detached, saved_outputs, grad_out);
                      },
                      saved);
  return outputs;
}

}  // namespace wick::autograd
