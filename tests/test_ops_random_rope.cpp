// Random tensors and dropout (counter-based: the same values on every device for a seed),
// and rotary position embeddings against a direct double loop. Seeds derive from
// WICK_TEST_SEED (tests/seed.h).
#include <cmath>
#include <cstdlib>
#include <set>

#include "seed.h"
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

// The generators' seed, moved by WICK_TEST_SEED (tests/seed.h; the binary prints the base).
uint64_t test_seed() { return test::seed(20240611); }

// The rotation of one (total, heads, D) tensor written out in doubles.
std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<int64_t>& pos, size_t heads, size_t d,
                             size_t rd, double base, bool interleaved) {
  std::vector<double> y = x;
  for (size_t t = 0; t < pos.size(); ++t)
    for (size_t h = 0; h < heads; ++h) {
      const size_t row = (t * heads + h) * d;
      for (size_t p = 0; p < rd / 2; ++p) {
        const double angle = static_cast<double>(pos[t]) * std::pow(base, -2.0 * static_cast<double>(p) / static_cast<double>(rd));
        const size_t i = interleaved ? 2 * p : p, j = interleaved ? 2 * p + 1 : p + rd / 2;
        y[row + i] = x[row + i] * std::cos(angle) - x[row + j] * std::sin(angle);
        y[row + j] = x[row + i] * std::sin(angle) + x[row + j] * std::cos(angle);
      }
    }
  return y;
}

}  // namespace

TEST_CASE("rand: uniform in [0, 1), deterministic per seed, each element a function of (seed, index)") {
  const uint64_t seed = test_seed();
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes()) {
      INFO(dtype_name(dt));
      Tensor r = Tensor::rand({4000}, dt, dev, seed);
      std::vector<double> v = r.to_f64_vec();
      double mean = 0;
      for (double e : v) {
        CHECK(e >= 0.0);
        CHECK(e < 1.0);
        mean += e / static_cast<double>(v.size());
      }
      CHECK(mean == doctest::Approx(0.5).epsilon(0.05));
      CHECK(Tensor::rand({4000}, dt, dev, seed).to_f64_vec() == v);
      CHECK(Tensor::rand({4000}, dt, dev, seed + 1).to_f64_vec() != v);
      // counter-based: a smaller or reshaped request sees the same leading values
      std::vector<double> head = Tensor::rand({2, 5}, dt, dev, seed).to_f64_vec();
      CHECK(std::vector<double>(v.begin(), v.begin() + 10) == head);
    }
  }
}

TEST_CASE("rand, randint and dropout give the same values on CUDA as on the CPU") {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = test_seed();
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    CHECK(Tensor::rand({3, 333}, dt, gpu, seed).to_f64_vec() == Tensor::rand({3, 333}, dt, cpu, seed).to_f64_vec());
    Tensor x = Tensor::randn({5, 77}, dt, cpu, seed + 1);
    CHECK(dropout(x.to_device(gpu).t(), 0.3, seed).to_f64_vec() == dropout(x.t(), 0.3, seed).to_f64_vec());
  }
  for (DType dt : {DType::I64, DType::U8, DType::F32, DType::BF16})
    CHECK(Tensor::randint(-3, 100, {999}, dt == DType::U8 ? DType::I32 : dt, gpu, seed).to_f64_vec() ==
          Tensor::randint(-3, 100, {999}, dt == DType::U8 ? DType::I32 : dt, cpu, seed).to_f64_vec());
}

TEST_CASE("randint: every value in [low, high), every value reached, exact in each dtype") {
  const uint64_t seed = test_seed();
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::I64, DType::I32, DType::U8, DType::F32, DType::F16, DType::BF16}) {
      INFO(dtype_name(dt));
      const int64_t low = dt == DType::U8 ? 0 : -5, high = 12;
      Tensor r = Tensor::randint(low, high, {2000}, dt, dev, seed);
      CHECK(r.dtype() == dt);
      std::set<double> seen;
      for (double v : r.to_f64_vec()) {
        CHECK(v == std::floor(v));
        CHECK(v >= static_cast<double>(low));
        CHECK(v < static_cast<double>(high));
        seen.insert(v);
      }
      CHECK(seen.size() == static_cast<size_t>(high - low));
    }
    // the full int64 range does not overflow
    Tensor wide = Tensor::randint(INT64_MIN, INT64_MAX, {64}, DType::I64, dev, seed);
    std::set<int64_t> distinct;
    for (int64_t v : wide.to_vec<int64_t>()) distinct.insert(v);
    CHECK(distinct.size() == 64);
  }
}

TEST_CASE("dropout: drops about p, scales the rest by 1/(1-p), p = 0 and p = 1, gradient uses the same mask") {
  const uint64_t seed = test_seed();
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::ones({100, 50}, DType::F32, dev);
    std::vector<double> y = dropout(x, 0.25, seed).to_f64_vec();
    size_t zeros = 0;
    for (double v : y) {
      if (v == 0) ++zeros;
      else CHECK(v == doctest::Approx(1 / 0.75));
    }
    CHECK(static_cast<double>(zeros) / 5000.0 == doctest::Approx(0.25).epsilon(0.1));
    CHECK(dropout(x, 0.25, seed).to_f64_vec() == y);
    CHECK(dropout(x, 0.25, seed + 1).to_f64_vec() != y);
    CHECK(dropout(x, 0.0, seed).to_f64_vec() == x.to_f64_vec());
    CHECK(dropout(x, 1.0, seed).to_f64_vec() == std::vector<double>(5000, 0.0));
    // the gradient is the forward's mask and scale: d sum(dropout(x) * 3) / dx = 3 * y
    Tensor leaf = Tensor::ones({100, 50}, DType::F32, dev).requires_grad(true);
    sum_all(mul_scalar(dropout(leaf, 0.25, seed), 3.0)).backward();
    std::vector<double> g = leaf.grad().to_f64_vec();
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(3 * y[i]));
  }
}

TEST_CASE("rope: both conventions and partial rotation against a double loop, on packed sequences") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    // three packed sequences of 3, 1 and 4 tokens: positions restart per sequence
    Tensor cu = Tensor::from_vec(std::vector<uint32_t>{0, 3, 4, 8}, {4}, dev);
    Tensor pos = varlen_positions(cu);
    CHECK(pos.dtype() == DType::I64);
    CHECK(pos.device() == dev);
    const std::vector<int64_t> pv = pos.to_vec<int64_t>();
    CHECK(pv == std::vector<int64_t>{0, 1, 2, 0, 0, 1, 2, 3});
    for (DType dt : float_dtypes())
      for (bool interleaved : {false, true})
        for (size_t rd : {size_t{0}, size_t{4}}) {
          INFO(dtype_name(dt), interleaved ? " interleaved" : " half rotation", " rotary_dim ", rd);
          Tensor x = Tensor::randn({8, 2, 8}, dt, dev, test::seed(5));
          Tensor y = rope(x, pos, 500.0, interleaved ? RopeStyle::Interleaved : RopeStyle::HalfRotation, rd);
          CHECK(y.shape() == x.shape());
          check_close(y, rope_ref(x.to_f64_vec(), pv, 2, 8, rd ? rd : 8, 500.0, interleaved), 2 * tol_for(dt));
        }
    // position 0 is the identity; positions of any leading shape (B, T) for x (B, T, H, D)
    Tensor x = Tensor::randn({2, 3, 1, 4}, DType::F64, dev, test::seed(6));
    Tensor p2 = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 5, 6, 7}, {2, 3}, dev);
    Tensor y = rope(x, p2);
    check_close(y, rope_ref(x.to_f64_vec(), {0, 1, 2, 5, 6, 7}, 1, 4, 4, 10000.0, false), 1e-12);
    CHECK(y.narrow(0, 0, 1).narrow(1, 0, 1).to_f64_vec() == x.narrow(0, 0, 1).narrow(1, 0, 1).to_f64_vec());
    // a strided x (a transposed view) reads through its layout
    Tensor xt = Tensor::randn({8, 8, 2}, DType::F64, dev, test::seed(7)).transpose(1, 2);
    check_close(rope(xt, pos), rope_ref(xt.to_f64_vec(), pv, 2, 8, 8, 10000.0, false), 1e-12);
  }
}

TEST_CASE("varlen_positions: decode positions continue after the cached keys") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    // one new token per sequence, with 5 and 2 keys (4 and 1 cached + the new one)
    Tensor q = Tensor::from_vec(std::vector<uint32_t>{0, 1, 2}, {3}, dev);
    Tensor k = Tensor::from_vec(std::vector<uint32_t>{0, 5, 7}, {3}, dev);
    CHECK(varlen_positions(q, k).to_vec<int64_t>() == std::vector<int64_t>{4, 1});
    Tensor q2 = Tensor::from_vec(std::vector<int64_t>{0, 2, 3}, {3}, dev);
    CHECK(varlen_positions(q2, k).to_vec<int64_t>() == std::vector<int64_t>{3, 4, 1});
  }
}
