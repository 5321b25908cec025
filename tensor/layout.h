// Layout: how a tensor's logical elements map onto its storage. A pure value:
// shape, stride (in elements, one per dim; 0 for broadcast dims) and start_offset
// (in elements). Every view op returns a new Layout and never touches data.
// Element (i0, ..., in) lives at start_offset + sum_k ik * stride[k].
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tensor/shape.h"

namespace wick {

class Layout {
 public:
  Layout() = default;
  // stride: one entry per dim (throws otherwise); start_offset: elements into the storage.
  Layout(Shape shape, std::vector<int64_t> stride, size_t start_offset);
  static Layout contiguous(const Shape& shape) { return contiguous_with_offset(shape, 0); }
  static Layout contiguous_with_offset(const Shape& shape, size_t start_offset);

  const Shape& shape() const { return shape_; }
  const std::vector<size_t>& dims() const { return shape_.dims(); }
  const std::vector<int64_t>& stride() const { return stride_; }
  size_t start_offset() const { return start_offset_; }
  size_t rank() const { return shape_.rank(); }
  size_t elem_count() const { return shape_.elem_count(); }

  bool is_contiguous() const { return shape_.is_contiguous(stride_); }
  bool is_fortran_contiguous() const { return shape_.is_fortran_contiguous(stride_); }
  // [start, end) in storage elements when C-contiguous, else nullopt.
  std::optional<std::pair<size_t, size_t>> contiguous_offsets() const;
  // One past the largest storage element this layout can touch (0 when empty; SIZE_MAX when
  // that does not fit in size_t).
  size_t max_offset_exclusive() const;

  // Views. Each throws wick::Error naming the op, the shape and the dims on misuse.
  Layout narrow(size_t dim, size_t start, size_t len) const;
  Layout transpose(size_t dim0, size_t dim1) const;
  Layout permute(const std::vector<size_t>& dims) const;
  Layout broadcast_as(const Shape& shape) const;
  // A view with the new shape when the strides allow one (merging/splitting dims that
  // are laid out compatibly); otherwise throws an error telling the caller to call
  // contiguous() first. Element counts must match.
  Layout reshape(const Shape& shape) const;
  Layout squeeze(size_t dim) const;    // dim must have size 1
  Layout unsqueeze(size_t dim) const;  // dim may equal rank

  // Storage offsets of every element in logical (row-major) order.
  std::vector<size_t> offsets() const;

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.shape_ == b.shape_ && a.stride_ == b.stride_ && a.start_offset_ == b.start_offset_;
  }

 private:
  Shape shape_;
  std::vector<int64_t> stride_;
  size_t start_offset_ = 0;
};

// Walks a layout's storage offsets in logical order without materialising them.
//   for (StridedIndex it(layout); !it.done(); it.next()) use(it.offset());
// Keeps its own copy of dims and strides, so `layout` may be a temporary
// (StridedIndex it(l.narrow(0, 1, 2))).
class StridedIndex {
 public:
  explicit StridedIndex(const Layout& layout);
  bool done() const { return remaining_ == 0; }
  size_t offset() const { return offset_; }
  void next();

 private:
  std::vector<size_t> dims_;
  std::vector<int64_t> stride_;
  std::vector<size_t> index_;
  size_t offset_;
  size_t remaining_;
};

// The same walk over N layouts at once, for CPU loops over several operands:
// calls f(i, {off_0, ..., off_{N-1}}) for each logical index i of the common shape of the N
// layouts (which must have equal dims; not checked), with each layout's storage offset. The
// last dim is the tight inner loop; contiguous layouts need no index arithmetic at all.
//   for_each_offsets<2>({&dst, &src}, [&](size_t i, const std::array<size_t, 2>& o) {
//     d[o[0]] = s[o[1]];
//   });
template <size_t N, class F>
void for_each_offsets(const std::array<const Layout*, N>& ls, F&& f) {
  const Layout& l0 = *ls[0];
  const size_t n = l0.elem_count();
  if (n == 0) return;
  const auto& d = l0.dims();
  const size_t r = d.size();
  std::array<int64_t, N> base;
  bool all_contig = true;
  for (size_t j = 0; j < N; ++j) {
    base[j] = static_cast<int64_t>(ls[j]->start_offset());
    all_contig = all_contig && ls[j]->is_contiguous();
  }
  std::array<size_t, N> off;
  if (all_contig || r == 0) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < N; ++j) off[j] = static_cast<size_t>(base[j]) + i;
      f(i, off);
    }
    return;
  }
  const size_t inner = d[r - 1];
  std::array<int64_t, N> is;
  for (size_t j = 0; j < N; ++j) is[j] = ls[j]->stride()[r - 1];
  std::vector<size_t> idx(r - 1, 0);
  for (size_t i = 0; i < n; i += inner) {
    for (size_t c = 0; c < inner; ++c) {
      for (size_t j = 0; j < N; ++j) off[j] = static_cast<size_t>(base[j] + static_cast<int64_t>(c) * is[j]);
      f(i + c, off);
    }
    for (size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < d[k]) {
        for (size_t j = 0; j < N; ++j) base[j] += ls[j]->stride()[k];
        break;
      }
      for (size_t j = 0; j < N; ++j) base[j] -= ls[j]->stride()[k] * static_cast<int64_t>(d[k] - 1);
      idx[k] = 0;
    }
  }
}

// One layout: f(i, offset).
template <class F>
void for_each_offset(const Layout& l, F&& f) {
  for_each_offsets<1>({&l}, [&](size_t i, const std::array<size_t, 1>& o) { f(i, o[0]); });
}

}  // namespace wick
