// tril and triu: keep one triangle of the last two dims, zero the rest. A (rows, cols) U8
// mask from two aranges (j - i compared with the diagonal) picks x or 0 through where, so
// both devices run the existing kernels and the gradient is where's: g on the kept triangle.
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

Tensor triangle(const char* op, bool lower, const Tensor& x, int64_t diagonal) {
  check_defined(op, x);
  if (x.rank() < 2) throw Error("O33", std::string(op) + ": needs rank >= 2, got shape " + to_string(x.shape()));
  const int64_t rows = static_cast<int64_t>(x.dim(-2)), cols = static_cast<int64_t>(x.dim(-1));
  Tensor mask;
  {
    autograd::NoGradGuard no_grad;
    Tensor i = Tensor::arange(0, rows, DType::I64, x.device()).reshape({rows, 1});
    Tensor j = Tensor::arange(0, cols, DType::I64, x.device()).reshape({1, cols});
    Tensor diff = sub(j, i), d = Tensor::full(Shape{}, static_cast<double>(diagonal), DType::I64, x.device());
    mask = lower ? le(diff, d) : ge(diff, d);
  }
  return where(mask, x, Tensor::zeros(Shape{}, x.dtype(), x.device()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", true, x, diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", false, x, diagonal); }

}  // namespace wick
