#include "autograd/gradcheck.h"

#include <cmath>
#include <cstdio>

#include "autograd/engine.h"
#include "tensor/grad_node.h"

namespace wick::autograd {

namespace {

constexpr uint64_t kProjectionSeed = 0x5eed;  // fixed, so a failure reproduces

// A fresh contiguous leaf on `device` holding t's values as `dtype`, requiring grad.
Tensor leaf_copy(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  Tensor t = visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v(values.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(values[i]);
    return Tensor::from_vec<T>(v, shape, device);
  });
  t.requires_grad(true);
  return t;
}

std::vector<Tensor> leaves(const std::vector<std::vector<double>>& values, const std::vector<Shape>& shapes,
                           DType dtype, Device device) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back(leaf_copy(values[i], shapes[i], dtype, device));
  return out;
}

void check_output(const Tensor& out) {
  if (!out.defined()) throw Error("G18", "gradcheck: the function's output is an empty (default-constructed) tensor");
  if (!is_float(out.dtype()))
    throw Error("G19", std::string("gradcheck: the function must return a float tensor, got ") + dtype_name(out.dtype()));
  if (!out.requires_grad())
    throw Error("G20", "gradcheck: the output " + to_string(out.shape()) +
                " has no graph: the function does not depend on its inputs through recorded ops");
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Analytic gradients of <out, r> with out = f(xs) already evaluated (and checked), one host
// vector per input (zeros where f ignores it). r has out.elem_count() values.
struct Analytic {
  std::vector<double> out;                 // f's forward values
  std::vector<std::vector<double>> grads;  // one per input
};
Analytic analytic(const Tensor& out, const std::vector<Tensor>& xs, const std::vector<double>& r) {
  Tensor seed = leaf_copy(r, out.shape(), out.dtype(), out.device()).detach();
  GradStore store = grad(out, seed);
  Analytic a{out.to_f64_vec(), {}};
  for (const Tensor& x : xs) {
    Tensor g = store.get(x);
    a.grads.push_back(g.defined() ? g.to_f64_vec() : std::vector<double>(x.elem_count(), 0.0));
  }
  return a;
}

// Records the comparison of got vs want at one element; keeps the first failure's text.
void compare(GradcheckResult& r, double got, double want, double tol, const std::string& where) {
  double err = std::fabs(got - want);
  if (!(err <= r.max_abs_err)) r.max_abs_err = std::isnan(err) ? INFINITY : err;
  ++r.checked;
  if (err <= tol * (1 + std::fabs(want))) return;
  if (r.ok) r.message = where + ": expected " + fmt(want) + ", got " + fmt(got);
  r.ok = false;
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& inputs) {
  std::vector<Shape> s;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !is_float(t.dtype()))
      throw Error("G21", "gradcheck: every input must be a float tensor (capture index or mask tensors in f)");
    s.push_back(t.shape());
  }
  return s;
}

std::vector<std::vector<double>> values_of(const std::vector<Tensor>& inputs) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : inputs) v.push_back(t.to_f64_vec());
  return v;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, double eps, double tol) {
  const std::vector<Shape> shapes = shapes_of(inputs);
  std::vector<std::vector<double>> values = values_of(inputs);
  const Device cpu = Device::cpu();

  std::vector<Tensor> xs = leaves(values, shapes, DType::F64, cpu);
  Tensor out = f(xs);
  check_output(out);
  const std::vector<double> r = Tensor::randn(out.shape(), DType::F64, cpu, kProjectionSeed).to_f64_vec();
  Analytic a = analytic(out, xs, r);

  GradcheckResult result;
  NoGradGuard no_grad;  // the perturbed evaluations need no graph
  auto projected = [&] { return dot(f(leaves(values, shapes, DType::F64, cpu)).to_f64_vec(), r); };
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t e = 0; e < values[i].size(); ++e) {
      const double x0 = values[i][e];
      values[i][e] = x0 + eps;
      const double plus = projected();
      values[i][e] = x0 - eps;
      const double minus = projected();
      values[i][e] = x0;
      const double numeric = (plus - minus) / (2 * eps);
      compare(result, a.grads[i][e], numeric, tol,
              "input " + std::to_string(i) + " " + to_string(shapes[i]) + " element " + std::to_string(e));
    }
  }
  return result;
}

GradcheckResult gradcheck_device(const GradcheckFn& f, const std::vector<Tensor>& inputs, Device device,
                                 double tol) {
  const std::vector<Shape> shapes = shapes_of(inputs);
  const std::vector<std::vector<double>> values = values_of(inputs);

  std::vector<Tensor> ref_in = leaves(values, shapes, DType::F64, Device::cpu());
  Tensor ref_out = f(ref_in);
  check_output(ref_out);
  const std::vector<double> r =
      Tensor::randn(ref_out.shape(), DType::F64, Device::cpu(), kProjectionSeed).to_f64_vec();
  Analytic ref = analytic(ref_out, ref_in, r);
  std::vector<Tensor> dev_in = leaves(values, shapes, DType::F32, device);
  Tensor dev_out = f(dev_in);
  check_output(dev_out);
  // Before analytic() shapes r as dev_out: a size mismatch would otherwise surface as a
  // from_vec error instead of this one.
  if (dev_out.elem_count() != ref_out.elem_count())
    throw Error("G22", "gradcheck_device: the output on " + to_string(device) + " has " +
                std::to_string(dev_out.elem_count()) + " elements, on Cpu " + std::to_string(ref_out.elem_count()));
  Analytic got = analytic(dev_out, dev_in, r);

  GradcheckResult result;
  for (size_t e = 0; e < ref.out.size(); ++e)
    compare(result, got.out[e], ref.out[e], tol, "output element " + std::to_string(e));
  for (size_t i = 0; i < ref.grads.size(); ++i)
    for (size_t e = 0; e < ref.grads[i].size(); ++e)
      compare(result, got.grads[i][e], ref.grads[i][e], tol,
              "gradient of input " + std::to_string(i) + " " + to_string(shapes[i]) + " element " + std::to_string(e));
  return result;
}

}  // namespace wick::autograd
