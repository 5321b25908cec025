// Rotary position embedding (rope) and the positions of a packed batch (varlen_positions).
// rope's element formula is kernels/rope_ops.h's rope_element, evaluated by the CPU loop here
// and by kernels/rope.cu. Backward rule:
//   rope: dx = the same rotation by the opposite angle applied to g (a rotation's inverse is
//         its transpose)
#include "kernels/rope.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

Tensor rope_fwd(const Tensor& x, const Tensor& pos, kernels::RopeParams p) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  Tensor xc = x.detach().contiguous();
  if (x.device().is_cpu()) {
    const int64_t* pv = cpu_base<int64_t>(pos) + pos.layout().start_offset();
    visit_float("rope", x, [&](auto zero) {
      using T = decltype(zero);
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* in = cpu_base<T>(xc) + xc.layout().start_offset();
      T* o = cpu_base_mut<T>(out);
      for (int64_t r = 0; r < p.rows; ++r)
        for (int64_t h0 = 0; h0 < p.row_len; h0 += p.head_dim) {
          const T* head = in + r * p.row_len + h0;
          for (int64_t c = 0; c < p.head_dim; ++c)
            o[r * p.row_len + h0 + c] = static_cast<T>(
                kernels::rope_element<C>(p, c, pv[r], [&](int64_t k) { return static_cast<C>(head[k]); }));
        }
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::rope(ktype(x.dtype()), xc.data_ptr(), out.data_ptr(), static_cast<const int64_t*>(pos.data_ptr()), p);
#else
  no_cuda("rope");
#endif
  return out;
}

// cu (batch + 1) on the host, checked cumulative from 0.
std::vector<int64_t> host_cumulative(const char* which, const Tensor& cu) {
  check_defined("varlen_positions", cu, which);
  check_index_dtype("varlen_positions", cu);
  if (cu.rank() != 1 || cu.dim(0) == 0)
    throw Error("O36", std::string("varlen_positions: ") + which + " must have rank 1 and at least one entry, got shape " +
                           to_string(cu.shape()));
  HostIndices h = host_indices(cu);
  std::vector<int64_t> v(h.values, h.values + h.size);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t prev = i == 0 ? 0 : v[i - 1];
    if ((i == 0 && v[0] != 0) || v[i] < prev)
      throw Error("O37", std::string("varlen_positions: ") + which + " " + to_string(v) +
                             " is not cumulative from 0 (entry " + std::to_string(i) + ")");
  }
  return v;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& positions, double base, RopeStyle style, size_t rotary_dim) {
  check_defined("rope", x, "x");
  check_defined("rope", positions, "positions");
  check_same_device("rope", x, positions);
  require_float("rope", x);
  check_index_dtype("rope", positions);
  bool leading = positions.rank() < x.rank();
  for (size_t d = 0; leading && d < positions.rank(); ++d) leading = positions.dim(d) == x.dim(d);
  if (!leading)
    throw Error("O34", "rope: positions shape " + to_string(positions.shape()) +
                           " must be a leading part of x's shape " + to_string(x.shape()) + " (without its last dim)");
  const size_t head_dim = x.dims().back(), rd = rotary_dim ? rotary_dim : head_dim;
  if (rd % 2 != 0 || rd > head_dim)
    throw Error("O35", "rope: rotary_dim " + std::to_string(rd) + " must be even and at most head_dim " +
                           std::to_string(head_dim));
  kernels::RopeParams p;
  p.rows = static_cast<int64_t>(positions.elem_count());
  p.row_len = p.rows ? static_cast<int64_t>(x.elem_count()) / p.rows : 0;
  p.head_dim = static_cast<int64_t>(head_dim);
  p.rotary_dim = static_cast<int64_t>(rd);
  p.base = base;
  p.interleaved = style == RopeStyle::Interleaved;
  Tensor pos = cast(positions.detach(), DType::I64).contiguous();
  Tensor out = rope_fwd(x, pos, p);
  if (!autograd::should_record(x)) return out;
  return autograd::record(out, "rope", {x, positions}, [pos, p](const Tensor& g) {
    kernels::RopeParams inv = p;
    inv.inverse = true;
    return Grads{rope_fwd(g, pos, inv), Tensor()};
  }, {pos});
}

Tensor varlen_positions(const Tensor& cu_seqlens, const std::optional<Tensor>& cu_seqlens_k) {
  std::vector<int64_t> q = host_cumulative("cu_seqlens", cu_seqlens), k = q;
  if (cu_seqlens_k) {
    k = host_cumulative("cu_seqlens_k", *cu_seqlens_k);
    if (k.size() != q.size())
      throw Error("O38", "varlen_positions: cu_seqlens_k has " + std::to_string(k.size()) + " entries but cu_seqlens has " +
                             std::to_string(q.size()));
  }
  for (size_t b = 0; b + 1 < q.size(); ++b) {
    const int64_t sq = q[b + 1] - q[b], sk = k[b + 1] - k[b];
    if (sk < sq)
      throw Error("O39", "varlen_positions: sequence " + std::to_string(b) + " has " + std::to_string(sq) +
                             " queries but only " + std::to_string(sk) + " keys");
  }
  // Built on the host in a tensor allocated first, so a total that no memory can hold is
  // refused (S03) before any work.
  Tensor pos = Tensor::empty(Shape{static_cast<size_t>(q.back())}, DType::I64, Device::cpu());
  int64_t* out = cpu_base_mut<int64_t>(pos);
  for (size_t b = 0; b + 1 < q.size(); ++b) {
    const int64_t sq = q[b + 1] - q[b], sk = k[b + 1] - k[b];
    for (int64_t i = 0; i < sq; ++i) *out++ = sk - sq + i;
  }
  return pos.to_device(cu_seqlens.device());
}

}  // namespace wick
