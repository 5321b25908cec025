// The code of docs/autograd.md, compiled and run. Each ```cpp block of the page appears in
// this file line for line (indentation and blank lines aside), inside the setup it needs;
// the last test case checks that, so the page and the code cannot drift apart.
#include "wick.h"
using namespace wick;

autograd::CustomOp make_softplus() {
  autograd::CustomOp op;
  op.name = "softplus";
  // Built from wick ops, so the same forward serves both devices; a plugin with its own
  // kernels would set a different function for each.
  op.cpu_forward = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{log(add_scalar(exp(in[0]), 1.0))};
  };
  op.cuda_forward = op.cpu_forward;
  // inputs, forward outputs, gradient of output 0 -> one gradient per input
  op.backward = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const Tensor& grad_out) {
    return std::vector<Tensor>{mul(grad_out, sigmoid(in[0]))};
  };
  return op;
}

#include <doctest/doctest.h>

#include <cassert>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The lines of s, trimmed, without the empty ones.
std::vector<std::string> code_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t\r");
    if (a != std::string::npos) out.push_back(line.substr(a, b - a + 1));
  }
  return out;
}

}  // namespace

TEST_CASE("docs/autograd.md: the first example computes d loss / d w") {
  Tensor w = Tensor::randn({3, 2}, DType::F32, Device::cpu(), 1).requires_grad(true);
  Tensor x = Tensor::randn({4, 3}, DType::F32, Device::cpu(), 2);
  Tensor loss = mean_all(tanh(matmul(x, w)));
  loss.backward();          // w.grad() now holds d loss / d w, shape (3, 2)
  CHECK(w.grad().shape() == Shape{3, 2});
  auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return mean_all(tanh(matmul(x.to_dtype(DType::F64), in[0]))); },
                               {w.detach()});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("docs/autograd.md: a GradStore holds the gradient of an intermediate tensor") {
  Tensor x = Tensor::randn({5}, DType::F64, Device::cpu(), 3).requires_grad(true);
  Tensor h = tanh(x);
  Tensor loss = sum_all(mul(h, h));
  autograd::BackwardOptions opt;
  opt.retain_graph = true;                       // keep the graph for a second pass
  autograd::GradStore g = autograd::grad(loss, opt);
  Tensor dh = g.get(h);                          // d loss / d h for a non-leaf h
  const std::vector<double> hv = h.to_f64_vec(), dv = dh.to_f64_vec();
  for (size_t i = 0; i < hv.size(); ++i) CHECK(dv[i] == doctest::Approx(2 * hv[i]));
  loss.backward();  // the retained graph allows a second pass
  CHECK(x.grad().defined());
}

TEST_CASE("docs/autograd.md: the softplus custom op") {
Tensor x = Tensor::randn({4}, DType::F32, Device::cpu(), 0).requires_grad(true);
Tensor y = make_softplus()({x});              // y.grad_fn()->name == "softplus"
sum_all(y).backward();                        // x.grad() == sigmoid(x)

// Check the rule against finite differences before trusting it:
auto r = autograd::gradcheck(
    [](const std::vector<Tensor>& in) { return make_softplus()({in[0]}); }, {x});
assert(r.ok);
  CHECK(y.grad_fn()->name == "softplus");
  CHECK(r.ok);
  const std::vector<double> xv = x.to_f64_vec(), gv = x.grad().to_f64_vec();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gv[i] == doctest::Approx(1 / (1 + std::exp(-xv[i]))).epsilon(1e-6));
}

TEST_CASE("docs/autograd.md: the training loop with nn, a schedule and clipping") {
  // two separable classes: y = 1 where x0 + x1 > 0
  Tensor x = Tensor::randn({64, 2}, DType::F32, Device::cpu(), 5);
  std::vector<int64_t> labels;
  const std::vector<double> xv = x.to_f64_vec();
  for (size_t i = 0; i < 64; ++i) labels.push_back(xv[2 * i] + xv[2 * i + 1] > 0 ? 1 : 0);
  Tensor y = Tensor::from_vec(labels, {64}, Device::cpu());
  double first = 0;
  {
    nn::Linear probe(2, 2, true, DType::F32, Device::cpu(), 1);
    first = cross_entropy(probe.forward(x), y).item();
  }
  nn::Linear model(2, 2, /*with_bias=*/true, DType::F32, Device::cpu(), /*seed=*/1);
  autograd::AdamW opt(model.parameters(), {.lr = 1e-2});
  nn::CosineSchedule schedule(1e-2, /*total_steps=*/200, /*warmup_steps=*/10);
  for (size_t step = 0; step < 200; ++step) {
    Tensor loss = cross_entropy(model.forward(x), y);
    schedule.apply(opt, step);
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm(opt.params(), 1.0);
    opt.step();
  }
  const double last = cross_entropy(model.forward(x), y).item();
  MESSAGE("docs training loop: loss ", first, " -> ", last);
  CHECK(last < first - 0.2);
}

TEST_CASE("docs/autograd.md: a saved tensor written after the forward") {
  Tensor x = Tensor::from_vec(std::vector<float>{1, 2, 3}, {3}, Device::cpu());
  x.requires_grad(true);
  Tensor w = Tensor::from_vec(std::vector<float>{4, 5, 6}, {3}, Device::cpu());
  const Tensor w_new = Tensor::zeros({3}, DType::F32, Device::cpu());
  const Tensor seed = Tensor::ones({3}, DType::F32, Device::cpu());
  std::string code;
  try {
    Tensor y = mul(x, w);
    copy_into(w, w_new);   // w's storage moves to a new version
    y.backward(seed);      // G29: backward of 'mul': a tensor it saved ([3] F32) was modified ...
  } catch (const Error& e) {
    code = e.code();
  }
  CHECK(code == "G29");
}

TEST_CASE("docs/autograd.md: every code block of the page is in this file") {
  const auto root = std::filesystem::path(__FILE__).parent_path().parent_path();
  const std::string md = read(root / "docs/autograd.md");
  REQUIRE_MESSAGE(!md.empty(), "docs/autograd.md not found");
  const std::vector<std::string> src = code_lines(read(__FILE__));
  size_t blocks = 0;
  for (size_t at = 0; (at = md.find("```cpp\n", at)) != std::string::npos;) {
    const size_t begin = at + 7, end = md.find("```", begin);
    REQUIRE(end != std::string::npos);
    const std::vector<std::string> block = code_lines(md.substr(begin, end - begin));
    at = end + 3;
    ++blocks;
    bool found = false;
    for (size_t i = 0; !found && i + block.size() <= src.size(); ++i)
      found = std::equal(block.begin(), block.end(), src.begin() + static_cast<std::ptrdiff_t>(i));
    CHECK_MESSAGE(found, "docs/autograd.md block ", blocks, " is not in tests/test_docs_autograd.cpp:\n",
                  md.substr(begin, end - begin));
  }
  CHECK(blocks == 6);
}
