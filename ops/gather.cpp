// Index ops after PyTorch: gather, scatter_add, one_hot. The index tensor's shape drives both:
// element e of the index, at coordinates c, names the element of x at c with c[dim] replaced
// by index[e]. CPU loops here, CUDA kernels in kernels/gather.cu, the same coordinate walk.
// Backward rules:
//   gather:      dx = scatter_add(zeros(x), dim, index, g)     (f32 for f16/bf16)
//   scatter_add: dx = g, dsrc = gather(g, dim, index) (zero where src is larger than index)
#include "kernels/gather.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

// The dtype scatter_add accumulates in for dtype dt.
DType acc_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

// Checks index's rank and dims against `other` ("x" or "src"): same rank, and index.dim(d) <=
// other.dim(d) for every d (except `dim` when skip_dim).
void check_index_shape(const char* op, const Tensor& index, const Tensor& other, const char* what, size_t dim,
                       bool skip_dim) {
  if (index.rank() != other.rank())
    throw Error("O27", std::string(op) + ": index has rank " + std::to_string(index.rank()) + " but " + what +
                           " has rank " + std::to_string(other.rank()) + "; they must match");
  for (size_t d = 0; d < index.rank(); ++d)
    if (!(skip_dim && d == dim) && index.dim(d) > other.dim(d))
      throw Error("O28", std::string(op) + ": index shape " + to_string(index.shape()) + " is larger than " + what +
                             " shape " + to_string(other.shape()) + " at dim " + std::to_string(d));
}

// index as contiguous I64 after checking every value is in [0, size).
Tensor checked_index(const char* op, const Tensor& index, size_t size, size_t dim, const Shape& x_shape) {
  HostIndices h = host_indices(index);
  for (size_t j = 0; j < h.size; ++j)
    if (h.values[j] < 0 || static_cast<size_t>(h.values[j]) >= size)
      throw Error("O17", std::string(op) + ": index " + std::to_string(h.values[j]) + " out of range for dim " +
                  std::to_string(dim) + " of size " + std::to_string(size) + " (shape " + to_string(x_shape) + ")");
  return h.i64;
}

// Calls f(e, coords) for each element e of `shape` in row-major order.
template <class F>
void for_each_coord(const Shape& shape, F&& f) {
  const size_t n = shape.elem_count(), r = shape.rank();
  std::vector<size_t> c(r, 0);
  for (size_t e = 0; e < n; ++e) {
    f(e, c);
    for (size_t k = r; k-- > 0;) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
}

// Storage offset of coordinates c in layout l, with c[dim] replaced by `at` when at >= 0.
size_t offset_of(const Layout& l, const std::vector<size_t>& c, size_t dim, int64_t at) {
  size_t off = l.start_offset();
  for (size_t k = 0; k < c.size(); ++k)
    off += (k == dim && at >= 0 ? static_cast<size_t>(at) : c[k]) * static_cast<size_t>(l.stride()[k]);
  return off;
}

// out (idx's shape, x's dtype) = x gathered at idx (contiguous I64, already checked).
Tensor gather_fwd(const Tensor& x, size_t dim, const Tensor& idx) {
  Tensor out = Tensor::empty(idx.shape(), x.dtype(), x.device());
  if (out.elem_count() == 0) return out;
  const size_t es = dtype_size(x.dtype());
  if (x.device().is_cpu()) {
    const int64_t* iv = cpu_base<int64_t>(idx) + idx.layout().start_offset();
    kernels::visit_elem_bytes(es, [&](auto zero) {
      using U = decltype(zero);
      const U* src = cpu_base<U>(x);
      U* o = cpu_base_mut<U>(out);
      for_each_coord(idx.shape(), [&](size_t e, const std::vector<size_t>& c) { o[e] = src[offset_of(x.layout(), c, dim, iv[e])]; });
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::gather(es, x.data_ptr(), kview("gather", x.layout()), static_cast<const int64_t*>(idx.data_ptr()),
                  kview("gather", idx.layout()), static_cast<int>(dim), out.data_ptr());
#else
  no_cuda("gather");
#endif
  return out;
}

// dst (F32/F64, contiguous, owned by the caller) += src scattered at idx along dim.
void scatter_add_into(const Tensor& dst, size_t dim, const Tensor& idx, const Tensor& src) {
  if (idx.elem_count() == 0) return;
  if (dst.device().is_cpu()) {
    const int64_t* iv = cpu_base<int64_t>(idx) + idx.layout().start_offset();
    auto add = [&](auto zero) {  // dst and src are F32 or F64 (the accumulation types)
      using T = decltype(zero);
      T* d = cpu_base_mut<T>(dst);
      const T* s = cpu_base<T>(src);
      for_each_coord(idx.shape(), [&](size_t e, const std::vector<size_t>& c) {
        d[offset_of(dst.layout(), c, dim, iv[e])] += s[offset_of(src.layout(), c, dim, -1)];
      });
    };
    if (dst.dtype() == DType::F64) add(double{});
    else add(float{});
    return;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(dst.device());
  kernels::scatter_add(ktype(dst.dtype()), dst.data_ptr(), kview("scatter_add", dst.layout()),
                       static_cast<const int64_t*>(idx.data_ptr()), kview("scatter_add", idx.layout()),
                       static_cast<int>(dim), src.data_ptr(), kview("scatter_add", src.layout()));
#else
  no_cuda("scatter_add");
#endif
}

// zeros of `shape` in `dtype` with the scatter of g added (the gradient of gather).
Tensor scatter_into_zeros(const Shape& shape, DType dtype, size_t dim, const Tensor& idx, const Tensor& g) {
  const DType acc = acc_dtype(dtype);
  Tensor dx = Tensor::zeros(shape, acc, g.device());
  scatter_add_into(dx, dim, idx, cast(g, acc));
  return cast(dx, dtype);
}

// g gathered at idx, placed in the index-sized corner of zeros of `shape` (src's gradient).
Tensor gather_padded(const Tensor& g, size_t dim, const Tensor& idx, const Shape& shape) {
  Tensor picked = gather_fwd(g, dim, idx);
  if (picked.shape() == shape) return picked;
  Tensor out = Tensor::zeros(shape, g.dtype(), g.device());
  Tensor window = out;
  for (size_t d = 0; d < shape.rank(); ++d) window = window.narrow(static_cast<int64_t>(d), 0, idx.dim(d));
  copy_into(window, picked);
  return out;
}

}  // namespace

namespace ops_detail {

Tensor gather_checked(const Tensor& x, size_t dim, const Tensor& idx) {
  Tensor out = gather_fwd(x, dim, idx);
  if (!autograd::should_record(x)) return out;
  const Shape xs = x.shape();
  const DType dt = x.dtype();
  return autograd::record(out, "gather", {x}, [xs, dt, dim, idx](const Tensor& g) {
    return Grads{scatter_into_zeros(xs, dt, dim, idx, g)};
  }, {idx});
}

}  // namespace ops_detail

Tensor gather(const Tensor& x, int64_t dim_arg, const Tensor& index) {
  check_defined("gather", x, "x");
  check_defined("gather", index, "index");
  check_same_device("gather", x, index);
  const size_t dim = check_dim("gather", x, dim_arg);
  check_index_dtype("gather", index);
  check_index_shape("gather", index, x, "x", dim, true);
  return gather_checked(x, dim, checked_index("gather", index, x.dim(dim), dim, x.shape()));
}

Tensor scatter_add(const Tensor& x, int64_t dim_arg, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add", index, "index");
  check_pair("scatter_add", x, src, "x", "src");
  check_same_device("scatter_add", x, index);
  require_float("scatter_add", x);
  const size_t dim = check_dim("scatter_add", x, dim_arg);
  check_index_dtype("scatter_add", index);
  check_index_shape("scatter_add", index, x, "x", dim, true);
  check_index_shape("scatter_add", index, src, "src", dim, false);
  Tensor idx = checked_index("scatter_add", index, x.dim(dim), dim, x.shape());
  const DType acc = acc_dtype(x.dtype());
  Tensor out = cast(x.detach(), acc);
  out = out.same_storage(x) ? out.copy() : out.contiguous();
  scatter_add_into(out, dim, idx, cast(src.detach(), acc));
  out = cast(out, x.dtype());
  if (!autograd::should_record(x, src)) return out;
  const Shape ss = src.shape();
  return autograd::record(out, "scatter_add", {x, index, src}, [dim, idx, ss](const Tensor& g) {
    return Grads{g, Tensor(), gather_padded(g, dim, idx, ss)};
  }, {idx});
}

Tensor one_hot(const Tensor& indices, size_t num_classes, DType dtype) {
  check_defined("one_hot", indices, "indices");
  check_index_dtype("one_hot", indices);
  HostIndices h = host_indices(indices);
  for (size_t j = 0; j < h.size; ++j)
    if (h.values[j] < 0 || static_cast<size_t>(h.values[j]) >= num_classes)
      throw Error("O29", "one_hot: index " + std::to_string(h.values[j]) + " is outside [0, " +
                             std::to_string(num_classes) + ")");
  autograd::NoGradGuard no_grad;
  Tensor classes = Tensor::arange(0, static_cast<int64_t>(num_classes), DType::I64, indices.device());
  return cast(eq(h.i64.reshape(indices.shape()).unsqueeze(-1), classes), dtype);
}

}  // namespace wick
