// The engine under real training: the two-spirals MLP from examples/ trains below a loss
// bound; 1000 optimizer steps leave the allocator's live bytes where they were; backward
// runs through a 10,000-op chain of real ops.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "ops/ops.h"
#include "tests/devices.h"
#include "examples/spirals.h"

using namespace wick;
using wick::test::test_devices;

namespace {

int64_t live(const Device& dev) {
  synchronize(dev);
  return Storage::live_bytes(dev.kind);
}

// One step of a tiny two-layer regression (matmul, broadcast add, tanh, mean of squares).
double train_step(const std::vector<Tensor>& params, const Tensor& x, const Tensor& y, autograd::Optimizer& opt) {
  Tensor h = tanh(add(matmul(x, params[0]), params[1]));
  Tensor err = sub(matmul(h, params[2]), y);
  Tensor loss = mean_all(mul(err, err));
  double value = loss.item();
  opt.zero_grad();
  loss.backward();
  opt.step();
  return value;
}

std::vector<Tensor> tiny_params(const Device& dev) {
  std::vector<Tensor> p{Tensor::randn({3, 8}, DType::F32, dev, 1), Tensor::randn({8}, DType::F32, dev, 2),
                        Tensor::randn({8, 1}, DType::F32, dev, 3)};
  for (Tensor& t : p) t.requires_grad(true);
  return p;
}

}  // namespace

TEST_CASE("training: 1000 steps do not grow live memory (SGD with momentum, AdamW)") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({16, 3}, DType::F32, dev, 10);
    Tensor y = Tensor::randn({16, 1}, DType::F32, dev, 11);
    for (int which = 0; which < 2; ++which) {
      std::vector<Tensor> params = tiny_params(dev);
      std::unique_ptr<autograd::Optimizer> opt;
      if (which == 0) opt = std::make_unique<autograd::SGD>(params, autograd::SGDOptions{0.05, 0.9, 0, 1e-4});
      else opt = std::make_unique<autograd::AdamW>(params, autograd::AdamWOptions{});
      // The first steps allocate the optimizer state and the first grads; measure after them.
      double first = 0, last = 0;
      for (int i = 0; i < 5; ++i) first = train_step(params, x, y, *opt);
      const int64_t before = live(dev);
      for (int i = 0; i < 1000; ++i) last = train_step(params, x, y, *opt);
      const int64_t after = live(dev);
      INFO("optimizer ", which == 0 ? "SGD" : "AdamW", ": live bytes ", before, " -> ", after);
      CHECK(after == before);
      CHECK(last < first);  // it did train
    }
  }
}

TEST_CASE("training: backward through a 10,000-op chain of real ops") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    DType dt = dev.is_cpu() ? DType::F64 : DType::F32;
    Tensor x = Tensor::from_vec(std::vector<double>{0.5, -1.0, 2.0}, {3}, Device::cpu()).to_dtype(dt).to_device(dev);
    x.requires_grad(true);
    constexpr int kDepth = 10000;
    Tensor y = x;
    for (int i = 0; i < kDepth; ++i) y = mul_scalar(y, i % 2 ? 1.0002 : 0.9999);
    sum_all(y).backward();
    // d/dx = product of the scales
    const double want = std::pow(1.0002 * 0.9999, kDepth / 2);
    for (double g : x.grad().to_f64_vec()) CHECK(g == doctest::Approx(want).epsilon(dev.is_cpu() ? 1e-9 : 1e-3));
  }
}

TEST_CASE("training: two-spirals MLP loss falls below 0.1 in 600 AdamW steps") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    examples::TrainConfig c;
    c.device = dev;
    c.steps = 600;
    examples::TrainResult r = examples::train_spirals(c);
    INFO("loss ", r.first_loss, " -> ", r.final_loss, ", accuracy ", r.accuracy);
    CHECK(r.first_loss > 0.5);   // starts near log 2 (chance)
    CHECK(r.final_loss < 0.1);   // the stated bound
    CHECK(r.accuracy > 0.97);
  }
}
