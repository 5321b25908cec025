// The engine on its own: a few tiny host-only ops are defined here through
// autograd::record, so these tests depend on nothing in ops/. Each checks real values.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "autograd/autograd.h"
#include "tensor/tensor.h"

using namespace wick;
using autograd::record;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vec(v, s, Device::cpu()); }

// Elementwise map of one f64 tensor on the host.
Tensor map1(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> v = x.to_f64_vec();
  for (double& e : v) e = f(e);
  return f64(v, x.shape());
}
// Elementwise combination of two same-shape f64 tensors on the host.
Tensor map2(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  std::vector<double> va = a.to_f64_vec(), vb = b.to_f64_vec();
  for (size_t i = 0; i < va.size(); ++i) va[i] = f(va[i], vb[i]);
  return f64(va, a.shape());
}

// d(a*b)/da = b, d(a*b)/db = a
Tensor tmul(const Tensor& a, const Tensor& b) {
  Tensor ad = a.detach(), bd = b.detach();
  return record(map2(a, b, std::multiplies<>()), "tmul", {a, b}, [ad, bd](const Tensor& g) {
    return std::vector<Tensor>{map2(g, bd, std::multiplies<>()), map2(g, ad, std::multiplies<>())};
  });
}
// d(a+b)/da = d(a+b)/db = 1
Tensor tadd(const Tensor& a, const Tensor& b) {
  return record(map2(a, b, std::plus<>()), "tadd", {a, b},
                [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
}
// d(s*x)/dx = s
Tensor tscale(const Tensor& x, double s) {
  return record(map1(x, [s](double e) { return s * e; }), "tscale", {x},
                [s](const Tensor& g) { return std::vector<Tensor>{map1(g, [s](double e) { return s * e; })}; });
}
// d(sin x)/dx = cos x
Tensor tsin(const Tensor& x) {
  Tensor xd = x.detach();
  return record(map1(x, [](double e) { return std::sin(e); }), "tsin", {x}, [xd](const Tensor& g) {
    return std::vector<Tensor>{map2(g, xd, [](double gi, double xi) { return gi * std::cos(xi); })};
  });
}
// d(sum x)/dx_i = 1
Tensor tsum(const Tensor& x) {
  double s = 0;
  for (double e : x.to_f64_vec()) s += e;
  Shape shape = x.shape();
  return record(f64({s}, Shape{}), "tsum", {x}, [shape](const Tensor& g) {
    return std::vector<Tensor>{f64(std::vector<double>(shape.elem_count(), g.item()), shape)};
  });
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("autograd: scalar loss, chain rule through several ops") {
  Tensor x = f64({0.3, -1.2, 2.5}, {3});
  Tensor w = f64({1.5, 0.7, -0.4}, {3});
  x.requires_grad(true);
  w.requires_grad(true);
  // loss = sum(sin(x * w) * 3)
  Tensor loss = tsum(tscale(tsin(tmul(x, w)), 3.0));
  CHECK(loss.grad_fn() != nullptr);
  CHECK(loss.grad_fn()->name == "tsum");
  loss.backward();
  std::vector<double> xv = x.to_f64_vec(), wv = w.to_f64_vec(), gx, gw;
  for (size_t i = 0; i < 3; ++i) {
    gx.push_back(3 * std::cos(xv[i] * wv[i]) * wv[i]);  // d/dx = 3 cos(xw) w
    gw.push_back(3 * std::cos(xv[i] * wv[i]) * xv[i]);  // d/dw = 3 cos(xw) x
  }
  check_close(x.grad().to_f64_vec(), gx);
  check_close(w.grad().to_f64_vec(), gw);
}

TEST_CASE("autograd: a tensor used twice gets the sum of both paths") {
  Tensor x = f64({0.5, -2.0}, {2});
  x.requires_grad(true);
  Tensor y = tsin(x);
  // loss = sum(y * y + y): d/dx = (2 sin x + 1) cos x
  Tensor loss = tsum(tadd(tmul(y, y), y));
  autograd::GradStore store = autograd::grad(loss);
  std::vector<double> xv = x.to_f64_vec();
  check_close(store.get(x).to_f64_vec(), {(2 * std::sin(xv[0]) + 1) * std::cos(xv[0]),
                                          (2 * std::sin(xv[1]) + 1) * std::cos(xv[1])});
  // The store also holds intermediates: d loss / dy = 2y + 1.
  check_close(store.get(y).to_f64_vec(), {2 * std::sin(xv[0]) + 1, 2 * std::sin(xv[1]) + 1});
  CHECK_FALSE(x.grad().defined());  // autograd::grad leaves the leaves alone

  // Without keep_intermediate only the leaves' gradients survive the pass.
  Tensor y2 = tsin(x);
  autograd::BackwardOptions lean;
  lean.keep_intermediate = false;
  autograd::GradStore leaves_only = autograd::grad(tsum(tmul(y2, y2)), lean);
  CHECK(leaves_only.size() == 1);
  CHECK(leaves_only.contains(x));
  CHECK_FALSE(leaves_only.get(y2).defined());
}

TEST_CASE("autograd: gradients accumulate across backward calls until zeroed") {
  Tensor x = f64({1.0, 2.0}, {2});
  x.requires_grad(true);
  tsum(tscale(x, 2.0)).backward();
  check_close(x.grad().to_f64_vec(), {2, 2});
  tsum(tscale(x, 5.0)).backward();
  check_close(x.grad().to_f64_vec(), {7, 7});
  autograd::zero_grad({x});
  CHECK_FALSE(x.grad().defined());
  tsum(tmul(x, x)).backward();  // d/dx x^2 = 2x
  check_close(x.grad().to_f64_vec(), {2, 4});
}

TEST_CASE("autograd: explicit seed for a non-scalar output; no seed is an error") {
  Tensor x = f64({1.0, -3.0, 0.25}, {3});
  x.requires_grad(true);
  Tensor y = tscale(x, 4.0);
  CHECK_THROWS_WITH_AS(y.backward(),
                       "backward: the output has shape [3] (3 elements); without a seed only a single-element "
                       "loss can be differentiated, pass a seed gradient of the output's shape: backward(seed)",
                       Error);
  y.backward(f64({0.5, -1.0, 2.0}, {3}));
  check_close(x.grad().to_f64_vec(), {2.0, -4.0, 8.0});  // 4 * seed
  Tensor z = tscale(x, 1.0);
  CHECK_THROWS_WITH_AS(z.backward(f64({1, 2}, {2})),
                       "backward: the seed gradient must match the output [3] F64 on Cpu, got [2] F64 on Cpu", Error);
}

TEST_CASE("autograd: the graph is freed after backward unless retained") {
  Tensor x = f64({0.1, 0.2}, {2});
  x.requires_grad(true);
  Tensor loss = tsum(tmul(x, x));
  autograd::BackwardOptions keep;
  keep.retain_graph = true;
  autograd::GradStore first = autograd::grad(loss, keep);
  autograd::GradStore second = autograd::grad(loss);  // the graph is still there
  check_close(first.get(x).to_f64_vec(), {0.2, 0.4});
  check_close(second.get(x).to_f64_vec(), {0.2, 0.4});
  CHECK(loss.grad_fn()->released);
  CHECK(loss.grad_fn()->inputs.empty());  // saved tensors dropped
  CHECK_THROWS_WITH_AS(loss.backward(),
                       "backward: the graph through 'tsum' was freed by an earlier backward pass; pass "
                       "retain_graph = true to the first pass to run backward through the same graph twice",
                       Error);
}

TEST_CASE("autograd: NoGradGuard, detach and untracked inputs record nothing") {
  Tensor x = f64({1.0, 2.0}, {2});
  x.requires_grad(true);
  {
    autograd::NoGradGuard guard;
    CHECK_FALSE(autograd::grad_enabled());
    Tensor y = tscale(x, 2.0);
    CHECK(y.grad_fn() == nullptr);
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(autograd::grad_enabled());
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.same_storage(x));
  CHECK(tscale(d, 2.0).grad_fn() == nullptr);
  Tensor c = f64({3.0, 4.0}, {2});
  Tensor y = tmul(x, c);  // only x requires grad
  tsum(y).backward();
  check_close(x.grad().to_f64_vec(), {3.0, 4.0});
  CHECK_FALSE(c.grad().defined());
  CHECK_THROWS_WITH_AS(tsum(c).backward(),
                       "backward: the tensor [] does not require grad and has no graph (computed under "
                       "NoGradGuard, detached, or from inputs none of which requires grad)",
                       Error);
}

TEST_CASE("autograd: a rule returning the wrong shape is reported with the op's name") {
  Tensor x = f64({1.0, 2.0, 3.0}, {3});
  x.requires_grad(true);
  Tensor y = record(f64({6.0}, Shape{}), "bad_sum", {x},
                    [](const Tensor&) { return std::vector<Tensor>{f64({1.0, 1.0}, {2})}; });
  CHECK_THROWS_WITH_AS(y.backward(),
                       "backward of 'bad_sum': gradient for input 0 is [2] F64 on Cpu but the input is [3] F64 on Cpu",
                       Error);
}

TEST_CASE("autograd: backward through a 10,000-op chain, and dropping a deeper one unrun") {
  Tensor x = f64({0.5, -0.25}, {2});
  x.requires_grad(true);
  constexpr int kDepth = 10000;
  Tensor y = x;
  for (int i = 0; i < kDepth; ++i) y = tscale(y, i % 2 ? 1.001 : 0.999);  // d/dx = prod of scales
  tsum(y).backward();
  double want = std::pow(1.001 * 0.999, kDepth / 2);
  check_close(x.grad().to_f64_vec(), {want, want}, 1e-9);

  // A chain built and dropped without backward is torn down without deep recursion.
  Tensor z = x;
  for (int i = 0; i < 200000; ++i) z = tscale(z, 1.0);
  CHECK(z.grad_fn() != nullptr);
  z = Tensor();
  CHECK_FALSE(z.defined());
}

TEST_CASE("autograd: a leaf as the loss, and identity ops never form a cycle") {
  Tensor x = f64({2.5}, {1});
  x.requires_grad(true);
  x.backward();
  check_close(x.grad().to_f64_vec(), {1.0});
  Tensor same = record(x, "identity", {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  CHECK(same.grad_fn() == nullptr);  // returned unchanged: no self-loop
}
