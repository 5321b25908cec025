// wick's core ops: free functions over Tensor, on every device.
//
// Common contract (every op below):
// - Inputs may have any layout (strided, offset, transposed, broadcast views); outputs are
//   fresh contiguous tensors on the inputs' device unless said otherwise.
// - Inputs of one op must share a device ("device mismatch in add, lhs: Cpu, rhs: ...") and,
//   where the op mixes them elementwise, a dtype ("dtype mismatch in add, lhs: F32, rhs: F16").
// - f16/bf16 are storage types: CPU computes in f32 and rounds the result; CUDA does the same
//   in registers. f64 computes in f64. An (op, dtype, device) that is not supported raises
//   wick::Error naming all three.
// - When an input requires grad (and grad mode is on) the output carries an autograd node
//   whose backward rule sits next to the op's forward in ops/<family>.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace wick {

// ---- elementwise unary (float dtypes) -------------------------------------------------
// Each maps x (any shape) to an output of the same shape and dtype.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as candle's gelu.
Tensor gelu(const Tensor& x);
Tensor silu(const Tensor& x);      // x * sigmoid(x)
Tensor sigmoid(const Tensor& x);   // 1 / (1 + exp(-x))
Tensor affine(const Tensor& x, double mul, double add);  // x * mul + add
Tensor add_scalar(const Tensor& x, double s);            // x + s
Tensor mul_scalar(const Tensor& x, double s);            // x * s
Tensor powf(const Tensor& x, double e);                  // x ^ e (NaN for x < 0, non-integer e)

// ---- elementwise binary, numpy broadcasting ---------------------------------------------
// lhs and rhs broadcast to a common shape (dims aligned from the right; each pair equal or
// one of them 1), else "shape mismatch in add, lhs: [2, 3], rhs: [4]". Same dtype required.
// Arithmetic: every dtype on CPU and CUDA. Integer division truncates toward zero; division by
// zero raises "div: integer division by zero" on CPU and yields 0 on CUDA (kernels cannot throw);
// a signed MIN / -1 wraps to MIN on both.
Tensor add(const Tensor& lhs, const Tensor& rhs);
Tensor sub(const Tensor& lhs, const Tensor& rhs);
Tensor mul(const Tensor& lhs, const Tensor& rhs);
Tensor div(const Tensor& lhs, const Tensor& rhs);
Tensor maximum(const Tensor& lhs, const Tensor& rhs);
Tensor minimum(const Tensor& lhs, const Tensor& rhs);
// Comparisons: broadcast shape, dtype U8 (1 true, 0 false). Not differentiable.
Tensor eq(const Tensor& lhs, const Tensor& rhs);
Tensor ne(const Tensor& lhs, const Tensor& rhs);
Tensor lt(const Tensor& lhs, const Tensor& rhs);
Tensor le(const Tensor& lhs, const Tensor& rhs);
Tensor gt(const Tensor& lhs, const Tensor& rhs);
Tensor ge(const Tensor& lhs, const Tensor& rhs);
// cond ? a : b elementwise. cond is U8 (nonzero = true); cond, a, b broadcast together;
// a and b share a dtype, which the output takes.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);

// ---- copies and casts -------------------------------------------------------------------
// Converts every element to `dtype` (round to nearest for floats, truncation toward zero for
// float -> int; i64 <-> float goes through f64). Same as x.to_dtype(dtype). A float outside
// the target integer type's range converts to an unspecified value.
Tensor cast(const Tensor& x, DType dtype);
// Writes src's elements (logical order) into dst's layout in place. dst may be any
// non-overlapping view (narrow, transpose, ...); shapes, dtypes and devices must match. A
// broadcast dst (a stride-0 dim of size > 1) is an error; other self-overlapping layouts
// (e.g. shape [3, 2] with stride [1, 1]) are not detected: their result is unspecified.
// Not recorded by autograd. Used by cat and by the narrow backward rule.
void copy_into(const Tensor& dst, const Tensor& src);

// ---- reductions ---------------------------------------------------------------------------
// Reduce x over `dims` (each < rank, no repeats). keepdim keeps them as size-1 dims, else they
// are removed (all dims removed -> a rank-0 tensor). Empty `dims` reduces nothing (a copy).
// sum/max/min: every dtype (integer sums wrap in the input dtype); mean: float dtypes.
// max/min over an empty dim is an error.
Tensor sum(const Tensor& x, const std::vector<size_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<size_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<size_t>& dims, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<size_t>& dims, bool keepdim = false);
Tensor sum_all(const Tensor& x);   // rank-0 sum of every element
Tensor mean_all(const Tensor& x);  // rank-0 mean of every element
// Index (I64) of the first largest / smallest element along `dim`. A NaN never replaces the
// running best (so a leading NaN wins and later NaNs are skipped); same rule on every device.
Tensor argmax(const Tensor& x, size_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, size_t dim, bool keepdim = false);
// Sums `grad` down to `shape` when grad's shape is shape broadcast (the backward of a
// broadcast): leading extra dims are summed away, dims where shape has 1 are summed with keepdim.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- softmax, norms -----------------------------------------------------------------------
// Over the last dim, numerically stable (subtract the row max). x rank >= 1, float dtypes.
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
// x (..., d), weight (d): x / sqrt(mean(x^2) + eps) * weight, statistics in f32/f64.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// x (..., d), weight (d), bias (d): (x - mean) / sqrt(var + eps) * weight + bias (biased var).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

// ---- matmul -----------------------------------------------------------------------------
// lhs (..., m, k) x rhs (..., k, n) -> (..., m, n). Both rank >= 2; batch dims broadcast
// numpy-style. F32, F64, F16, BF16 (f16/bf16 accumulate in f32). CPU: Eigen GEMM (reads
// strided matrices in place when one of the last two strides is 1); CUDA: cuBLAS (transposed
// or batch-strided inputs go in without a copy when cuBLAS can express them).
Tensor matmul(const Tensor& lhs, const Tensor& rhs);

// ---- joining and gathering ----------------------------------------------------------------
// Concatenates along dim; all tensors share rank, dtype, device and every other dim. out has
// the first tensor's shape with dims[dim] = the sum of every tensor's dims[dim], in list order.
Tensor cat(const std::vector<Tensor>& tensors, size_t dim);
// out has x's shape with dims[dim] replaced by indices.elem_count(); out[.., j, ..] =
// x[.., indices[j], ..]. indices: rank 1, U32, I32 or I64, each in [0, x.dim(dim)).
// An index outside that range is O17, never a stray read. CPU indices are checked at the
// call. CUDA indices are checked by the gather kernel itself, so the call never waits for the
// device: a bad index gives zero rows and O17 is raised at the next call that waits for the
// device (docs/errors.md, "How errors surface on CUDA"); the backward drops those rows.
Tensor index_select(const Tensor& x, const Tensor& indices, size_t dim);
// ids (any shape, U32/I32/I64) into table (vocab, hidden) -> ids.shape + (hidden). The same
// range check as index_select; errors name embedding.
Tensor embedding(const Tensor& ids, const Tensor& table);

}  // namespace wick
