// Shape: the dims of a tensor. Prints as candle's Debug does: "[2, 3, 4]", rank 0 "[]".
//
// Sizes: every element count, contiguous stride, storage offset and byte count in wick fits
// in int64_t (the type of strides and of the kernels' offsets). A Shape enforces its part
// when it is made: the product of its nonzero dims must be below 2^63 (L23), so elem_count()
// and every contiguous stride are exact; a larger product is a wick::Error, never a wrapped
// count. Other products of sizes (bytes = elements x element size, ...) go through
// mul_size(), the one checked multiplication.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

namespace wick {

// The largest element count, stride, offset or byte count wick forms: 2^63 - 1.
constexpr size_t kMaxSize = static_cast<size_t>(INT64_MAX);

// The one checked multiplication of sizes: *out = a * b and true when the product is at most
// kMaxSize; false (and *out untouched) otherwise. Callers raise their own error on false.
inline bool mul_size(size_t a, size_t b, size_t* out) {
  size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxSize) return false;
  *out = r;
  return true;
}

class Shape {
 public:
  Shape() = default;  // rank 0 (a scalar)
  // Both throw L23 when the nonzero dims multiply to 2^63 or more.
  Shape(std::vector<size_t> dims) : dims_(std::move(dims)) { check_size(); }
  Shape(std::initializer_list<size_t> dims) : dims_(dims) { check_size(); }

  const std::vector<size_t>& dims() const { return dims_; }
  size_t rank() const { return dims_.size(); }
  size_t dim(size_t i) const { return dims_.at(i); }
  size_t operator[](size_t i) const { return dims_[i]; }
  size_t elem_count() const;  // exact: at most kMaxSize
  // Row-major (C-contiguous) strides in elements.
  std::vector<int64_t> stride_contiguous() const;
  // True when stride walks this shape in row-major order. Size-1 dims are ignored.
  bool is_contiguous(const std::vector<int64_t>& stride) const;
  // True when stride walks this shape in column-major order. Size-1 dims are ignored.
  bool is_fortran_contiguous(const std::vector<int64_t>& stride) const;

  // Dims of a shape of known rank; throws candle's rank error otherwise.
  size_t dims0() const;
  size_t dims1() const;
  std::array<size_t, 2> dims2() const;
  std::array<size_t, 3> dims3() const;
  std::array<size_t, 4> dims4() const;
  std::array<size_t, 5> dims5() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }

 private:
  void check_size() const;
  std::vector<size_t> dims_;
};

std::string to_string(const Shape& s);
// "[2048, 128, 1]": candle's Debug form of a slice of integers.
std::string to_string(const std::vector<int64_t>& v);
std::string to_string(const std::vector<size_t>& v);

// The one text for a dim a shape does not have, shared by views, Tensor::dim and the ops:
// "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})".
// `limit` is one past the largest valid dim: the rank for most ops, rank + 1 for unsqueeze
// (which inserts a dim and so also accepts dim == rank); {valid} is "-{limit}..={limit - 1}"
// (negative dims count from the end), or "none" when limit is 0 (a dim of a rank-0 tensor).
std::string dim_out_of_range(const std::string& op, int64_t dim, const Shape& s, size_t limit);

// A dim as the public API takes it: in [-limit, limit), where -1 is the last valid dim
// (limit - 1). Returns it in [0, limit), or throws dim_out_of_range's text.
size_t resolve_dim(const std::string& op, int64_t dim, const Shape& s, size_t limit, const char* code = "L01");

// One entry of a DimList. Converts from any integer type, so a braced list may mix negative
// literals and unsigned variables ({n, -1} with size_t n) without a narrowing error.
struct Dim {
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  constexpr Dim(I v) : value(static_cast<int64_t>(v)) {}
  int64_t value;
};

// The dims an op works over (reductions, permute), each possibly negative (-1 is the last).
// Built from one integer (sum(x, -1)), a braced list ({0, -1}), a std::vector<size_t> or a
// std::vector<int64_t>.
class DimList {
 public:
  DimList() = default;
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  DimList(I dim) : dims_{static_cast<int64_t>(dim)} {}
  DimList(std::initializer_list<Dim> dims) {
    for (Dim d : dims) dims_.push_back(d.value);
  }
  DimList(const std::vector<int64_t>& dims) : dims_(dims) {}
  DimList(const std::vector<size_t>& dims) : dims_(dims.begin(), dims.end()) {}
  const std::vector<int64_t>& values() const { return dims_; }
  size_t size() const { return dims_.size(); }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace wick
