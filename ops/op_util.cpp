#include "ops/op_util.h"

#include <algorithm>

namespace wick::ops_detail {

static_assert(static_cast<int>(kernels::ElemType::F64) == static_cast<int>(DType::F64) &&
                  static_cast<int>(kernels::ElemType::U8) == static_cast<int>(DType::U8) &&
                  static_cast<int>(kernels::ElemType::BF16) == static_cast<int>(DType::BF16),
              "kernels::ElemType must mirror wick::DType");

void unsupported(const std::string& op, DType dtype, const Device& device) {
  throw Error("O01", op + ": unsupported dtype " + dtype_name(dtype) + " on " + to_string(device));
}

void no_cuda(const std::string& op) {
  throw Error("O02", op + ": this build of wick has no CUDA support (configure with WICK_CUDA=ON)");
}

void check_defined(const std::string& op, const Tensor& t, const std::string& what) {
  if (!t.defined()) throw Error("L12", op + ": " + what + " is an empty (default-constructed) tensor");
}

void check_same_device(const std::string& op, const Tensor& lhs, const Tensor& rhs) {
  if (!(lhs.device() == rhs.device())) throw_device_mismatch(op, lhs.device(), rhs.device());
}

void check_same_dtype(const std::string& op, const Tensor& lhs, const Tensor& rhs) {
  if (lhs.dtype() != rhs.dtype())
    throw Error("O03", "dtype mismatch in " + op + ", lhs: " + dtype_name(lhs.dtype()) +
                ", rhs: " + dtype_name(rhs.dtype()));
}

void check_pair(const std::string& op, const Tensor& lhs, const Tensor& rhs, const std::string& lhs_name,
                const std::string& rhs_name) {
  check_defined(op, lhs, lhs_name);
  check_defined(op, rhs, rhs_name);
  check_same_device(op, lhs, rhs);
  check_same_dtype(op, lhs, rhs);
}

void throw_shape_mismatch(const std::string& op, const Shape& lhs, const Shape& rhs) {
  throw Error("O04", "shape mismatch in " + op + ", lhs: " + to_string(lhs) + ", rhs: " + to_string(rhs));
}

Shape broadcast_shape(const std::string& op, const Shape& a, const Shape& b) {
  const size_t r = std::max(a.rank(), b.rank());
  std::vector<size_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    // Align from the right; missing leading dims count as 1.
    size_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    size_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (da != db && da != 1 && db != 1) throw_shape_mismatch(op, a, b);
    out[i] = da == 1 ? db : da;
  }
  return Shape(out);
}

size_t check_dim(const std::string& op, const Tensor& x, int64_t dim) {
  return resolve_dim(op, dim, x.shape(), x.rank(), "O05");
}

void require_float(const std::string& op, const Tensor& x) {
  if (!is_float(x.dtype())) unsupported(op, x.dtype(), x.device());
}

kernels::StridedView kview(const std::string& op, const Layout& l) {
  if (l.rank() > static_cast<size_t>(kernels::kMaxRank))
    throw Error("O07", op + ": shape " + to_string(l.shape()) + " has rank " + std::to_string(l.rank()) +
                ", CUDA kernels take at most " + std::to_string(kernels::kMaxRank) +
                " dims (call contiguous() and reshape first)");
  kernels::StridedView v;
  v.rank = static_cast<int>(l.rank());
  for (size_t i = 0; i < l.rank(); ++i) {
    v.dims[i] = static_cast<int64_t>(l.dims()[i]);
    v.stride[i] = l.stride()[i];
  }
  v.contiguous = l.is_contiguous();
  return v;
}

std::vector<size_t> check_dims(const std::string& op, const Tensor& x, const DimList& dims) {
  // In ascending order of the values as given, so the first fault found is the same whatever
  // order the list was written in.
  std::vector<int64_t> given = dims.values();
  std::sort(given.begin(), given.end());
  std::vector<size_t> out;
  for (int64_t d : given) {
    const size_t r = check_dim(op, x, d);
    if (std::find(out.begin(), out.end(), r) != out.end())
      throw Error("O06", op + ": dim " + std::to_string(r) + " appears twice in " + to_string(dims.values()) +
                  " for shape " + to_string(x.shape()));
    out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_index_dtype(const std::string& op, const Tensor& idx) {
  const DType dt = idx.dtype();
  if (dt != DType::U32 && dt != DType::I32 && dt != DType::I64)
    throw Error("O16", op + ": indices must be U32, I32 or I64, got " + dtype_name(dt));
}

HostIndices host_indices(const Tensor& idx) {
  HostIndices h;
  h.i64 = cast(idx.detach(), DType::I64).contiguous();
  h.size = h.i64.elem_count();
  if (h.i64.device().is_cpu()) {
    h.values = cpu_base<int64_t>(h.i64) + h.i64.layout().start_offset();
  } else {
    h.copy = h.i64.to_vec<int64_t>();
    h.values = h.copy.data();
  }
  return h;
}

}  // namespace wick::ops_detail
