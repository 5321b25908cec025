#include "ops/attention/backward.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/flash/contract.h"
#include "ops/cpu/parallel.h"
#include "ops/ops.h"  // cast
#include "tensor/stream.h"
#ifdef WICK_WITH_CUDA
#include "kernels/flash_bwd/flash_bwd.h"
#endif

namespace wick::attention {

namespace {

using namespace kernels::attn;  // the contract: seq_bounds, kv_row, key_visible, logit, ...
using kernels::FlashFwdParams;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Column = Eigen::Array<float, Eigen::Dynamic, 1>;

constexpr int kBlockM = 64;  // query rows per tile
constexpr int kBlockN = 64;  // keys per tile

// The host tensors the backward reads, each with its (batch, row, head) strides in the
// contract's sense (channel stride 1): the tensors themselves for a CPU plan (read in place,
// whatever their layout: a broadcast k of 5 real rows stays 5 rows), compact host copies for
// a CUDA plan. out and grad_out are laid out like q, lse as the forward wrote it.
struct HostInputs {
  Tensor q, k, v, out, grad_out, lse;
};

Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : t.to_device(Device::cpu()); }
// Channels contiguous, as the loads below read them (a broadcast grad_out from sum() is not).
Tensor rows_contiguous(const Tensor& t) { return t.stride().back() == 1 ? t : t.contiguous(); }

struct Strides {
  int64_t batch, row, head;
};
// (batch, row, head) strides of a q-like tensor, or of k / v (paged: block, row in block).
Strides strides_of(const Tensor& t, bool varlen) {
  const auto& s = t.stride();
  if (varlen && t.rank() == 3) return {0, s[0], s[1]};
  return {s[0], s[1], s[2]};
}

// The plan's params pointed at the host tensors (index tables from HostTables).
FlashFwdParams host_params(const AttnPlan& plan, const FlashFwdParams& tables, const HostInputs& in,
                           Strides& dout) {
  FlashFwdParams p = tables;
  p.q = in.q.data_ptr(), p.k = in.k.data_ptr(), p.v = in.v.data_ptr(), p.out = in.out.data_ptr();
  p.lse = static_cast<float*>(in.lse.data_ptr());
  const Strides q = strides_of(in.q, plan.varlen), k = strides_of(in.k, plan.varlen),
                v = strides_of(in.v, plan.varlen), o = strides_of(in.out, plan.varlen);
  p.q_batch_stride = q.batch, p.q_row_stride = q.row, p.q_head_stride = q.head;
  p.k_batch_stride = k.batch, p.k_row_stride = k.row, p.k_head_stride = k.head;
  p.v_batch_stride = v.batch, p.v_row_stride = v.row, p.v_head_stride = v.head;
  p.o_batch_stride = o.batch, p.o_row_stride = o.row, p.o_head_stride = o.head;
  dout = strides_of(in.grad_out, plan.varlen);
  return p;
}

// One thread's share of the backward: every (sequence, query head, query tile) of the kv
// heads it owns. dK and dV of kv head hk are written by the thread that owns hk only, so
// threads never add into the same rows (sequences may share paged blocks; heads never).
// T: the storage type (f16 / bf16).
template <class T>
class Worker {
 public:
  Worker(const FlashFwdParams& p, const T* dout, Strides ds, T* dq, float* dk_acc, float* dv_acc)
      : p_(p), d_(p.head_size), dout_(dout), ds_(ds), dq_(dq), dk_(dk_acc), dv_(dv_acc) {}

  void run_kv_head(int hk) {
    const int group = group_size(p_);
    for (int b = 0; b < p_.batch; ++b) {
      const SeqBounds s = seq_bounds(p_, b);
      if (s.sq == 0) continue;
      for (int h = hk * group; h < (hk + 1) * group; ++h)
        for (int m0 = 0; m0 < s.sq; m0 += kBlockM) query_tile(b, s, h, hk, m0, std::min(kBlockM, s.sq - m0));
    }
  }

 private:
  const FlashFwdParams& p_;
  const int d_;
  const T* dout_;
  const Strides ds_;
  T* dq_;             // (total_q, num_heads, d) contiguous, or null when q needs no gradient
  float* dk_, *dv_;   // (kv rows, num_heads_k, d) f32 accumulators, or null
  RowMatrix Q_, dO_, dQ_, K_, V_, S_, dP_;
  Column lse_, dsum_;

  static void load(const T* src, float* dst, int n) {
    for (int i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }

  // The rows [m0, m0 + rows) of query head h of sequence b: recompute P from the LSE key
  // tile by key tile (only the tiles the rows can see), and form dQ, dK, dV.
  void query_tile(int b, const SeqBounds& s, int h, int hk, int m0, int rows) {
    const T* q = static_cast<const T*>(p_.q);
    const T* out = static_cast<const T*>(p_.out);
    Q_.resize(rows, d_), dO_.resize(rows, d_), lse_.resize(rows), dsum_.resize(rows);
    std::vector<float> o_row(d_);
    for (int r = 0; r < rows; ++r) {
      const int64_t i = m0 + r;
      load(q + q_offset(p_, b, s, i, h), Q_.row(r).data(), d_);
      load(dout_ + b * ds_.batch + (s.q_start + i) * ds_.row + h * ds_.head, dO_.row(r).data(), d_);
      load(out + o_offset(p_, b, s, i, h), o_row.data(), d_);
      // D = rowsum(dO * O)
      dsum_(r) = (dO_.row(r).array() * Eigen::Map<const Eigen::ArrayXf>(o_row.data(), d_).transpose()).sum();
      lse_(r) = p_.lse[lse_offset(p_, b, s, i, h)];
    }
    if (dq_) dQ_.setZero(rows, d_);
    const int64_t pos0 = key_position(s, m0), pos1 = pos0 + rows - 1;
    const KeyRange keys = visible_keys_of_rows<int64_t>(p_, b, pos0, pos1, s.sk);
    const float slope = alibi_slope(p_, h);
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t n0 = keys.empty() ? keys.end : keys.begin; n0 < keys.end; n0 += kBlockN) {
      const int cols = static_cast<int>(std::min<int64_t>(kBlockN, keys.end - n0));
      K_.resize(cols, d_), V_.resize(cols, d_);
      for (int c = 0; c < cols; ++c) {
        load(static_cast<const T*>(p_.k) + k_offset<int64_t>(p_, b, s, n0 + c, hk), K_.row(c).data(), d_);
        load(static_cast<const T*>(p_.v) + v_offset<int64_t>(p_, b, s, n0 + c, hk), V_.row(c).data(), d_);
      }
      // s = scale * q.k; P = exp(logit - lse) where visible (0 elsewhere and on rows that
      // saw nothing); dS = P * (dP - D), times cap'(s) = 1 - tanh^2(s / softcap) with softcap.
      S_.noalias() = Q_ * K_.transpose();
      S_ *= p_.softmax_scale;
      dP_.noalias() = dO_ * V_.transpose();
      for (int r = 0; r < rows; ++r) {
        const int64_t pos = pos0 + r;
        for (int c = 0; c < cols; ++c) {
          const int64_t t = n0 + c;
          if (lse_(r) == -inf || !key_visible<int64_t>(p_, b, pos, t, s.sk)) {
            S_(r, c) = dP_(r, c) = 0.f;  // exact zeros: what a masked key's values hold never leaks in
            continue;
          }
          const float prob = std::exp(logit(S_(r, c), 1.0f, p_.softcap, slope, pos, t) - lse_(r));
          float cap_grad = 1.f;
          if (p_.softcap > 0) {
            const float th = std::tanh(S_(r, c) / p_.softcap);
            cap_grad = 1.f - th * th;
          }
          S_(r, c) = prob;                                       // P
          dP_(r, c) = prob * (dP_(r, c) - dsum_(r)) * cap_grad;  // dS
        }
      }
      if (dq_) dQ_.noalias() += dP_ * K_;
      if (dk_) add_rows(dk_, b, s, n0, cols, hk, dP_.transpose() * Q_, p_.softmax_scale);
      if (dv_) add_rows(dv_, b, s, n0, cols, hk, S_.transpose() * dO_, 1.0f);
    }
    if (dq_) {
      dQ_ *= p_.softmax_scale;
      for (int r = 0; r < rows; ++r) {
        T* dst = dq_ + ((s.q_row0 + m0 + r) * p_.num_heads + h) * d_;
        for (int c = 0; c < d_; ++c) dst[c] = static_cast<T>(dQ_(r, c));
      }
    }
  }

  // acc[kv_row(t), hk, :] += scale * G[t - n0, :] for the tile's keys.
  void add_rows(float* acc, int b, const SeqBounds& s, int64_t n0, int cols, int hk, const RowMatrix& g,
                float scale) {
    for (int c = 0; c < cols; ++c) {
      float* dst = acc + (kv_row<int64_t>(p_, b, s, n0 + c) * p_.num_heads_k + hk) * d_;
      for (int j = 0; j < d_; ++j) dst[j] += scale * g(c, j);
    }
  }
};

// Runs f(hk) for every kv head on the CPU pool (ops/cpu/parallel.h: one thread per kv head
// at most, none nested); rethrows the first error.
template <class F>
void for_each_kv_head(int num_heads_k, F&& f) {
  std::atomic<int> next{0};
  cpu::parallel_run(std::min(num_heads_k, cpu::max_threads()), [&](int) {
    for (int hk; (hk = next.fetch_add(1)) < num_heads_k;) f(hk);
  });
}

}  // namespace

#ifdef WICK_WITH_CUDA
// Binds the forward's out/lse and grad_out (the autograd engine gives it out's shape, dtype
// and device) into the kernels' params and allocates the f32 accumulators
// (flash_bwd_params.h) and the outputs on the device.
std::array<Tensor, 3> cuda_backward(const AttnPlan& plan_in, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                    std::array<bool, 3> needed) {
  AttnPlan plan = plan_in;
  const Tensor o = out.stride().back() == 1 ? out : out.contiguous();
  const Tensor l = lse.contiguous();
  const Tensor g = grad_out.stride().back() == 1 ? grad_out : grad_out.contiguous();
  bind_outputs(plan, o, l);

  kernels::FlashBwdParams bp;
  bp.fwd = plan.params;
  bp.deterministic = plan.deterministic;
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
  Tensor dq = Tensor::empty(q.shape(), q.dtype(), dev);
  Tensor dk = Tensor::empty(k.shape(), q.dtype(), dev);
  Tensor dv = Tensor::empty(v.shape(), q.dtype(), dev);
  bp.dsum = static_cast<float*>(dsum.data_ptr());
  bp.dq_accum = static_cast<float*>(dq_acc.data_ptr());
  bp.dq = dq.data_ptr(), bp.dk = dk.data_ptr(), bp.dv = dv.data_ptr();
  Tensor dk_acc, dv_acc;  // only when the kernels add dK, dV up in f32 (paged, or unaligned rows)
  if (kernels::flash_bwd_accumulates_kv(bp)) {
    dk_acc = Tensor::empty(Shape{static_cast<size_t>(bp.kv_rows), HK, D}, DType::F32, dev);
    dv_acc = Tensor::empty(dk_acc.shape(), DType::F32, dev);
    bp.dk_accum = static_cast<float*>(dk_acc.data_ptr());
    bp.dv_accum = static_cast<float*>(dv_acc.data_ptr());
  }
  kernels::flash_bwd(bp, current_stream(dev).handle);
  // The kernels form all three; only the needed ones are handed back.
  return {needed[0] ? dq : Tensor(), needed[1] ? dk : Tensor(), needed[2] ? dv : Tensor()};
}
#endif

std::array<Tensor, 3> host_backward(const AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                                    std::array<bool, 3> needed) {
  const HostInputs in{on_host(q), on_host(k), on_host(v), rows_contiguous(on_host(out)),
                      rows_contiguous(on_host(grad_out)), on_host(lse).contiguous()};
  AttnPlan bound = plan;
  bind_outputs(bound, out, lse);  // lse strides of a contiguous lse
  const HostTables tables(bound);
  Strides ds{};
  const FlashFwdParams p = host_params(plan, tables.params(), in, ds);
  const size_t HK = p.num_heads_k, D = p.head_size;
  const size_t kv_rows = k.elem_count() / std::max<size_t>(HK * D, 1);  // k's leading dims flattened
  // Outputs: dq written tile by tile in q's dtype; dK / dV summed in f32 (a kv head gets the
  // gradients of all the query heads of its group and of every query tile), cast once.
  const Device cpu = Device::cpu();
  Tensor dq = needed[0] ? Tensor::empty(q.shape(), q.dtype(), cpu) : Tensor();
  Tensor dk_acc = needed[1] ? Tensor::zeros({kv_rows, HK, D}, DType::F32, cpu) : Tensor();
  Tensor dv_acc = needed[2] ? Tensor::zeros({kv_rows, HK, D}, DType::F32, cpu) : Tensor();
  auto f32_ptr = [](const Tensor& t) { return t.defined() ? static_cast<float*>(t.data_ptr()) : nullptr; };
  visit_dtype(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      T* dq_ptr = dq.defined() ? static_cast<T*>(dq.data_ptr()) : nullptr;
      const T* dout = static_cast<const T*>(in.grad_out.data_ptr());
      for_each_kv_head(static_cast<int>(HK), [&](int hk) {
        Worker<T>(p, dout, ds, dq_ptr, f32_ptr(dk_acc), f32_ptr(dv_acc)).run_kv_head(hk);
      });
    }
  });
  auto finish = [&](const Tensor& acc, const Tensor& like) {
    return acc.defined() ? cast(acc, q.dtype()).reshape(like.shape()).to_device(q.device()) : Tensor();
  };
  return {dq.defined() ? dq.to_device(q.device()) : Tensor(), finish(dk_acc, k), finish(dv_acc, v)};
}

}  // namespace wick::attention
