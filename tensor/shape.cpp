#include "tensor/shape.h"

#include "tensor/error.h"

namespace wick {

// Zero dims count as 1: an empty tensor still has contiguous strides, which are products of
// the dims to their right, and those must fit as well.
void Shape::check_size() const {
  size_t n = 1;
  for (size_t d : dims_)
    if (d != 0 && !mul_size(n, d, &n))
      throw Error("L23", "shape " + to_string(*this) +
                             " is too large: its nonzero dims multiply to 2^63 or more (element counts, strides "
                             "and offsets must fit in int64)");
}

// check_size() bounds the product, so neither this nor the strides below can wrap.
size_t Shape::elem_count() const {
  size_t n = 1;
  for (size_t d : dims_) n *= d;
  return n;
}

std::vector<int64_t> Shape::stride_contiguous() const {
  std::vector<int64_t> stride(dims_.size());
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    stride[i] = acc;
    acc *= static_cast<int64_t>(dims_[i]);
  }
  return stride;
}

bool Shape::is_contiguous(const std::vector<int64_t>& stride) const {
  if (stride.size() != dims_.size()) return false;
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    if (dims_[i] > 1 && stride[i] != acc) return false;
    acc *= static_cast<int64_t>(dims_[i]);
  }
  return true;
}

bool Shape::is_fortran_contiguous(const std::vector<int64_t>& stride) const {
  if (stride.size() != dims_.size()) return false;
  int64_t acc = 1;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] > 1 && stride[i] != acc) return false;
    acc *= static_cast<int64_t>(dims_[i]);
  }
  return true;
}

size_t Shape::dims0() const {
  if (rank() != 0) throw_rank_error(0, *this);
  return 0;
}
size_t Shape::dims1() const {
  if (rank() != 1) throw_rank_error(1, *this);
  return dims_[0];
}
std::array<size_t, 2> Shape::dims2() const {
  if (rank() != 2) throw_rank_error(2, *this);
  return {dims_[0], dims_[1]};
}
std::array<size_t, 3> Shape::dims3() const {
  if (rank() != 3) throw_rank_error(3, *this);
  return {dims_[0], dims_[1], dims_[2]};
}
std::array<size_t, 4> Shape::dims4() const {
  if (rank() != 4) throw_rank_error(4, *this);
  return {dims_[0], dims_[1], dims_[2], dims_[3]};
}
std::array<size_t, 5> Shape::dims5() const {
  if (rank() != 5) throw_rank_error(5, *this);
  return {dims_[0], dims_[1], dims_[2], dims_[3], dims_[4]};
}

template <class V>
static std::string join_debug(const V& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string to_string(const Shape& s) { return join_debug(s.dims()); }
std::string to_string(const std::vector<int64_t>& v) { return join_debug(v); }
std::string to_string(const std::vector<size_t>& v) { return join_debug(v); }

std::string dim_out_of_range(const std::string& op, int64_t dim, const Shape& s, size_t limit) {
  std::string valid = "none";
  if (limit > 0) {
    valid = std::to_string(limit);
    valid.insert(valid.begin(), '-');
    valid += "..=" + std::to_string(limit - 1);
  }
  return op + ": dim " + std::to_string(dim) + " out of range for shape " + to_string(s) + " (rank " +
         std::to_string(s.rank()) + ", valid dims " + valid + ")";
}

size_t resolve_dim(const std::string& op, int64_t dim, const Shape& s, size_t limit, const char* code) {
  const int64_t n = static_cast<int64_t>(limit);
  if (dim < -n || dim >= n) throw Error(code, dim_out_of_range(op, dim, s, limit));
  return static_cast<size_t>(dim < 0 ? dim + n : dim);
}

}  // namespace wick
