// Optimizers against a host reimplementation of PyTorch's update rules, step by step, on
// every device; plus their misuse errors. Gradients are set directly with set_grad so each
// step's input is known exactly.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "ops/ops.h"
#include "tests/devices.h"

using namespace wick;
using wick::test::test_devices;

namespace {

using Vec = std::vector<double>;

Tensor on(const Vec& v, const Device& dev) {
  DType dt = dev.is_cpu() ? DType::F64 : DType::F32;
  return Tensor::from_vec(v, {v.size()}, Device::cpu()).to_dtype(dt).to_device(dev);
}

Tensor leaf(const Vec& v, const Device& dev) {
  Tensor t = on(v, dev);
  t.requires_grad(true);
  return t;
}

// Gradients fed at steps 1, 2, 3 (random-looking, of both signs).
const std::vector<Vec> kGrads{{0.5, -1.25, 2.0}, {-0.75, 0.5, 1.5}, {0.25, 0.125, -3.0}};
const Vec kStart{1.0, -2.0, 0.5};

void check_close(const Vec& got, const Vec& want, const Device& dev) {
  const double tol = dev.is_cpu() ? 1e-12 : 1e-5;
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("optim: SGD with momentum, dampening and weight decay matches the reference") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (bool nesterov : {false, true}) {
      autograd::SGDOptions o{0.1, 0.9, nesterov ? 0.0 : 0.2, 0.05, nesterov};
      Tensor p = leaf(kStart, dev);
      const void* storage_before = p.storage().get();
      autograd::SGD opt({p}, o);
      Vec ref = kStart, buf(3);
      for (size_t step = 0; step < kGrads.size(); ++step) {
        p.set_grad(on(kGrads[step], dev));
        opt.step();
        for (size_t i = 0; i < 3; ++i) {  // torch.optim.SGD, written out
          double g = kGrads[step][i] + o.weight_decay * ref[i];
          buf[i] = step == 0 ? g : o.momentum * buf[i] + (1 - o.dampening) * g;
          double d = nesterov ? g + o.momentum * buf[i] : buf[i];
          ref[i] -= o.lr * d;
        }
        INFO("nesterov ", nesterov, " step ", step + 1);
        check_close(p.to_f64_vec(), ref, dev);
      }
      CHECK(p.storage().get() == storage_before);  // updated in place: the handle stays valid
      CHECK(p.grad_fn() == nullptr);               // and it is still a leaf
    }
  }
}

TEST_CASE("optim: plain SGD is p -= lr * g; parameters without a gradient are skipped") {
  Tensor p = leaf({1.0, 2.0}, Device::cpu());
  Tensor q = leaf({3.0}, Device::cpu());
  autograd::SGD opt({p, q}, {0.1});
  p.set_grad(on({0.5, -1.0}, Device::cpu()));
  opt.step();
  check_close(p.to_f64_vec(), {0.95, 2.1}, Device::cpu());
  CHECK(q.to_f64_vec() == Vec{3.0});
  opt.zero_grad();
  CHECK_FALSE(p.grad().defined());
}

TEST_CASE("optim: AdamW matches the reference over three steps") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    autograd::AdamWOptions o{0.01, 0.8, 0.95, 1e-8, 0.1};
    Tensor p = leaf(kStart, dev);
    autograd::AdamW opt({p}, o);
    Vec ref = kStart, m(3, 0), v(3, 0);
    for (size_t step = 0; step < kGrads.size(); ++step) {
      p.set_grad(on(kGrads[step], dev));
      opt.step();
      const double t = static_cast<double>(step + 1);
      for (size_t i = 0; i < 3; ++i) {  // torch.optim.AdamW, written out
        const double g = kGrads[step][i];
        ref[i] *= 1 - o.lr * o.weight_decay;
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
        const double mhat = m[i] / (1 - std::pow(o.beta1, t)), vhat = v[i] / (1 - std::pow(o.beta2, t));
        ref[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
      }
      INFO("step ", step + 1);
      check_close(p.to_f64_vec(), ref, dev);
    }
    CHECK(opt.steps() == 3);
  }
}

TEST_CASE("optim: a few AdamW steps on a real loss move it downhill") {
  // loss = sum((p - target)^2): every step must reduce it from the start value.
  Tensor target = on({0.3, -0.7, 1.1}, Device::cpu());
  Tensor p = leaf(kStart, Device::cpu());
  autograd::AdamW opt({p}, {0.1, 0.9, 0.999, 1e-8, 0.0});
  auto loss_value = [&] {
    Tensor d = sub(p, target);
    return sum_all(mul(d, d));
  };
  const double start = loss_value().item();
  for (int i = 0; i < 20; ++i) {
    Tensor loss = loss_value();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  CHECK(loss_value().item() < 0.2 * start);
}

TEST_CASE("optim: misuse names the optimizer and the parameter") {
  Tensor x = leaf({1.0, 2.0}, Device::cpu());
  Tensor y = mul(x, x);
  CHECK_THROWS_WITH_AS(autograd::SGD({x, y}, {0.1}),
                       "SGD: parameter 1 [2] is computed by 'mul', not a leaf; pass the tensors that were "
                       "created with requires_grad(true)",
                       Error);
  CHECK_THROWS_WITH_AS(autograd::AdamW({on({1.0}, Device::cpu())}, {}),
                       "AdamW: parameter 0 [1] does not require grad", Error);
  CHECK_THROWS_WITH_AS(autograd::AdamW({Tensor::arange(0, 3, DType::I64, Device::cpu())}, {}),
                       "AdamW: parameter 0 has dtype I64; parameters must be float", Error);
  Tensor m = Tensor::randn({2, 3}, DType::F64, Device::cpu(), 1);
  m.requires_grad(true);
  Tensor mt = m.detach().t();
  mt.requires_grad(true);
  CHECK_THROWS_WITH_AS(autograd::SGD({mt}, {0.1}), "SGD: parameter 0 [3, 2] is not contiguous", Error);
  CHECK_THROWS_WITH_AS(autograd::SGD({x}, {0.1, 0.0, 0.0, 0.0, true}),
                       "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum 0, dampening 0)",
                       Error);
}
