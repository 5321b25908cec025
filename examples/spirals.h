// Two interleaved spirals, a small MLP that learns to tell them apart, and the training
// loop shared by examples/train_mlp.cpp and the test suite (which runs a short version and
// asserts the loss falls below a bound).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "wick.h"

namespace wick::examples {

struct SpiralData {
  Tensor x;       // (2 * points_per_class, 2) point coordinates, roughly in [-1, 1]
  Tensor targets;  // (2 * points_per_class) I64 class of each row, 0 or 1
  std::vector<int> labels;  // 0 or 1 per row of x
};

// Points on two arms r = t, angle = 3.5 pi t (+ pi for class 1), t in (0, 1], with Gaussian
// noise of standard deviation `noise`. Same data on every device for the same seed.
SpiralData make_spirals(size_t points_per_class, double noise, DType dtype, Device device, uint64_t seed);

// 2 -> hidden -> hidden -> 2, tanh activations, logits out.
struct Mlp {
  Tensor w1, b1;  // (2, hidden), (hidden)
  Tensor w2, b2;  // (hidden, hidden), (hidden)
  Tensor w3, b3;  // (hidden, 2), (2)
  // x (n, 2) -> logits (n, 2)
  Tensor forward(const Tensor& x) const;
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3}; }
};

// Weights ~ N(0, 1 / fan_in), biases 0; every parameter a leaf that requires grad.
Mlp make_mlp(size_t hidden, DType dtype, Device device, uint64_t seed);


struct TrainConfig {
  Device device = Device::cpu();
  DType dtype = DType::F32;
  size_t points_per_class = 100;
  double noise = 0.02;
  size_t hidden = 32;
  size_t steps = 1000;
  double lr = 0.01;  // AdamW
  double weight_decay = 1e-4;
  uint64_t seed = 1;
  size_t log_every = 100;  // on_log is called every log_every steps and at the last step
};

struct TrainResult {
  double first_loss = 0;  // loss before the first update
  double final_loss = 0;  // loss at the last step (before its update)
  double accuracy = 0;    // fraction of training points classified correctly after training
};

// Full-batch AdamW on the spirals, minimising cross_entropy(logits, targets); on_log(step, loss)
// as it goes.
TrainResult train_spirals(const TrainConfig& config,
                          const std::function<void(size_t step, double loss)>& on_log = {});

}  // namespace wick::examples
