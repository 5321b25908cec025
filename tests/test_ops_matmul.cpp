// matmul against a double triple loop: every float dtype, transposed / offset / broadcast
// operands, broadcast batch dims; and the row-major -> cuBLAS translation on its own.
#include "kernels/gemm_layout.h"
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

namespace {

// Reference (..., m, k) x (..., k, n) with broadcast batch dims, in double.
std::vector<double> matmul_ref(const Tensor& a, const Tensor& b, const Shape& out) {
  auto av = a.to_f64_vec(), bv = b.to_f64_vec();
  const size_t r = out.rank(), m = out[r - 2], n = out[r - 1], k = a.dims().back();
  std::vector<size_t> ob(out.dims().begin(), out.dims().end() - 2);
  std::vector<size_t> abd(a.dims().begin(), a.dims().end() - 2), bbd(b.dims().begin(), b.dims().end() - 2);
  size_t batches = 1;
  for (size_t v : ob) batches *= v;
  std::vector<double> c(batches * m * n, 0.0);
  for (size_t bi = 0; bi < batches; ++bi) {
    auto idx = unravel(bi, ob);
    size_t fa = broadcast_flat(idx, abd), fb = broadcast_flat(idx, bbd);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double s = 0;
        for (size_t p = 0; p < k; ++p) s += av[(fa * m + i) * k + p] * bv[(fb * k + p) * n + j];
        c[(bi * m + i) * n + j] = s;
      }
  }
  return c;
}

double matmul_tol(DType dt, size_t k) {
  switch (dt) {
    case DType::F16: return 2e-3 * std::sqrt(double(k));
    case DType::BF16: return 1.5e-2 * std::sqrt(double(k));
    case DType::F32: return 1e-5 * std::sqrt(double(k));
    default: return 1e-12 * double(k);
  }
}

}  // namespace

TEST_CASE("ops: matmul on every layout, dtype and broadcast batch") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : float_dtypes()) {
      // 2-D, every layout pair.
      for (auto& [la, a] : layouts({5, 7}, dt, dev, 91))
        for (auto& [lb, b] : layouts({7, 3}, dt, dev, 92)) {
          const std::string lhs = la, rhs = lb;  // INFO captures in a lambda: variables, not bindings
          INFO(dtype_name(dt), " lhs ", lhs, " rhs ", rhs);
          Tensor c = matmul(a, b);
          CHECK(c.dims() == std::vector<size_t>{5, 3});
          check_close(c, matmul_ref(a, b, c.shape()), matmul_tol(dt, 7));
        }
      INFO(dtype_name(dt));
      // Batched with broadcast batch dims, transposed and offset operands.
      Tensor a = Tensor::randn({2, 1, 6, 4}, dt, dev, 93).transpose(2, 3);            // (2, 1, 4, 6) transposed
      Tensor b = Tensor::randn({3, 6, 9}, dt, dev, 94).narrow(2, 2, 5);                // (3, 6, 5) row stride 9
      Tensor c = matmul(a, b);
      CHECK(c.dims() == std::vector<size_t>{2, 3, 4, 5});
      check_close(c, matmul_ref(a, b, c.shape()), matmul_tol(dt, 6));
      // One matrix broadcast over a batch (stride-0 batch dim), and a batch-permuted operand.
      Tensor w = Tensor::randn({6, 3}, dt, dev, 95);
      Tensor x = Tensor::randn({4, 2, 6}, dt, dev, 96).permute({1, 0, 2});  // (2, 4, 6), batch stride 6
      Tensor y = matmul(x, w.broadcast_as({2, 6, 3}));
      check_close(y, matmul_ref(x, w.broadcast_as({2, 6, 3}), y.shape()), matmul_tol(dt, 6));
      // A middle-dim broadcast that no single batch stride can express.
      Tensor p = Tensor::randn({2, 1, 3, 4}, dt, dev, 97).broadcast_as({2, 3, 3, 4});
      Tensor q = Tensor::randn({2, 3, 4, 2}, dt, dev, 98);
      Tensor pq = matmul(p, q);
      check_close(pq, matmul_ref(p, q, pq.shape()), matmul_tol(dt, 4));
      // Neither stride 1: a copy is taken, the result is still right.
      Tensor s = Tensor::randn({8, 10}, dt, dev, 99).narrow(0, 0, 4);
      Tensor odd(s.storage(), Layout(Shape{4, 5}, {10, 2}, 1), dt);
      Tensor t = Tensor::randn({5, 2}, dt, dev, 100);
      check_close(matmul(odd, t), matmul_ref(odd, t, Shape{4, 2}), matmul_tol(dt, 5));
      // Vectors as (1, k) and (k, 1) matrices; k = 0 gives zeros.
      Tensor r = Tensor::randn({1, 7}, dt, dev, 101), col = Tensor::randn({7, 1}, dt, dev, 102);
      check_close(matmul(r, col), matmul_ref(r, col, Shape{1, 1}), matmul_tol(dt, 7));
      Tensor z = matmul(Tensor::randn({3, 0}, dt, dev, 1), Tensor::randn({0, 2}, dt, dev, 2));
      CHECK(z.to_f64_vec() == std::vector<double>(6, 0.0));
    }
  }
}

TEST_CASE("ops: a larger f32 matmul agrees with the double reference") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor a = Tensor::randn({70, 130}, DType::F32, dev, 111), b = Tensor::randn({90, 130}, DType::F32, dev, 112).t();
    Tensor c = matmul(a, b);
    check_close(c, matmul_ref(a, b, c.shape()), 2e-4);
  }
}

namespace {

// Runs a CublasGemm the way cuBLAS defines it (column-major, op N/T, strided batches) on the
// host, so the translation can be checked without a GPU.
void emulate_cublas(const kernels::CublasGemm& g, const double* A, const double* B, double* C) {
  for (int bi = 0; bi < g.batch; ++bi)
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) {
        double s = 0;
        for (int p = 0; p < g.k; ++p) {
          // op(A)(i, p), op(B)(p, j); X(r, c) column-major = X[r + c * ld]
          double a = g.trans_a ? A[bi * g.stride_a + p + i * g.lda] : A[bi * g.stride_a + i + p * g.lda];
          double b = g.trans_b ? B[bi * g.stride_b + j + p * g.ldb] : B[bi * g.stride_b + p + j * g.ldb];
          s += a * b;
        }
        C[bi * g.stride_c + i + j * g.ldc] = s;
      }
}

// Checks to_cublas on one problem whose operands are read from `a` / `b` through the given
// row-major strides, against the row-major definition.
void check_translation(int64_t batch, int64_t m, int64_t n, int64_t k, kernels::RowMajorOperand oa,
                       kernels::RowMajorOperand ob, bool expect_ok) {
  kernels::RowMajorGemm g{batch, m, n, k, oa, ob};
  auto c = kernels::to_cublas(g);
  REQUIRE(c.has_value() == expect_ok);
  if (!c) return;
  std::vector<double> A(4096), B(4096);
  for (size_t i = 0; i < A.size(); ++i) { A[i] = std::sin(double(i) * 0.37); B[i] = std::cos(double(i) * 0.91); }
  std::vector<double> got(static_cast<size_t>(batch * m * n), -1.0), want(got.size());
  emulate_cublas(*c, B.data(), A.data(), got.data());  // cuBLAS's A is our B and vice versa
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += A[bi * oa.batch_stride + i * oa.row_stride + p * oa.col_stride] *
               B[bi * ob.batch_stride + p * ob.row_stride + j * ob.col_stride];
        want[(bi * m + i) * n + j] = s;
      }
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("gemm_layout: row-major to cuBLAS translation, checked by emulating cuBLAS") {
  // Contiguous: C^T = B^T A^T with no transposes, lda = n, ldb = k.
  auto c = kernels::to_cublas({2, 3, 4, 5, {3, 5, 5, 1, 15}, {5, 4, 4, 1, 20}});
  REQUIRE(c);
  CHECK_FALSE(c->trans_a);
  CHECK_FALSE(c->trans_b);
  CHECK(c->m == 4);
  CHECK(c->n == 3);
  CHECK(c->k == 5);
  CHECK(c->lda == 4);
  CHECK(c->ldb == 5);
  CHECK(c->ldc == 4);
  CHECK(c->stride_a == 20);
  CHECK(c->stride_b == 15);
  CHECK(c->stride_c == 12);
  CHECK(c->batch == 2);
  // (batch, m, n, k, lhs {rows, cols, rs, cs, bs}, rhs {...}, expressible)
  check_translation(2, 3, 4, 5, {3, 5, 5, 1, 15}, {5, 4, 4, 1, 20}, true);    // contiguous
  check_translation(2, 3, 4, 5, {3, 5, 1, 3, 15}, {5, 4, 4, 1, 20}, true);    // lhs transposed
  check_translation(2, 3, 4, 5, {3, 5, 5, 1, 15}, {5, 4, 1, 5, 20}, true);    // rhs transposed
  check_translation(2, 3, 4, 5, {3, 5, 1, 3, 15}, {5, 4, 1, 5, 20}, true);    // both transposed
  check_translation(3, 3, 4, 5, {3, 5, 9, 1, 40}, {5, 4, 7, 1, 0}, true);     // row strides, rhs broadcast
  check_translation(1, 1, 4, 5, {1, 5, 0, 1, 0}, {5, 4, 4, 1, 0}, true);      // m = 1 with stride 0
  check_translation(2, 3, 1, 5, {3, 5, 5, 1, 15}, {5, 1, 1, 77, 5}, true);    // n = 1
  check_translation(1, 3, 4, 5, {3, 5, 10, 2, 0}, {5, 4, 4, 1, 0}, false);    // no unit stride
  check_translation(1, 3, 4, 5, {3, 5, 2, 1, 0}, {5, 4, 4, 1, 0}, false);     // overlapping rows (ld < k)
}
