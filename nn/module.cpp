#include "nn/module.h"

#include <set>

#include "tensor/grad_node.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace wick::nn {

namespace {

// "a, b, c" for up to five names, then ", ... (n in all)".
std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 5; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 5) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

}  // namespace

void Params::operator()(const std::string& name, Tensor& t) {
  if (t.defined()) sink_(prefix_ + name, t);
}

void Params::operator()(const std::string& name, Module& child) {
  Params nested(prefix_ + name + ".", sink_);
  child.visit(nested);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  Params p("", [&](const std::string& name, Tensor& t) { out.emplace_back(name, t); });
  // visit() takes the members by reference so a module can hand out its own tensors; reading
  // them here changes nothing.
  const_cast<Module*>(this)->visit(p);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

size_t Module::num_parameters() const {
  size_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.elem_count();
  return n;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out[name] = t;
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& sd, bool strict) {
  const auto params = named_parameters();
  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  for (const auto& [name, p] : params) {
    known.insert(name);
    auto it = sd.find(name);
    if (it == sd.end()) {
      missing.push_back(name);
      continue;
    }
    if (!it->second.defined())
      throw Error("N01", "load_state_dict: '" + name + "' is an empty (default-constructed) tensor in the state dict");
    if (!(it->second.shape() == p.shape()))
      throw Error("N02", "load_state_dict: '" + name + "' has shape " + to_string(it->second.shape()) +
                             " in the state dict but " + to_string(p.shape()) + " in the module");
  }
  for (const auto& kv : sd)
    if (!known.count(kv.first)) unexpected.push_back(kv.first);
  if (strict && !missing.empty())
    throw Error("N03", "load_state_dict: the state dict lacks " + std::to_string(missing.size()) +
                           " parameter(s) of the module: " + name_list(missing));
  if (strict && !unexpected.empty())
    throw Error("N04", "load_state_dict: the state dict has " + std::to_string(unexpected.size()) +
                           " name(s) the module does not: " + name_list(unexpected));
  autograd::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    auto it = sd.find(name);
    if (it == sd.end()) continue;
    copy_into(p, it->second.detach().to_dtype(p.dtype()).to_device(p.device()));
  }
}

void Module::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  save_safetensors(path, state_dict(), metadata);
}

void Module::load(const std::string& path, bool strict) { load_state_dict(load_safetensors(path), strict); }

}  // namespace wick::nn
