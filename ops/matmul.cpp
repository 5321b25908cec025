// Batched matmul: lhs (..., m, k) x rhs (..., k, n) -> (..., m, n), batch dims broadcast.
// CPU: ops/cpu/gemm.h (a library's f32 GEMM, MKL or oneDNN, where the build has one, else
// Eigen's GEMM for this CPU's code path) on the strided matrices (row- or column-major with an
// outer stride, so transposed and row-strided inputs are read in place). CUDA: cuBLAS, via the
// one row-major -> column-major translation in kernels/gemm_layout.h.
// Backward: dA = g * B^T, dB = A^T * g, each summed back over broadcast batch dims.
#include "kernels/gemm_layout.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/parallel.h"
#include "ops/op_util.h"
#ifdef WICK_WITH_CUDA
#include "kernels/cublas_gemm.h"
#endif

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

// How one (rows x cols) matrix with strides (rs, cs) maps onto an Eigen Map: the question
// cuBLAS asks too, answered by kernels::as_transposed (trans == false: a row-major Map).
struct MatKind {
  bool row_major;
  int64_t ld;  // Eigen's OuterStride
};

std::optional<MatKind> mat_kind(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  auto op = kernels::as_transposed(kernels::RowMajorOperand{rows, cols, rs, cs, 0});
  if (!op) return std::nullopt;
  return MatKind{!op->trans, op->ld};
}

// One GEMM runs through ops/cpu/gemm.h (threaded over the shared CPU pool when it is large). A batch of several products is split over the pool by
// batch entry instead, each product on one thread (the GEMM does not fork again inside a
// parallel region); a batch too small to pay for the fork stays on the calling thread.
template <class T>
void gemm_batch(const T* pa, const std::vector<int64_t>& offa, MatKind ka, const T* pb,
                const std::vector<int64_t>& offb, MatKind kb, T* pc, int64_t m, int64_t n, int64_t k) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      cpu::gemm<T>(m, n, k, {pa + offa[i], ka.ld, ka.row_major}, {pb + offb[i], kb.ld, kb.row_major}, pc + i * m * n);
  };
  const auto batch = static_cast<int64_t>(offa.size());
  if (batch == 1) return run(0, 1);
  // About 2^20 multiply-adds per thread at least.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(1, m * n * k));
  cpu::parallel_for(batch, grain, run);
}

// Storage offset of each batch's matrix, in batch order, for a layout (batch..., rows, cols).
std::vector<int64_t> batch_offsets(const Layout& l) {
  std::vector<size_t> bd(l.dims().begin(), l.dims().end() - 2);
  std::vector<int64_t> bs(l.stride().begin(), l.stride().end() - 2);
  Layout batch(Shape(bd), bs, l.start_offset());
  std::vector<int64_t> out;
  out.reserve(batch.elem_count());
  for (StridedIndex it(batch); !it.done(); it.next()) out.push_back(static_cast<int64_t>(it.offset()));
  return out;
}

template <class T>
void cpu_matmul(Tensor a, Tensor b, const Tensor& out, int64_t m, int64_t n, int64_t k) {
  auto kind_of = [](Tensor& t) {
    const size_t r = t.rank();
    auto kd = mat_kind(static_cast<int64_t>(t.dim(r - 2)), static_cast<int64_t>(t.dim(r - 1)), t.stride()[r - 2],
                       t.stride()[r - 1]);
    if (!kd) {  // neither stride is 1: one compact copy, then it is row-major
      t = t.contiguous();
      kd = mat_kind(static_cast<int64_t>(t.dim(r - 2)), static_cast<int64_t>(t.dim(r - 1)), t.stride()[r - 2],
                    t.stride()[r - 1]);
    }
    return *kd;
  };
  MatKind ka = kind_of(a), kb = kind_of(b);
  std::vector<int64_t> oa = batch_offsets(a.layout()), ob = batch_offsets(b.layout());
  const T* pa = cpu_base<T>(a);
  const T* pb = cpu_base<T>(b);
  T* pc = cpu_base_mut<T>(out);
  gemm_batch<T>(pa, oa, ka, pb, ob, kb, pc, m, n, k);
}

#ifdef WICK_WITH_CUDA
// The single stride that walks a layout's batch dims in order, if there is one.
std::optional<int64_t> batch_stride(const Layout& l) {
  std::optional<int64_t> inner;  // stride of the innermost non-1 batch dim seen so far
  int64_t expect = 0;
  for (size_t i = l.rank() - 2; i-- > 0;) {
    if (l.dims()[i] == 1) continue;
    if (inner && l.stride()[i] != expect) return std::nullopt;
    if (!inner) inner = l.stride()[i];
    expect = l.stride()[i] * static_cast<int64_t>(l.dims()[i]);
  }
  return inner.value_or(0);
}

std::optional<kernels::RowMajorOperand> operand(const Layout& l) {
  auto bs = batch_stride(l);
  if (!bs) return std::nullopt;
  const size_t r = l.rank();
  return kernels::RowMajorOperand{static_cast<int64_t>(l.dims()[r - 2]), static_cast<int64_t>(l.dims()[r - 1]),
                                  l.stride()[r - 2], l.stride()[r - 1], *bs};
}

void cuda_matmul(Tensor a, Tensor b, const Tensor& out, int64_t batch, int64_t m, int64_t n, int64_t k) {
  kernels::RowMajorGemm g{batch, m, n, k, {}, {}};
  auto build = [&]() -> std::optional<kernels::CublasGemm> {
    auto oa = operand(a.layout()), ob = operand(b.layout());
    if (!oa || !ob) return std::nullopt;
    g.a = *oa;
    g.b = *ob;
    return kernels::to_cublas(g);
  };
  auto c = build();
  if (!c) {  // a layout cuBLAS cannot express: compact copies, which it always can
    a = a.contiguous();
    b = b.contiguous();
    c = build();
  }
  if (!c)
    throw Error("O20", "matmul: sizes (batch " + std::to_string(batch) + ", m " + std::to_string(m) + ", n " +
                std::to_string(n) + ", k " + std::to_string(k) + ") exceed cuBLAS's 32-bit arguments");
  set_current_device(out.device());
  kernels::gemm(ktype(out.dtype()), out.device().gpu_id, *c, b.data_ptr(), a.data_ptr(), out.data_ptr());
}
#endif

// candle's shape-mismatch text for matmul with the reason appended, so the caller learns
// which of the three conditions failed: "shape mismatch in matmul, lhs: [2, 3], rhs: [2, 3]:
// ...".
[[noreturn]] void matmul_mismatch(const Tensor& a, const Tensor& b, const std::string& why) {
  throw Error("O21", "shape mismatch in matmul, lhs: " + to_string(a.shape()) + ", rhs: " + to_string(b.shape()) + ": " + why);
}

Tensor matmul_fwd(const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || b.rank() < 2)
    matmul_mismatch(a, b, "both sides need rank >= 2 (lhs has rank " + std::to_string(a.rank()) + ", rhs rank " +
                              std::to_string(b.rank()) + ")");
  if (a.dims().back() != b.dim(b.rank() - 2))
    matmul_mismatch(a, b, "inner dims differ: lhs k (its last dim) is " + std::to_string(a.dims().back()) +
                              ", rhs k (its second-to-last dim) is " + std::to_string(b.dim(b.rank() - 2)));
  const DType dt = a.dtype();
  if (dt != DType::F32 && dt != DType::F64 && dt != DType::F16 && dt != DType::BF16)
    unsupported("matmul", dt, a.device());
  const size_t m = a.dim(a.rank() - 2), k = a.dims().back(), n = b.dims().back();
  std::vector<size_t> ba(a.dims().begin(), a.dims().end() - 2), bb(b.dims().begin(), b.dims().end() - 2);
  Shape bshape;
  try {
    bshape = broadcast_shape("matmul", Shape(ba), Shape(bb));
  } catch (const Error&) {
    matmul_mismatch(a, b, "batch dims " + to_string(Shape(ba)) + " and " + to_string(Shape(bb)) + " do not broadcast");
  }
  auto with = [&](size_t r, size_t c) {
    std::vector<size_t> d = bshape.dims();
    d.push_back(r);
    d.push_back(c);
    return Shape(d);
  };
  const Shape out_shape = with(m, n);
  // An empty output, or k == 0: every element is an empty sum.
  if (out_shape.elem_count() == 0 || k == 0) return Tensor::zeros(out_shape, dt, a.device());
  // f16/bf16 on the CPU: an f32 GEMM. The casts take a and b as given, so a broadcast
  // batch dim is not copied once per batch.
  if (a.device().is_cpu() && dt != DType::F32 && dt != DType::F64)
    return cast(matmul_fwd(cast(a, DType::F32), cast(b, DType::F32)), dt);
  Tensor ad(a.storage(), a.layout().broadcast_as(with(m, k)), dt);
  Tensor bd(b.storage(), b.layout().broadcast_as(with(k, n)), dt);
  Tensor out = Tensor::empty(out_shape, dt, a.device());
  const auto M = static_cast<int64_t>(m), N = static_cast<int64_t>(n), K = static_cast<int64_t>(k);
  if (a.device().is_cpu()) {
    if (dt == DType::F32) cpu_matmul<float>(ad, bd, out, M, N, K);
    else cpu_matmul<double>(ad, bd, out, M, N, K);
    return out;
  }
#ifdef WICK_WITH_CUDA
  cuda_matmul(ad, bd, out, static_cast<int64_t>(bshape.elem_count()), M, N, K);
#else
  no_cuda("matmul");
#endif
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_pair("matmul", a, b);
  Tensor out;
  {
    autograd::NoGradGuard no_grad;  // the f16/bf16 casts inside are not part of the graph
    out = matmul_fwd(a.detach(), b.detach());
  }
  if (!autograd::should_record(a, b)) return out;
  Tensor ad = a.detach(), bd = b.detach();
  return autograd::record(out, "matmul", {a, b}, [ad, bd](const Tensor& g) {
    return Grads{sum_to(matmul(g, bd.t()), ad.shape()), sum_to(matmul(ad.t(), g), bd.shape())};
  }, {ad, bd});
}

}  // namespace wick
