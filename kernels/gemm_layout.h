// The row-major -> cuBLAS (column-major) translation of a batched GEMM, in one function,
// plain C++ so it is unit-tested on machines without a GPU (tests/test_ops_matmul.cpp,
// "gemm_layout: ...").
//
// wick computes C = A * B with row-major C (batch, m, n) contiguous. A column-major reader of
// C's memory sees C^T (n x m) with leading dimension n, and C^T = B^T * A^T. So cuBLAS gets
//   its "A" = our B read as B^T (n x k), its "B" = our A read as A^T (k x m), m' = n, n' = m.
// An operand M (rows R, cols Cl) with element (r, c) at r*rs + c*cs is, to a column-major
// reader, either
//   - M^T stored column-major with ld = rs, when cs == 1            -> op N
//   - M   stored column-major with ld = cs, when rs == 1, used as M^T -> op T
// and cuBLAS also needs ld >= the stored matrix's row count. Anything else needs a copy.
#pragma once
#include <climits>
#include <cstdint>
#include <optional>

namespace wick::kernels {

// One row-major matrix operand of a batched GEMM: matrix b's element (r, c) lives at
// base + b * batch_stride + r * row_stride + c * col_stride (elements).
struct RowMajorOperand {
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 0;
  int64_t batch_stride = 0;  // 0 broadcasts one matrix over the batch
};

// C (batch, m, n) contiguous = A (batch, m, k) * B (batch, k, n).
struct RowMajorGemm {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  RowMajorOperand a, b;
};

// Arguments of cublasGemmStridedBatchedEx. Its A operand is the row-major B, its B operand is
// the row-major A (the swap above); C is the row-major output with ldc = n.
struct CublasGemm {
  bool trans_a = false, trans_b = false;  // cuBLAS op on its A (our B) and its B (our A)
  int m = 0, n = 0, k = 0;                // m = our n, n = our m
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 0;
};

// How a column-major reader (cuBLAS, or an Eigen Map) takes one row-major operand.
struct ColMajorOperand {
  bool trans;  // false: M^T stored column-major (M row-major); true: M stored column-major
  int64_t ld;  // leading dimension (cuBLAS lda/ldb, Eigen's OuterStride)
};
// M (R x Cl, row-major view) as a column-major operand that yields M^T (Cl x R), or nullopt
// when neither stride is 1 or the leading dimension would be smaller than the stored
// matrix's row count. ops/matmul.cpp asks the same question for its Eigen Maps.
inline std::optional<ColMajorOperand> as_transposed(const RowMajorOperand& op) {
  const int64_t R = op.rows, Cl = op.cols;
  auto at_least = [](int64_t v, int64_t lo) { return v < lo ? lo : v; };
  // M^T (Cl x R) column-major: column r starts at r*rs, elements step cs == 1.
  if (op.col_stride == 1 || Cl <= 1) {
    int64_t ld = R <= 1 ? at_least(Cl, 1) : op.row_stride;
    if (ld >= at_least(Cl, 1)) return ColMajorOperand{false, ld};
  }
  // M (R x Cl) column-major: column c starts at c*cs, elements step rs == 1; cuBLAS transposes it.
  if (op.row_stride == 1 || R <= 1) {
    int64_t ld = Cl <= 1 ? at_least(R, 1) : op.col_stride;
    if (ld >= at_least(R, 1)) return ColMajorOperand{true, ld};
  }
  return std::nullopt;
}

namespace detail {
inline bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }
}  // namespace detail

// The cuBLAS call for g, or nullopt when an operand's strides cannot be expressed (neither
// stride is 1, a leading dimension would be too small, or a size overflows int); the caller
// then copies that operand to contiguous and asks again.
inline std::optional<CublasGemm> to_cublas(const RowMajorGemm& g) {
  auto b = as_transposed(g.b);  // B^T (n x k): cuBLAS's A
  auto a = as_transposed(g.a);  // A^T (k x m): cuBLAS's B
  if (!a || !b) return std::nullopt;
  CublasGemm c;
  c.trans_a = b->trans;
  c.trans_b = a->trans;
  if (!detail::fits_int(g.m) || !detail::fits_int(g.n) || !detail::fits_int(g.k) ||
      !detail::fits_int(b->ld) || !detail::fits_int(a->ld) || !detail::fits_int(g.batch))
    return std::nullopt;
  c.m = static_cast<int>(g.n);
  c.n = static_cast<int>(g.m);
  c.k = static_cast<int>(g.k);
  c.lda = static_cast<int>(b->ld);
  c.ldb = static_cast<int>(a->ld);
  c.ldc = static_cast<int>(g.n < 1 ? 1 : g.n);
  c.stride_a = g.b.batch_stride;
  c.stride_b = g.a.batch_stride;
  c.stride_c = g.m * g.n;
  c.batch = static_cast<int>(g.batch);
  return c;
}

}  // namespace wick::kernels
