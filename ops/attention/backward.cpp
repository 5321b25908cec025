#include "ops/attention/backward.h"

#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "kernels/flash/contract.h"
#include "tensor/stream.h"
#ifdef WICK_WITH_CUDA
#include "kernels/flash_bwd/flash_bwd.h"
#endif

namespace wick::attention {

namespace {

using namespace kernels::attn;  // the contract: seq_bounds, kv_row, key_visible, logit, ...
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> host_f32(const Tensor& t) {
  const std::vector<double> v = t.to_f64_vec();
  return std::vector<float>(v.begin(), v.end());
}

Tensor to_tensor(const std::vector<float>& v, const Shape& shape, DType dtype, Device dev) {
  return visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
    return Tensor::from_vec(out, shape, dev);
  });
}

}  // namespace

#ifdef WICK_WITH_CUDA
// Binds the forward's out/lse and grad_out (the autograd engine gives it out's shape, dtype
// and device) into the kernels' params and allocates the f32 accumulators
// (flash_bwd_params.h) and the outputs on the device.
std::array<Tensor, 3> cuda_backward(const AttnPlan& plan_in, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out) {
  AttnPlan plan = plan_in;
  const Tensor o = out.stride().back() == 1 ? out : out.contiguous();
  const Tensor l = lse.contiguous();
  const Tensor g = grad_out.stride().back() == 1 ? grad_out : grad_out.contiguous();
  bind_outputs(plan, o, l);

  kernels::FlashBwdParams bp;
  bp.fwd = plan.params;
  bp.dout = g.data_ptr();
  const auto& gs = g.stride();
  if (plan.varlen)
    bp.do_batch_stride = 0, bp.do_row_stride = gs[0], bp.do_head_stride = gs[1];
  else
    bp.do_batch_stride = gs[0], bp.do_row_stride = gs[1], bp.do_head_stride = gs[2];

  const auto& p = plan.params;
  const Device dev = q.device();
  const size_t H = p.num_heads, HK = p.num_heads_k, D = p.head_size, tq = p.total_q;
  bp.kv_rows = static_cast<int64_t>(k.elem_count() / std::max<size_t>(HK * D, 1));
  Tensor dsum = Tensor::empty(Shape{std::max<size_t>(tq * H, 1)}, DType::F32, dev);
  Tensor dq_acc = Tensor::empty(Shape{tq, H, D}, DType::F32, dev);
  Tensor dk_acc = Tensor::empty(Shape{static_cast<size_t>(bp.kv_rows), HK, D}, DType::F32, dev);
  Tensor dv_acc = Tensor::empty(dk_acc.shape(), DType::F32, dev);
  Tensor dq = Tensor::empty(q.shape(), q.dtype(), dev);
  Tensor dk = Tensor::empty(k.shape(), q.dtype(), dev);
  Tensor dv = Tensor::empty(v.shape(), q.dtype(), dev);
  bp.dsum = static_cast<float*>(dsum.data_ptr());
  bp.dq_accum = static_cast<float*>(dq_acc.data_ptr());
  bp.dk_accum = static_cast<float*>(dk_acc.data_ptr());
  bp.dv_accum = static_cast<float*>(dv_acc.data_ptr());
  bp.dq = dq.data_ptr(), bp.dk = dk.data_ptr(), bp.dv = dv.data_ptr();
  kernels::flash_bwd(bp, current_stream(dev).handle);
  return {dq, dk, dv};
}
#endif

std::array<Tensor, 3> host_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out) {
  // The host index tables, with the lse strides of a contiguous lse: every tensor below is
  // read in logical order, so the contract's offsets with contiguous strides index it.
  AttnPlan bound = plan;
  bind_outputs(bound, out, lse);
  const HostTables tables(bound);
  const auto& p = tables.params();
  const int H = p.num_heads, HK = p.num_heads_k, D = p.head_size;
  const std::vector<float> qh = host_f32(q), kh = host_f32(k), vh = host_f32(v), oh = host_f32(out),
                           lh = host_f32(lse), gh = host_f32(grad_out);
  std::vector<float> dq(qh.size(), 0.0f), dk(kh.size(), 0.0f), dv(vh.size(), 0.0f);
  const float inf = std::numeric_limits<float>::infinity();

  for (int b = 0; b < p.batch; ++b) {
    const SeqBounds r = seq_bounds(p, b);
    if (r.sq == 0 || r.sk == 0) continue;
    std::vector<int64_t> k_row(r.sk);  // row of key t in k's leading dims flattened
    for (int64_t t = 0; t < r.sk; ++t) k_row[t] = kv_row(p, b, r, t);
    for (int h = 0; h < H; ++h) {
      const int hk = kv_head(p, h);
      RowMatrix Q(r.sq, D), dO(r.sq, D), O(r.sq, D), K(r.sk, D), V(r.sk, D);
      for (int64_t i = 0; i < r.sq; ++i)
        for (int c = 0; c < D; ++c) {
          const size_t at = ((r.q_row0 + i) * H + h) * D + c;
          Q(i, c) = qh[at], dO(i, c) = gh[at], O(i, c) = oh[at];
        }
      for (int64_t t = 0; t < r.sk; ++t)
        for (int c = 0; c < D; ++c) {
          const size_t at = (k_row[t] * HK + hk) * D + c;
          K(t, c) = kh[at], V(t, c) = vh[at];
        }
      // Recompute the probabilities from the LSE, exactly as the forward defined them.
      RowMatrix S = Q * K.transpose() * p.softmax_scale;  // s = scale * q.k
      RowMatrix T;                                         // tanh(s / softcap)
      if (p.softcap > 0) T = (S.array() / p.softcap).tanh().matrix();
      RowMatrix P(r.sq, r.sk);
      const float slope = alibi_slope(p, h);
      for (int64_t i = 0; i < r.sq; ++i) {
        const float lse_i = lh[lse_offset(p, b, r, i, h)];
        const int64_t pos = key_position(r, i);
        for (int64_t t = 0; t < r.sk; ++t) {
          if (!key_visible<int64_t>(p, b, pos, t, r.sk) || lse_i == -inf) {
            P(i, t) = 0.0f;
            continue;
          }
          // S holds scale * q.k already: the contract's logit with a unit scale.
          P(i, t) = std::exp(logit(S(i, t), 1.0f, p.softcap, slope, pos, t) - lse_i);
        }
      }
      const RowMatrix dV = P.transpose() * dO;
      const RowMatrix dP = dO * V.transpose();
      const Eigen::ArrayXf Dsum = (dO.array() * O.array()).rowwise().sum();
      RowMatrix dS = (P.array() * (dP.array().colwise() - Dsum)).matrix();
      if (p.softcap > 0) dS.array() *= 1.0f - T.array().square();
      const RowMatrix dQ = dS * K * p.softmax_scale;
      const RowMatrix dK = dS.transpose() * Q * p.softmax_scale;
      for (int64_t i = 0; i < r.sq; ++i)
        for (int c = 0; c < D; ++c) dq[((r.q_row0 + i) * H + h) * D + c] = dQ(i, c);
      for (int64_t t = 0; t < r.sk; ++t)
        for (int c = 0; c < D; ++c) {
          const size_t at = (k_row[t] * HK + hk) * D + c;
          dk[at] += dK(t, c), dv[at] += dV(t, c);
        }
    }
  }
  const DType dt = q.dtype();
  const Device dev = q.device();
  return {to_tensor(dq, q.shape(), dt, dev), to_tensor(dk, k.shape(), dt, dev), to_tensor(dv, v.shape(), dt, dev)};
}

}  // namespace wick::attention
