// softmax and log_softmax over one dim, numerically stable: y = exp(x - max) / sum(exp(x - max)).
// The kernels work on rows of the last dim; another dim is moved last (a transposed view,
// made contiguous inside) and moved back.
// Backward rules (s = softmax(x), rows along the last dim):
//   softmax:     dx = s * (g - sum(g * s))
//   log_softmax: dx = g - exp(y) * sum(g)
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/softmax.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

template <class T>
void cpu_softmax_rows(bool log, const T* x, T* out, size_t rows, size_t cols) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = out + r * cols;
    C mx = -std::numeric_limits<C>::infinity();
    for (size_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<C>(xr[c]));
    C sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(static_cast<C>(xr[c]) - mx);
    const C log_sum = std::log(sum);
    for (size_t c = 0; c < cols; ++c) {
      C v = static_cast<C>(xr[c]) - mx;
      yr[c] = static_cast<T>(log ? v - log_sum : std::exp(v) / sum);
    }
  }
}

Tensor softmax_fwd(const char* name, bool log, const Tensor& x) {
  check_defined(name, x);
  require_float(name, x);
  if (x.rank() == 0) throw Error("O10", std::string(name) + ": needs rank >= 1, got shape []");
  const size_t cols = x.dims().back();
  const size_t rows = cols ? x.elem_count() / cols : 0;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  Tensor xc = x.detach().contiguous();
  if (x.device().is_cpu()) {
    visit_float(name, x, [&](auto zero) {
      using T = decltype(zero);
      cpu_softmax_rows<T>(log, cpu_base<T>(xc) + xc.layout().start_offset(), cpu_base_mut<T>(out), rows, cols);
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::softmax_rows(log, ktype(x.dtype()), xc.data_ptr(), out.data_ptr(), static_cast<int64_t>(rows),
                        static_cast<int64_t>(cols));
#else
  no_cuda(name);
#endif
  return out;
}

Tensor softmax_last(const Tensor& x) {
  Tensor out = softmax_fwd("softmax", false, x);
  if (!autograd::should_record(x)) return out;
  Tensor s = out.detach();
  return autograd::record(out, "softmax", {x}, [s](const Tensor& g) {
    const size_t last = s.rank() - 1;
    return Grads{mul(s, sub(g, sum(mul(g, s), {last}, true)))};
  }, {s});
}

Tensor log_softmax_last(const Tensor& x) {
  Tensor out = softmax_fwd("log_softmax", true, x);
  if (!autograd::should_record(x)) return out;
  Tensor y = out.detach();
  return autograd::record(out, "log_softmax", {x}, [y](const Tensor& g) {
    const size_t last = y.rank() - 1;
    return Grads{sub(g, mul(exp(y), sum(g, {last}, true)))};
  }, {y});
}

// The checks of softmax_fwd first (so a scalar reports O10, not a dim error), then the dim.
Tensor over_dim(const char* name, Tensor (*last_dim_op)(const Tensor&), const Tensor& x, int64_t dim) {
  check_defined(name, x);
  require_float(name, x);
  if (x.rank() == 0) throw Error("O10", std::string(name) + ": needs rank >= 1, got shape []");
  const size_t d = check_dim(name, x, dim), last = x.rank() - 1;
  if (d == last) return last_dim_op(x);
  return last_dim_op(x.transpose(d, last)).transpose(d, last).contiguous();
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return over_dim("softmax", softmax_last, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return over_dim("log_softmax", log_softmax_last, x, dim); }

}  // namespace wick
