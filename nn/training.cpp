#include "nn/training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tensor/grad_node.h"
#include "ops/ops.h"

namespace wick::nn {

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm >= 0)) throw Error("N05", "clip_grad_norm: max_norm must be >= 0, got " + num(max_norm));
  autograd::NoGradGuard no_grad;
  // One running sum of squares per device, read once each.
  std::vector<std::pair<Device, Tensor>> sums;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor g32 = g.dtype() == DType::F64 ? g : cast(g, DType::F32);
    Tensor sq = sum_all(mul(g32, g32)).to_dtype(DType::F64);
    auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& s) { return s.first == g.device(); });
    if (it == sums.end()) sums.emplace_back(g.device(), sq);
    else it->second = add(it->second, sq);
  }
  double total = 0;
  for (const auto& s : sums) total += s.second.item();
  const double norm = std::sqrt(total);
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const Tensor& p : params)
      if (p.defined() && p.grad().defined()) p.set_grad(mul_scalar(p.grad(), scale));
  }
  return norm;
}

CosineSchedule::CosineSchedule(double base_lr, size_t total_steps, size_t warmup_steps, double min_lr)
    : base_lr_(base_lr), min_lr_(min_lr), total_(total_steps), warmup_(warmup_steps) {
  if (total_steps == 0 || warmup_steps > total_steps)
    throw Error("N06", "CosineSchedule: needs 0 < total_steps and warmup_steps <= total_steps, got total_steps " +
                           std::to_string(total_steps) + ", warmup_steps " + std::to_string(warmup_steps));
}

double CosineSchedule::lr(size_t step) const {
  constexpr double kPi = 3.14159265358979323846;
  if (step < warmup_) return base_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (step >= total_) return min_lr_;
  const double t = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1 + std::cos(kPi * t));
}

}  // namespace wick::nn
