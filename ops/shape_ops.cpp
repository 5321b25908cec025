// Joining and gathering: cat, index_select, embedding.
// Backward rules:
//   cat:          input i gets g.narrow(dim, offset_i, size_i)
//   index_select: dx = zeros(x) with dx[.., idx[j], ..] += g[.., j, ..] (repeats accumulate),
//                 computed in f32 for f16/bf16; the indices get no gradient
#include <numeric>

#include "kernels/index.h"
#include "ops/op_util.h"
#include "tensor/device_fault.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

struct Split {  // x viewed as contiguous (outer, dim, inner)
  size_t outer = 1, dim = 1, inner = 1;
};
Split split_at(const Shape& s, size_t dim) {
  Split p;
  for (size_t i = 0; i < dim; ++i) p.outer *= s[i];
  p.dim = s[dim];
  for (size_t i = dim + 1; i < s.rank(); ++i) p.inner *= s[i];
  return p;
}

std::string index_message(const std::string& name, int64_t index, size_t dim, size_t size, const Shape& x_shape) {
  return name + ": index " + std::to_string(index) + " out of range for dim " + std::to_string(dim) + " of size " +
         std::to_string(size) + " (shape " + to_string(x_shape) + ")";
}

// The O17 message of an index fault recorded by kernels::index_select (values: the index,
// the op (0 index_select, 1 embedding), dim, size, rank, dims).
[[maybe_unused]] void format_index_fault(const DeviceFault& f, std::string& code, std::string& message) {
  const int64_t* v = f.values;
  std::vector<size_t> dims(static_cast<size_t>(v[4]));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<size_t>(v[5 + i]);
  code = "O17";
  message = index_message(v[1] == 0 ? "index_select" : "embedding", v[0], static_cast<size_t>(v[2]),
                          static_cast<size_t>(v[3]), Shape(dims));
}

// The indices as a contiguous I64 tensor on their device. Every index must be in [0, size):
// CPU indices are checked here, at the call; CUDA indices by the gather kernel itself
// (kernels/index.h), which never follows a bad one and records the first for the next
// waiting call to raise (tensor/device_fault.h), so the call does not wait for the device.
Tensor checked_indices(const char* name, const Tensor& idx, size_t size, size_t dim, const Shape& x_shape) {
  const DType dt = idx.dtype();
  if (dt != DType::U32 && dt != DType::I32 && dt != DType::I64)
    throw Error("O16", std::string(name) + ": indices must be U32, I32 or I64, got " + dtype_name(dt));
  Tensor i64 = cast(idx.detach(), DType::I64).contiguous();
  if (i64.device().is_cpu()) {
    const int64_t* v = cpu_base<int64_t>(i64) + i64.layout().start_offset();
    for (size_t j = 0; j < i64.elem_count(); ++j)
      if (v[j] < 0 || static_cast<size_t>(v[j]) >= size) throw Error("O17", index_message(name, v[j], dim, size, x_shape));
  }
  return i64;
}

// dst (contiguous, F32/F64, outer x dim x inner) += scatter of src (outer x n x inner) at idx.
void index_add(const Tensor& dst, const Tensor& idx, const Tensor& src, const Split& p) {
  const size_t n = idx.elem_count();
  if (dst.device().is_cpu()) {
    visit_float("index_add", dst, [&](auto zero) {
      using T = decltype(zero);
      using C = compute_t<T>;
      T* d = cpu_base_mut<T>(dst) + dst.layout().start_offset();
      const T* s = cpu_base<T>(src) + src.layout().start_offset();
      const int64_t* host_idx = cpu_base<int64_t>(idx) + idx.layout().start_offset();
      for (size_t o = 0; o < p.outer; ++o)
        for (size_t j = 0; j < n; ++j) {
          T* drow = d + (o * p.dim + static_cast<size_t>(host_idx[j])) * p.inner;
          const T* srow = s + (o * n + j) * p.inner;
          for (size_t i = 0; i < p.inner; ++i) drow[i] = static_cast<T>(C(drow[i]) + C(srow[i]));
        }
    });
    return;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(dst.device());
  kernels::index_add(ktype(dst.dtype()), dst.data_ptr(), static_cast<int64_t>(p.outer), static_cast<int64_t>(p.dim),
                     static_cast<int64_t>(p.inner), static_cast<const int64_t*>(idx.data_ptr()),
                     static_cast<int64_t>(n), src.data_ptr());
#else
  no_cuda("index_add");
#endif
}

}  // namespace

Tensor cat(const std::vector<Tensor>& ts, int64_t dim_arg) {
  if (ts.empty()) throw Error("O14", "cat: empty list of tensors");
  const Tensor& first = ts[0];
  check_defined("cat", first, "tensor 1");
  const size_t dim = check_dim("cat", first, dim_arg);
  size_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    check_pair("cat", first, ts[i], "tensor 1", "tensor " + std::to_string(i + 1));
    bool ok = ts[i].rank() == first.rank();
    for (size_t d = 0; ok && d < first.rank(); ++d) ok = d == dim || ts[i].dim(d) == first.dim(d);
    if (!ok)
      throw Error("O15", "shape mismatch in cat for dim " + std::to_string(dim) + ", shape for arg 1: " +
                  to_string(first.shape()) + " shape for arg " + std::to_string(i + 1) + ": " +
                  to_string(ts[i].shape()));
    total += ts[i].dim(dim);
  }
  std::vector<size_t> d = first.dims();
  d[dim] = total;
  Tensor out = Tensor::empty(Shape(d), first.dtype(), first.device());
  std::vector<size_t> offsets, sizes;
  size_t off = 0;
  for (const Tensor& t : ts) {
    copy_into(out.narrow(dim, off, t.dim(dim)), t.detach());
    offsets.push_back(off);
    sizes.push_back(t.dim(dim));
    off += t.dim(dim);
  }
  return autograd::record(out, "cat", ts, [dim, offsets, sizes](const Tensor& g) {
    Grads gs;
    for (size_t i = 0; i < offsets.size(); ++i) gs.push_back(g.narrow(dim, offsets[i], sizes[i]).contiguous());
    return gs;
  });
}

namespace {

// index_select under the name of the op the caller called (index_select or embedding), so
// every message names that op.
Tensor select_rows(const char* name, const Tensor& x, const Tensor& indices, int64_t dim_arg) {
  check_same_device(name, x, indices);
  const size_t dim = check_dim(name, x, dim_arg);
  if (indices.rank() != 1)
    throw Error("O18", std::string(name) + ": indices must have rank 1, got shape " + to_string(indices.shape()));
  Tensor idx = checked_indices(name, indices, x.dim(dim), dim, x.shape());
  const size_t n = idx.elem_count();
  const Split p = split_at(x.shape(), dim);
  std::vector<size_t> od = x.dims();
  od[dim] = n;
  Tensor out = Tensor::empty(Shape(od), x.dtype(), x.device());
  if (out.elem_count() > 0 || (x.device().is_cuda() && n > 0)) {  // CUDA: the kernel checks the indices
    Tensor xc = x.detach().contiguous();
    const size_t es = dtype_size(x.dtype());
    if (x.device().is_cpu()) {
      const char* src = static_cast<const char*>(xc.data_ptr());
      char* dst = static_cast<char*>(out.data_ptr());
      const int64_t* host = cpu_base<int64_t>(idx) + idx.layout().start_offset();
      const size_t row = p.inner * es;
      for (size_t o = 0; o < p.outer; ++o)
        for (size_t j = 0; j < n; ++j)
          std::memcpy(dst + (o * n + j) * row, src + (o * p.dim + static_cast<size_t>(host[j])) * row, row);
    } else {
#ifdef WICK_WITH_CUDA
      set_current_device(x.device());
      register_fault_formatter(FaultKind::Index, format_index_fault);
      kernels::IndexCheck check;
      check.sink = fault_sink(x.device());
      const Shape& shown = x.shape();
      check.values[1] = std::string(name) == "index_select" ? 0 : 1;
      check.values[2] = static_cast<int64_t>(dim);
      check.values[3] = static_cast<int64_t>(x.dim(dim));
      check.values[4] = static_cast<int64_t>(shown.rank());
      for (size_t i = 0; i < shown.rank() && i < 11; ++i) check.values[5 + i] = static_cast<int64_t>(shown[i]);
      check.n = 16;
      kernels::index_select(es, xc.data_ptr(), static_cast<int64_t>(p.outer), static_cast<int64_t>(p.dim),
                            static_cast<int64_t>(p.inner), static_cast<const int64_t*>(idx.data_ptr()),
                            static_cast<int64_t>(n), out.data_ptr(), check);
#else
      no_cuda(name);
#endif
    }
  }
  Shape xs = x.shape();
  const DType dt = x.dtype();
  return autograd::record(out, "index_select", {x, indices}, [xs, dt, idx, dim](const Tensor& g) {
    const DType acc = dt == DType::F64 ? DType::F64 : DType::F32;
    Tensor dx = Tensor::zeros(xs, acc, g.device());
    Tensor gc = cast(g, acc).contiguous();
    index_add(dx, idx, gc, split_at(xs, dim));
    return Grads{cast(dx, dt), Tensor()};
  }, {idx});
}

}  // namespace

Tensor index_select(const Tensor& x, const Tensor& indices, int64_t dim) {
  check_defined("index_select", x, "x");
  check_defined("index_select", indices, "indices");
  return select_rows("index_select", x, indices, dim);
}

Tensor embedding(const Tensor& ids, const Tensor& table) {
  check_defined("embedding", ids, "ids");
  check_defined("embedding", table, "table");
  if (table.rank() != 2)
    throw Error("O19", "embedding: table must have rank 2 (vocab, hidden), got shape " + to_string(table.shape()));
  check_same_device("embedding", ids, table);
  Tensor flat = ids.contiguous().reshape(Shape{ids.elem_count()});
  std::vector<size_t> od = ids.dims();
  od.push_back(table.dim(1));
  return select_rows("embedding", table, flat, 0).reshape(Shape(od));
}

}  // namespace wick
