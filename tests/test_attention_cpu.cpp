// The CPU attention forward's code paths (ops/attention/cpu_tiles.h): every path this CPU
// supports against the float64 evaluation, non-finite inputs, thread counts, and the
// scratch bound for long sequences with short windows.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/attention/cpu.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/plan.h"
#include "ops/attention/reference.h"
#include "ops/cpu/isa.h"
#include "seed.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;
using attention::AttnPlan;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<cpu::Isa> cpu_paths() {
  std::vector<cpu::Isa> paths;
  for (int i = 0; i <= static_cast<int>(cpu::best_isa()); ++i) paths.push_back(static_cast<cpu::Isa>(i));
  return paths;
}

// Runs the CPU forward of `plan` on one path into NaN-filled outputs: (out, lse) as doubles.
std::pair<std::vector<double>, std::vector<double>> run_path(AttnPlan plan, cpu::Isa isa, int threads = 0) {
  Tensor out = Tensor::full(plan.out_shape, kNaN, plan.dtype, plan.device);
  Tensor lse = Tensor::full(plan.lse_shape, kNaN, DType::F32, plan.device);
  attention::bind_outputs(plan, out, lse);
  attention::cpu_flash_fwd(plan.params, threads, isa);
  return {out.to_f64_vec(), lse.to_f64_vec()};
}

struct Case {
  DType dtype;
  size_t d, hk, group;
  std::vector<uint32_t> lens_q, lens_k;
  std::optional<size_t> left, right;
  float softcap = 0;
  bool alibi = false, mm_prefix = false;
  size_t page = 0;
};

struct Built {
  FlashAttnVarLen op;
  Tensor q, k, v;
};

Built build(const Case& c, uint64_t seed) {
  Built r;
  const auto cq = cumulative(c.lens_q), ck = cumulative(c.lens_k);
  const size_t h = c.hk * c.group;
  r.q = randn({cq.back(), h, c.d}, c.dtype, Device::cpu(), seed);
  r.k = randn({ck.back(), c.hk, c.d}, c.dtype, Device::cpu(), seed + 1);
  r.v = randn({ck.back(), c.hk, c.d}, c.dtype, Device::cpu(), seed + 2);
  auto& op = r.op;
  op.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  op.max_seqlen_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  op.max_seqlen_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  op.seqlens_q = u32_tensor(cq, Device::cpu());
  op.seqlens_k = u32_tensor(ck, Device::cpu());
  op.window_size_left = c.left;
  op.window_size_right = c.right;
  if (c.softcap > 0) op.softcap = c.softcap;
  if (c.alibi) {
    std::vector<float> slopes(h);
    for (size_t i = 0; i < h; ++i) slopes[i] = std::pow(2.0f, -8.0f * (i + 1) / h);
    op.alibi_slopes = Tensor::from_vec(slopes, Shape{h}, Device::cpu());
  }
  if (c.mm_prefix) {
    const size_t batch = c.lens_k.size();
    std::vector<int32_t> ranges(batch * 2);
    for (size_t b = 0; b < batch; ++b)
      ranges[2 * b] = static_cast<int32_t>(c.lens_k[b] / 4), ranges[2 * b + 1] = static_cast<int32_t>(c.lens_k[b] / 2 + 1);
    op.mm_prefix_ranges = Tensor::from_vec(ranges, Shape{batch, 1, 2}, Device::cpu());
  }
  if (c.page > 0) {
    PagedKv pk = make_paged(r.k, r.v, ck, c.page, CacheLayout::PaddedHeads, DType::I32, Device::cpu(), seed + 3);
    r.k = pk.k, r.v = pk.v;
    r.op.block_table = pk.block_table;
    r.op.page_block_size = c.page;
  }
  return r;
}

}  // namespace

TEST_CASE("attention cpu: every code path of this CPU matches the float64 evaluation") {
  MESSAGE("best CPU path: ", std::string(cpu::isa_name(cpu::best_isa())));
  const std::vector<Case> cases = {
      // head sizes below, at and between the paths' vector widths and AMX's 32-channel steps
      {DType::BF16, 8, 1, 1, {1, 70}, {5, 70}, {}, {}},
      {DType::BF16, 40, 2, 2, {65, 3}, {130, 200}, {}, 0},
      {DType::F16, 72, 1, 3, {100}, {100}, {}, 0},
      {DType::BF16, 128, 2, 4, {129, 64, 17}, {129, 300, 17}, {}, {}},
      {DType::F16, 128, 1, 1, {77}, {150}, 20, 5},
      {DType::BF16, 200, 1, 2, {40}, {90}, 30, 0, 0, true},
      {DType::BF16, 64, 2, 1, {90, 33}, {90, 120}, {}, {}, 30.0f, false, true},
      {DType::F16, 512, 1, 1, {20}, {70}, {}, 0},
      {DType::BF16, 96, 2, 2, {70, 5}, {140, 200}, 50, 0, 0, false, false, 32},
      {DType::F16, 64, 1, 2, {64, 128}, {64, 300}, {}, 0, 0, false, false, 64},
  };
  uint64_t seed = test::seed(1500);
  MESSAGE("seed ", seed);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    Built b = build(c, seed + 10 * i);
    AttnPlan plan = attention::plan_varlen(b.op, b.q, b.k, b.v);
    const Ref64 ref = ref64(plan.params);
    const std::vector<double> naive =
        attention_reference(b.op, b.q, b.k, b.v, ReferencePrecision::Input).to_f64_vec();
    const double naive_err = max_abs_diff(naive, ref.out);
    for (cpu::Isa isa : cpu_paths()) {
      INFO("case ", i, " (d ", c.d, ", ", std::string(dtype_name(c.dtype)), "), path ", std::string(cpu::isa_name(isa)));
      auto [out, lse] = run_path(plan, isa);
      REQUIRE(all_finite(out));
      const double err = max_abs_diff(out, ref.out);
      INFO("max|out - ref64| = ", err, ", same-precision reference ", naive_err);
      CHECK(err <= 2 * naive_err + 1e-5);
      check_lse(lse, ref.lse);
    }
  }
}

TEST_CASE("attention cpu: thread counts and code paths are deterministic") {
  const Case c{DType::BF16, 64, 2, 2, {300, 129}, {300, 400}, {}, 0};
  Built b = build(c, test::seed(1600));
  AttnPlan plan = attention::plan_varlen(b.op, b.q, b.k, b.v);
  for (cpu::Isa isa : cpu_paths()) {
    INFO("path ", std::string(cpu::isa_name(isa)));
    auto [out1, lse1] = run_path(plan, isa, 1);
    auto [out3, lse3] = run_path(plan, isa, 3);
    auto [out3b, lse3b] = run_path(plan, isa, 3);
    CHECK(max_abs_diff(out1, out3) == 0.0);
    CHECK(max_abs_diff(lse1, lse3) == 0.0);
    CHECK(max_abs_diff(out3, out3b) == 0.0);
  }
}

// Non-finite inputs: rows that see a NaN or inf get NaN (out and lse), like the float64
// evaluation of the definition and PyTorch; rows that do not see it are untouched; rows
// that see no key keep 0 and -inf.
TEST_CASE("attention cpu: NaN and inf in q, k and v propagate to the rows that see them") {
  const size_t sk = 150, sq = 150, d = 64, H = 2;
  const std::vector<double> qv = normal(sq * H * d, test::seed(1700)), kv0 = normal(sk * d, test::seed(1701)),
                            vv0 = normal(sk * d, test::seed(1702));
  const double inf = std::numeric_limits<double>::infinity();
  // causal, sq == sk: row i sees keys [0, i]; two query heads share one kv head.
  auto run = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                 std::optional<float> softcap, DType dt, cpu::Isa isa) {
    FlashAttnVarLen op;
    op.max_seqlen_q = sq, op.max_seqlen_k = sk;
    op.seqlens_q = u32_tensor({0, uint32_t(sq)}, Device::cpu());
    op.seqlens_k = u32_tensor({0, uint32_t(sk)}, Device::cpu());
    op.causal = true;
    op.softcap = softcap;
    Tensor tq = make(q, Shape{sq, H, d}, dt, Device::cpu());
    Tensor tk = make(k, Shape{sk, 1, d}, dt, Device::cpu()), tv = make(v, Shape{sk, 1, d}, dt, Device::cpu());
    return run_path(attention::plan_varlen(op, tq, tk, tv), isa);
  };
  auto out_row_nan = [&](const std::vector<double>& out, size_t i, size_t h) {
    for (size_t c = 0; c < d; ++c)
      if (!std::isnan(out[(i * H + h) * d + c])) return false;
    return true;
  };
  auto out_row_finite = [&](const std::vector<double>& out, size_t i, size_t h) {
    for (size_t c = 0; c < d; ++c)
      if (!std::isfinite(out[(i * H + h) * d + c])) return false;
    return true;
  };
  for (DType dt : {DType::BF16, DType::F16})
    for (cpu::Isa isa : cpu_paths()) {
      INFO(std::string(dtype_name(dt)), ", path ", std::string(cpu::isa_name(isa)));
      {  // NaN in key 70: rows 70.. of both heads; +inf in key 100 as well: rows 100..
        std::vector<double> k = kv0;
        k[70 * d + 5] = kNaN;
        k[100 * d + 9] = inf;
        auto [out, lse] = run(qv, k, vv0, {}, dt, isa);
        for (size_t h = 0; h < H; ++h)
          for (size_t i = 0; i < sq; ++i) {
            INFO("row ", i, " head ", h);
            const double l = lse[h * sq + i];
            if (i < 70) {
              CHECK(out_row_finite(out, i, h));
              CHECK(std::isfinite(l));
            } else {
              CHECK(out_row_nan(out, i, h));
              CHECK(std::isnan(l));
            }
          }
      }
      {  // NaN in query row 40 of head 1 only
        std::vector<double> q = qv;
        q[(40 * H + 1) * d + 3] = kNaN;
        auto [out, lse] = run(q, kv0, vv0, {}, dt, isa);
        for (size_t h = 0; h < H; ++h)
          for (size_t i = 0; i < sq; ++i) {
            const bool bad = h == 1 && i == 40;
            INFO("row ", i, " head ", h);
            CHECK(bad == out_row_nan(out, i, h));
            CHECK(bad == std::isnan(lse[h * sq + i]));
            if (!bad) CHECK(out_row_finite(out, i, h));
          }
      }
      {  // NaN in value row 90: out of rows 90.. (their lse is finite); rows before it, whose
         // weight for key 90 is 0 (masked), stay finite
        std::vector<double> v = vv0;
        v[90 * d + 7] = kNaN;
        auto [out, lse] = run(qv, kv0, v, {}, dt, isa);
        for (size_t h = 0; h < H; ++h)
          for (size_t i = 0; i < sq; ++i) {
            INFO("row ", i, " head ", h);
            CHECK(std::isfinite(lse[h * sq + i]));
            if (i < 90) CHECK(out_row_finite(out, i, h));
            else CHECK(std::isnan(out[(i * H + h) * d + 7]));
          }
      }
      {  // softcap = inf: every logit is inf * tanh(0) = NaN
        auto [out, lse] = run(qv, kv0, vv0, std::numeric_limits<float>::infinity(), dt, isa);
        for (size_t h = 0; h < H; ++h)
          for (size_t i = 0; i < sq; ++i) {
            CHECK(out_row_nan(out, i, h));
            CHECK(std::isnan(lse[h * sq + i]));
          }
      }
    }
}

TEST_CASE("attention cpu: a query that sees no key keeps out 0 and lse -inf next to NaN rows") {
  // sq > sk with a causal mask: the first sq - sk rows sit before every key.
  const size_t sq = 80, sk = 40, d = 16;
  std::vector<double> k = normal(sk * d, test::seed(1750));
  k[10 * d] = kNaN;
  FlashAttnVarLen op;
  op.max_seqlen_q = sq, op.max_seqlen_k = sk;
  op.seqlens_q = u32_tensor({0, uint32_t(sq)}, Device::cpu());
  op.seqlens_k = u32_tensor({0, uint32_t(sk)}, Device::cpu());
  op.causal = true;
  Tensor q = make(normal(sq * d, test::seed(1751)), Shape{sq, 1, d}, DType::BF16, Device::cpu());
  Tensor tk = make(k, Shape{sk, 1, d}, DType::BF16, Device::cpu());
  Tensor v = make(normal(sk * d, test::seed(1752)), Shape{sk, 1, d}, DType::BF16, Device::cpu());
  AttnPlan plan = attention::plan_varlen(op, q, tk, v);
  for (cpu::Isa isa : cpu_paths()) {
    INFO("path ", std::string(cpu::isa_name(isa)));
    auto [out, lse] = run_path(plan, isa);
    for (size_t i = 0; i < sq; ++i) {
      INFO("row ", i);
      const int64_t pos = int64_t(i) + int64_t(sk) - int64_t(sq);
      if (pos < 0) {
        CHECK((std::isinf(lse[i]) && lse[i] < 0));
        for (size_t c = 0; c < d; ++c) CHECK(out[i * d + c] == 0.0);
      } else if (pos < 10) {
        CHECK(std::isfinite(lse[i]));
      } else {
        CHECK(std::isnan(lse[i]));
        CHECK(std::isnan(out[i * d]));
      }
    }
  }
}

// The forward's K/V scratch is bounded by what a tile sees: 2^29 - 64 keys (k and v
// stride-0 views of one row, so the test allocates nothing large) with a window of 40 keys
// would need 2 * 2^29 * 512 * 4 bytes (2 TiB) if the scratch covered the sequence.
TEST_CASE("attention cpu: a huge sequence with a short window runs in bounded scratch") {
  const size_t sk = (size_t(1) << 29) - 64, sq = 70, d = 512;
  const std::vector<double> kr = normal(d, test::seed(1800)), vr = normal(d, test::seed(1801));
  Tensor k1 = make(kr, Shape{1, 1, d}, DType::BF16, Device::cpu());
  Tensor v1 = make(vr, Shape{1, 1, d}, DType::BF16, Device::cpu());
  Tensor k = k1.broadcast_as(Shape{sk, 1, d}), v = v1.broadcast_as(Shape{sk, 1, d});
  Tensor q = make(normal(sq * d, test::seed(1802)), Shape{sq, 1, d}, DType::BF16, Device::cpu());
  FlashAttnVarLen op;
  op.max_seqlen_q = sq, op.max_seqlen_k = sk;
  op.seqlens_q = u32_tensor({0, uint32_t(sq)}, Device::cpu());
  op.seqlens_k = u32_tensor({0, uint32_t(sk)}, Device::cpu());
  op.window_size_left = 39;
  op.window_size_right = 0;
  op.softmax_scale = 0.05f;
  AttnPlan plan = attention::plan_varlen(op, q, k, v);
  // Every key is the same row: each query sees 40 equal logits, so out = v's row and
  // lse = logit + log(40).
  const std::vector<double> qd = q.to_f64_vec(), kd = k1.to_f64_vec(), vd = v1.to_f64_vec();
  for (cpu::Isa isa : cpu_paths()) {
    INFO("path ", std::string(cpu::isa_name(isa)));
    auto [out, lse] = run_path(plan, isa);
    for (size_t i = 0; i < sq; ++i) {
      double dot = 0;
      for (size_t c = 0; c < d; ++c) dot += qd[i * d + c] * kd[c];
      CHECK(lse[i] == doctest::Approx(0.05 * dot + std::log(40.0)).epsilon(1e-4));
      for (size_t c = 0; c < d; ++c) CHECK(out[i * d + c] == doctest::Approx(vd[c]).epsilon(1e-2));
    }
  }
}
