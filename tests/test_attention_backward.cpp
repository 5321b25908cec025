// The attention backward: for loss = sum(out * W), the directional derivative
// sum(dX * U) along a random direction U for X = q, k, v is compared with central
// differences of the float64 evaluation (test_attention_common.h) on the same inputs:
//   d loss / dX . U  ~=  (loss(X + eps U) - loss(X - eps U)) / (2 eps)
// The analytic side is computed in f32 and rounded to bf16/f16, hence a tolerance of
// 4e-3 * sum|dX * U| (twice the worst bf16 rounding of every term).
// On CUDA the gradients come from the backward kernels (kernels/flash_bwd/); each case then
// also runs the host reference (attention::host_backward) on the same device tensors and
// compares every element: the host computes in f32, the kernels round P and dS to the input
// dtype before the tensor cores use them, so they differ by a rounding of the dtype at the
// gradient's scale (the finite differences above are the accuracy check).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "tensor/grad_node.h"
#include "devices.h"
#include "ops/attention/backward.h"
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

// Largest |kernel - host| seen per dtype (reported at the end of the cases that use it).
// (max |kernel - host|, max |host| of that gradient) per dtype name.
std::map<std::string, std::pair<double, double>>& worst_kernel_vs_host() {
  static std::map<std::string, std::pair<double, double>> m;
  return m;
}

// Kernel gradients (grads, from autograd on a CUDA device) against the host reference on the
// same device tensors, element by element; every element must be a number.
template <class Op, class PlanFn>
void compare_with_host(const Op& op, PlanFn plan_fn, const Tensor& q, const Tensor& k, const Tensor& v,
                       const std::vector<double>& w, const std::vector<double> (&grads)[3]) {
  autograd::NoGradGuard no_grad;
  const attention::AttnPlan plan = plan_fn(op, q, k, v);
  auto [out, lse] = op.forward_with_lse(q, k, v);
  const Tensor go = make(w, out.shape(), out.dtype(), out.device());
  const auto host = attention::host_backward(plan, q, k, v, out, lse, go);
  const double rel = q.dtype() == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;  // two roundings of the dtype
  const char* names[3] = {"dq", "dk", "dv"};
  for (int which = 0; which < 3; ++which) {
    INFO("kernel vs host: ", names[which]);
    const std::vector<double> h = host[which].to_f64_vec();
    const std::vector<double>& g = grads[which];
    REQUIRE(g.size() == h.size());
    CHECK(all_finite(g));
    double max_abs = 0, max_diff = 0;
    for (double x : h) max_abs = std::max(max_abs, std::abs(x));
    CHECK(max_abs > 0);
    size_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double diff = std::abs(g[i] - h[i]);
      max_diff = std::max(max_diff, diff);
      // The tensor-core kernels feed P and dS to the matrix units in the input dtype (as
      // FlashAttention's backward does), so an element also carries a rounding of the dtype
      // at the gradient's scale: rel * max_abs on top of its own.
      bad += !(diff <= rel * (std::abs(h[i]) + max_abs) + 1e-6);  // NaN counts as bad
    }
    INFO("max |kernel - host| ", max_diff, ", max |host| ", max_abs);
    CHECK(bad == 0);
    auto& worst = worst_kernel_vs_host()[dtype_name(q.dtype())];
    if (max_diff > worst.first) worst = {max_diff, max_abs};
  }
}

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
  if (q.device().is_cuda()) compare_with_host(op_dev, plan_fn, q, k, v, w, grads);

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

namespace {

// One varlen (or paged) backward case of the kernel-vs-host sweep.
struct SweepCase {
  const char* name;
  std::vector<uint32_t> lens_q, lens_k;
  size_t h, hk, d;
  DType dtype;
  std::optional<size_t> left, right;  // window (right = 0: causal)
  float softcap = 0;
  bool alibi = false, mm = false;
  size_t page = 0;  // 0: not paged
  CacheLayout layout = CacheLayout::Separate;
};

// deterministic: the op's field (on CUDA: the two-kernel path instead of the fused one).
void run_sweep_case(const SweepCase& c, Device dev, uint64_t seed, bool deterministic) {
  const auto cq = cumulative(c.lens_q), ck = cumulative(c.lens_k);
  const size_t tq = cq.back(), tk = ck.back(), batch = c.lens_q.size();
  auto build = [&](Device d) {
    FlashAttnVarLen op = make_op(VarlenSetup{c.lens_q, c.lens_k, c.h, c.hk, c.d, c.dtype}, d);
    op.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    op.window_size_left = c.left, op.window_size_right = c.right;
    if (c.softcap > 0) op.softcap = c.softcap;
    if (c.alibi) {
      std::vector<float> sl(c.h);
      for (size_t i = 0; i < c.h; ++i) sl[i] = 0.5f / static_cast<float>(i + 1);
      op.alibi_slopes = Tensor::from_vec(sl, Shape{c.h}, d);
    }
    if (c.mm) {
      std::vector<int32_t> r;
      for (size_t b = 0; b < batch; ++b) r.insert(r.end(), {2, 2 + static_cast<int32_t>(c.lens_k[b] / 3), 0, 0});
      op.mm_prefix_ranges = Tensor::from_vec(r, Shape{batch, 2, 2}, d);
    }
    return op;
  };
  FlashAttnVarLen op_c = build(Device::cpu()), op_d = build(dev);
  op_d.deterministic = deterministic;
  Tensor qc = randn({tq, c.h, c.d}, c.dtype, Device::cpu(), seed);
  Tensor kc = randn({tk, c.hk, c.d}, c.dtype, Device::cpu(), seed + 1);
  Tensor vc = randn({tk, c.hk, c.d}, c.dtype, Device::cpu(), seed + 2);
  auto on_dev = [&](const Tensor& t) { return dev.is_cuda() ? t.to_device(dev) : t.copy(); };
  Tensor q = on_dev(qc), k, v;
  if (c.page > 0) {
    // The device cache may be strided (interleaved or padded heads); the CPU side gets a
    // contiguous copy of the same values and the same shuffled block table.
    PagedKv pk = make_paged(kc, vc, ck, c.page, c.layout, DType::I32, dev, seed + 3);
    k = pk.k, v = pk.v;
    kc = pk.k.to_device(Device::cpu()).contiguous(), vc = pk.v.to_device(Device::cpu()).contiguous();
    op_d.block_table = pk.block_table, op_d.page_block_size = c.page;
    op_c.block_table = pk.block_table.to_device(Device::cpu()), op_c.page_block_size = c.page;
  } else {
    k = on_dev(kc), v = on_dev(vc);
  }
  check_grads(op_c, op_d, attention::plan_varlen, q, k, v, qc, kc, vc, seed + 4);
  if (c.page > 0) {
    // Cache rows no sequence uses (3 spare blocks at least) get exactly zero gradient.
    size_t zeros = 0;
    for (double g : k.grad().to_f64_vec()) zeros += g == 0.0;
    CHECK(zeros >= 3 * c.page * c.hk * c.d);
  }
}

}  // namespace

TEST_CASE("attention backward: sweep of shapes, masks, GQA, paging and dtypes") {
  using CL = CacheLayout;
  const std::vector<SweepCase> cases = {
      {"GQA 8/2 causal sq != sk, zero-length sequences, d64", {37, 0, 70, 5}, {50, 0, 70, 0}, 8, 2, 64, DType::BF16,
       std::nullopt, 0},
      {"MQA 4/1 window, d128", {33, 65}, {90, 65}, 4, 1, 128, DType::F16, 10, 3},
      {"softcap causal, d40", {20, 31}, {45, 31}, 2, 2, 40, DType::BF16, std::nullopt, 0, 5.0f},
      {"ALiBi full, d64", {17, 9}, {29, 9}, 4, 2, 64, DType::F16, std::nullopt, std::nullopt, 0, true},
      {"mm-prefix causal GQA 8/2, d64", {12, 40}, {30, 40}, 8, 2, 64, DType::BF16, std::nullopt, 0, 0, false, true},
      {"paged 32 interleaved causal ALiBi, d64", {5, 40}, {70, 40}, 4, 2, 64, DType::F16, std::nullopt, 0, 0, true,
       false, 32, CL::Interleaved},
      {"paged 64 padded heads GQA 8/2 softcap, d128", {1, 17, 3}, {130, 17, 64}, 8, 2, 128, DType::BF16,
       std::nullopt, 0, 3.0f, false, false, 64, CL::PaddedHeads},
      {"paged 32 MQA window, d40", {9, 24}, {33, 60}, 2, 1, 40, DType::BF16, 7, 0, 0, false, false, 32, CL::Separate},
      {"GQA 4/2 causal, d256", {20, 33}, {40, 33}, 4, 2, 256, DType::BF16, std::nullopt, 0},
      {"window, f16 d192", {17, 30}, {17, 30}, 2, 1, 192, DType::F16, 5, 5},
      {"full, d512 (the scalar kernels)", {9, 12}, {9, 12}, 2, 2, 512, DType::BF16, std::nullopt, std::nullopt},
      // long enough for whole tiles that need no mask, next to partial and masked ones
      {"whole tiles, causal GQA 4/2, d128", {200, 130}, {260, 130}, 4, 2, 128, DType::BF16, std::nullopt, 0},
      {"whole tiles, full, f16 d64", {192, 70}, {256, 140}, 2, 1, 64, DType::F16, std::nullopt, std::nullopt},
  };
  uint64_t seed = 9100;
  for (const SweepCase& c : cases) {
    for (Device dev : test::test_devices())
      for (bool deterministic : {false, true}) {
        if (deterministic && dev.is_cpu()) continue;  // one CPU backward
        INFO("case: ", c.name, deterministic ? " (deterministic)" : "");
        DEVICE_CONTEXT(dev);
        run_sweep_case(c, dev, seed, deterministic);
      }
    seed += 10;
  }
  for (const auto& entry : worst_kernel_vs_host()) {
    const auto& dt = entry.first;  // named, not bound: MESSAGE captures them in a lambda
    const auto& w = entry.second;
    MESSAGE("kernel vs host, ", dt, ": max |diff| ", w.first, " (max |grad| of that gradient ", w.second, ")");
  }
}

TEST_CASE("attention backward: batched op, GQA 8/2 causal sq != sk, f16 d128") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    auto build = [&](Device) {
      FlashAttn op;
      op.softmax_scale = 0.125f;
      op.window_size_right = 0;
      return op;
    };
    Tensor qc = randn({2, 40, 8, 128}, DType::F16, Device::cpu(), 301);
    Tensor kc = randn({2, 72, 2, 128}, DType::F16, Device::cpu(), 302);
    Tensor vc = randn({2, 72, 2, 128}, DType::F16, Device::cpu(), 303);
    auto on_dev = [&](const Tensor& t) { return dev.is_cuda() ? t.to_device(dev) : t.copy(); };
    check_grads(build(Device::cpu()), build(dev), attention::plan_batched, on_dev(qc), on_dev(kc), on_dev(vc), qc, kc,
                vc, 304);
  }
}

// The deterministic CUDA backward gives the same gradients, bit for bit, run after run (no
// gradient is summed with atomics in an order that varies); the default fused kernel agrees
// with it to the rounding of the dtype. Strided q, k, v and dO (padded rows and heads) go
// through the same kernels.
TEST_CASE("attention backward: deterministic CUDA gradients are bitwise identical run to run, strided q, k and v") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  const VarlenSetup s{{300, 1, 257}, {300, 64, 400}, 8, 2, 128, DType::BF16};
  FlashAttnVarLen op = make_op(s, dev);
  op.causal = true;
  op.deterministic = true;
  const size_t tq = 558, tk = 764;
  const Tensor q = randn({tq, 8, 136}, DType::BF16, dev, 71).narrow(2, 0, 128);  // row stride 1088
  // k and v with padded heads (head stride 136, row stride 272), v's rows further apart
  const Tensor k = randn({tk, 2, 136}, DType::BF16, dev, 72).narrow(2, 0, 128);
  const Tensor v = randn({tk, 3, 136}, DType::BF16, dev, 73).narrow(1, 0, 2).narrow(2, 0, 128);
  const Tensor seed = randn({tq, 8, 128}, DType::BF16, dev, 74);
  auto grads = [&] {
    Tensor qg = q.detach(), kg = k.detach(), vg = v.detach();
    qg.requires_grad(true), kg.requires_grad(true), vg.requires_grad(true);
    op.forward(qg, kg, vg).backward(seed);
    return std::vector<std::vector<double>>{qg.grad().to_f64_vec(), kg.grad().to_f64_vec(), vg.grad().to_f64_vec()};
  };
  const auto first = grads();
  for (int run = 0; run < 3; ++run) CHECK(grads() == first);
  op.deterministic = false;
  const auto fused = grads();
  op.deterministic = true;
  // both are the host backward's, within the f32 rounding the kernel tests allow
  autograd::NoGradGuard no_grad;
  const attention::AttnPlan plan = attention::plan_varlen(op, q, k, v);
  auto [out, lse] = op.forward_with_lse(q, k, v);
  const auto host = attention::host_backward(plan, q, k, v, out, lse, seed);
  for (int which = 0; which < 3; ++which) {
    const std::vector<double> h = host[which].to_f64_vec();
    double max_abs = 0, max_diff = 0, max_diff_fused = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(h[i]));
      max_diff = std::max(max_diff, std::abs(h[i] - first[which][i]));
      max_diff_fused = std::max(max_diff_fused, std::abs(h[i] - fused[which][i]));
    }
    INFO("gradient ", which, ": max |kernel - host| ", max_diff, " (fused kernel ", max_diff_fused, "), max |host| ",
         max_abs);
    CHECK(max_diff <= 1e-2 * max_abs);
    CHECK(max_diff_fused <= 1e-2 * max_abs);
  }
}

TEST_CASE("attention backward: the deterministic field reaches the plan") {
  const VarlenSetup s{{3}, {5}, 2, 1, 16, DType::BF16};
  FlashAttnVarLen op = make_op(s, Device::cpu());
  const Tensor q = randn({3, 2, 16}, DType::BF16, Device::cpu(), 1), k = randn({5, 1, 16}, DType::BF16, Device::cpu(), 2);
  const char* e = std::getenv("WICK_DETERMINISTIC");  // set and neither "" nor "0": on for every call
  const bool env = e && std::string(e) != "0" && std::string(e) != "";
  CHECK(attention::plan_varlen(op, q, k, k).deterministic == env);
  op.deterministic = true;
  CHECK(attention::plan_varlen(op, q, k, k).deterministic);
  FlashAttn batched;
  batched.deterministic = true;
  CHECK(attention::plan_batched(batched, q.unsqueeze(0), k.unsqueeze(0), k.unsqueeze(0)).deterministic);
}
