// CustomOp: a plugin operator joins the graph as one node; every missing part is a clear
// error naming the op. The forwards here are host loops, so nothing in ops/ is needed;
// gradcheck is exercised on them too, including a rule that is deliberately wrong.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "tensor/tensor.h"
#include "tests/devices.h"

using namespace wick;
using autograd::CustomOp;

namespace {

Tensor host_map(const Tensor& x, double (*f)(double)) {
  std::vector<double> v = x.to_f64_vec();
  for (double& e : v) e = f(e);
  return Tensor::from_vec(v, x.shape(), Device::cpu());
}

// y = x^3 with the rule dy/dx = 3 x^2; `wrong` makes the rule 2 x^2 on purpose.
CustomOp cube_op(bool wrong = false) {
  CustomOp op;
  op.name = "cube";
  op.cpu_forward = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{host_map(in[0], [](double x) { return x * x * x; })};
  };
  op.backward = [wrong](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Tensor& g) {
    std::vector<double> x = in[0].to_f64_vec(), gv = g.to_f64_vec();
    for (size_t i = 0; i < x.size(); ++i) gv[i] *= (wrong ? 2 : 3) * x[i] * x[i];
    return std::vector<Tensor>{Tensor::from_vec(gv, in[0].shape(), Device::cpu())};
  };
  return op;
}

// out = a * b elementwise, plus an auxiliary output sum(a) the rule does not need but receives.
CustomOp mul_with_aux_op() {
  CustomOp op;
  op.name = "mul_aux";
  op.cpu_forward = [](const std::vector<Tensor>& in) {
    std::vector<double> a = in[0].to_f64_vec(), b = in[1].to_f64_vec();
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i], a[i] *= b[i];
    return std::vector<Tensor>{Tensor::from_vec(a, in[0].shape(), Device::cpu()),
                               Tensor::from_vec(std::vector<double>{s}, Shape{}, Device::cpu())};
  };
  // d(ab)/da = b, d(ab)/db = a
  op.backward = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Tensor& g) {
    CHECK(out.size() == 2);  // the auxiliary output reaches the rule
    std::vector<double> a = in[0].to_f64_vec(), b = in[1].to_f64_vec(), gv = g.to_f64_vec();
    std::vector<double> ga(a.size()), gb(a.size());
    for (size_t i = 0; i < a.size(); ++i) ga[i] = gv[i] * b[i], gb[i] = gv[i] * a[i];
    return std::vector<Tensor>{Tensor::from_vec(ga, in[0].shape(), Device::cpu()),
                               Tensor::from_vec(gb, in[1].shape(), Device::cpu())};
  };
  return op;
}

Tensor rand64(const Shape& s, uint64_t seed) { return Tensor::randn(s, DType::F64, Device::cpu(), seed); }

}  // namespace

TEST_CASE("custom op: records one node named after the op; backward gives 3x^2") {
  Tensor x = Tensor::from_vec(std::vector<double>{0.5, -1.5, 2.0}, {3}, Device::cpu());
  x.requires_grad(true);
  Tensor y = cube_op()({x});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name == "cube");
  CHECK(y.to_f64_vec() == std::vector<double>{0.125, -3.375, 8.0});
  y.backward(Tensor::from_vec(std::vector<double>{1.0, 2.0, -1.0}, {3}, Device::cpu()));
  CHECK(x.grad().to_f64_vec() == std::vector<double>{0.75, 13.5, -12.0});  // 3 x^2 * seed
}

TEST_CASE("custom op: no inputs requiring grad, or grad mode off, records nothing") {
  Tensor x = rand64({4}, 1);
  CHECK(cube_op()({x}).grad_fn() == nullptr);
  x.requires_grad(true);
  autograd::NoGradGuard guard;
  CHECK(cube_op()({x}).grad_fn() == nullptr);
}

TEST_CASE("gradcheck: passes on a correct custom op, with auxiliary outputs and two inputs") {
  autograd::GradcheckResult r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return cube_op()({in[0]}); }, {rand64({2, 3}, 2)});
  CHECK_MESSAGE(r.ok, r.message);
  CHECK(r.checked == 6);
  CHECK(r.max_abs_err < 1e-7);
  r = autograd::gradcheck([](const std::vector<Tensor>& in) { return mul_with_aux_op()({in[0], in[1]}); },
                          {rand64({5}, 3), rand64({5}, 4)});
  CHECK_MESSAGE(r.ok, r.message);
  CHECK(r.checked == 10);
}

TEST_CASE("gradcheck: catches a wrong rule and says where") {
  Tensor x = Tensor::from_vec(std::vector<double>{1.0, 2.0}, {2}, Device::cpu());
  autograd::GradcheckResult r =
      autograd::gradcheck([](const std::vector<Tensor>& in) { return cube_op(true)({in[0]}); }, {x});
  CHECK_FALSE(r.ok);
  // The projection r is fixed (seeded), so the expected value is reproducible:
  // got / expected = 2/3 at every element.
  CHECK(r.message.rfind("input 0 [2] element 0: expected ", 0) == 0);
  CHECK(r.max_abs_err > 0.1);
}

TEST_CASE("gradcheck: misuse is an error, not a pass") {
  Tensor x = rand64({3}, 5);
  CHECK_THROWS_WITH_AS(autograd::gradcheck([](const std::vector<Tensor>& in) { return in[0].detach(); }, {x}),
                       "gradcheck: the output [3] has no graph: the function does not depend on its inputs "
                       "through recorded ops",
                       Error);
  Tensor idx = Tensor::from_vec(std::vector<int32_t>{0, 1}, {2}, Device::cpu());
  CHECK_THROWS_WITH_AS(autograd::gradcheck([](const std::vector<Tensor>& in) { return in[0]; }, {idx}),
                       "gradcheck: every input must be a float tensor (capture index or mask tensors in f)", Error);
}

TEST_CASE("custom op: each missing part raises an error naming the op") {
  Tensor x = rand64({3}, 6);
  CustomOp no_name = cube_op();
  no_name.name.clear();
  CHECK_THROWS_WITH_AS(no_name({x}), "custom op: the op has no name (set CustomOp::name)", Error);

  CustomOp no_cpu = cube_op();
  no_cpu.cpu_forward = nullptr;
  CHECK_THROWS_WITH_AS(no_cpu({x}), "custom op 'cube': no cpu forward, so it cannot run on Cpu inputs", Error);

  CustomOp no_backward = cube_op();
  no_backward.backward = nullptr;
  CHECK(no_backward({x}).to_f64_vec().size() == 3);  // fine while nothing requires grad
  x.requires_grad(true);
  CHECK_THROWS_WITH_AS(no_backward({x}),
                       "custom op 'cube': input 0 requires grad but the op has no backward; set "
                       "CustomOp::backward, run it under NoGradGuard, or pass detached inputs",
                       Error);

  CHECK_THROWS_WITH_AS(cube_op()({}), "custom op 'cube': called with no inputs", Error);
  CHECK_THROWS_WITH_AS(cube_op()({Tensor()}), "custom op 'cube': input 0 is an empty (default-constructed) tensor", Error);

  CustomOp empty_out = cube_op();
  empty_out.cpu_forward = [](const std::vector<Tensor>&) { return std::vector<Tensor>{}; };
  CHECK_THROWS_WITH_AS(empty_out({x}), "custom op 'cube': the cpu forward returned no output", Error);

  CustomOp bad_rule = cube_op();
  bad_rule.backward = [](const std::vector<Tensor>&, const std::vector<Tensor>&, const Tensor&) {
    return std::vector<Tensor>{};
  };
  CHECK_THROWS_WITH_AS(bad_rule({x}).backward(Tensor::ones({3}, DType::F64, Device::cpu())),
                       "backward of 'cube': the rule returned 0 gradients for 1 inputs", Error);
}

TEST_CASE("custom op: the cuda forward is required for CUDA inputs") {
  SKIP_WITHOUT_CUDA();
  Tensor x = Tensor::randn({3}, DType::F32, Device::cuda(0), 7);
  CHECK_THROWS_WITH_AS(cube_op()({x}),
                       "custom op 'cube': no cuda forward, so it cannot run on Cuda { gpu_id: 0 } inputs", Error);
}
