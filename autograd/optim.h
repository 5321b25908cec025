// Optimizers: SGD (momentum, weight decay, Nesterov) and AdamW, with PyTorch's update
// rules. step() reads each parameter's grad() and writes the new values into the
// parameter's own storage (the handle and its id stay the same), with grad mode off.
// Parameters whose grad() is undefined are skipped, as torch does.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace wick::autograd {

class Optimizer {
 public:
  // params: float leaf tensors that require grad (no grad_fn), contiguous, one device each.
  explicit Optimizer(std::vector<Tensor> params, const char* name);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Clears every parameter's grad() (set to undefined, torch's set_to_none=True).
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }  // for schedules

 protected:
  std::vector<Tensor> params_;
  double lr_ = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;      // 0 disables the velocity buffer
  double dampening = 0;     // scales the new gradient's share of the velocity
  double weight_decay = 0;  // L2: adds weight_decay * p to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening 0
};

// buf = momentum * buf + (1 - dampening) * (g + wd p)    (buf = g + wd p on the first step)
// p  -= lr * (nesterov ? g + wd p + momentum * buf : buf)  (plain g + wd p without momentum)
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;

 private:
  SGDOptions o_;
  std::vector<Tensor> velocity_;  // one per parameter, same shape; undefined until first used
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p *= 1 - lr * weight_decay before the Adam step
};

// p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  void step() override;
  int64_t steps() const { return t_; }

 private:
  AdamWOptions o_;
  int64_t t_ = 0;
  std::vector<Tensor> m_, v_;  // first and second moments, per parameter
};

}  // namespace wick::autograd
