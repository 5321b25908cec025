// The research toolkit's ops against plain loops and hand-worked values, on every device:
// sin/cos/abs/clamp/gelu_erf, scalar arithmetic on both sides, negative dims and -1 in
// reshape, cumsum, gather/scatter_add/one_hot, tril/triu, softmax over any dim, the losses,
// allclose and the Tensor methods. Random ops, rope and printing have their own files.
#include <cmath>
#include <limits>

#include "seed.h"
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

std::vector<double> vals(const Tensor& t) { return t.to_f64_vec(); }

Tensor f64(std::vector<double> v, const Shape& s, Device d) { return Tensor::from_vec(v, s, d); }
Tensor i64(std::vector<int64_t> v, const Shape& s, Device d) { return Tensor::from_vec(v, s, d); }

double erf_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("research ops: sin, cos, abs, gelu_erf and clamp match the C library on every dtype and layout") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Tensor& x) { return x.cos(); }, [](double x) { return std::cos(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }},
      {"gelu_erf", [](const Tensor& x) { return gelu_erf(x); }, erf_gelu},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.75); },
       [](double x) { return std::min(std::max(x, -0.5), 0.75); }},
      {"clamp one-sided", [](const Tensor& x) { return x.clamp(-INFINITY, 0.1); },
       [](double x) { return std::min(x, 0.1); }},
  };
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (const Labelled& in : layouts({3, 5}, dt, dev, test::seed(7))) {
        for (const Case& c : cases) {
          INFO(c.name, " ", dtype_name(dt), " ", in.layout);
          Tensor out = c.op(in.t);
          CHECK(out.dtype() == dt);
          CHECK(out.shape() == in.t.shape());
          std::vector<double> x = vals(in.t), want(x.size());
          for (size_t i = 0; i < x.size(); ++i) want[i] = c.ref(x[i]);
          check_close(out, want, tol_for(dt));
        }
      }
  }
}

TEST_CASE("research ops: clamp of integers rounds the bounds inward and keeps the dtype; NaN passes through") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor ids = i64({-5, 0, 3, 9}, {4}, dev);
    Tensor c = clamp(ids, -1.5, 3.5);
    CHECK(c.dtype() == DType::I64);
    CHECK(c.to_vec<int64_t>() == std::vector<int64_t>{-1, 0, 3, 3});
    Tensor u = Tensor::from_vec(std::vector<uint8_t>{0, 7, 250}, {3}, dev);
    CHECK(clamp(u, -100, 1e9).to_vec<uint8_t>() == std::vector<uint8_t>{0, 7, 250});
    std::vector<double> got = vals(clamp(f64({NAN, 2.0}, {2}, dev), 0, 1));
    CHECK(std::isnan(got[0]));
    CHECK(got[1] == 1.0);
  }
}

TEST_CASE("research ops: scalar arithmetic on both sides, and integer tensors stay integer") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = f64({1, -2, 4}, {3}, dev);
    CHECK(vals(2.0 * x) == std::vector<double>{2, -4, 8});
    CHECK(vals(1.0 - x) == std::vector<double>{0, 3, -3});
    CHECK(vals(8.0 / x) == std::vector<double>{8, -4, 2});
    CHECK(vals(0.5 + x) == std::vector<double>{1.5, -1.5, 4.5});
    CHECK(vals(-x) == std::vector<double>{-1, 2, -4});
    Tensor ids = i64({1, 2, 3}, {3}, dev);
    Tensor twice = 2 * ids + 1;
    CHECK(twice.dtype() == DType::I64);
    CHECK(twice.to_vec<int64_t>() == std::vector<int64_t>{3, 5, 7});
    CHECK((10 - ids).to_vec<int64_t>() == std::vector<int64_t>{9, 8, 7});
    CHECK((ids / 2).to_vec<int64_t>() == std::vector<int64_t>{0, 1, 1});
    CHECK((6 / ids).to_vec<int64_t>() == std::vector<int64_t>{6, 3, 2});
  }
}

TEST_CASE("research ops: negative dims in views, reductions, joins and Tensor::dim; -1 in reshape") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::arange(0, 24, DType::F32, dev).reshape({2, 3, 4});
    CHECK(x.dim(-1) == 4);
    CHECK(x.dim(-3) == 2);
    CHECK(x.narrow(-1, 1, 2).layout() == x.narrow(2, 1, 2).layout());
    CHECK(x.transpose(-1, -2).layout() == x.transpose(2, 1).layout());
    CHECK(x.permute({-1, 0, 1}).layout() == x.permute({2, 0, 1}).layout());
    CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
    CHECK(x.unsqueeze(-4).shape() == Shape{1, 2, 3, 4});
    CHECK(x.unsqueeze(-1).squeeze(-1).shape() == x.shape());
    CHECK(vals(sum(x, {-1})) == vals(sum(x, {2})));
    CHECK(vals(x.sum({0, -1}, true)) == vals(sum(x, {0, 2}, true)));
    CHECK(x.sum({0, -1}, true).shape() == Shape{1, 3, 1});
    CHECK(vals(max(x, -2)) == vals(max(x, {1})));
    CHECK(argmax(x, -1).to_vec<int64_t>() == argmax(x, 2).to_vec<int64_t>());
    CHECK(cat({x, x}, -1).shape() == Shape{2, 3, 8});
    Tensor idx = i64({2, 0}, {2}, dev);
    CHECK(vals(index_select(x, idx, -2)) == vals(index_select(x, idx, 1)));
    // reshape with -1, from a braced list mixing unsigned and negative entries
    const size_t two = 2;
    CHECK(x.reshape({-1}).shape() == Shape{24});
    CHECK(x.reshape({two, -1}).shape() == Shape{2, 12});
    CHECK(x.reshape({-1, 3, 2}).shape() == Shape{4, 3, 2});
    CHECK(x.reshape(std::vector<int64_t>{6, -1}).shape() == Shape{6, 4});
    CHECK(vals(x.reshape({-1})) == vals(x));
    // select and operator[]
    CHECK(vals(x[1]) == vals(x.narrow(0, 1, 1).squeeze(0)));
    CHECK(vals(x[-1]) == vals(x[1]));
    CHECK(vals(x.select(-1, -1)) == std::vector<double>{3, 7, 11, 15, 19, 23});
    CHECK(x.select(1, 2).shape() == Shape{2, 4});
    // flatten: views when contiguous, copies otherwise
    CHECK(x.flatten().shape() == Shape{24});
    CHECK(x.flatten(1).shape() == Shape{2, 12});
    CHECK(x.flatten(0, 1).same_storage(x));
    CHECK(vals(x.transpose(0, 2).flatten(1, -1)) == vals(x.transpose(0, 2).contiguous().reshape({4, 6})));
  }
}

TEST_CASE("research ops: cumsum along any dim, every dtype, strided input") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    CHECK(vals(cumsum(x, 1)) == std::vector<double>{1, 3, 6, 4, 9, 15});
    CHECK(vals(cumsum(x, -2)) == std::vector<double>{1, 2, 3, 5, 7, 9});
    CHECK(vals(x.t().cumsum(1)) == std::vector<double>{1, 5, 2, 7, 3, 9});
    Tensor ints = Tensor::from_vec(std::vector<int32_t>{5, -2, 7}, {3}, dev);
    CHECK(cumsum(ints, 0).to_vec<int32_t>() == std::vector<int32_t>{5, 3, 10});
    for (DType dt : float_dtypes()) {
      INFO(dtype_name(dt));
      Tensor r = Tensor::randn({3, 40}, dt, dev, test::seed(3));
      std::vector<double> v = vals(r), want(v.size());
      for (size_t i = 0; i < 3; ++i) {
        double s = 0;
        for (size_t j = 0; j < 40; ++j) want[i * 40 + j] = s += v[i * 40 + j];
      }
      check_close(cumsum(r, 1), want, 4 * tol_for(dt));
    }
  }
}

TEST_CASE("research ops: gather, scatter_add and one_hot on hand-worked values") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    // x = [[1, 2], [3, 4]]: gather(x, 1, [[0, 0], [1, 0]]) = [[1, 1], [4, 3]]
    Tensor x = f64({1, 2, 3, 4}, {2, 2}, dev);
    CHECK(vals(gather(x, 1, i64({0, 0, 1, 0}, {2, 2}, dev))) == std::vector<double>{1, 1, 4, 3});
    // dim 0 with an index smaller than x in the other dim: out[i][j] = x[idx[i][j]][j]
    Tensor x3 = f64({0, 1, 2, 10, 11, 12, 20, 21, 22}, {3, 3}, dev);
    Tensor g = gather(x3, 0, Tensor::from_vec(std::vector<int32_t>{2, 0, 1, 1}, {2, 2}, dev));
    CHECK(g.shape() == Shape{2, 2});
    CHECK(vals(g) == std::vector<double>{20, 1, 10, 11});
    // a transposed x: gather reads through the strides
    CHECK(vals(gather(x3.t(), -1, i64({0, 2, 1}, {3, 1}, dev))) == std::vector<double>{0, 21, 12});
    // scatter_add: repeated indices accumulate; x is not modified
    Tensor base = Tensor::zeros({2, 3}, DType::F32, dev);
    Tensor src = Tensor::from_vec(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    Tensor idx = i64({0, 1, 0, 1, 1, 0}, {2, 3}, dev);
    Tensor out = scatter_add(base, 0, idx, src);
    CHECK(vals(out) == std::vector<double>{1, 0, 9, 4, 7, 0});
    CHECK(vals(base) == std::vector<double>(6, 0.0));
    Tensor rows = scatter_add(Tensor::ones({2, 2}, DType::BF16, dev), 1, i64({1, 1, 0}, {1, 3}, dev),
                              Tensor::ones({1, 3}, DType::BF16, dev));
    CHECK(vals(rows) == std::vector<double>{2, 3, 1, 1});
    // one_hot
    Tensor oh = one_hot(Tensor::from_vec(std::vector<uint32_t>{2, 0, 1, 2}, {2, 2}, dev), 3);
    CHECK(oh.dtype() == DType::I64);
    CHECK(oh.shape() == Shape{2, 2, 3});
    CHECK(oh.to_vec<int64_t>() == std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
    CHECK(one_hot(i64({1}, {1}, dev), 2, DType::F32).to_vec<float>() == std::vector<float>{0, 1});
  }
}

TEST_CASE("research ops: tril and triu keep their triangle of the last two dims") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::arange(1, 13, DType::F32, dev).reshape({3, 4});
    CHECK(vals(tril(x)) == std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
    CHECK(vals(x.triu()) == std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
    CHECK(vals(tril(x, 1)) == std::vector<double>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
    CHECK(vals(triu(x, -1)) == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
    Tensor b = Tensor::ones({2, 2, 2}, DType::I32, dev);
    CHECK(tril(b).to_vec<int32_t>() == std::vector<int32_t>{1, 0, 1, 1, 1, 0, 1, 1});
  }
}

TEST_CASE("research ops: softmax and log_softmax over any dim equal the last-dim op on the moved tensor") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({3, 4, 5}, DType::F64, dev, test::seed(11));
    for (int64_t d : {0, 1, -1, -3}) {
      INFO("dim ", d);
      const size_t r = d < 0 ? static_cast<size_t>(d + 3) : static_cast<size_t>(d);
      Tensor want = softmax(x.transpose(r, 2)).transpose(r, 2).contiguous();
      check_close(softmax(x, d), vals(want), 1e-12);
      check_close(x.log_softmax(d), vals(log(want)), 1e-12);
      CHECK(softmax(x, d).is_contiguous());
    }
    std::vector<double> s = vals(sum(softmax(x, 0), {0}));
    for (double v : s) CHECK(v == doctest::Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("research ops: cross_entropy and nll_loss against the formula, with ignore_index") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor logits = Tensor::randn({4, 5}, DType::F64, dev, test::seed(21));
    std::vector<double> lv = vals(logits);
    std::vector<int64_t> t = {3, 0, -100, 4};
    auto log_p = [&](size_t n, size_t c) {
      double m = -INFINITY, s = 0;
      for (size_t k = 0; k < 5; ++k) m = std::max(m, lv[n * 5 + k]);
      for (size_t k = 0; k < 5; ++k) s += std::exp(lv[n * 5 + k] - m);
      return lv[n * 5 + c] - m - std::log(s);
    };
    const double want = -(log_p(0, 3) + log_p(1, 0) + log_p(3, 4)) / 3;
    Tensor targets = i64(t, {4}, dev);
    CHECK(cross_entropy(logits, targets, -100).item() == doctest::Approx(want).epsilon(1e-12));
    CHECK(nll_loss(log_softmax(logits), targets, -100).item() == doctest::Approx(want).epsilon(1e-12));
    Tensor all = Tensor::from_vec(std::vector<int32_t>{1, 2, 0, 4}, {4}, dev);
    const double want_all = -(log_p(0, 1) + log_p(1, 2) + log_p(2, 0) + log_p(3, 4)) / 4;
    CHECK(cross_entropy(logits, all).item() == doctest::Approx(want_all).epsilon(1e-12));
    CHECK(cross_entropy(logits.to_dtype(DType::F32), all).item() == doctest::Approx(want_all).epsilon(1e-5));
    CHECK(std::isnan(cross_entropy(logits, i64({-1, -1, -1, -1}, {4}, dev), -1).item()));
    // the gradient: (softmax - one_hot) / count on kept rows, 0 on the ignored row
    Tensor leaf = logits.detach().copy().requires_grad(true);
    cross_entropy(leaf, targets, -100).backward();
    std::vector<double> gv = vals(leaf.grad());
    for (size_t n = 0; n < 4; ++n)
      for (size_t c = 0; c < 5; ++c) {
        const double expect = n == 2 ? 0.0 : (std::exp(log_p(n, c)) - (static_cast<int64_t>(c) == t[n])) / 3;
        CHECK(gv[n * 5 + c] == doctest::Approx(expect).epsilon(1e-12));
      }
  }
}

TEST_CASE("research ops: allclose") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor a = f64({1, 2, INFINITY}, {3}, dev);
    CHECK(allclose(a, f64({1, 2 + 1e-6, INFINITY}, {3}, dev)));
    CHECK_FALSE(allclose(a, f64({1, 2.001, INFINITY}, {3}, dev)));
    CHECK(allclose(a, f64({1, 2.001, INFINITY}, {3}, dev), 1e-3));
    CHECK_FALSE(allclose(f64({NAN}, {1}, dev), f64({NAN}, {1}, dev)));
    CHECK_FALSE(allclose(a, f64({1, 2, -INFINITY}, {3}, dev)));
    CHECK(allclose(Tensor::ones({2, 3}, DType::F32, dev), Tensor::ones({3}, DType::BF16, dev)));
    CHECK(allclose(i64({3, 4}, {2}, dev), f64({3, 4}, {2}, dev)));
    CHECK_FALSE(allclose(f64({1e-7}, {1}, dev), f64({0}, {1}, dev), 0, 1e-8));
  }
}

TEST_CASE("research ops: Tensor methods are the free functions") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({3, 4}, DType::F64, dev, test::seed(31)), w = Tensor::randn({4, 2}, DType::F64, dev, test::seed(32));
    CHECK(x.sum().rank() == 0);
    CHECK(x.sum().item() == doctest::Approx(sum_all(x).item()));
    CHECK(x.mean().item() == doctest::Approx(mean_all(x).item()));
    CHECK(vals(x.mean(1)) == vals(mean(x, {1})));
    CHECK(vals(x.mean({1}, true)) == vals(mean(x, {1}, true)));
    const std::vector<double> xv = vals(x);
    CHECK(x.max().item() == *std::max_element(xv.begin(), xv.end()));
    CHECK(vals(x.min(0)) == vals(min(x, {0})));
    CHECK(vals(x.matmul(w)) == vals(matmul(x, w)));
    CHECK(vals(x.exp()) == vals(exp(x)));
    CHECK(vals(x.abs().log()) == vals(log(abs(x))));
    CHECK(vals(x.abs().sqrt()) == vals(sqrt(abs(x))));
    CHECK(vals(x.tanh()) == vals(tanh(x)));
    CHECK(vals(x.relu()) == vals(relu(x)));
    CHECK(vals(x.gelu()) == vals(gelu(x)));
    CHECK(vals(x.silu()) == vals(silu(x)));
    CHECK(vals(x.sigmoid()) == vals(sigmoid(x)));
    CHECK(vals(x.sin()) == vals(sin(x)));
    CHECK(vals(x.neg()) == vals(neg(x)));
    CHECK(vals(x.abs().pow(1.5)) == vals(powf(abs(x), 1.5)));
    CHECK(vals(x.softmax()) == vals(softmax(x)));
    CHECK(x.argmax(1).to_vec<int64_t>() == argmax(x, 1).to_vec<int64_t>());
    CHECK(x.argmin(0, true).shape() == Shape{1, 4});
    CHECK(vals(x.tril(-1)) == vals(tril(x, -1)));
  }
}

TEST_CASE("research ops: zeros_like, ones_like and full_like") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({2, 3}, DType::BF16, dev, test::seed(1)).t();
    Tensor z = zeros_like(x), o = ones_like(x, DType::I32), f = full_like(x, 2.5);
    CHECK(z.shape() == Shape{3, 2});
    CHECK(z.dtype() == DType::BF16);
    CHECK(z.device() == dev);
    CHECK(z.is_contiguous());
    CHECK(vals(z) == std::vector<double>(6, 0.0));
    CHECK(o.dtype() == DType::I32);
    CHECK(o.to_vec<int32_t>() == std::vector<int32_t>(6, 1));
    CHECK(vals(f) == std::vector<double>(6, 2.5));
    CHECK(full_like(x, 7, DType::U8).to_vec<uint8_t>() == std::vector<uint8_t>(6, 7));
  }
}
