// The compute part of the fuzz target: one op of ops/ops.h (arithmetic with broadcasting and
// with scalars, comparisons, where, reductions, argmax/argmin, running sums, softmax, norms,
// matmul, cat, gather and scatter, one_hot, embedding, triangles, losses, rope,
// varlen_positions, dropout, clamp and the float maps) on operands of any shape, dtype and
// layout (narrowed, permuted or broadcast views of a larger tensor), with arguments that are
// now and then wrong; or a session of paged-cache calls (fuzz_cache.cpp), or an op's
// gradients against finite differences (fuzz_grad.cpp). Beside the op runs a
// model in double precision over the operands' values. Where the model says the call is valid
// it must run and match (exactly for integer results, within a rounding bound for float
// ones); where it says the call is invalid it must raise a wick::Error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_wick.h"
#include "ops/ops.h"

namespace wick::fuzz {

namespace {

constexpr DType kAll[] = {DType::U8,   DType::U32, DType::I16, DType::I32, DType::I64,
                          DType::BF16, DType::F16, DType::F32, DType::F64};
constexpr DType kFloats[] = {DType::BF16, DType::F16, DType::F32, DType::F64};
constexpr DType kIndexTypes[] = {DType::U32, DType::I32, DType::I64};

bool is_index(DType dt) { return dt == DType::U32 || dt == DType::I32 || dt == DType::I64; }

// `usual`, or now and then (one input in `one_in`) any dtype: a mismatch the op must refuse.
DType mostly(FuzzedDataProvider& in, DType usual, int one_in) {
  return in.ConsumeIntegralInRange<int>(0, one_in - 1) == one_in - 1 ? in.PickValueInArray(kAll) : usual;
}
// An index dtype, now and then (one input in 12) any dtype.
DType pick_index_dtype(FuzzedDataProvider& in) {
  return in.ConsumeIntegralInRange<int>(0, 11) == 11 ? in.PickValueInArray(kAll) : in.PickValueInArray(kIndexTypes);
}

// An operand: the tensor, and its values in row-major order as the model reads them.
struct Operand {
  Tensor t;
  std::vector<size_t> dims;
  std::vector<double> v;
};

// A tensor of `dims` and `dt` whose values are integers in [lo, hi] (the dtype's conversion
// applied: an unsigned dtype holds 0 for a negative value), laid out as the input picks: a
// window (narrow) of a larger tensor stored with its dims in another order (permute), and
// size-1 dims broadcast to their size (stride 0).
Operand make_operand(FuzzedDataProvider& in, const std::vector<size_t>& dims, DType dt, int64_t lo = -4,
                     int64_t hi = 4) {
  const View view = pick_view(in, dims, 8, 2);
  std::vector<double> values(count(view.leaf));
  for (auto& x : values) x = static_cast<double>(in.ConsumeIntegralInRange<int64_t>(lo, hi));
  const Tensor t = view.apply(cast(Tensor::from_vec(values, Shape(view.leaf), kCpu), dt));
  return Operand{t, dims, t.to_f64_vec()};
}

std::vector<size_t> pick_dims(FuzzedDataProvider& in, size_t max_rank = 4, size_t max_dim = 4) {
  std::vector<size_t> dims(in.ConsumeIntegralInRange<size_t>(0, max_rank));
  for (auto& d : dims)
    d = in.ConsumeIntegralInRange<int>(0, 15) == 15 ? 0 : in.ConsumeIntegralInRange<size_t>(1, max_dim);
  return dims;
}

// A dim argument as a user might pass it: in range (sometimes negative) or not.
int64_t pick_dim_arg(FuzzedDataProvider& in, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  return in.ConsumeIntegralInRange<int64_t>(-r - 1, r);
}
std::optional<size_t> normalise(int64_t dim, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r) return std::nullopt;
  return static_cast<size_t>(dim < 0 ? dim + r : dim);
}

// An integer value as the dtype holds it: wrapped modulo 2^bits (two's complement).
double wrap(double x, DType dt) {
  if (is_float(dt)) return x;
  const auto w = static_cast<uint64_t>(static_cast<int64_t>(x));
  switch (dt) {
    case DType::U8:
      return static_cast<double>(static_cast<uint8_t>(w));
    case DType::U32:
      return static_cast<double>(static_cast<uint32_t>(w));
    case DType::I16:
      return static_cast<double>(static_cast<int16_t>(w));
    case DType::I32:
      return static_cast<double>(static_cast<int32_t>(w));
    case DType::I64:
      return static_cast<double>(static_cast<int64_t>(w));
    default:
      return x;
  }
}

// Whether got is want as dtype dt can hold it: the same integer, or a float within the
// rounding of one result of that dtype computed in f32 (f64 for f64).
bool close(double got, double want, DType dt) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!is_float(dt)) return got == want;
  const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : dt == DType::F16 ? 2e-3 : 1.6e-2;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

// The call being checked, with its operands, for the messages of expect().
std::string g_call;

std::string describe(const Operand& x) {
  const Layout& l = x.t.layout();
  return to_string(l.shape()) + " " + dtype_name(x.t.dtype()) + " (stride " + to_string(l.stride()) + ", offset " +
         std::to_string(l.start_offset()) + ")";
}

void expect(const Tensor& r, const std::vector<size_t>& dims, DType dt, const std::vector<double>& want) {
  if (!(r.shape() == Shape(dims)))
    fail(g_call + ": shape " + to_string(r.shape()) + ", the model's " + to_string(Shape(dims)));
  if (r.dtype() != dt) fail(g_call + ": dtype " + dtype_name(r.dtype()) + ", the model's " + dtype_name(dt));
  const std::vector<double> got = r.to_f64_vec();
  for (size_t i = 0; i < got.size(); ++i)
    if (!close(got[i], want[i], dt))
      fail(g_call + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", the model says " +
           std::to_string(want[i]));
}

// The call's outcome against the model's verdict: a valid call must run, an invalid one must
// raise a wick::Error. `what` names the call and its arguments besides the operands. Returns
// whether it ran.
template <class F>
bool outcome(const std::string& what, std::initializer_list<const Operand*> operands, bool valid, F&& call) {
  g_call = what + " on";
  for (const Operand* x : operands) g_call += " " + describe(*x) + ";";
  std::string error;
  bool ok = true;
  try {
    call();
  } catch (const Error& e) {
    ok = false;
    error = e.what();
  }
  if (ok != valid) fail(g_call + (ok ? " an invalid call ran" : " a valid call raised: " + error));
  return ok;
}

// numpy broadcasting of two shapes (aligned from the right); nullopt when they do not.
std::optional<std::vector<size_t>> broadcast(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  std::vector<size_t> out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}
// Element `i` of `out` read from an operand of `dims` broadcast to it.
size_t source(size_t i, const std::vector<size_t>& out, const std::vector<size_t>& dims) {
  std::vector<size_t> idx = unravel(i, out);
  std::vector<size_t> src(idx.end() - static_cast<std::ptrdiff_t>(dims.size()), idx.end());
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] == 1) src[k] = 0;
  return ravel(src, dims);
}
// Shapes that broadcast to `out` (a suffix of it with some dims 1), now and then one that
// may not.
std::vector<size_t> partner_dims(FuzzedDataProvider& in, const std::vector<size_t>& out) {
  std::vector<size_t> d(
      out.begin() + in.ConsumeIntegralInRange<std::ptrdiff_t>(0, static_cast<std::ptrdiff_t>(out.size())), out.end());
  for (auto& x : d)
    if (in.ConsumeIntegralInRange<int>(0, 3) == 3) x = 1;
  if (!d.empty() && in.ConsumeIntegralInRange<int>(0, 9) == 9)
    d[in.ConsumeIntegralInRange<size_t>(0, d.size() - 1)] = 3;
  return d;
}

// ---- the ops ------------------------------------------------------------------------------

// The binary ops: wick's, and the model's on two values (integer: the dtype is not a float).
struct BinaryOp {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&);
  double (*model)(double, double, bool integer);
  bool compare;  // a U8 result
};
const BinaryOp kBinary[] = {
    {"add", add, [](double x, double y, bool) { return x + y; }, false},
    {"sub", sub, [](double x, double y, bool) { return x - y; }, false},
    {"mul", mul, [](double x, double y, bool) { return x * y; }, false},
    {"div", div, [](double x, double y, bool integer) { return !integer ? x / y
                                                               : y == 0 ? 0
                                                                        : std::trunc(x / y); },
     false},
    {"maximum", maximum, [](double x, double y, bool) { return std::max(x, y); }, false},
    {"minimum", minimum, [](double x, double y, bool) { return std::min(x, y); }, false},
    {"eq", eq, [](double x, double y, bool) { return double(x == y); }, true},
    {"ne", ne, [](double x, double y, bool) { return double(x != y); }, true},
    {"lt", lt, [](double x, double y, bool) { return double(x < y); }, true},
    {"le", le, [](double x, double y, bool) { return double(x <= y); }, true},
    {"gt", gt, [](double x, double y, bool) { return double(x > y); }, true},
    {"ge", ge, [](double x, double y, bool) { return double(x >= y); }, true},
};

// A binary op on operands that broadcast together (now and then not), of one dtype (now and
// then two); integer division by zero is an error.
void binary(FuzzedDataProvider& in) {
  const std::vector<size_t> out = pick_dims(in);
  const DType dt = in.PickValueInArray(kAll);
  const DType dt2 = mostly(in, dt, 10);
  const Operand a = make_operand(in, partner_dims(in, out), dt), b = make_operand(in, partner_dims(in, out), dt2);
  const BinaryOp& f = in.PickValueInArray(kBinary);
  const bool integer = !is_float(dt), division = std::string(f.name) == "div";
  const auto shape = broadcast(a.dims, b.dims);
  bool zero_divisor = false;
  std::vector<double> want(shape ? count(*shape) : 0);
  for (size_t i = 0; i < want.size(); ++i) {
    const double x = a.v[source(i, *shape, a.dims)], y = b.v[source(i, *shape, b.dims)];
    zero_divisor |= division && integer && y == 0;
    want[i] = f.compare ? f.model(x, y, integer) : wrap(f.model(x, y, integer), dt);
  }
  Tensor r;
  if (!outcome(f.name, {&a, &b}, shape && dt == dt2 && !zero_divisor, [&] { r = f.op(a.t, b.t); })) return;
  expect(r, *shape, f.compare ? DType::U8 : dt, want);
}

// Scalar arithmetic, the scalar on either side: float tensors take one affine pass, other
// dtypes the binary op against the scalar converted as cast converts (truncated toward zero,
// saturated at the dtype's bounds).
void scalar_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const double s = in.PickValueInArray({2.0, -1.0, 0.5, 0.0, 300.0, -3.5});
  const int op = in.ConsumeIntegralInRange<int>(0, 3);
  const bool left = in.ConsumeBool();  // s op x instead of x op s
  static const char* const kNames[] = {"+", "-", "*", "/"};
  double c = s;  // the scalar as the tensor's dtype holds it (of the bounds, only U8's and 0 matter here)
  if (!is_float(dt))
    c = std::min(std::max(std::trunc(s), dt == DType::U8 || dt == DType::U32 ? 0.0 : -INFINITY),
                 dt == DType::U8 ? 255.0 : INFINITY);
  bool zero_divisor = false;
  std::vector<double> want(x.v.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = left ? c : x.v[i], b = left ? x.v[i] : c;
    zero_divisor |= op == 3 && !is_float(dt) && b == 0;
    want[i] = wrap(op == 0         ? a + b
                   : op == 1       ? a - b
                   : op == 2       ? a * b
                   : !is_float(dt) ? (b == 0 ? 0 : std::trunc(a / b))
                                   : a / b,
                   dt);
  }
  Tensor r;
  if (!outcome(
          left ? std::to_string(s) + " " + kNames[op] + " x" : "x " + std::string(kNames[op]) + " " + std::to_string(s),
          {&x}, !zero_divisor, [&] {
            switch (op) {
              case 0:
                r = left ? s + x.t : x.t + s;
                break;
              case 1:
                r = left ? s - x.t : x.t - s;
                break;
              case 2:
                r = left ? s * x.t : x.t * s;
                break;
              default:
                r = left ? s / x.t : x.t / s;
                break;
            }
          }))
    return;
  expect(r, x.dims, dt, want);
}

void where_op(FuzzedDataProvider& in) {
  const std::vector<size_t> out = pick_dims(in);
  const DType dt = in.PickValueInArray(kAll);
  const DType cdt = mostly(in, DType::U8, 8);
  const Operand c = make_operand(in, partner_dims(in, out), cdt, 0, 1), a = make_operand(in, partner_dims(in, out), dt),
                b = make_operand(in, partner_dims(in, out), dt);
  std::optional<std::vector<size_t>> shape = broadcast(a.dims, b.dims);
  if (shape) shape = broadcast(c.dims, *shape);
  Tensor r;
  if (!outcome("where", {&c, &a, &b}, shape && cdt == DType::U8, [&] { r = where(c.t, a.t, b.t); })) return;
  std::vector<double> want(count(*shape));
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = c.v[source(i, *shape, c.dims)] != 0 ? a.v[source(i, *shape, a.dims)] : b.v[source(i, *shape, b.dims)];
  expect(r, *shape, dt, want);
}

// sum, mean, max, min over a list of dims (sometimes out of range or repeated), keepdim or not.
void reduction(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const size_t rank = x.dims.size();
  std::vector<int64_t> dims(in.ConsumeIntegralInRange<size_t>(0, rank + 1));
  for (auto& d : dims) d = pick_dim_arg(in, rank);
  const bool keepdim = in.ConsumeBool();
  const int op = in.ConsumeIntegralInRange<int>(0, 3);
  static const char* const kNames[] = {"sum", "mean", "max", "min"};
  std::vector<bool> reduced(rank);
  bool valid = op != 1 || is_float(dt);
  for (int64_t d : dims) {
    const auto k = normalise(d, rank);
    valid = valid && k && !reduced[*k];
    if (k) reduced[*k] = true;
  }
  std::vector<size_t> kept_dims, out_dims;
  size_t cols = 1;
  for (size_t k = 0; k < rank; ++k) {
    if (!reduced[k]) kept_dims.push_back(x.dims[k]);
    if (!reduced[k] || keepdim) out_dims.push_back(reduced[k] ? 1 : x.dims[k]);
    if (reduced[k]) cols *= x.dims[k];
  }
  const size_t rows = count(kept_dims);
  valid = valid && (op < 2 || cols > 0 || rows == 0);  // max / min of nothing
  Tensor r;
  if (!outcome(std::string(kNames[op]) + " over " + to_string(dims) + (keepdim ? ", keepdim" : ""), {&x}, valid, [&] {
        const DimList list(dims);
        r = op == 0   ? sum(x.t, list, keepdim)
            : op == 1 ? mean(x.t, list, keepdim)
            : op == 2 ? max(x.t, list, keepdim)
                      : min(x.t, list, keepdim);
      }))
    return;
  std::vector<double> want(rows, op == 2 ? -INFINITY : op == 3 ? INFINITY : 0.0);
  for (size_t i = 0; i < x.v.size(); ++i) {
    const std::vector<size_t> idx = unravel(i, x.dims);
    std::vector<size_t> kept;
    for (size_t k = 0; k < rank; ++k)
      if (!reduced[k]) kept.push_back(idx[k]);
    double& w = want[ravel(kept, kept_dims)];
    w = op < 2 ? w + x.v[i] : op == 2 ? std::max(w, x.v[i]) : std::min(w, x.v[i]);
  }
  for (auto& w : want) w = op == 1 ? w / static_cast<double>(cols) : wrap(w, dt);
  expect(r, out_dims, dt, want);
}

// argmax / argmin (the first best) and cumsum along one dim.
void along_dim(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const size_t rank = x.dims.size();
  const int64_t dim = pick_dim_arg(in, rank);
  const int op = in.ConsumeIntegralInRange<int>(0, 2);
  const bool keepdim = in.ConsumeBool();
  const auto k = normalise(dim, rank);
  const char* name = op == 0 ? "argmax" : op == 1 ? "argmin" : "cumsum";
  bool valid = k.has_value();
  std::vector<size_t> out_dims = x.dims;
  if (k && op < 2) {
    if (keepdim)
      out_dims[*k] = 1;
    else
      out_dims.erase(out_dims.begin() + static_cast<std::ptrdiff_t>(*k));
    valid = x.dims[*k] > 0 || count(out_dims) == 0;  // the best of nothing, for some row
  }
  Tensor r;
  if (!outcome(std::string(name) + " dim " + std::to_string(dim) + (keepdim ? ", keepdim" : ""), {&x}, valid, [&] {
        r = op == 0 ? argmax(x.t, dim, keepdim) : op == 1 ? argmin(x.t, dim, keepdim) : cumsum(x.t, dim);
      }))
    return;
  std::vector<double> want(count(out_dims), 0.0), best(want.size(), 0.0);
  std::vector<bool> seen(want.size());
  for (size_t i = 0; i < x.v.size(); ++i) {
    std::vector<size_t> idx = unravel(i, x.dims);
    const size_t j = idx[*k];
    if (op == 2) {
      double s = 0;
      for (size_t t = 0; t <= j; ++t) {
        idx[*k] = t;
        s += x.v[ravel(idx, x.dims)];
      }
      want[i] = wrap(s, dt);
      continue;
    }
    if (keepdim)
      idx[*k] = 0;
    else
      idx.erase(idx.begin() + static_cast<std::ptrdiff_t>(*k));
    const size_t o = ravel(idx, out_dims);
    if (!seen[o] || (op == 0 ? x.v[i] > best[o] : x.v[i] < best[o]))
      seen[o] = true, best[o] = x.v[i], want[o] = static_cast<double>(j);
  }
  expect(r, out_dims, op == 2 ? dt : DType::I64, want);
}

void softmax_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const int64_t dim = pick_dim_arg(in, x.dims.size());
  const bool log_form = in.ConsumeBool();
  const auto k = normalise(dim, x.dims.size());
  const char* name = log_form ? "log_softmax" : "softmax";
  Tensor r;
  if (!outcome(std::string(name) + " dim " + std::to_string(dim), {&x}, is_float(dt) && k,
               [&] { r = log_form ? log_softmax(x.t, dim) : softmax(x.t, dim); }))
    return;
  std::vector<double> want(x.v.size());
  for (size_t i = 0; i < x.v.size(); ++i) {
    std::vector<size_t> idx = unravel(i, x.dims);
    double m = -INFINITY, s = 0;
    for (size_t t = 0; t < x.dims[*k]; ++t) idx[*k] = t, m = std::max(m, x.v[ravel(idx, x.dims)]);
    for (size_t t = 0; t < x.dims[*k]; ++t) idx[*k] = t, s += std::exp(x.v[ravel(idx, x.dims)] - m);
    want[i] = log_form ? x.v[i] - m - std::log(s) : std::exp(x.v[i] - m) / s;
  }
  expect(r, x.dims, dt, want);
}

void norm_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kFloats);
  const DType pdt = mostly(in, dt, 10);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const size_t d = x.dims.empty() ? 1 : x.dims.back();
  const size_t pd = in.ConsumeIntegralInRange<int>(0, 9) == 9 ? in.ConsumeIntegralInRange<size_t>(0, 5) : d;
  const Operand w = make_operand(in, {pd}, pdt), b = make_operand(in, {pd}, pdt);
  const double eps = in.PickValueInArray({1e-5, 1e-2, 1.0});
  const bool layer = in.ConsumeBool();
  const char* name = layer ? "layer_norm" : "rms_norm";
  Tensor r;
  if (!outcome(std::string(name) + " eps " + std::to_string(eps), {&x, &w, &b}, !x.dims.empty() && pdt == dt && pd == d,
               [&] { r = layer ? layer_norm(x.t, w.t, b.t, eps) : rms_norm(x.t, w.t, eps); }))
    return;
  std::vector<double> want(x.v.size());
  for (size_t row = 0; d > 0 && row < x.v.size() / d; ++row) {
    const double* xr = x.v.data() + row * d;
    double mu = 0, sq = 0;
    for (size_t j = 0; j < d; ++j) mu += xr[j] / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j) sq += (layer ? (xr[j] - mu) * (xr[j] - mu) : xr[j] * xr[j]) / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      want[row * d + j] =
          layer ? (xr[j] - mu) / std::sqrt(sq + eps) * w.v[j] + b.v[j] : xr[j] / std::sqrt(sq + eps) * w.v[j];
  }
  expect(r, x.dims, dt, want);
}

void matmul_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const size_t m = in.ConsumeIntegralInRange<size_t>(0, 5), k = in.ConsumeIntegralInRange<size_t>(0, 5),
               n = in.ConsumeIntegralInRange<size_t>(0, 5);
  const std::vector<size_t> batch = pick_dims(in, 2, 3);
  std::vector<size_t> ad = partner_dims(in, batch), bd = partner_dims(in, batch);
  ad.insert(ad.end(), {m, k});
  bd.insert(bd.end(), {in.ConsumeIntegralInRange<int>(0, 9) == 9 ? k + 1 : k, n});
  // now and then a rank below 2
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) ad.erase(ad.begin(), ad.end() - 1);
  const Operand a = make_operand(in, ad, dt), b = make_operand(in, bd, dt);
  const size_t ra = ad.size(), rb = bd.size();
  std::optional<std::vector<size_t>> shape;
  if (ra >= 2 && rb >= 2 && ad[ra - 1] == bd[rb - 2])
    shape = broadcast(std::vector<size_t>(ad.begin(), ad.end() - 2), std::vector<size_t>(bd.begin(), bd.end() - 2));
  Tensor r;
  if (!outcome("matmul", {&a, &b}, shape && is_float(dt), [&] { r = matmul(a.t, b.t); })) return;
  const std::vector<size_t> bo = *shape;
  std::vector<size_t> out = bo;
  out.insert(out.end(), {m, n});
  const std::vector<size_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  std::vector<double> want(count(out), 0.0);
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t bi = i / (m * n), row = i / n % m, col = i % n;
    const size_t sa = source(bi, bo, abatch), sb = source(bi, bo, bbatch);
    for (size_t t = 0; t < k; ++t) want[i] += a.v[(sa * m + row) * k + t] * b.v[(sb * k + t) * n + col];
  }
  expect(r, out, dt, want);
}

void cat_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const std::vector<size_t> dims = pick_dims(in);
  const int64_t dim = pick_dim_arg(in, dims.size());
  const auto k = normalise(dim, dims.size());
  std::vector<Operand> parts(in.ConsumeIntegralInRange<size_t>(0, 3));
  bool valid = k && !parts.empty();
  size_t total = 0;
  for (auto& p : parts) {
    std::vector<size_t> d = dims;
    if (k) d[*k] = in.ConsumeIntegralInRange<size_t>(0, 3);
    if (in.ConsumeIntegralInRange<int>(0, 11) == 11 && !d.empty())
      d[in.ConsumeIntegralInRange<size_t>(0, d.size() - 1)] += 1;
    const DType pdt = mostly(in, dt, 12);
    p = make_operand(in, d, pdt);
    // the first tensor sets the dtype and the other dims
    valid = valid && pdt == parts[0].t.dtype() && d.size() == parts[0].dims.size();
    for (size_t j = 0; valid && j < d.size(); ++j) valid = j == *k || d[j] == parts[0].dims[j];
    if (k) total += d[*k];
  }
  std::vector<Tensor> ts;
  for (const auto& p : parts) ts.push_back(p.t);
  std::string what = "cat dim " + std::to_string(dim) + " of";
  for (const auto& p : parts) what += " " + describe(p) + ";";
  Tensor r;
  if (!outcome(what, {}, valid, [&] { r = cat(ts, dim); })) return;
  std::vector<size_t> out = parts[0].dims;
  out[*k] = total;
  std::vector<double> want(count(out));
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<size_t> idx = unravel(i, out);
    size_t p = 0;
    while (idx[*k] >= parts[p].dims[*k]) idx[*k] -= parts[p++].dims[*k];
    want[i] = parts[p].v[ravel(idx, parts[p].dims)];
  }
  expect(r, out, parts[0].t.dtype(), want);
}

// gather, scatter_add, one_hot: indices sometimes out of range, shapes sometimes too large.
void index_ops(FuzzedDataProvider& in) {
  const int op = in.ConsumeIntegralInRange<int>(0, 2);
  const DType dt = in.PickValueInArray(kAll), it = pick_index_dtype(in);
  if (op == 2) {
    const size_t classes = in.ConsumeIntegralInRange<size_t>(0, 5);
    const Operand ids = make_operand(in, pick_dims(in, 3), it, -1, static_cast<int64_t>(classes));
    bool valid = is_index(it);
    for (double v : ids.v) valid = valid && v >= 0 && v < static_cast<double>(classes);
    Tensor r;
    if (!outcome("one_hot of " + std::to_string(classes) + " classes", {&ids}, valid,
                 [&] { r = one_hot(ids.t, classes, dt); }))
      return;
    std::vector<size_t> out = ids.dims;
    out.push_back(classes);
    std::vector<double> want(count(out));
    for (size_t i = 0; i < want.size(); ++i) want[i] = ids.v[i / classes] == static_cast<double>(i % classes);
    expect(r, out, dt, want);
    return;
  }
  const Operand x = make_operand(in, pick_dims(in, 3), dt);
  const size_t rank = x.dims.size();
  const int64_t dim = pick_dim_arg(in, rank);
  const auto k = normalise(dim, rank);
  std::vector<size_t> id = x.dims;  // the index's dims: at most x's (and src's), any size along dim
  for (auto& d : id) d = in.ConsumeIntegralInRange<size_t>(0, d + (in.ConsumeIntegralInRange<int>(0, 9) == 9));
  if (k) id[*k] = in.ConsumeIntegralInRange<size_t>(0, 4);
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) id.push_back(1);
  const int64_t size = k ? static_cast<int64_t>(x.dims[*k]) : 1;
  const Operand index = make_operand(in, id, it, -1, size);
  bool valid = k && is_index(it) && id.size() == rank;
  for (size_t d = 0; valid && d < rank; ++d) valid = d == *k || id[d] <= x.dims[d];
  for (double v : index.v) valid = valid && v >= 0 && v < static_cast<double>(size);
  if (op == 0) {
    Tensor r;
    if (!outcome("gather dim " + std::to_string(dim), {&x, &index}, valid, [&] { r = gather(x.t, dim, index.t); }))
      return;
    std::vector<double> want(index.v.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::vector<size_t> c = unravel(i, id);
      c[*k] = static_cast<size_t>(index.v[i]);
      want[i] = x.v[ravel(c, x.dims)];
    }
    expect(r, id, dt, want);
    return;
  }
  std::vector<size_t> sd = x.dims;  // src: x's dims, at least the index's
  if (rank == id.size())
    for (size_t d = 0; d < rank; ++d) sd[d] = std::max(sd[d], id[d]);
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15 && !sd.empty()) sd[0] = 0;
  const DType sdt = mostly(in, dt, 12);
  const Operand src = make_operand(in, sd, sdt);
  for (size_t d = 0; valid && d < rank; ++d) valid = id[d] <= sd[d];
  valid = valid && is_float(dt) && sdt == dt;
  Tensor r;
  if (!outcome("scatter_add dim " + std::to_string(dim), {&x, &index, &src}, valid,
               [&] { r = scatter_add(x.t, dim, index.t, src.t); }))
    return;
  std::vector<double> want = x.v;
  for (size_t i = 0; i < index.v.size(); ++i) {
    std::vector<size_t> c = unravel(i, id);
    const double s = src.v[ravel(c, sd)];
    c[*k] = static_cast<size_t>(index.v[i]);
    want[ravel(c, x.dims)] += s;
  }
  expect(r, x.dims, dt, want);
}

void triangle(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const int64_t diagonal = in.ConsumeIntegralInRange<int>(0, 15) == 15 ? in.ConsumeIntegral<int64_t>()
                                                                       : in.ConsumeIntegralInRange<int64_t>(-5, 5);
  const bool lower = in.ConsumeBool();
  const char* name = lower ? "tril" : "triu";
  const size_t rank = x.dims.size();
  Tensor r;
  if (!outcome(std::string(name) + " diagonal " + std::to_string(diagonal), {&x}, rank >= 2,
               [&] { r = lower ? tril(x.t, diagonal) : triu(x.t, diagonal); }))
    return;
  std::vector<double> want = x.v;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<size_t> idx = unravel(i, x.dims);
    const __int128 off = static_cast<__int128>(idx[rank - 1]) - static_cast<__int128>(idx[rank - 2]);
    if (lower ? off > diagonal : off < diagonal) want[i] = 0;
  }
  expect(r, x.dims, dt, want);
}

void loss(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll), it = pick_index_dtype(in);
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, 4), c = in.ConsumeIntegralInRange<size_t>(0, 4);
  std::vector<size_t> xd{n, c};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) xd.push_back(1);
  const Operand x = make_operand(in, xd, dt);
  std::vector<size_t> td{in.ConsumeIntegralInRange<int>(0, 15) == 15 ? n + 1 : n};
  const Operand targets = make_operand(in, td, it, -2, static_cast<int64_t>(c));
  const std::optional<int64_t> ignore =
      in.ConsumeBool() ? std::optional<int64_t>(in.ConsumeIntegralInRange<int64_t>(-2, 3)) : std::nullopt;
  const bool from_logits = in.ConsumeBool();
  const char* name = from_logits ? "cross_entropy" : "nll_loss";
  bool valid = is_float(dt) && xd.size() == 2 && is_index(it) && td[0] == n;
  double total = 0, used = 0;
  for (size_t i = 0; valid && i < n; ++i) {
    const double t = targets.v[i];
    if (ignore && t == static_cast<double>(*ignore)) continue;
    valid = t >= 0 && t < static_cast<double>(c);
    if (!valid) break;
    const double* row = x.v.data() + i * c;
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < c; ++j) m = std::max(m, row[j]);
    for (size_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
    total += from_logits ? row[static_cast<size_t>(t)] - m - std::log(s) : row[static_cast<size_t>(t)];
    used += 1;
  }
  Tensor r;
  if (!outcome(std::string(name) + (ignore ? " ignoring " + std::to_string(*ignore) : ""), {&x, &targets}, valid,
               [&] { r = from_logits ? cross_entropy(x.t, targets.t, ignore) : nll_loss(x.t, targets.t, ignore); }))
    return;
  expect(r, {}, dt, {used > 0 ? -total / used : NAN});
}

// clamp and the float maps.
void unary(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const int op = in.ConsumeIntegralInRange<int>(0, 15);
  if (op == 0) {
    const double lo = in.ConsumeIntegralInRange<int>(-5, 5) + (in.ConsumeBool() ? 0.5 : 0.0),
                 hi = in.ConsumeIntegralInRange<int>(-5, 5) + (in.ConsumeBool() ? 0.5 : 0.0);
    Tensor r;
    if (!outcome("clamp to [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", {&x}, lo <= hi,
                 [&] { r = clamp(x.t, lo, hi); }))
      return;
    // integer tensors clamp to the bounds rounded toward the inside, within the dtype's range
    const double least = dt == DType::U8 || dt == DType::U32 ? 0 : -INFINITY;
    const double l = is_float(dt) ? lo : std::max(std::ceil(lo), least),
                 h = is_float(dt) ? hi : std::max(std::floor(hi), least);
    std::vector<double> want = x.v;
    for (auto& v : want) v = std::min(std::max(v, l), h);
    if (!is_float(dt) && l > h) return;  // no integer inside: not specified
    expect(r, x.dims, dt, want);
    return;
  }
  struct Map {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*model)(double);
  };
  static const Map kMaps[] = {
      {"exp", exp, [](double v) { return std::exp(v); }},
      {"log", log, [](double v) { return std::log(v); }},
      {"sqrt", sqrt, [](double v) { return std::sqrt(v); }},
      {"tanh", tanh, [](double v) { return std::tanh(v); }},
      {"sigmoid", sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"relu", relu, [](double v) { return std::max(v, 0.0); }},
      {"abs", abs, [](double v) { return std::abs(v); }},
      {"neg", neg, [](double v) { return -v; }},
      {"sin", sin, [](double v) { return std::sin(v); }},
      {"cos", cos, [](double v) { return std::cos(v); }},
      {"silu", silu, [](double v) { return v / (1 + std::exp(-v)); }},
      {"gelu", gelu,
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }},
      {"gelu_erf", gelu_erf, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
  };
  // the two maps with parameters
  const double e = in.PickValueInArray({2.0, 0.5, -1.0, 3.0}), mul = in.PickValueInArray({0.5, -2.0, 0.0}),
               add = in.PickValueInArray({1.0, -0.25});
  const bool pow_map = op == 14, affine_map = op == 15;
  const std::string name = pow_map      ? "powf " + std::to_string(e)
                           : affine_map ? "affine " + std::to_string(mul) + ", " + std::to_string(add)
                                        : kMaps[op - 1].name;
  Tensor r;
  if (!outcome(name, {&x}, is_float(dt), [&] {
        r = pow_map ? powf(x.t, e) : affine_map ? affine(x.t, mul, add) : kMaps[op - 1].op(x.t);
      }))
    return;
  std::vector<double> want = x.v;
  for (auto& v : want) v = pow_map ? std::pow(v, e) : affine_map ? v * mul + add : kMaps[op - 1].model(v);
  expect(r, x.dims, dt, want);
}

// rope over positions whose shape is sometimes not a leading part of x's, rotary_dim
// sometimes odd or too large.
void rope_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll), it = pick_index_dtype(in);
  std::vector<size_t> xd = pick_dims(in);
  if (!xd.empty() && in.ConsumeBool()) xd.back() = 2 * in.ConsumeIntegralInRange<size_t>(0, 4);
  const Operand x = make_operand(in, xd, dt);
  std::vector<size_t> pd(
      xd.begin(), xd.begin() + in.ConsumeIntegralInRange<std::ptrdiff_t>(0, static_cast<std::ptrdiff_t>(xd.size())));
  if (!pd.empty() && in.ConsumeIntegralInRange<int>(0, 11) == 11) pd.back() += 1;
  const Operand pos = make_operand(in, pd, it, -3, 100);
  const size_t head = xd.empty() ? 0 : xd.back(), rotary = in.ConsumeIntegralInRange<size_t>(0, head + 1);
  const size_t rd = rotary ? rotary : head;
  const double base = in.PickValueInArray({10000.0, 500000.0, 2.0, 1.0});
  const bool interleaved = in.ConsumeBool();
  bool valid = is_float(dt) && is_index(it) && pd.size() < xd.size() && rd % 2 == 0 && rd <= head;
  for (size_t d = 0; valid && d < pd.size(); ++d) valid = pd[d] == xd[d];
  Tensor r;
  if (!outcome("rope rotary_dim " + std::to_string(rotary) + " base " + std::to_string(base) +
                   (interleaved ? " interleaved" : ""),
               {&x, &pos}, valid, [&] {
                 r = rope(x.t, pos.t, base, interleaved ? RopeStyle::Interleaved : RopeStyle::HalfRotation, rotary);
               }))
    return;
  std::vector<double> want = x.v;
  const size_t per_position = pos.v.empty() ? 0 : x.v.size() / pos.v.size();
  for (size_t h0 = 0; head > 0 && h0 < want.size(); h0 += head) {
    const double p = pos.v[h0 / per_position];
    for (size_t i = 0; i < rd / 2; ++i) {
      const double angle = p * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rd));
      const size_t ia = h0 + (interleaved ? 2 * i : i), ib = h0 + (interleaved ? 2 * i + 1 : i + rd / 2);
      want[ia] = x.v[ia] * std::cos(angle) - x.v[ib] * std::sin(angle);
      want[ib] = x.v[ia] * std::sin(angle) + x.v[ib] * std::cos(angle);
    }
  }
  expect(r, xd, dt, want);
}

// varlen_positions over cumulative lengths that are now and then not cumulative, of another
// count than the keys', or shorter than the queries; sometimes a total no memory can hold.
void positions_op(FuzzedDataProvider& in) {
  const DType it = pick_index_dtype(in);
  const size_t batch = in.ConsumeIntegralInRange<size_t>(0, 4);
  auto cumulative = [&](size_t entries) {
    std::vector<int64_t> cu(entries);
    for (size_t i = 1; i < entries; ++i) cu[i] = cu[i - 1] + in.ConsumeIntegralInRange<int64_t>(0, 5);
    // now and then an entry one less, or (I64) 2^40 more: a total no memory can hold
    if (entries > 0 && in.ConsumeIntegralInRange<int>(0, 9) == 9)
      cu[in.ConsumeIntegralInRange<size_t>(0, entries - 1)] +=
          it == DType::I64 && in.ConsumeIntegralInRange<int>(0, 3) == 3 ? int64_t{1} << 40 : -1;
    return cu;
  };
  const std::vector<int64_t> q = cumulative(batch + 1);
  const bool keys = in.ConsumeBool();
  const std::vector<int64_t> k = keys ? cumulative(batch + 1 + (in.ConsumeIntegralInRange<int>(0, 11) == 11)) : q;
  auto tensor = [&](const std::vector<int64_t>& cu) { return cast(Tensor::from_vec(cu, Shape{cu.size()}, kCpu), it); };
  const Tensor tq = tensor(q), tk = tensor(k);
  auto cumulative_from_0 = [&](const Tensor& t) {
    const std::vector<double> v = t.to_f64_vec();
    bool ok = !v.empty() && v[0] == 0;
    for (size_t i = 1; ok && i < v.size(); ++i) ok = v[i] >= v[i - 1];
    return ok;
  };
  bool valid = is_index(it) && cumulative_from_0(tq) && cumulative_from_0(tk) && k.size() == q.size();
  const std::vector<double> qv = tq.to_f64_vec(), kv = tk.to_f64_vec();
  std::vector<double> want;
  bool huge = false;
  for (size_t b = 0; valid && b + 1 < qv.size(); ++b) {
    const double sq = qv[b + 1] - qv[b], sk = kv[b + 1] - kv[b];
    valid = sk >= sq;
    huge |= sq > 1e6;
    for (double i = 0; valid && !huge && i < sq; ++i) want.push_back(sk - sq + i);
  }
  g_call = "varlen_positions of " + to_string(Shape{q.size()}) + (keys ? " with keys" : "");
  Tensor r;
  const bool ran = runs([&] { r = keys ? varlen_positions(tq, tk) : varlen_positions(tq); });
  if (huge) {  // a valid call whose result cannot be held: it must refuse with a wick::Error
    if (ran) fail(g_call + ": a result of more than 2^40 positions was made");
    return;
  }
  if (ran != valid) fail(g_call + (ran ? ": an invalid call ran" : ": a valid call raised an error"));
  if (ran) expect(r, {want.size()}, DType::I64, want);
}

// embedding rows, ids sometimes out of range or of a non-index dtype, the table sometimes
// not of rank 2.
void embedding_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll), it = pick_index_dtype(in);
  std::vector<size_t> td{in.ConsumeIntegralInRange<size_t>(0, 5), in.ConsumeIntegralInRange<size_t>(0, 4)};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15) td.pop_back();
  const Operand table = make_operand(in, td, dt);
  const int64_t vocab = static_cast<int64_t>(td[0]);
  const Operand ids = make_operand(in, pick_dims(in, 3), it, in.ConsumeIntegralInRange<int>(0, 7) == 7 ? -1 : 0, vocab);
  bool valid = td.size() == 2 && is_index(it);
  for (double v : ids.v) valid = valid && v >= 0 && v < static_cast<double>(vocab);
  Tensor r;
  if (!outcome("embedding", {&ids, &table}, valid, [&] { r = embedding(ids.t, table.t); })) return;
  std::vector<size_t> out = ids.dims;
  out.push_back(td[1]);
  std::vector<double> want;
  for (double id : ids.v)
    for (size_t j = 0; j < td[1]; ++j) want.push_back(table.v[static_cast<size_t>(id) * td[1] + j]);
  expect(r, out, dt, want);
}

// dropout: each element 0 or x / (1 - p); p sometimes outside [0, 1].
void dropout_op(FuzzedDataProvider& in) {
  const DType dt = in.PickValueInArray(kAll);
  const Operand x = make_operand(in, pick_dims(in), dt);
  const double p = in.PickValueInArray({0.0, 0.1, 0.5, 1.0, -0.1, 1.5, std::nan("")});
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  Tensor r;
  if (!outcome("dropout p " + std::to_string(p), {&x}, is_float(dt) && p >= 0 && p <= 1,
               [&] { r = dropout(x.t, p, seed); }))
    return;
  const std::vector<double> got = r.to_f64_vec();
  if (!(r.shape() == Shape(x.dims)) || r.dtype() != dt) fail(g_call + ": shape or dtype differs from x's");
  for (size_t i = 0; i < got.size(); ++i) {
    const double kept = p < 1 ? x.v[i] / (1 - p) : 0.0;
    if (got[i] != 0 && !close(got[i], kept, dt))
      fail(g_call + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", neither 0 nor " +
           std::to_string(kept));
  }
}

}  // namespace

void fuzz_ops(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 18)) {
    case 0:
      return binary(in);
    case 1:
      return where_op(in);
    case 2:
      return reduction(in);
    case 3:
      return along_dim(in);
    case 4:
      return softmax_op(in);
    case 5:
      return norm_op(in);
    case 6:
      return matmul_op(in);
    case 7:
      return cat_op(in);
    case 8:
      return index_ops(in);
    case 9:
      return triangle(in);
    case 10:
      return loss(in);
    case 11:
      return rope_op(in);
    case 12:
      return positions_op(in);
    case 13:
      return embedding_op(in);
    case 14:
      return dropout_op(in);
    case 15:
      return scalar_op(in);
    case 16:
      return fuzz_paged_cache(in);
    case 18:
      return fuzz_gradients(in);
    default:
      return unary(in);
  }
}

}  // namespace wick::fuzz
