// Elementwise ops against plain double loops, on every device, dtype and layout.
#include <algorithm>
#include <limits>

#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  bool positive;  // needs x > 0 (log, sqrt, powf)
};

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

// out = op(a, b) against ref over the broadcast shape.
void check_binary(const BinaryCase& c, const Tensor& a, const Tensor& b, double tol) {
  Tensor out = c.op(a, b);
  std::vector<double> av = a.to_f64_vec(), bv = b.to_f64_vec(), want(out.elem_count());
  for (size_t i = 0; i < want.size(); ++i) {
    auto idx = unravel(i, out.dims());
    want[i] = c.ref(av[broadcast_flat(idx, a.dims())], bv[broadcast_flat(idx, b.dims())]);
  }
  check_close(out, want, tol);
}

const std::vector<BinaryCase>& arith_cases() {
  static const std::vector<BinaryCase> v = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  return v;
}

const std::vector<BinaryCase>& cmp_cases() {
  static const std::vector<BinaryCase> v = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](double a, double b) { return double(a == b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, [](double a, double b) { return double(a != b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](double a, double b) { return double(a < b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }, [](double a, double b) { return double(a <= b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](double a, double b) { return double(a > b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, [](double a, double b) { return double(a >= b); }},
  };
  return v;
}

}  // namespace

TEST_CASE("ops: unary ops match a double loop on every layout and float dtype") {
  const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, false},
      {"-x", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, false},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, false},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, true},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, false},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return std::max(x, 0.0); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref, false},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
      {"affine", [](const Tensor& x) { return affine(x, 1.5, -0.25); }, [](double x) { return 1.5 * x - 0.25; }, false},
      {"x*s+t", [](const Tensor& x) { return (x * 2.0) + 0.5; }, [](double x) { return 2 * x + 0.5; }, false},
      {"(x-t)/s", [](const Tensor& x) { return (x - 0.5) / 4.0; }, [](double x) { return (x - 0.5) / 4; }, false},
      {"powf", [](const Tensor& x) { return powf(x, 1.7); }, [](double x) { return std::pow(x, 1.7); }, true},
  };
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (const auto& c : cases)
        for (auto& [layout, x] : layouts({3, 5, 7}, dt, dev, 11, c.positive)) {
          const std::string name = layout;  // INFO captures in a lambda: a variable, not a binding
          INFO(c.name, " ", dtype_name(dt), " ", name);
          Tensor out = c.op(x);
          CHECK(out.dtype() == dt);
          CHECK(out.shape() == x.shape());
          CHECK(out.is_contiguous());
          std::vector<double> xv = x.to_f64_vec(), want(xv.size());
          for (size_t i = 0; i < xv.size(); ++i) want[i] = c.ref(xv[i]);
          check_close(out, want, tol_for(dt));
        }
  }
}

TEST_CASE("ops: binary ops broadcast over strided, offset and broadcast views") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes())
      for (auto& [layout, a] : layouts({4, 6}, dt, dev, 21)) {
        const std::string name = layout;  // INFO captures in a lambda: a variable, not a binding
        INFO(dtype_name(dt), " ", name);
        Tensor b_full = Tensor::randn({4, 6}, dt, dev, 22).t().contiguous().t();  // column-major
        Tensor b_row = Tensor::randn({6}, dt, dev, 23);
        Tensor b_col = Tensor::randn({8, 1}, dt, dev, 24).narrow(0, 3, 4);  // (4, 1), offset 3
        Tensor b_scalar = Tensor::full({}, 0.75, dt, dev);
        Tensor b_bcast = Tensor::randn({6}, dt, dev, 25).broadcast_as({4, 6});  // stride 0 dim
        for (const auto& c : arith_cases()) {
          INFO(c.name);
          check_binary(c, a, b_full, tol_for(dt));
          check_binary(c, a, b_row, tol_for(dt));
          check_binary(c, b_row, a, tol_for(dt));
          check_binary(c, a, b_col, tol_for(dt));
          check_binary(c, a, b_scalar, tol_for(dt));
          check_binary(c, b_bcast, a, tol_for(dt));
          // Both sides broadcast: (4, 1) with (6) -> (4, 6)
          check_binary(c, b_col, b_row, tol_for(dt));
        }
        for (const auto& c : cmp_cases()) {
          INFO(c.name);
          Tensor a2 = a.narrow(1, 0, 3);
          Tensor b2 = cat({a.narrow(1, 0, 1), Tensor::randn({4, 2}, dt, dev, 26)}, 1);  // equal first column
          Tensor out = c.op(a2, b2);
          CHECK(out.dtype() == DType::U8);
          check_binary(c, a2, b2, 0);
          check_binary(c, a, b_row, 0);
        }
      }
  }
}

TEST_CASE("ops: integer arithmetic, comparisons and division") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::I64, DType::I32, DType::U32, DType::U8, DType::I16}) {
      INFO(dtype_name(dt));
      Tensor a = cast(Tensor::from_vec<int64_t>({7, 8, 9, 10, 11, 12}, {2, 3}, dev), dt);
      Tensor b = cast(Tensor::from_vec<int64_t>({2, 3, 4}, {3}, dev), dt);
      CHECK((a + b).to_f64_vec() == std::vector<double>{9, 11, 13, 12, 14, 16});
      CHECK((a * b).to_f64_vec() == std::vector<double>{14, 24, 36, 20, 33, 48});
      CHECK((a / b).to_f64_vec() == std::vector<double>{3, 2, 2, 5, 3, 3});
      CHECK(maximum(a.t(), cast(Tensor::full({1}, 9.0, DType::F64, dev), dt)).to_f64_vec() ==
            std::vector<double>{9, 10, 9, 11, 9, 12});
      CHECK(gt(a, b).to_f64_vec() == std::vector<double>{1, 1, 1, 1, 1, 1});
      CHECK(eq(a.narrow(1, 1, 1), cast(Tensor::full({}, 8.0, DType::F64, dev), dt)).to_f64_vec() ==
            std::vector<double>{1, 0});
    }
  }
  // MIN / -1 overflows: it wraps to MIN (it used to trap with SIGFPE on x86).
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
    constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
    Tensor m1_32 = Tensor::from_vec<int32_t>({-1, -1, 3}, {3}, dev);
    CHECK(div(Tensor::from_vec<int32_t>({kMin32, 7, kMin32}, {3}, dev), m1_32).to_vec<int32_t>() ==
          std::vector<int32_t>{kMin32, -7, kMin32 / 3});
    CHECK(div(Tensor::from_vec<int64_t>({kMin64, -9}, {2}, dev), Tensor::from_vec<int64_t>({-1, -1}, {2}, dev))
              .to_vec<int64_t>() == std::vector<int64_t>{kMin64, 9});
  }
  check_error([] { (void)div(Tensor::from_vec<int32_t>({1, 2}, {2}, Device::cpu()),
                             Tensor::from_vec<int32_t>({1, 0}, {2}, Device::cpu())); },
              "div: integer division by zero");
}

TEST_CASE("ops: where picks per element across broadcast cond, a and b") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::F64}) {
      INFO(dtype_name(dt));
      Tensor cond = Tensor::from_vec<uint8_t>({1, 0, 0, 1, 1, 0, 1, 0}, {2, 4}, dev).narrow(1, 1, 3);  // (2, 3) offset
      Tensor a = cast(Tensor::randn({3, 2}, DType::F64, dev, 31), dt).t();                            // (2, 3) transposed
      Tensor b = cast(Tensor::randn({3}, DType::F64, dev, 32), dt);                                    // broadcast row
      Tensor out = where(cond, a, b);
      std::vector<double> cv = cond.to_f64_vec(), av = a.to_f64_vec(), bv = b.to_f64_vec(), want(6);
      for (size_t i = 0; i < 6; ++i) want[i] = cv[i] ? av[i] : bv[i % 3];
      check_close(out, want, 0);
    }
  }
}

TEST_CASE("ops: cast between every pair of dtypes") {
  const std::vector<DType> all{DType::U8, DType::U32, DType::I16, DType::I32, DType::I64,
                               DType::BF16, DType::F16, DType::F32, DType::F64};
  const std::vector<double> vals{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 120};  // exact in every dtype
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType from : all)
      for (DType to : all) {
        INFO(dtype_name(from), " -> ", dtype_name(to));
        Tensor x = cast(Tensor::from_vec<double>(vals, {3, 4}, dev), from).t();  // strided source
        Tensor y = x.to_dtype(to);
        CHECK(y.dtype() == to);
        std::vector<double> want = x.to_f64_vec();
        CHECK(y.to_f64_vec() == want);
      }
    // Rounding: f32 -> f16/bf16 round to nearest; float -> int truncates toward zero.
    Tensor f = Tensor::from_vec<float>({1.0009765625f, -2.7f, 2.7f, 1e-8f}, {4}, dev);
    CHECK(cast(f, DType::I32).to_f64_vec() == std::vector<double>{1, -2, 2, 0});
    check_close(cast(f, DType::F16), {1.0009765625, -2.69921875, 2.69921875, 0.0}, 1e-7);
    check_close(cast(f, DType::BF16), {1.0, -2.703125, 2.703125, 1e-8}, 1e-2);
    // i64 beyond 2^53 survives an integer -> integer cast exactly.
    const int64_t big = (int64_t{1} << 60) + 3;
    CHECK(cast(cast(Tensor::from_vec<int64_t>({big}, {1}, dev), DType::I64), DType::I64).to_vec<int64_t>()[0] == big);
  }
}

TEST_CASE("ops: contiguous, copy and copy_into over strided views") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::F32, DType::BF16, DType::U8, DType::F64}) {
      Tensor base = cast(Tensor::randn({4, 5, 6}, DType::F32, dev, 41), dt);
      Tensor v = base.permute({2, 0, 1}).narrow(0, 1, 4).narrow(2, 2, 3);  // (4, 4, 3), offset, permuted
      CHECK_FALSE(v.is_contiguous());
      Tensor c = v.contiguous();
      CHECK(c.is_contiguous());
      CHECK(c.layout().start_offset() == 0);
      CHECK(c.to_f64_vec() == v.to_f64_vec());
      CHECK(base.contiguous().same_storage(base));  // already contiguous: the same tensor
      Tensor cp = base.copy();
      CHECK_FALSE(cp.same_storage(base));
      CHECK(cp.to_f64_vec() == base.to_f64_vec());
      // copy_into a transposed window of a zero tensor.
      Tensor dst = Tensor::zeros({3, 5}, dt, dev);
      Tensor src = cast(Tensor::arange(0, 6, DType::F64, dev), dt).reshape({3, 2});
      copy_into(dst.narrow(1, 1, 2), src);
      CHECK(dst.to_f64_vec() == std::vector<double>{0, 0, 1, 0, 0, 0, 2, 3, 0, 0, 0, 4, 5, 0, 0});
    }
  }
}

TEST_CASE("ops: to_device round trips any layout") {
  SKIP_WITHOUT_CUDA();
  Tensor x = Tensor::randn({5, 7}, DType::F32, Device::cpu(), 51).t().narrow(0, 1, 5);
  Tensor g = x.to_device(Device::cuda(0));
  CHECK(g.device() == Device::cuda(0));
  CHECK(g.to_f64_vec() == x.to_f64_vec());
  Tensor back = g.t().to_device(Device::cpu());
  CHECK(back.to_f64_vec() == x.t().to_f64_vec());
  CHECK(x.to_device(Device::cpu()).same_storage(x));
}

// Tensor::full fills on the device (a fill kernel on CUDA, no host buffer): every dtype and
// element size, sizes that leave a partial block, and an empty tensor, against the value
// converted on the host (f16/bf16 round the same way on both paths).
TEST_CASE("ops: full and ones give the converted value in every element on every device") {
  const std::vector<double> values{1.0, -2.75, 3.1415926535, 200.5};  // each fits every dtype it goes into
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16, DType::F32,
                     DType::F64})
      for (double v : values) {
        if (!is_float(dt) && v < 0) continue;  // negative values into unsigned types are not a fill question
        INFO(dtype_name(dt), " value ", v);
        for (size_t n : {size_t{1}, size_t{257}, size_t{0}}) {
          Tensor t = Tensor::full({n}, v, dt, dev);
          Tensor want = Tensor::full({n}, v, dt, Device::cpu());
          CHECK(t.dtype() == dt);
          CHECK(t.to_f64_vec() == want.to_f64_vec());
          if (n > 0) CHECK(want.to_f64_vec()[0] != 0.0);
        }
      }
    Tensor o = Tensor::ones({3, 5}, DType::BF16, dev);
    CHECK(o.to_f64_vec() == std::vector<double>(15, 1.0));
  }
}
