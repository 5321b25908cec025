// The attention backward: for loss = sum(out * W), the directional derivative
// sum(dX * U) along a random direction U for X = q, k, v is compared with central
// differences of the float64 evaluation (test_attention_common.h) on the same inputs:
//   d loss / dX . U  ~=  (loss(X + eps U) - loss(X - eps U)) / (2 eps)
// The analytic side is computed in f32 and rounded to bf16/f16, hence a tolerance of
// 4e-3 * sum|dX * U| (twice the worst bf16 rounding of every term).
#include <doctest/doctest.h>

#include <cmath>

#include "devices.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/plan.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// loss(q, k, v) = sum(out64 * W), reading double copies of contiguous q, k, v through the
// index maps of a CPU plan of the same call.
struct Loss64 {
  kernels::FlashFwdParams p;
  std::vector<double> w;
  double operator()(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    return dot(ref64_t<double>(p).out, w);
  }
};

template <class Op, class PlanFn>
void check_grads(const Op& op_cpu, const Op& op_dev, PlanFn plan_fn, Tensor q, Tensor k, Tensor v, Tensor qc,
                 Tensor kc, Tensor vc, uint64_t seed) {
  REQUIRE(qc.is_contiguous());
  REQUIRE(kc.is_contiguous());
  REQUIRE(vc.is_contiguous());
  q.requires_grad(true), k.requires_grad(true), v.requires_grad(true);
  Tensor out = op_dev.forward(q, k, v);
  const std::vector<double> w = normal(out.elem_count(), seed);
  out.backward(make(w, out.shape(), out.dtype(), out.device()));
  const std::vector<double> grads[3] = {q.grad().to_f64_vec(), k.grad().to_f64_vec(), v.grad().to_f64_vec()};

  const attention::AttnPlan plan = plan_fn(op_cpu, qc, kc, vc);
  Loss64 loss{plan.params, rounded(w, out.dtype())};
  std::vector<double> x[3] = {qc.to_f64_vec(), kc.to_f64_vec(), vc.to_f64_vec()};
  const char* names[3] = {"q", "k", "v"};
  constexpr double eps = 1e-3;
  for (int which = 0; which < 3; ++which) {
    INFO("gradient of ", names[which]);
    REQUIRE(grads[which].size() == x[which].size());
    const std::vector<double> u = normal(x[which].size(), seed + 10 + which);
    std::vector<double> plus = x[which], minus = x[which];
    for (size_t i = 0; i < u.size(); ++i) plus[i] += eps * u[i], minus[i] -= eps * u[i];
    auto at = [&](const std::vector<double>& xi) {
      return loss(which == 0 ? xi : x[0], which == 1 ? xi : x[1], which == 2 ? xi : x[2]);
    };
    const double numeric = (at(plus) - at(minus)) / (2 * eps);
    const double analytic = dot(grads[which], u);
    double scale = 0;
    for (size_t i = 0; i < u.size(); ++i) scale += std::abs(grads[which][i] * u[i]);
    INFO("analytic ", analytic, ", numeric ", numeric, ", scale ", scale);
    CHECK(std::abs(analytic - numeric) <= 4e-3 * scale + 1e-3);
  }
}

struct VarlenSetup {
  std::vector<uint32_t> lens_q, lens_k;
  size_t h, hk, d;
  DType dtype;
};

FlashAttnVarLen make_op(const VarlenSetup& s, Device dev) {
  FlashAttnVarLen op;
  op.softmax_scale = 0.3f;
  op.seqlens_q = u32_tensor(cumulative(s.lens_q), dev);
  op.seqlens_k = u32_tensor(cumulative(s.lens_k), dev);
  op.max_seqlen_q = *std::max_element(s.lens_q.begin(), s.lens_q.end());
  op.max_seqlen_k = *std::max_element(s.lens_k.begin(), s.lens_k.end());
  return op;
}

}  // namespace

TEST_CASE("attention backward: varlen gradients match float64 differences (every mask kind)") {
  const VarlenSetup s{{5, 0, 9, 3}, {7, 4, 9, 1}, 4, 2, 16, DType::BF16};
  const size_t tq = cumulative(s.lens_q).back(), tk = cumulative(s.lens_k).back();
  for (int kind = 0; kind < 6; ++kind) {
    for (Device dev : test::test_devices()) {
      INFO("mask kind ", kind);
      DEVICE_CONTEXT(dev);
      auto build = [&](Device d) {
        FlashAttnVarLen op = make_op(s, d);
        if (kind == 1) op.window_size_right = 0;                                   // causal
        if (kind == 2) op.window_size_left = 2, op.window_size_right = 1;          // window
        if (kind == 3) op.softcap = 2.0f, op.window_size_right = 0;                 // softcap
        if (kind == 4) op.alibi_slopes = Tensor::from_vec(std::vector<float>{.5f, .25f, .125f, .0625f}, Shape{4}, d);
        if (kind == 5) {
          op.window_size_right = 0;
          op.mm_prefix_ranges = Tensor::from_vec(std::vector<int32_t>{1, 4, 0, 2, 2, 6, 0, 0}, Shape{4, 1, 2}, d);
        }
        return op;
      };
      const uint64_t seed = 100 + kind;
      Tensor qc = randn({tq, s.h, s.d}, s.dtype, Device::cpu(), seed);
      Tensor kc = randn({tk, s.hk, s.d}, s.dtype, Device::cpu(), seed + 1);
      Tensor vc = randn({tk, s.hk, s.d}, s.dtype, Device::cpu(), seed + 2);
      check_grads(build(Device::cpu()), build(dev), attention::plan_varlen, randn({tq, s.h, s.d}, s.dtype, dev, seed),
                  randn({tk, s.hk, s.d}, s.dtype, dev, seed + 1), randn({tk, s.hk, s.d}, s.dtype, dev, seed + 2), qc,
                  kc, vc, seed);
    }
  }
}

TEST_CASE("attention backward: paged K/V get gradients in their blocks") {
  const VarlenSetup s{{3, 6}, {40, 6}, 2, 1, 8, DType::F16};
  const auto ck = cumulative(s.lens_k);
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    auto build = [&](Device d) {
      Tensor k = randn({ck.back(), s.hk, s.d}, s.dtype, d, 2), v = randn({ck.back(), s.hk, s.d}, s.dtype, d, 3);
      PagedKv pk = make_paged(k, v, ck, 32, CacheLayout::Separate, DType::I32, d, 9);
      FlashAttnVarLen op = make_op(s, d);
      op.window_size_right = 0;
      op.block_table = pk.block_table;
      op.page_block_size = 32;
      return std::make_tuple(op, randn({9, s.h, s.d}, s.dtype, d, 1), pk.k, pk.v);
    };
    auto [op_c, qc, kc, vc] = build(Device::cpu());
    auto [op_d, q, k, v] = build(dev);
    check_grads(op_c, op_d, attention::plan_varlen, q, k, v, qc, kc, vc, 7);
    // Rows of the cache no sequence uses get exactly zero gradient: 3 spare blocks.
    std::vector<double> dk = k.grad().to_f64_vec();
    size_t zeros = 0;
    for (double g : dk) zeros += g == 0.0;
    CHECK(zeros >= 3 * 32 * s.hk * s.d);
  }
}

TEST_CASE("attention backward: batched op, GQA, ALiBi and a window") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    auto build = [&](Device d) {
      FlashAttn op;
      op.softmax_scale = 0.25f;
      op.window_size_left = 3;
      op.alibi_slopes = Tensor::from_vec(std::vector<float>{.5f, .3f, .2f, .1f}, Shape{4}, d);
      return op;
    };
    check_grads(build(Device::cpu()), build(dev), attention::plan_batched, randn({2, 6, 4, 16}, DType::BF16, dev, 1),
                randn({2, 4, 2, 16}, DType::BF16, dev, 2), randn({2, 4, 2, 16}, DType::BF16, dev, 3),
                randn({2, 6, 4, 16}, DType::BF16, Device::cpu(), 1), randn({2, 4, 2, 16}, DType::BF16, Device::cpu(), 2),
                randn({2, 4, 2, 16}, DType::BF16, Device::cpu(), 3), 21);
  }
}
