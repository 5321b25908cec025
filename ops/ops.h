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
// - A dim argument may be negative, counting from the end (-1 is the last dim); a dim the
//   tensor does not have raises "{op}: dim 3 out of range for shape [2, 3] (rank 2, valid
//   dims -2..=1)".
#pragma once
#include <cstdint>
#include <optional>
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
// GELU, exact: 0.5 x (1 + erf(x / sqrt(2))), PyTorch's default gelu.
Tensor gelu_erf(const Tensor& x);
Tensor silu(const Tensor& x);      // x * sigmoid(x)
Tensor sigmoid(const Tensor& x);   // 1 / (1 + exp(-x))
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor abs(const Tensor& x);       // gradient sign(x), 0 at x == 0
Tensor affine(const Tensor& x, double mul, double add);  // x * mul + add
Tensor add_scalar(const Tensor& x, double s);            // x + s
Tensor mul_scalar(const Tensor& x, double s);            // x * s
Tensor powf(const Tensor& x, double e);                  // x ^ e (NaN for x < 0, non-integer e)
// min(max(x, lo), hi), lo <= hi (either may be infinite for a one-sided clamp). Every dtype
// (integer tensors clamp to the bounds rounded toward the inside). The gradient passes where
// lo <= x <= hi and is 0 elsewhere.
Tensor clamp(const Tensor& x, double lo, double hi);

// ---- elementwise binary, numpy broadcasting ---------------------------------------------
// lhs and rhs broadcast to a common shape (dims aligned from the right; each pair equal or
// one of them 1), else "shape mismatch in add, lhs: [2, 3], rhs: [4]". Same dtype required.
// Arithmetic: every dtype on CPU and CUDA. Integer add, sub and mul wrap modulo 2^bits of the
// dtype (two's complement, as Rust's wrapping_* and PyTorch's integer tensors); never
// undefined. Integer division truncates toward zero; division by
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
// Scalar arithmetic, either side. Float tensors: one affine pass (s / x is s * x^-1); other
// dtypes: the binary op against a rank-0 tensor of x's dtype holding s (converted as cast
// converts), so 2 * ids stays integer.
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);

// True when |a - b| <= atol + rtol * |b| for every element of a and b broadcast together
// (NaN is never close; equal infinities are). Any dtypes (compared in f64), same device.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// ---- copies and casts -------------------------------------------------------------------
// Converts every element to `dtype`, the same on every device (tensor/convert.h):
//   float -> float: round to nearest;  int -> float: nearest (i64 goes through f64)
//   float -> int: truncation toward zero, saturating at the type's min and max, NaN -> 0
//   int -> int: wraps modulo 2^bits of the target (I64 -1 -> U8 255)
// Same as x.to_dtype(dtype). Differentiable only to a float dtype: an integer result has no
// graph (as in PyTorch), so gradients never flow through a cast to an integer type.
Tensor cast(const Tensor& x, DType dtype);
// Writes src's elements (logical order) into dst's layout in place. dst may be any
// non-overlapping view (narrow, transpose, ...); shapes, dtypes and devices must match. src
// may overlap dst (two views of one storage): it is then copied aside first, so dst gets
// src's values as they were before the call. A broadcast dst (a stride-0 dim of size > 1) is
// an error; other self-overlapping dst layouts (e.g. shape [3, 2] with stride [1, 1]) are not
// detected: their result is unspecified. Not recorded by autograd, but it counts as a
// modification of dst's storage: a backward that saved a tensor of that storage before the
// call raises G29 instead of computing a wrong gradient. Used by cat and the narrow backward.
void copy_into(const Tensor& dst, const Tensor& src);

// ---- reductions ---------------------------------------------------------------------------
// Reduce x over `dims` (each in [-rank, rank), no repeats): sum(x, {0, -1}), sum(x, 1).
// keepdim keeps them as size-1 dims, else they are removed (all dims removed -> a rank-0
// tensor). Empty `dims` reduces nothing (a copy). sum/max/min: every dtype (integer sums wrap
// modulo 2^bits of the input dtype, on every device); mean: float dtypes, NaN over an empty
// dim (0 / 0). max/min over an empty dim is an error, unless the result is empty too.
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor max(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor min(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor sum_all(const Tensor& x);   // rank-0 sum of every element
Tensor mean_all(const Tensor& x);  // rank-0 mean of every element
// Index (I64) of the first largest / smallest element along `dim`. A NaN never replaces the
// running best (so a leading NaN wins and later NaNs are skipped); same rule on every device.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// Running sum along dim: out[.., j, ..] = sum_{i <= j} x[.., i, ..], x's shape and dtype.
// Every dtype (integers wrap; f16/bf16 accumulate in f32). Gradient: the reversed running
// sum of g.
Tensor cumsum(const Tensor& x, int64_t dim);
// Sums `grad` down to `shape` when grad's shape is shape broadcast (the backward of a
// broadcast): leading extra dims are summed away, dims where shape has 1 are summed with keepdim.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- softmax, norms -----------------------------------------------------------------------
// Over `dim` (default the last), numerically stable (subtract the max). x rank >= 1, float
// dtypes. A dim other than the last costs a transposed copy in and out.
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
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
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// out has x's shape with dims[dim] replaced by indices.elem_count(); out[.., j, ..] =
// x[.., indices[j], ..]. indices: rank 1, U32, I32 or I64, each in [0, x.dim(dim)).
// An index outside that range is O17, never a stray read. CPU indices are checked at the
// call. CUDA indices are checked by the gather kernel itself, so the call never waits for the
// device: a bad index gives zero rows and O17 is raised at the next call that waits for the
// device (docs/errors.md, "How errors surface on CUDA"); the backward drops those rows.
Tensor index_select(const Tensor& x, const Tensor& indices, int64_t dim);
// ids (any shape, U32/I32/I64) into table (vocab, hidden) -> ids.shape + (hidden). The same
// range check as index_select; errors name embedding.
Tensor embedding(const Tensor& ids, const Tensor& table);
// PyTorch's gather: index (U32/I32/I64) has x's rank and index.dim(d) <= x.dim(d) for every
// d != dim; out has index's shape and x's dtype, out[i][j][k] = x[index[i][j][k]][j][k] for
// dim 0 (likewise for the other dims). Every index must be in [0, x.dim(dim)), checked on
// the host at the call (CUDA indices are copied there, which waits for the device).
// Gradient: scatter_add of g.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x with src's elements added at the places index names along dim:
// out[index[i][j][k]][j][k] += src[i][j][k] for dim 0. index as for gather (its dims also
// <= src's); src has x's dtype. Float dtypes (f16/bf16 accumulate in f32). On CUDA repeated
// indices add in an unspecified order (atomics), so float sums may differ in the last bits
// between runs. Gradients: x gets g, src gets gather(g, dim, index).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// indices (any shape, U32/I32/I64, each in [0, num_classes)) -> indices.shape + (num_classes)
// holding 1 at each index and 0 elsewhere, in `dtype`. Not differentiable.
Tensor one_hot(const Tensor& indices, size_t num_classes, DType dtype = DType::I64);
// The lower (tril) or upper (triu) triangle of the last two dims, the rest zero: tril keeps
// x[.., i, j] where j - i <= diagonal, triu where j - i >= diagonal. Any dtype, rank >= 2.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- losses -------------------------------------------------------------------------------
// log_probs (N, C) float, targets (N) U32/I32/I64: -mean over n of log_probs[n, targets[n]],
// the mean taken over the targets that are not ignore_index (NaN when every target is
// ignored, as PyTorch). Every other target must be in [0, C). A rank-0 result.
// The targets are read on the host to check them (a copy, and a wait, for CUDA targets).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, std::optional<int64_t> ignore_index = std::nullopt);
// nll_loss(log_softmax(logits, -1), targets, ignore_index): logits (N, C).
// Gradient for logits: (softmax(logits) - one_hot(targets)) / count, zero on ignored rows.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::optional<int64_t> ignore_index = std::nullopt);

// ---- randomness -----------------------------------------------------------------------------
// Zeroes each element with probability p and scales the rest by 1 / (1 - p), p in [0, 1]
// (p == 1 zeroes everything). Element i is kept when the counter-based generator's value at
// (seed, i) says so (i in x's logical order), so the mask is the same on every device for the
// same seed and the backward recomputes it instead of storing it. Float dtypes. Always
// applies: call it only in training.
Tensor dropout(const Tensor& x, double p, uint64_t seed);

// ---- rotary position embedding --------------------------------------------------------------
enum class RopeStyle {
  HalfRotation,  // pairs (i, i + rotary_dim/2): GPT-NeoX, Hugging Face Llama
  Interleaved,   // pairs (2i, 2i + 1): the original RoFormer / Meta Llama / GPT-J
};
// Rotates pairs of x's last dim by angle position * base^(-2i / rotary_dim), pair i:
//   (a, b) -> (a cos - b sin, a sin + b cos).
// x (..., D) float; positions U32/I32/I64 whose shape is a leading part of x's
// (x (total, heads, D) with positions (total); x (B, T, H, D) with positions (B, T)): each
// position applies to the sub-tensor it indexes. rotary_dim: even, <= D, 0 meaning D; dims
// past it pass through. Angles are computed in f64, the rotation in f32 (f64 for f64 input).
// Gradient: the rotation by the opposite angle.
Tensor rope(const Tensor& x, const Tensor& positions, double base = 10000.0,
            RopeStyle style = RopeStyle::HalfRotation, size_t rotary_dim = 0);
// Positions for a packed batch, restarting at 0 for each sequence: cu_seqlens (batch + 1)
// cumulative U32/I32/I64 -> (total) I64 [0, 1, .., len_0 - 1, 0, 1, ..], on cu_seqlens'
// device. With cu_seqlens_k too, each sequence's positions end where its keys end (the
// causal mask's bottom-right alignment): query i of sequence b is at sk_b - sq_b + i, as in a
// decode step over a cache. Reads the lengths on the host (a copy, and a wait, for CUDA).
Tensor varlen_positions(const Tensor& cu_seqlens, const std::optional<Tensor>& cu_seqlens_k = std::nullopt);

}  // namespace wick
