#include "autograd/optim.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "ops/ops.h"
#include "tensor/grad_node.h"

namespace wick::autograd {

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_param(const Tensor& p, size_t i, const char* name) {
  std::string where = std::string(name) + ": parameter " + std::to_string(i);
  if (!p.defined()) throw Error("G23", where + " is an empty (default-constructed) tensor");
  if (!is_float(p.dtype())) throw Error("G24", where + " has dtype " + dtype_name(p.dtype()) + "; parameters must be float");
  if (p.grad_fn()) throw Error("G25", where + " " + to_string(p.shape()) + " is computed by '" + p.grad_fn()->name +
                               "', not a leaf; pass the tensors that were created with requires_grad(true)");
  if (!p.requires_grad()) throw Error("G26", where + " " + to_string(p.shape()) + " does not require grad");
  // The update is written through copy_into; a broadcast or overlapping view cannot take it.
  if (!p.is_contiguous()) throw Error("G27", where + " " + to_string(p.shape()) + " is not contiguous");
}
}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, const char* name) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) check_param(params_[i], i, name);
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), "SGD"), o_(options), velocity_(params_.size()) {
  lr_ = o_.lr;
  if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0))
    throw Error("G28", "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum " + num(o_.momentum) + ", dampening " +
                num(o_.dampening) + ")");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o_.weight_decay != 0) g = add(g, mul_scalar(p, o_.weight_decay));
    if (o_.momentum != 0) {
      Tensor& buf = velocity_[i];
      buf = buf.defined() ? add(mul_scalar(buf, o_.momentum), mul_scalar(g, 1 - o_.dampening)) : g.copy();
      g = o_.nesterov ? add(g, mul_scalar(buf, o_.momentum)) : buf;
    }
    copy_into(p, sub(p, mul_scalar(g, lr_)));
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), "AdamW"), o_(options), m_(params_.size()), v_(params_.size()) {
  lr_ = o_.lr;
}

void AdamW::step() {
  NoGradGuard no_grad;
  ++t_;
  const double bias1 = 1 - std::pow(o_.beta1, static_cast<double>(t_));
  const double bias2 = 1 - std::pow(o_.beta2, static_cast<double>(t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor& m = m_[i];
    Tensor& v = v_[i];
    Tensor g2 = mul(g, g);
    m = m.defined() ? add(mul_scalar(m, o_.beta1), mul_scalar(g, 1 - o_.beta1)) : mul_scalar(g, 1 - o_.beta1);
    v = v.defined() ? add(mul_scalar(v, o_.beta2), mul_scalar(g2, 1 - o_.beta2)) : mul_scalar(g2, 1 - o_.beta2);
    // step = (m / bias1) / (sqrt(v / bias2) + eps)
    Tensor denom = add_scalar(sqrt(mul_scalar(v, 1 / bias2)), o_.eps);
    Tensor update = div(mul_scalar(m, lr_ / bias1), denom);
    Tensor decayed = o_.weight_decay != 0 ? mul_scalar(p, 1 - lr_ * o_.weight_decay) : p;
    copy_into(p, sub(decayed, update));
  }
}

}  // namespace wick::autograd
