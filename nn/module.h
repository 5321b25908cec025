// Module: a model's parameters by name, and its state dict. A module reports its parameters
// and sub-modules in one function, visit(), which the rest is built on:
//
//   struct Block : nn::Module {
//     nn::RMSNorm norm;
//     nn::Linear up, down;
//     void visit(nn::Params& p) override { p("norm", norm); p("up", up); p("down", down); }
//   };
//   block.named_parameters()   // {"norm.weight", ...}, {"up.weight", ...}, {"up.bias", ...}, ...
//   block.save("block.safetensors");  block.load("block.safetensors");
//
// visit() reads the members as they are when called, so replacing a member tensor is seen at
// once; modules are plain values (copying one copies tensor handles, which share storage).
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace wick::nn {

class Module;

// What visit() reports to: each parameter under its name, each sub-module under its name
// (its parameters then appear as "name.param").
class Params {
 public:
  using Sink = std::function<void(const std::string& name, Tensor& t)>;
  Params(std::string prefix, Sink sink) : prefix_(std::move(prefix)), sink_(std::move(sink)) {}
  void operator()(const std::string& name, Tensor& t);     // skipped when t is undefined
  void operator()(const std::string& name, Module& child);

 private:
  std::string prefix_;
  Sink sink_;
};

class Module {
 public:
  virtual ~Module() = default;
  // Reports this module's parameters and sub-modules, in a fixed order.
  virtual void visit(Params& p) = 0;

  // (name, tensor) pairs in visit order, names joined with '.'.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;   // for an optimizer
  size_t num_parameters() const;            // elements over all parameters
  std::map<std::string, Tensor> state_dict() const;  // name -> parameter (the tensors themselves)

  // Copies each tensor of `sd` into the parameter of the same name, in place (handles an
  // optimizer holds stay valid), converting dtype and device as needed. Checks everything
  // before writing anything: a shape that differs is an error; with strict, so is a
  // parameter sd lacks or a name sd has that the module does not.
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = true);
  // The state dict through safetensors (io/safetensors.h).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  void load(const std::string& path, bool strict = true);
};

}  // namespace wick::nn
