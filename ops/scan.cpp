// cumsum: running sums along one dim. Both devices see x as a contiguous (outer, n, inner)
// block and walk each line (o, i) in order, accumulating in f32 for f16/bf16, the type
// itself for f32/f64, uint64 for integers (wrapping, never a signed overflow; the sum wraps
// to the type on store).
// Backward rule:
//   cumsum: dx = reversed cumsum of g (dx[j] = sum over j' >= j of g[j'])
#include <type_traits>

#include "kernels/scan.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

template <class T>
void cpu_cumsum(const T* x, T* out, size_t outer, size_t n, size_t inner, bool reverse) {
  using A = std::conditional_t<std::is_integral_v<T>, uint64_t, compute_t<T>>;
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inner; ++i) {
      const size_t base = o * n * inner + i;
      A s = 0;
      for (size_t t = 0; t < n; ++t) {
        const size_t j = reverse ? n - 1 - t : t;
        s += static_cast<A>(static_cast<compute_t<T>>(x[base + j * inner]));
        out[base + j * inner] = static_cast<T>(static_cast<compute_t<T>>(s));
      }
    }
}

Tensor cumsum_fwd(const Tensor& x, size_t dim, bool reverse) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d) outer *= x.dim(d);
  for (size_t d = dim + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t n = x.dim(dim);
  Tensor xc = x.detach().contiguous();
  if (x.device().is_cpu()) {
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      cpu_cumsum<T>(cpu_base<T>(xc) + xc.layout().start_offset(), cpu_base_mut<T>(out), outer, n, inner, reverse);
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::cumsum(ktype(x.dtype()), xc.data_ptr(), out.data_ptr(), static_cast<int64_t>(outer),
                  static_cast<int64_t>(n), static_cast<int64_t>(inner), reverse);
#else
  no_cuda("cumsum");
#endif
  return out;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim_arg) {
  check_defined("cumsum", x);
  const size_t dim = check_dim("cumsum", x, dim_arg);
  Tensor out = cumsum_fwd(x, dim, false);
  if (!autograd::should_record(x)) return out;
  return autograd::record(out, "cumsum", {x}, [dim](const Tensor& g) { return Grads{cumsum_fwd(g, dim, true)}; });
}

}  // namespace wick
