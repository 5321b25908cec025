// Shared plumbing for ops/*.cpp (not installed API): argument checks with candle's messages,
// the f16/bf16 -> f32 compute-type rule and the Tensor -> kernel-argument conversion.
// Included by op files only. (The CPU strided walkers are in tensor/layout.h.)
#pragma once
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common.h"
#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "tensor/grad_node.h"
#include "tensor/tensor.h"

namespace wick::ops_detail {

// The type CPU code computes in for storage type T: f32 for f16/bf16, T otherwise.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<f16> { using type = float; };
template <> struct ComputeOf<bf16> { using type = float; };
template <class T> using compute_t = typename ComputeOf<T>::type;

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, f16> ||
                                   std::is_same_v<T, bf16>;

// "add: unsupported dtype I16 on Cuda { gpu_id: 0 }"
[[noreturn]] void unsupported(const std::string& op, DType dtype, const Device& device);
// "add: this build of wick has no CUDA support"
[[noreturn]] void no_cuda(const std::string& op);
// "matmul: lhs is an empty (default-constructed) tensor": `what` names the argument.
void check_defined(const std::string& op, const Tensor& t, const std::string& what = "x");
// candle's "device mismatch in add, lhs: Cpu, rhs: Cuda { gpu_id: 0 }"
void check_same_device(const std::string& op, const Tensor& lhs, const Tensor& rhs);
// candle's "dtype mismatch in add, lhs: F32, rhs: F16"
void check_same_dtype(const std::string& op, const Tensor& lhs, const Tensor& rhs);
// The checks every two-tensor op starts with, in this order: both defined, then
// check_same_device, then check_same_dtype. The names label the arguments in the
// empty-tensor message.
void check_pair(const std::string& op, const Tensor& lhs, const Tensor& rhs, const std::string& lhs_name = "lhs",
                const std::string& rhs_name = "rhs");
// candle's "shape mismatch in add, lhs: [2, 3], rhs: [4]"
[[noreturn]] void throw_shape_mismatch(const std::string& op, const Shape& lhs, const Shape& rhs);
// numpy broadcasting of two shapes, or throw_shape_mismatch(op, a, b).
Shape broadcast_shape(const std::string& op, const Shape& a, const Shape& b);
// dim resolved against x's rank (negative counts from the end), or L01's text under op's name:
// "softmax: dim 3 out of range for shape [2, 3] (rank 2, valid dims -2..=1)"
size_t check_dim(const std::string& op, const Tensor& x, int64_t dim);
// Throws unsupported(op, ...) unless x has a float dtype.
void require_float(const std::string& op, const Tensor& x);

// Calls f(T{}) for the four float dtypes, unsupported(op, ...) for any other.
template <class F>
decltype(auto) visit_float(const std::string& op, const Tensor& x, F&& f) {
  switch (x.dtype()) {
    case DType::F16: return f(f16{});
    case DType::BF16: return f(bf16{});
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    default: unsupported(op, x.dtype(), x.device());
  }
}

// Typed storage base (CPU). Add a layout's storage offsets to it (they include start_offset).
template <class T> const T* cpu_base(const Tensor& t) { return static_cast<const T*>(t.storage()->data()); }
template <class T> T* cpu_base_mut(const Tensor& t) { return static_cast<T*>(t.storage()->data()); }

// Elements per thread, at least, when an elementwise loop runs on the shared CPU pool.
inline constexpr int64_t kParallelGrain = int64_t(1) << 16;

// for_each_offsets (tensor/layout.h) for the ops' elementwise loops: when every layout is
// contiguous and the range is large, it is split over the shared CPU pool
// (ops/cpu/parallel.h), so f must touch only what index i owns.
template <size_t N, class F>
void parallel_for_each_offsets(const std::array<const Layout*, N>& ls, F&& f) {
  const auto n = static_cast<int64_t>(ls[0]->elem_count());
  bool all_contig = true;
  for (size_t j = 0; j < N; ++j) all_contig = all_contig && ls[j]->is_contiguous();
  if (!all_contig || n < 2 * kParallelGrain) return for_each_offsets<N>(ls, std::forward<F>(f));
  cpu::parallel_for(n, kParallelGrain, [&](int64_t begin, int64_t end) {
    std::array<size_t, N> o;
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      for (size_t j = 0; j < N; ++j) o[j] = ls[j]->start_offset() + i;
      f(i, o);
    }
  });
}

template <class F>
void parallel_for_each_offset(const Layout& l, F&& f) {
  parallel_for_each_offsets<1>({&l}, [&](size_t i, const std::array<size_t, 1>& o) { f(i, o[0]); });
}

// Kernel arguments for a layout; throws when the rank exceeds kernels::kMaxRank.
kernels::StridedView kview(const std::string& op, const Layout& l);
inline kernels::ElemType ktype(DType dt) { return static_cast<kernels::ElemType>(static_cast<int>(dt)); }

// Normalises a dim list: each in [-rank, rank), no repeats once resolved; returns it resolved
// and sorted.
std::vector<size_t> check_dims(const std::string& op, const Tensor& x, const DimList& dims);

// Index tensors (index_select, embedding, gather, scatter_add, one_hot): U32, I32 or I64, else
// "{op}: indices must be U32, I32 or I64, got F32".
void check_index_dtype(const std::string& op, const Tensor& idx);
// idx as a contiguous I64 tensor on its device, and its values on the host (read in place
// for CPU tensors; one copy, which waits for the device, for CUDA tensors).
struct HostIndices {
  Tensor i64;                 // contiguous I64 on idx's device
  std::vector<int64_t> copy;  // filled for CUDA indices only
  const int64_t* values = nullptr;  // idx.elem_count() values on the host
  size_t size = 0;
};
HostIndices host_indices(const Tensor& idx);

// gather along dim with idx already a checked contiguous I64 tensor of x's rank (ops/gather.cpp);
// recorded for autograd like gather. The losses use it after checking their targets.
Tensor gather_checked(const Tensor& x, size_t dim, const Tensor& idx);

}  // namespace wick::ops_detail
