// Helpers for the op tests: inputs in several layouts (contiguous, offset+narrowed,
// transposed), tolerances per dtype, and element-by-element comparison against a
// reference computed in double by a plain loop.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "devices.h"
#include "wick.h"

namespace wick::test {

// Absolute + relative tolerance for results stored in dt.
inline double tol_for(DType dt) {
  switch (dt) {
    case DType::F16: return 4e-3;
    case DType::BF16: return 3e-2;
    case DType::F32: return 2e-5;
    default: return 1e-11;
  }
}

// |got - want| <= tol * (1 + |want|) for every element (NaNs must match).
inline void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  std::vector<double> g = got.to_f64_vec();
  REQUIRE(g.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(want[i])) || std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i]));
    if (!ok && bad++ < 3) CHECK_MESSAGE(ok, "element " << i << ": got " << g[i] << ", want " << want[i]);
  }
  CHECK(bad == 0);
}

// Row-major unravel of flat index i over dims.
inline std::vector<size_t> unravel(size_t i, const std::vector<size_t>& dims) {
  std::vector<size_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = dims[k] ? i % dims[k] : 0;
    if (dims[k]) i /= dims[k];
  }
  return idx;
}

// Flat index into `in` (a shape broadcast to out's dims) of out's multi-index.
inline size_t broadcast_flat(const std::vector<size_t>& out_idx, const std::vector<size_t>& in_dims) {
  size_t lead = out_idx.size() - in_dims.size(), flat = 0;
  for (size_t k = 0; k < in_dims.size(); ++k) flat = flat * in_dims[k] + (in_dims[k] == 1 ? 0 : out_idx[lead + k]);
  return flat;
}

struct Labelled {
  std::string layout;
  Tensor t;
};

// The same logical shape in three layouts with random values: contiguous; a window of a wider
// tensor (start_offset > 0, row stride > last dim); and (rank >= 2) a transposed view.
// positive: values exp(randn) instead of randn.
inline std::vector<Labelled> layouts(const Shape& s, DType dt, Device dev, uint64_t seed, bool positive = false) {
  auto gen = [&](const Shape& sh, uint64_t sd) {
    Tensor t = Tensor::randn(sh, dt, dev, sd);
    return positive ? exp(t) : t;
  };
  std::vector<Labelled> out;
  out.push_back({"contiguous", gen(s, seed)});
  if (s.rank() >= 1) {
    std::vector<size_t> wide = s.dims();
    wide.back() += 3;
    out.push_back({"narrowed", gen(Shape(wide), seed + 1).narrow(s.rank() - 1, 2, s.dims().back())});
  }
  if (s.rank() >= 2) {
    std::vector<size_t> sw = s.dims();
    std::swap(sw[s.rank() - 1], sw[s.rank() - 2]);
    out.push_back({"transposed", gen(Shape(sw), seed + 2).transpose(s.rank() - 2, s.rank() - 1)});
  }
  return out;
}

// Checks that f throws wick::Error with exactly `msg`.
inline void check_error(const std::function<void()>& f, const std::string& msg) {
  try {
    f();
    FAIL("expected wick::Error: " << msg);
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == msg);
  }
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v{DType::F32, DType::F64, DType::F16, DType::BF16};
  return v;
}

}  // namespace wick::test
