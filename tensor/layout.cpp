#include "tensor/layout.h"

#include <algorithm>

#include "tensor/error.h"

namespace wick {

namespace {
std::string ctx(const char* op, const Shape& s) { return std::string(op) + ": shape " + to_string(s); }

void check_dim(const char* op, const Shape& s, size_t dim, size_t limit) {
  if (dim >= limit) throw Error("L01", dim_out_of_range(op, static_cast<int64_t>(dim), s, limit));
}
}  // namespace

Layout::Layout(Shape shape, std::vector<int64_t> stride, size_t start_offset)
    : shape_(std::move(shape)), stride_(std::move(stride)), start_offset_(start_offset) {
  if (stride_.size() != shape_.rank())
    throw Error("L09", "layout: stride " + to_string(stride_) + " does not match shape " + to_string(shape_));
  // Offsets are unsigned and the storage bound (max_offset_exclusive) assumes strides that
  // only move forward, as candle's usize strides do; a negative one would reach before it.
  for (int64_t s : stride_)
    if (s < 0)
      throw Error("L18", "layout: stride " + to_string(stride_) + " has a negative entry (shape " + to_string(shape_) + ")");
}

Layout Layout::contiguous_with_offset(const Shape& shape, size_t start_offset) {
  return Layout(shape, shape.stride_contiguous(), start_offset);
}

std::optional<std::pair<size_t, size_t>> Layout::contiguous_offsets() const {
  if (!is_contiguous()) return std::nullopt;
  return std::make_pair(start_offset_, start_offset_ + elem_count());
}

size_t Layout::max_offset_exclusive() const {
  if (elem_count() == 0) return 0;
  // Saturates at SIZE_MAX instead of wrapping, so an absurd stride can never pass a bound check.
  size_t last = start_offset_;
  for (size_t i = 0; i < rank(); ++i) {
    size_t step = 0;
    if (__builtin_mul_overflow(dims()[i] - 1, static_cast<size_t>(stride_[i]), &step) ||
        __builtin_add_overflow(last, step, &last))
      return SIZE_MAX;
  }
  return last == SIZE_MAX ? SIZE_MAX : last + 1;
}

Layout Layout::narrow(size_t dim, size_t start, size_t len) const {
  check_dim("narrow", shape_, dim, rank());
  if (start > dims()[dim] || len > dims()[dim] - start)
    throw Error("L02", ctx("narrow", shape_) + ", dim " + std::to_string(dim) + ": start " +
                std::to_string(start) + " + len " + std::to_string(len) + " exceeds size " +
                std::to_string(dims()[dim]));
  std::vector<size_t> d = dims();
  d[dim] = len;
  Shape shape(d);
  // An empty view reads nothing, and the strides of an empty layout are unbounded (the
  // storage check never sees them): keep its offset rather than form start * stride.
  if (shape.elem_count() == 0) return Layout(std::move(shape), stride_, start_offset_);
  // Non-empty: start * stride <= (dim - 1) * stride, inside the storage.
  return Layout(std::move(shape), stride_, start_offset_ + start * static_cast<size_t>(stride_[dim]));
}

Layout Layout::transpose(size_t dim0, size_t dim1) const {
  check_dim("transpose", shape_, dim0, rank());
  check_dim("transpose", shape_, dim1, rank());
  std::vector<size_t> d = dims();
  std::vector<int64_t> s = stride_;
  std::swap(d[dim0], d[dim1]);
  std::swap(s[dim0], s[dim1]);
  return Layout(Shape(d), s, start_offset_);
}

Layout Layout::permute(const std::vector<size_t>& perm) const {
  std::vector<size_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = sorted.size() == rank();
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == i;
  if (!ok)
    throw Error("L03", ctx("permute", shape_) + ", dims " + to_string(perm) +
                " is not a permutation of 0.." + std::to_string(rank()));
  std::vector<size_t> d(rank());
  std::vector<int64_t> s(rank());
  for (size_t i = 0; i < rank(); ++i) {
    d[i] = dims()[perm[i]];
    s[i] = stride_[perm[i]];
  }
  return Layout(Shape(d), s, start_offset_);
}

Layout Layout::broadcast_as(const Shape& target) const {
  auto fail = [&] {
    throw Error("L04", "broadcast_as: cannot broadcast " + to_string(shape_) + " to " + to_string(target));
  };
  if (target.rank() < rank()) fail();
  size_t added = target.rank() - rank();
  std::vector<int64_t> s(target.rank(), 0);
  for (size_t i = 0; i < rank(); ++i) {
    size_t src = dims()[i], dst = target[added + i];
    if (src == dst) s[added + i] = stride_[i];
    else if (src == 1) s[added + i] = 0;
    else fail();
  }
  return Layout(target, s, start_offset_);
}

// Splits and merges dims where the strides allow, as numpy/PyTorch do: walk the old dims
// in chunks whose elements are equally spaced in memory, and give each chunk's new dims
// the strides that chunk implies.
Layout Layout::reshape(const Shape& target) const {
  if (target.elem_count() != elem_count())
    throw Error("L05", "reshape: cannot reshape " + to_string(shape_) + " (" + std::to_string(elem_count()) +
                " elements) to " + to_string(target) + " (" + std::to_string(target.elem_count()) +
                " elements)");
  // Contiguous, or empty (no element to place): the new shape's own strides.
  if (is_contiguous() || elem_count() == 0) return contiguous_with_offset(target, start_offset_);
  std::vector<int64_t> out(target.rank(), 0);
  const auto& od = dims();
  const auto& nd = target.dims();
  size_t oi = 0, ni = 0;
  bool ok = true;
  while (ok && (oi < od.size() || ni < nd.size())) {
    // Skip size-1 dims: they carry no stride constraint.
    if (ni < nd.size() && nd[ni] == 1) { out[ni++] = 1; continue; }
    if (oi < od.size() && od[oi] == 1) { ++oi; continue; }
    if (oi >= od.size() || ni >= nd.size()) { ok = false; break; }
    // Grow a chunk of old dims [o0, oi) and new dims [n0, ni) with equal element counts.
    size_t o0 = oi, n0 = ni, ocount = od[oi++], ncount = nd[ni++];
    while (ocount != ncount) {
      if (ocount < ncount) {
        if (oi >= od.size()) { ok = false; break; }
        ocount *= od[oi++];
      } else {
        if (ni >= nd.size()) { ok = false; break; }
        ncount *= nd[ni++];
      }
    }
    if (!ok) break;
    // The old chunk must be one run: stride[k] == stride[k+1] * dim[k+1] (ignoring size-1 dims).
    int64_t inner = 0;
    bool have_inner = false;
    // (Products that overflow cannot describe a storage this layout fits in: no view.)
    for (size_t k = oi; k-- > o0;) {
      if (od[k] == 1) continue;
      if (have_inner && stride_[k] != inner) { ok = false; break; }
      if (__builtin_mul_overflow(stride_[k], static_cast<int64_t>(od[k]), &inner)) { ok = false; break; }
      have_inner = true;
    }
    if (!ok) break;
    int64_t base = 1;
    for (size_t k = oi; k-- > o0;) if (od[k] != 1) { base = stride_[k]; break; }
    for (size_t k = ni; k-- > n0 && ok;) {
      out[k] = base;
      ok = !__builtin_mul_overflow(base, static_cast<int64_t>(nd[k]), &base);
    }
  }
  if (!ok)
    throw Error("L06", "reshape: cannot view " + to_string(shape_) + " with stride " + to_string(stride_) +
                " as " + to_string(target) + " without a copy; call contiguous() first");
  return Layout(target, out, start_offset_);
}

Layout Layout::squeeze(size_t dim) const {
  check_dim("squeeze", shape_, dim, rank());
  if (dims()[dim] != 1)
    throw Error("L07", ctx("squeeze", shape_) + ", dim " + std::to_string(dim) + " has size " +
                std::to_string(dims()[dim]) + ", not 1");
  std::vector<size_t> d = dims();
  std::vector<int64_t> s = stride_;
  d.erase(d.begin() + static_cast<std::ptrdiff_t>(dim));
  s.erase(s.begin() + static_cast<std::ptrdiff_t>(dim));
  return Layout(Shape(d), s, start_offset_);
}

Layout Layout::unsqueeze(size_t dim) const {
  check_dim("unsqueeze", shape_, dim, rank() + 1);
  std::vector<size_t> d = dims();
  std::vector<int64_t> s = stride_;
  // The new dim has size 1, so its stride never multiplies an index: any value is right; the
  // one that keeps a contiguous layout contiguous is used when it can be formed.
  int64_t st = 1;
  if (dim < rank() && __builtin_mul_overflow(stride_[dim], static_cast<int64_t>(dims()[dim]), &st)) st = stride_[dim];
  d.insert(d.begin() + static_cast<std::ptrdiff_t>(dim), 1);
  s.insert(s.begin() + static_cast<std::ptrdiff_t>(dim), st);
  return Layout(Shape(d), s, start_offset_);
}

std::vector<size_t> Layout::offsets() const {
  std::vector<size_t> out;
  out.reserve(elem_count());
  for (StridedIndex it(*this); !it.done(); it.next()) out.push_back(it.offset());
  return out;
}

StridedIndex::StridedIndex(const Layout& layout)
    : dims_(layout.dims()),
      stride_(layout.stride()),
      index_(layout.rank(), 0),
      offset_(layout.start_offset()),
      remaining_(layout.elem_count()) {}

void StridedIndex::next() {
  --remaining_;
  for (size_t k = dims_.size(); k-- > 0;) {
    if (++index_[k] < dims_[k]) {
      offset_ += static_cast<size_t>(stride_[k]);
      return;
    }
    offset_ -= static_cast<size_t>(stride_[k]) * (dims_[k] - 1);
    index_[k] = 0;
  }
}

}  // namespace wick
