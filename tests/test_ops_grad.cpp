// Quick checks of op backward rules, one node at a time: the node's backward applied to a
// random seed must match central finite differences of sum(seed * f(inputs)) in f64.
// (Full-graph gradient checks belong to the autograd tests.)
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

double weighted_sum(const Tensor& y, const std::vector<double>& seed) {
  auto v = y.to_f64_vec();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * seed[i];
  return s;
}

// inputs: f64 CPU tensors (any layout); grad_mask: which ones to check.
void check_rule(const char* name, const Fn& f, std::vector<Tensor> inputs, std::vector<bool> grad_mask = {}) {
  const std::string rule = name;
  INFO("rule: ", rule);
  if (grad_mask.empty()) grad_mask.assign(inputs.size(), true);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (grad_mask[i]) inputs[i].requires_grad(true);
  Tensor y = f(inputs);
  REQUIRE(y.grad_fn() != nullptr);
  Tensor seed = Tensor::randn(y.shape(), DType::F64, Device::cpu(), 999);
  std::vector<double> sv = seed.to_f64_vec();
  std::vector<Tensor> node_grads = y.grad_fn()->backward(seed);
  const auto& node_inputs = y.grad_fn()->inputs;
  REQUIRE(node_grads.size() == node_inputs.size());
  // The node may hold extra, non-differentiable inputs (where's cond, index_select's indices).
  std::vector<Tensor> grads(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k)
    for (size_t j = 0; j < node_inputs.size(); ++j)
      if (node_inputs[j].defined() && node_inputs[j].id() == inputs[k].id()) grads[k] = node_grads[j];
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!grad_mask[k]) continue;
    INFO("input ", k);
    REQUIRE(grads[k].defined());
    CHECK(grads[k].shape() == inputs[k].shape());
    std::vector<double> x = inputs[k].to_f64_vec(), want(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      auto at = [&](double delta) {
        std::vector<double> xp = x;
        xp[e] += delta;
        std::vector<Tensor> in = inputs;
        in[k] = Tensor::from_vec<double>(xp, inputs[k].shape(), Device::cpu());
        autograd::NoGradGuard ng;
        return weighted_sum(f(in), sv);
      };
      want[e] = (at(h) - at(-h)) / (2 * h);
    }
    check_close(grads[k], want, 1e-6);
  }
}

Tensor r(const Shape& s, uint64_t seed) { return Tensor::randn(s, DType::F64, Device::cpu(), seed); }

}  // namespace

TEST_CASE("backward rules: elementwise, with broadcasting reduced back") {
  Tensor pos = exp(r({2, 3}, 1));
  check_rule("add", [](auto& v) { return add(v[0], v[1]); }, {r({2, 3}, 2), r({3}, 3)});
  check_rule("sub", [](auto& v) { return sub(v[0], v[1]); }, {r({2, 1}, 4), r({2, 3}, 5).t().t()});
  check_rule("mul", [](auto& v) { return mul(v[0], v[1]); }, {r({3, 2}, 6).t(), r({1, 3}, 7)});
  check_rule("div", [](auto& v) { return div(v[0], v[1]); }, {r({2, 3}, 8), add_scalar(exp(r({3}, 9)), 0.5)});
  check_rule("maximum", [](auto& v) { return maximum(v[0], v[1]); }, {r({2, 3}, 10), r({2, 3}, 11)});
  check_rule("minimum", [](auto& v) { return minimum(v[0], v[1]); }, {r({2, 3}, 12), r({3}, 13)});
  check_rule("exp", [](auto& v) { return exp(v[0]); }, {r({2, 3}, 14)});
  check_rule("log", [](auto& v) { return log(v[0]); }, {pos});
  check_rule("sqrt", [](auto& v) { return sqrt(v[0]); }, {pos});
  check_rule("tanh", [](auto& v) { return tanh(v[0]); }, {r({2, 3}, 15)});
  check_rule("relu", [](auto& v) { return relu(v[0]); }, {r({2, 3}, 16)});
  check_rule("gelu", [](auto& v) { return gelu(v[0]); }, {r({2, 3}, 17)});
  check_rule("silu", [](auto& v) { return silu(v[0]); }, {r({2, 3}, 18)});
  check_rule("sigmoid", [](auto& v) { return sigmoid(v[0]); }, {r({2, 3}, 19)});
  check_rule("affine", [](auto& v) { return affine(v[0], -1.5, 2.0); }, {r({2, 3}, 20)});
  check_rule("powf", [](auto& v) { return powf(v[0], 2.5); }, {pos});
  Tensor cond = Tensor::from_vec<uint8_t>({1, 0, 1}, {3}, Device::cpu());
  check_rule("where", [cond](auto& v) { return where(cond, v[0], v[1]); }, {r({2, 3}, 21), r({2, 1}, 22)});
}

TEST_CASE("backward rules: reductions, softmax, norms, matmul, gathers, views") {
  check_rule("sum", [](auto& v) { return sum(v[0], {0, 2}); }, {r({2, 3, 4}, 30)});
  check_rule("sum keepdim", [](auto& v) { return sum(v[0], {1}, true); }, {r({2, 3, 4}, 31)});
  check_rule("mean", [](auto& v) { return mean(v[0], {1}); }, {r({2, 3, 4}, 32)});
  check_rule("max", [](auto& v) { return max(v[0], {1}); }, {r({2, 5}, 33)});
  check_rule("min", [](auto& v) { return min(v[0], {0}, true); }, {r({4, 3}, 34)});
  check_rule("softmax", [](auto& v) { return softmax(v[0]); }, {r({3, 5}, 35)});
  check_rule("log_softmax", [](auto& v) { return log_softmax(v[0]); }, {r({3, 5}, 36)});
  check_rule("rms_norm", [](auto& v) { return rms_norm(v[0], v[1], 1e-5); }, {r({3, 6}, 37), r({6}, 38)});
  check_rule("layer_norm", [](auto& v) { return layer_norm(v[0], v[1], v[2], 1e-5); },
             {r({3, 6}, 39), r({6}, 40), r({6}, 41)});
  check_rule("matmul", [](auto& v) { return matmul(v[0], v[1]); }, {r({2, 3, 4}, 42), r({4, 5}, 43)});
  check_rule("matmul bcast", [](auto& v) { return matmul(v[0], v[1]); }, {r({1, 3, 4}, 44), r({2, 5, 4}, 45).t()});
  check_rule("cat", [](auto& v) { return cat({v[0], v[1]}, 1); }, {r({2, 3}, 46), r({2, 2}, 47)});
  Tensor idx = Tensor::from_vec<int64_t>({2, 0, 2}, {3}, Device::cpu());
  check_rule("index_select", [idx](auto& v) { return index_select(v[0], idx, 1); }, {r({2, 3, 2}, 48)});
  check_rule("narrow", [](auto& v) { return v[0].narrow(1, 1, 2); }, {r({2, 4}, 50)});
  check_rule("transpose", [](auto& v) { return v[0].transpose(0, 2); }, {r({2, 3, 4}, 51)});
  check_rule("permute", [](auto& v) { return v[0].permute({2, 0, 1}); }, {r({2, 3, 4}, 52)});
  check_rule("reshape", [](auto& v) { return v[0].reshape({6, 2}); }, {r({3, 4}, 53)});
  check_rule("unsqueeze", [](auto& v) { return v[0].unsqueeze(1); }, {r({3, 4}, 54)});
  check_rule("broadcast_as", [](auto& v) { return v[0].broadcast_as({2, 3, 4}); }, {r({3, 1}, 55)});
  check_rule("copy", [](auto& v) { return v[0].copy(); }, {r({3, 2}, 57).t()});
  // A cast's gradient is the seed cast back to the input's dtype.
  Tensor x = r({3}, 56);
  x.requires_grad(true);
  Tensor y = cast(x, DType::F32);
  Tensor g = y.grad_fn()->backward(Tensor::from_vec<float>({1.5f, -2.f, 0.25f}, {3}, Device::cpu()))[0];
  CHECK(g.dtype() == DType::F64);
  CHECK(g.to_f64_vec() == std::vector<double>{1.5, -2, 0.25});
}

TEST_CASE("backward rules: f32 matmul and softmax gradients agree across devices") {
  SKIP_WITHOUT_CUDA();
  Tensor a = Tensor::randn({3, 4}, DType::F32, Device::cpu(), 60), b = Tensor::randn({4, 5}, DType::F32, Device::cpu(), 61);
  Tensor g = Tensor::randn({3, 5}, DType::F32, Device::cpu(), 62);
  auto grads = [&](Device dev) {
    Tensor ad = a.to_device(dev), bd = b.to_device(dev);
    ad.requires_grad(true);
    bd.requires_grad(true);
    Tensor y = softmax(matmul(ad, bd));
    Tensor gy = y.grad_fn()->backward(g.to_device(dev))[0];
    Tensor mm = matmul(ad, bd);
    return std::make_pair(gy, mm.grad_fn()->backward(gy)[1]);
  };
  auto [c1, c2] = grads(Device::cpu());
  auto [d1, d2] = grads(Device::cuda(0));
  check_close(d1, c1.to_f64_vec(), 1e-5);
  check_close(d2, c2.to_f64_vec(), 1e-5);
}
