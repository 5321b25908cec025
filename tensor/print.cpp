// Printing a tensor the way PyTorch does: a header line with shape, dtype and device, then
// the values nested by dims, every element in one column width so rows line up.
//   - floats: "%.4f"; "%.4e" when the finite nonzero magnitudes span more than 1000x, exceed
//     1e8 or fall below 1e-4; integral floats print as "3." (scientific past 1e8 or 1000x);
//     nan, inf and -inf as such. Integer dtypes print as integers.
//   - more than kThreshold elements: each dim shows its first and last kEdge entries with
//     "..." between (only those elements are read, so printing a large CUDA tensor copies
//     a few hundred elements, not the tensor).
//   - a row of the last dim wraps at kLineWidth characters; blocks of rank >= 3 are
//     separated by blank lines.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "tensor/tensor.h"

namespace wick {

namespace {

constexpr size_t kThreshold = 1000;  // more elements than this: summarize
constexpr size_t kEdge = 3;          // entries shown at each end of a summarized dim
constexpr size_t kLineWidth = 80;
constexpr size_t kGap = SIZE_MAX;    // marks the "..." in a list of shown indices

struct Value {
  double f = 0;   // float dtypes
  int64_t i = 0;  // integer dtypes
};

// The indices of a dim of size n that are printed, kGap where "..." goes.
std::vector<size_t> shown(size_t n, bool summarize) {
  std::vector<size_t> idx;
  if (summarize && n > 2 * kEdge) {
    for (size_t i = 0; i < kEdge; ++i) idx.push_back(i);
    idx.push_back(kGap);
    for (size_t i = n - kEdge; i < n; ++i) idx.push_back(i);
  } else {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

// The element at storage offset `off` (elements), read where it lives.
Value read_element(const Tensor& t, size_t off) {
  Value v;
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T x;
    if (t.device().is_cpu()) x = static_cast<const T*>(t.storage()->data())[off];
    else t.storage()->copy_to_host(off * sizeof(T), &x, sizeof(T));
    if constexpr (std::is_integral_v<T>) v.i = static_cast<int64_t>(x);
    else v.f = static_cast<double>(x);
  });
  return v;
}

// Calls leaf(offset) for each printed element in logical order and gap/close hooks for the
// structure; the same walk serves collecting and printing.
template <class Leaf, class Open, class Sep, class Close>
void walk(const Tensor& t, bool summarize, size_t k, size_t off, Leaf&& leaf, Open&& open, Sep&& sep,
          Close&& close) {
  if (k == t.rank()) {
    leaf(off, k);
    return;
  }
  open(k);
  std::vector<size_t> idx = shown(t.dims()[k], summarize);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] == kGap) leaf(kGap, k + 1);
    else walk(t, summarize, k + 1, off + idx[j] * static_cast<size_t>(t.stride()[k]), leaf, open, sep, close);
    if (j + 1 < idx.size()) sep(k);
  }
  close(k);
}

struct Formatter {
  bool is_float = true;
  bool int_mode = false;  // every finite float is integral
  bool sci = false;
  size_t width = 0;

  std::string raw(const Value& v) const {
    char buf[64];
    if (!is_float) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.i));
      return buf;
    }
    if (std::isnan(v.f)) return "nan";
    if (std::isinf(v.f)) return v.f > 0 ? "inf" : "-inf";
    if (sci) std::snprintf(buf, sizeof buf, "%.4e", v.f);
    else if (int_mode) std::snprintf(buf, sizeof buf, "%.0f.", v.f);
    else std::snprintf(buf, sizeof buf, "%.4f", v.f);
    return buf;
  }
  std::string operator()(const Value& v) const {
    const std::string s = raw(v);
    std::string out(width > s.size() ? width - s.size() : 0, ' ');
    out += s;
    return out;
  }
};

Formatter make_formatter(DType dt, const std::vector<Value>& vals) {
  Formatter f;
  f.is_float = is_float(dt);
  if (f.is_float) {
    double lo = INFINITY, hi = 0;
    bool integral = true;
    for (const Value& v : vals) {
      if (!std::isfinite(v.f)) continue;
      integral = integral && std::ceil(v.f) == v.f;
      const double a = std::fabs(v.f);
      if (a == 0) continue;
      lo = std::min(lo, a);
      hi = std::max(hi, a);
    }
    f.int_mode = integral;
    if (hi > 0) f.sci = hi / lo > 1000.0 || hi > 1e8 || (!integral && lo < 1e-4);
  }
  for (const Value& v : vals) f.width = std::max(f.width, f.raw(v).size());
  return f;
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "Tensor[empty]";
  std::string s = "Tensor[" + to_string(t.shape()) + ", " + dtype_name(t.dtype()) + ", " + to_string(t.device()) + "]\n";
  const bool summarize = t.elem_count() > kThreshold;
  const size_t r = t.rank();
  if (t.elem_count() == 0) return s + std::string(r, '[') + std::string(r, ']');
  auto none = [](size_t) {};
  std::vector<Value> vals;
  walk(t, summarize, 0, t.layout().start_offset(),
       [&](size_t off, size_t) { if (off != kGap) vals.push_back(read_element(t, off)); }, none, none, none);
  const Formatter fmt = make_formatter(t.dtype(), vals);

  size_t next = 0, line_start = s.size();
  walk(
      t, summarize, 0, t.layout().start_offset(),
      [&](size_t off, size_t depth) {
        std::string item = off == kGap ? "..." : fmt(vals[next++]);
        // Wrap a long row of the last dim, continuing under its first element.
        if (depth == r && s.size() - line_start + item.size() + 1 > kLineWidth && s.back() == ' ') {
          s.pop_back();
          s += '\n';
          s.append(r, ' ');
          line_start = s.size() - r;
        }
        s += item;
      },
      [&](size_t) { s += "["; },
      [&](size_t k) {
        if (k + 1 == r) {
          s += ", ";
          return;
        }
        s += ',';
        s.append(r - k - 1, '\n');
        s.append(k + 1, ' ');
        line_start = s.size() - (k + 1);
      },
      [&](size_t) { s += "]"; });
  return s;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace wick
