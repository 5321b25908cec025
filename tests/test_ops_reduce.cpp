// Reductions, softmax and norms against plain double loops, on every device and layout.
#include <algorithm>
#include <cmath>
#include <limits>

#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

// Reference reduction of x (logical values xv, dims d) over the sorted dims rd.
// kind: 0 sum, 1 max, 2 min, 3 mean. Returns values in the keepdim output's row-major order.
std::vector<double> reduce_ref(const std::vector<double>& xv, const std::vector<size_t>& d,
                               const std::vector<size_t>& rd, int kind) {
  std::vector<size_t> od = d;
  for (size_t r : rd) od[r] = 1;
  size_t n = 1;
  for (size_t v : od) n *= v;
  std::vector<double> out(n, kind == 1 ? -1e300 : kind == 2 ? 1e300 : 0.0);
  std::vector<size_t> cnt(n, 0);
  for (size_t i = 0; i < xv.size(); ++i) {
    auto idx = unravel(i, d);
    for (size_t r : rd) idx[r] = 0;
    size_t o = 0;
    for (size_t k = 0; k < od.size(); ++k) o = o * od[k] + idx[k];
    if (kind == 1) out[o] = std::max(out[o], xv[i]);
    else if (kind == 2) out[o] = std::min(out[o], xv[i]);
    else out[o] += xv[i];
    ++cnt[o];
  }
  if (kind == 3)
    for (size_t o = 0; o < n; ++o) out[o] /= static_cast<double>(cnt[o]);
  return out;
}

}  // namespace

TEST_CASE("ops: sum, mean, max, min over dim lists, keepdim or not") {
  const std::vector<std::vector<size_t>> dim_sets = {{0}, {1}, {2}, {0, 2}, {2, 0}, {0, 1, 2}, {}};
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (auto& [layout, x] : layouts({3, 4, 5}, dt, dev, 61))
        for (const auto& dims : dim_sets)
          for (bool keep : {false, true}) {
            const std::string name = layout;  // INFO captures in a lambda: a variable, not a binding
            INFO(dtype_name(dt), " ", name, " dims ", to_string(dims), " keepdim ", keep);
            std::vector<size_t> rd = dims;
            std::sort(rd.begin(), rd.end());
            std::vector<size_t> want_dims;
            for (size_t i = 0; i < 3; ++i) {
              bool r = std::find(rd.begin(), rd.end(), i) != rd.end();
              if (!r) want_dims.push_back(x.dim(i));
              else if (keep) want_dims.push_back(1);
            }
            auto xv = x.to_f64_vec();
            const double tol = dt == DType::F32 ? 1e-5 : tol_for(dt);
            Tensor s = sum(x, dims, keep);
            CHECK(s.dims() == want_dims);
            check_close(s, reduce_ref(xv, x.dims(), rd, 0), tol * 8);
            check_close(mean(x, dims, keep), reduce_ref(xv, x.dims(), rd, 3), tol);
            check_close(max(x, dims, keep), reduce_ref(xv, x.dims(), rd, 1), 0);
            check_close(min(x, dims, keep), reduce_ref(xv, x.dims(), rd, 2), 0);
          }
    Tensor x = Tensor::randn({6, 7}, DType::F32, dev, 62).t();
    CHECK(sum_all(x).rank() == 0);
    double total = 0;
    for (double v : x.to_f64_vec()) total += v;
    CHECK(sum_all(x).item() == doctest::Approx(total).epsilon(1e-5));
    CHECK(mean_all(x).item() == doctest::Approx(total / 42).epsilon(1e-5));
  }
}

TEST_CASE("ops: reductions over an empty dim") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes()) {
      INFO(dtype_name(dt));
      const Tensor x = Tensor::zeros({3, 0, 2}, dt, dev);
      // sum of nothing is 0, the mean of nothing 0 / 0 (NaN)
      check_close(sum(x, {1}), std::vector<double>(6, 0.0), 0);
      const std::vector<double> m = mean(x, {1}, true).to_f64_vec();
      CHECK(m.size() == 6);
      for (double v : m) CHECK(std::isnan(v));
      CHECK(std::isnan(mean_all(x).item()));
      // the largest of nothing has no value, unless no row asks for one
      CHECK_THROWS_AS((void)max(x, {1}), Error);
      CHECK_THROWS_AS((void)argmin(x, 1), Error);
      CHECK(max(x, {0}).dims() == std::vector<size_t>{0, 2});
      CHECK(argmax(x, 2).dims() == std::vector<size_t>{3, 0});
    }
  }
}

TEST_CASE("ops: integer sums and argmax/argmin with first-index ties") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor a = Tensor::from_vec<int64_t>({3, 9, 9, 1, -4, 7, 7, -4}, {2, 4}, dev);
    CHECK(sum(a, {1}).to_vec<int64_t>() == std::vector<int64_t>{22, 6});
    CHECK(max(a, {0}).to_vec<int64_t>() == std::vector<int64_t>{3, 9, 9, 1});
    CHECK(argmax(a, 1).to_vec<int64_t>() == std::vector<int64_t>{1, 1});
    CHECK(argmin(a, 1).to_vec<int64_t>() == std::vector<int64_t>{3, 0});
    CHECK(argmax(a, 0, true).dims() == std::vector<size_t>{1, 4});
    // Long rows exercise the block-wide combine on CUDA.
    std::vector<float> v(3000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 2999);
    v[2500] = 5000.0f;
    v[700] = 5000.0f;
    v[1234] = -1.0f;
    Tensor t = Tensor::from_vec<float>(v, {1, 3000}, dev);
    CHECK(argmax(t, 1).to_vec<int64_t>() == std::vector<int64_t>{700});
    CHECK(argmin(t, 1).to_vec<int64_t>() == std::vector<int64_t>{1234});
    CHECK(max(t, {1}).item() == 5000.0);
    Tensor u8 = Tensor::from_vec<uint8_t>({200, 100}, {2}, dev);
    CHECK(sum(u8, {0}).to_vec<uint8_t>() == std::vector<uint8_t>{44});  // wraps in U8
  }
}

TEST_CASE("ops: softmax and log_softmax over the last dim, stable for large inputs") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (auto& [layout, x] : layouts({4, 3, 37}, dt, dev, 71)) {
        const std::string name = layout;  // INFO captures in a lambda: a variable, not a binding
        INFO(dtype_name(dt), " ", name);
        auto xv = x.to_f64_vec();
        const size_t cols = 37;
        std::vector<double> sm(xv.size()), lsm(xv.size());
        for (size_t r = 0; r < xv.size() / cols; ++r) {
          double m = -1e300, s = 0;
          for (size_t c = 0; c < cols; ++c) m = std::max(m, xv[r * cols + c]);
          for (size_t c = 0; c < cols; ++c) s += std::exp(xv[r * cols + c] - m);
          for (size_t c = 0; c < cols; ++c) {
            sm[r * cols + c] = std::exp(xv[r * cols + c] - m) / s;
            lsm[r * cols + c] = xv[r * cols + c] - m - std::log(s);
          }
        }
        check_close(softmax(x), sm, tol_for(dt));
        check_close(log_softmax(x), lsm, tol_for(dt) * 4);
      }
    Tensor big = Tensor::from_vec<float>({1000.f, 1001.f, 1002.f}, {1, 3}, dev);
    check_close(softmax(big), {0.09003057317038046, 0.24472847105479764, 0.6652409557748219}, 1e-6);
  }
}

TEST_CASE("ops: rms_norm and layer_norm against a double loop") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (auto& [layout, x] : layouts({5, 2, 24}, dt, dev, 81)) {
        const std::string name = layout;  // INFO captures in a lambda: a variable, not a binding
        INFO(dtype_name(dt), " ", name);
        const size_t d = 24;
        Tensor w = Tensor::randn({2 * d}, dt, dev, 82).narrow(0, 3, d);
        Tensor b = Tensor::randn({d}, dt, dev, 83);
        const double eps = 1e-5;
        auto xv = x.to_f64_vec(), wv = w.to_f64_vec(), bv = b.to_f64_vec();
        std::vector<double> rms(xv.size()), ln(xv.size());
        for (size_t r = 0; r < xv.size() / d; ++r) {
          double sq = 0, mu = 0, var = 0;
          for (size_t c = 0; c < d; ++c) { sq += xv[r * d + c] * xv[r * d + c]; mu += xv[r * d + c]; }
          mu /= d;
          for (size_t c = 0; c < d; ++c) var += (xv[r * d + c] - mu) * (xv[r * d + c] - mu);
          var /= d;
          for (size_t c = 0; c < d; ++c) {
            rms[r * d + c] = xv[r * d + c] / std::sqrt(sq / d + eps) * wv[c];
            ln[r * d + c] = (xv[r * d + c] - mu) / std::sqrt(var + eps) * wv[c] + bv[c];
          }
        }
        check_close(rms_norm(x, w, eps), rms, tol_for(dt) * 4);
        check_close(layer_norm(x, w, b, eps), ln, tol_for(dt) * 4);
      }
  }
}

TEST_CASE("ops: long rows (block-wide combines) agree between CUDA and CPU") {
  SKIP_WITHOUT_CUDA();
  Device gpu = Device::cuda(0), cpu = Device::cpu();
  for (DType dt : {DType::F32, DType::BF16}) {
    INFO(dtype_name(dt));
    Tensor x = Tensor::randn({3, 70001}, dt, cpu, 91);
    Tensor xg = x.to_device(gpu);
    const double tol = dt == DType::F32 ? 1e-4 : 3e-2;
    check_close(sum(xg, {1}), sum(cast(x, DType::F64), {1}).to_f64_vec(), dt == DType::F32 ? 1e-3 : 0.5);
    check_close(max(xg, {1}), max(x, {1}).to_f64_vec(), 0);
    CHECK(argmin(xg, 1).to_vec<int64_t>() == argmin(x, 1).to_vec<int64_t>());
    // Scaled by the row length so entries are O(1) and the tolerance is relative.
    check_close(softmax(xg) * 70001.0, (softmax(x) * 70001.0).to_f64_vec(), tol);
    check_close(log_softmax(xg), log_softmax(x).to_f64_vec(), tol);
    Tensor w = Tensor::randn({70001}, dt, cpu, 92), b = Tensor::randn({70001}, dt, cpu, 93);
    check_close(layer_norm(xg, w.to_device(gpu), b.to_device(gpu), 1e-5), layer_norm(x, w, b, 1e-5).to_f64_vec(), tol);
    check_close(rms_norm(xg, w.to_device(gpu), 1e-5), rms_norm(x, w, 1e-5).to_f64_vec(), tol);
  }
}
