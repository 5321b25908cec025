// nn/: the layers against the ops they stand for, parameter names of nested modules, the
// state dict through safetensors, gradient clipping and the cosine schedule.
#include <cmath>
#include <filesystem>

#include "seed.h"
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

struct Block : nn::Module {
  nn::RMSNorm norm;
  nn::Linear up, down;
  std::vector<nn::Linear> extra;
  Block(Device dev, uint64_t seed, DType dt = DType::F32)
      : norm(4, 1e-6, dt, dev), up(4, 8, true, dt, dev, seed), down(8, 4, false, dt, dev, seed + 1) {
    extra.emplace_back(4, 2, true, dt, dev, seed + 2);
  }
  void visit(nn::Params& p) override {
    p("norm", norm);
    p("up", up);
    p("down", down);
    for (size_t i = 0; i < extra.size(); ++i) p("extra." + std::to_string(i), extra[i]);
  }
  Tensor forward(const Tensor& x) const { return down.forward(silu(up.forward(norm.forward(x)))); }
};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("wick_test_nn_" + name)).string();
}

}  // namespace

TEST_CASE("nn: the layers compute what their ops compute, with PyTorch's shapes and initial values") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    nn::Linear lin(5, 3, true, DType::F64, dev, 1);
    CHECK(lin.weight.shape() == Shape{3, 5});
    CHECK(lin.bias.shape() == Shape{3});
    CHECK(lin.weight.requires_grad());
    const double bound = 1 / std::sqrt(5.0);
    for (double w : lin.weight.to_f64_vec()) CHECK(std::fabs(w) <= bound);
    Tensor x = Tensor::randn({2, 4, 5}, DType::F64, dev, test::seed(2));
    check_close(lin.forward(x), add(matmul(x, lin.weight.t()), lin.bias).to_f64_vec(), 1e-12);
    CHECK_FALSE(nn::Linear(5, 3, false, DType::F32, dev, 1).bias.defined());

    nn::Embedding emb(10, 4, DType::F32, dev, 3);
    Tensor ids = Tensor::from_vec(std::vector<int64_t>{1, 9, 1}, {3}, dev);
    CHECK(emb.forward(ids).to_f64_vec() == embedding(ids, emb.weight).to_f64_vec());

    nn::RMSNorm rms(5, 1e-5, DType::F64, dev);
    CHECK(rms.weight.to_f64_vec() == std::vector<double>(5, 1.0));
    check_close(rms.forward(x), rms_norm(x, rms.weight, 1e-5).to_f64_vec(), 1e-12);
    nn::LayerNorm ln(5, 1e-5, DType::F64, dev);
    CHECK(ln.bias.to_f64_vec() == std::vector<double>(5, 0.0));
    check_close(ln.forward(x), layer_norm(x, ln.weight, ln.bias, 1e-5).to_f64_vec(), 1e-12);
  }
}

TEST_CASE("nn: nested modules name their parameters with dotted paths, in visit order") {
  Block b(Device::cpu(), 7);
  std::vector<std::string> names;
  for (auto& [name, t] : b.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"norm.weight", "up.weight", "up.bias", "down.weight", "extra.0.weight",
                                          "extra.0.bias"});
  CHECK(b.parameters().size() == 6);
  CHECK(b.num_parameters() == 4 + 32 + 8 + 32 + 8 + 2);
  CHECK(b.state_dict().at("up.weight").same_storage(b.up.weight));
  // visit reads the members as they are now
  b.up.weight = Tensor::zeros({8, 4}, DType::F32, Device::cpu());
  CHECK(b.state_dict().at("up.weight").same_storage(b.up.weight));
}

TEST_CASE("nn: a state dict saved through safetensors loads into another model, in place, any dtype and device") {
  const std::string path = scratch("block.safetensors");
  Block a(Device::cpu(), 10);
  a.save(path, {{"step", "3"}});
  CHECK(load_safetensors_metadata(path).at("step") == "3");
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
      INFO(std::string(dtype_name(dt)));
      Block b(dev, 99, dt);
      const Tensor handle = b.up.weight;
      autograd::AdamW opt(b.parameters(), {});
      b.load(path);
      CHECK(b.up.weight.same_storage(handle));  // in place: the optimizer's handles see the values
      CHECK(b.up.weight.dtype() == dt);
      CHECK(b.up.weight.device() == dev);
      for (auto& entry : a.named_parameters()) {  // no structured binding: INFO captures its names
        const auto& name = entry.first;
        auto& t = entry.second;
        INFO(name);
        check_close(b.state_dict().at(name), t.to_dtype(dt).to_f64_vec(), 0);
      }
      Tensor x = Tensor::randn({3, 4}, DType::F32, Device::cpu(), test::seed(5));
      check_close(b.forward(x.to_dtype(dt).to_device(dev)), a.forward(x).to_f64_vec(), 4 * std::max(tol_for(dt), tol_for(DType::F32)));
    }
  }
  // non-strict loading skips what either side lacks
  Block c(Device::cpu(), 20);
  std::map<std::string, Tensor> partial = a.state_dict();
  partial.erase("norm.weight");
  partial["unused"] = Tensor::zeros({1}, DType::F32, Device::cpu());
  const std::vector<double> norm_before = c.norm.weight.to_f64_vec();
  c.load_state_dict(partial, false);
  CHECK(c.norm.weight.to_f64_vec() == norm_before);
  CHECK(c.up.weight.to_f64_vec() == a.up.weight.to_f64_vec());
  std::filesystem::remove(path);
}

TEST_CASE("nn: clip_grad_norm returns the global norm and scales the gradients above max_norm") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor a = Tensor::zeros({2}, DType::F32, dev).requires_grad(true);
    Tensor b = Tensor::zeros({1}, DType::F64, dev).requires_grad(true);
    Tensor c = Tensor::zeros({1}, DType::F32, dev).requires_grad(true);  // no gradient: skipped
    a.set_grad(Tensor::from_vec(std::vector<float>{3, 0}, {2}, dev));
    b.set_grad(Tensor::from_vec(std::vector<double>{4}, {1}, dev));
    CHECK(nn::clip_grad_norm({a, b, c}, 10.0) == doctest::Approx(5.0));
    CHECK(a.grad().to_f64_vec() == std::vector<double>{3, 0});  // below max_norm: unchanged
    CHECK(nn::clip_grad_norm({a, b, c}, 1.0) == doctest::Approx(5.0));
    CHECK(a.grad().to_f64_vec()[0] == doctest::Approx(0.6).epsilon(1e-5));
    CHECK(b.grad().to_f64_vec()[0] == doctest::Approx(0.8).epsilon(1e-5));
    CHECK(nn::clip_grad_norm({a, b, c}, 1.0) == doctest::Approx(1.0).epsilon(1e-5));
    CHECK_FALSE(c.grad().defined());
  }
}

TEST_CASE("nn: the cosine schedule warms up linearly, decays by a half cosine, then holds min_lr") {
  nn::CosineSchedule s(1.0, 10, 2, 0.1);
  CHECK(s.lr(0) == doctest::Approx(0.5));
  CHECK(s.lr(1) == doctest::Approx(1.0));
  CHECK(s.lr(2) == doctest::Approx(1.0));
  CHECK(s.lr(6) == doctest::Approx(0.1 + 0.9 * 0.5));  // halfway through the decay
  CHECK(s.lr(9) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(3.141592653589793 * 7 / 8))));
  CHECK(s.lr(10) == doctest::Approx(0.1));
  CHECK(s.lr(1000) == doctest::Approx(0.1));
  nn::CosineSchedule plain(0.01, 4);
  CHECK(plain.lr(0) == doctest::Approx(0.01));
  Tensor p = Tensor::zeros({1}, DType::F32, Device::cpu()).requires_grad(true);
  autograd::SGD opt({p}, {});
  plain.apply(opt, 2);
  CHECK(opt.lr() == doctest::Approx(0.005));
}
