#include "examples/spirals.h"

#include <cmath>
#include <random>

namespace wick::examples {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTurns = 3.5 * kPi;  // how far each arm winds

Tensor from_f64(const std::vector<double>& v, const Shape& shape, DType dtype, Device device) {
  Tensor t = Tensor::from_vec(v, shape, Device::cpu());
  return t.to_dtype(dtype).to_device(device);
}

Tensor param(const Shape& shape, double scale, DType dtype, Device device, uint64_t seed) {
  Tensor t;
  {
    autograd::NoGradGuard no_grad;
    t = mul_scalar(Tensor::randn(shape, DType::F64, Device::cpu(), seed), scale).to_dtype(dtype).to_device(device);
  }
  t.requires_grad(true);
  return t;
}

Tensor zero_param(const Shape& shape, DType dtype, Device device) {
  Tensor t = Tensor::zeros(shape, dtype, device);
  t.requires_grad(true);
  return t;
}

}  // namespace

SpiralData make_spirals(size_t points_per_class, double noise, DType dtype, Device device, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> jitter(0.0, noise);
  const size_t n = 2 * points_per_class;
  std::vector<double> xy(n * 2);
  std::vector<int> labels(n);
  std::vector<int64_t> targets(n);
  for (size_t i = 0; i < n; ++i) {
    const int label = static_cast<int>(i % 2);
    const double t = (static_cast<double>(i / 2) + 1) / static_cast<double>(points_per_class);
    const double angle = kTurns * t + label * kPi;
    xy[2 * i] = t * std::cos(angle) + jitter(gen);
    xy[2 * i + 1] = t * std::sin(angle) + jitter(gen);
    labels[i] = label;
    targets[i] = label;
  }
  return {from_f64(xy, {n, 2}, dtype, device), Tensor::from_vec(targets, {n}, device), labels};
}

Mlp make_mlp(size_t hidden, DType dtype, Device device, uint64_t seed) {
  Mlp m;
  m.w1 = param({2, hidden}, std::sqrt(1.0 / 2), dtype, device, seed);
  m.b1 = zero_param({hidden}, dtype, device);
  m.w2 = param({hidden, hidden}, std::sqrt(1.0 / hidden), dtype, device, seed + 1);
  m.b2 = zero_param({hidden}, dtype, device);
  m.w3 = param({hidden, 2}, std::sqrt(1.0 / hidden), dtype, device, seed + 2);
  m.b3 = zero_param({2}, dtype, device);
  return m;
}

Tensor Mlp::forward(const Tensor& x) const {
  Tensor h = tanh(add(matmul(x, w1), b1));  // (n, hidden); b1 broadcasts over rows
  h = tanh(add(matmul(h, w2), b2));
  return add(matmul(h, w3), b3);  // (n, 2)
}

TrainResult train_spirals(const TrainConfig& c, const std::function<void(size_t, double)>& on_log) {
  SpiralData data = make_spirals(c.points_per_class, c.noise, c.dtype, c.device, c.seed);
  Mlp model = make_mlp(c.hidden, c.dtype, c.device, c.seed + 100);
  autograd::AdamWOptions opt;
  opt.lr = c.lr;
  opt.weight_decay = c.weight_decay;
  autograd::AdamW optimizer(model.params(), opt);

  TrainResult result;
  for (size_t step = 0; step < c.steps; ++step) {
    Tensor loss = cross_entropy(model.forward(data.x), data.targets);
    const double value = loss.item();
    if (step == 0) result.first_loss = value;
    result.final_loss = value;
    if (on_log && c.log_every && (step % c.log_every == 0 || step + 1 == c.steps)) on_log(step, value);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }

  autograd::NoGradGuard no_grad;
  std::vector<double> logits = model.forward(data.x).to_f64_vec();
  size_t correct = 0;
  for (size_t i = 0; i < data.labels.size(); ++i)
    correct += (logits[2 * i + 1] > logits[2 * i]) == (data.labels[i] == 1);
  result.accuracy = static_cast<double>(correct) / static_cast<double>(data.labels.size());
  return result;
}

}  // namespace wick::examples
