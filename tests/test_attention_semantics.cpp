// Attention semantics: exact small cases that expose the mask (uniform weights over one-hot
// values), then random grids against the float64 evaluation with the accuracy rule of
// docs/parity.md: max|out - ref64| <= 2 * max|out_naive - ref64| + 1e-5. Every output is written
// into NaN-filled tensors, so an element the op skips fails the test.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "devices.h"
#include "seed.h"
#include "ops/attention/dispatch.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/plan.h"
#include "ops/attention/reference.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;
using attention::AttnPlan;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs a plan into NaN-filled outputs and returns (out, lse) on the host as doubles.
std::pair<std::vector<double>, std::vector<double>> run_into_nan(AttnPlan& plan) {
  Tensor out = Tensor::full(plan.out_shape, kNaN, plan.dtype, plan.device);
  Tensor lse = Tensor::full(plan.lse_shape, kNaN, DType::F32, plan.device);
  attention::bind_outputs(plan, out, lse);
  attention::run_forward(plan);
  return {out.to_f64_vec(), lse.to_f64_vec()};
}

// The accuracy rule (docs/parity.md) against ref64: out_naive is the same-precision reference
// path (attention_reference with ReferencePrecision::Input: S and P rounded to the input
// dtype, as FlashAttention's rule computes its reference). The f32 reference path must sit
// within rounding of ref64 (a loose sanity bound: 2 ulps of the largest output).
template <class Op>
void check_accuracy(const std::vector<double>& out, const Op& op, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Ref64& ref, DType dtype) {
  const std::vector<double> naive = attention_reference(op, q, k, v, ReferencePrecision::Input).to_f64_vec();
  const std::vector<double> ref32 = attention_reference(op, q, k, v).to_f64_vec();
  REQUIRE(all_finite(out));
  REQUIRE(all_finite(naive));
  REQUIRE(all_finite(ref32));
  const double err = max_abs_diff(out, ref.out);
  const double naive_err = max_abs_diff(naive, ref.out);
  const double ref32_err = max_abs_diff(ref32, ref.out);
  const double rounding = max_abs_diff(rounded(ref.out, dtype), ref.out);
  INFO("max|out - ref64| = ", err, ", max|out_naive - ref64| = ", naive_err, ", f32 reference ", ref32_err,
       ", rounding ", rounding);
  CHECK(err <= 2 * naive_err + 1e-5);
  CHECK(ref32_err <= 4 * rounding + 1e-5);
}

// One-hot values: out row = average of e_t over the keys the row sees when the logits are
// all equal (softmax_scale 0). d = 8, so at most 8 keys.
Tensor one_hot_v(size_t sk, DType dt, Device dev) {
  std::vector<double> v(sk * 8, 0.0);
  for (size_t t = 0; t < sk; ++t) v[t * 8 + t] = 1.0;
  return make(v, Shape{sk, 1, 8}, dt, dev);
}

// Expected row of averaged one-hots for visible keys [lo, hi].
std::vector<double> avg_row(int lo, int hi) {
  std::vector<double> r(8, 0.0);
  for (int t = lo; t <= hi; ++t) r[t] = 1.0 / (hi - lo + 1);
  return r;
}

}  // namespace

TEST_CASE("attention: causal mask is aligned bottom-right and fully masked rows give 0 and -inf") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    // One sequence, sq = 3, sk = 5: row i sits at key position i + 2.
    Tensor q = randn({3, 1, 8}, DType::BF16, dev, 1);
    Tensor k = randn({5, 1, 8}, DType::BF16, dev, 2);
    Tensor v = one_hot_v(5, DType::BF16, dev);
    FlashAttnVarLen op;
    op.softmax_scale = 0.0f;
    op.max_seqlen_q = 3, op.max_seqlen_k = 5;
    op.seqlens_q = u32_tensor({0, 3}, dev);
    op.seqlens_k = u32_tensor({0, 5}, dev);
    op.window_size_right = 0;
    auto [out, lse] = op.forward_with_lse(q, k, v);
    std::vector<double> o = out.to_f64_vec(), want;
    for (int i = 0; i < 3; ++i) {
      auto r = avg_row(0, i + 2);
      want.insert(want.end(), r.begin(), r.end());
    }
    CHECK(max_abs_diff(o, want) < 2e-3);
    // log(sum of exp(0)) over 3, 4, 5 keys
    std::vector<double> l = lse.to_f64_vec();
    CHECK(l[0] == doctest::Approx(std::log(3.0)));
    CHECK(l[2] == doctest::Approx(std::log(5.0)));

    // sq = 4 > sk = 2: rows 0 and 1 sit before the first key and see nothing.
    Tensor q2 = randn({4, 1, 8}, DType::F16, dev, 3);
    Tensor k2 = randn({2, 1, 8}, DType::F16, dev, 4);
    Tensor v2 = one_hot_v(2, DType::F16, dev);
    op.max_seqlen_q = 4, op.max_seqlen_k = 2;
    op.seqlens_q = u32_tensor({0, 4}, dev);
    op.seqlens_k = u32_tensor({0, 2}, dev);
    auto [out2, lse2] = op.forward_with_lse(q2, k2, v2);
    std::vector<double> o2 = out2.to_f64_vec(), l2 = lse2.to_f64_vec();
    for (int c = 0; c < 16; ++c) CHECK(o2[c] == 0.0);
    CHECK(std::isinf(l2[0]));
    CHECK(l2[0] < 0);
    CHECK(std::isinf(l2[1]));
    CHECK(o2[16] == doctest::Approx(1.0));  // row 2 (position 0) sees key 0 only
    CHECK(o2[24] == doctest::Approx(0.5).epsilon(1e-2));
  }
}

TEST_CASE("attention: windows, mm-prefix ranges and window conversion") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor q = randn({6, 1, 8}, DType::BF16, dev, 5);
    Tensor k = randn({6, 1, 8}, DType::BF16, dev, 6);
    Tensor v = one_hot_v(6, DType::BF16, dev);
    FlashAttnVarLen op;
    op.softmax_scale = 0.0f;
    op.max_seqlen_q = 6, op.max_seqlen_k = 6;
    op.seqlens_q = u32_tensor({0, 6}, dev);
    op.seqlens_k = u32_tensor({0, 6}, dev);
    SUBCASE("left 1, right 2") {
      op.window_size_left = 1, op.window_size_right = 2;
      std::vector<double> o = op.forward(q, k, v).to_f64_vec();
      for (int i = 0; i < 6; ++i) {
        auto want = avg_row(std::max(0, i - 1), std::min(5, i + 2));
        for (int c = 0; c < 6; ++c) CHECK(o[i * 8 + c] == doctest::Approx(want[c]).epsilon(1e-2));
      }
    }
    SUBCASE("a window larger than max_seqlen_k counts as None") {
      op.window_size_left = 7, op.window_size_right = 0;  // 7 > 6: None, so plain causal
      AttnPlan plan = attention::plan_varlen(op, q, k, v);
      CHECK(plan.params.window_left == 6);  // candle: a missing left side becomes max_seqlen_k
      CHECK(plan.params.window_right == 0);
      op.window_size_left = 2, op.window_size_right = std::nullopt;
      plan = attention::plan_varlen(op, q, k, v);
      CHECK(plan.params.window_left == 2);
      CHECK(plan.params.window_right == 6);
    }
    SUBCASE("mm-prefix range [1, 4) is bidirectional inside a causal mask") {
      op.window_size_right = 0;
      op.mm_prefix_ranges = Tensor::from_vec(std::vector<int32_t>{1, 4, 5, 5}, Shape{1, 2, 2}, dev);
      AttnPlan plan = attention::plan_varlen(op, q, k, v);
      CHECK(plan.params.window_left == 6);  // candle turns causal into left = max_seqlen_k first
      std::vector<double> o = op.forward(q, k, v).to_f64_vec();
      const int hi[6] = {0, 3, 3, 3, 4, 5};  // rows 1..3 see up to key 3; [5, 5) is empty
      for (int i = 0; i < 6; ++i) {
        auto want = avg_row(0, hi[i]);
        for (int c = 0; c < 6; ++c) CHECK(o[i * 8 + c] == doctest::Approx(want[c]).epsilon(1e-2));
      }
    }
  }
}

TEST_CASE("attention: strides are 64-bit in the plan") {
  // A size-1 row dim may carry any stride; 2^33 would overflow candle's u32 strides.
  const int64_t big = int64_t{1} << 33;
  auto base = Tensor::zeros({64}, DType::BF16, Device::cpu()).storage();
  Tensor q(base, Layout(Shape{1, 2, 8}, {big, 8, 1}, 0), DType::BF16);
  Tensor k(base, Layout(Shape{1, 2, 8}, {big, 16, 1}, 0), DType::BF16);
  FlashAttnVarLen op;
  op.max_seqlen_q = 1, op.max_seqlen_k = 1;
  op.seqlens_q = u32_tensor({0, 1}, Device::cpu());
  op.seqlens_k = u32_tensor({0, 1}, Device::cpu());
  AttnPlan plan = attention::plan_varlen(op, q, k, k);
  CHECK(plan.params.q_row_stride == big);
  CHECK(plan.params.k_row_stride == big);
  CHECK(plan.params.k_head_stride == 16);
}

namespace {

struct MaskSpec {
  std::optional<size_t> left, right;
  bool alibi = false;
  std::optional<float> softcap;
  bool mm_prefix = false;
};

MaskSpec random_mask(std::mt19937_64& gen) {
  MaskSpec m;
  auto side = [&]() -> std::optional<size_t> {
    if (gen() % 3 == 0) return std::nullopt;
    return gen() % 40;
  };
  switch (gen() % 7) {
    case 0: break;                                          // full attention
    case 1: m.right = 0; break;                             // causal
    case 2: m.left = side(), m.right = side(); break;       // sliding window, either side
    case 3: m.alibi = true, m.right = 0; break;             // ALiBi, causal
    case 4: m.alibi = true, m.left = side(); break;         // ALiBi, window
    case 5: m.softcap = 5.0f + gen() % 30, m.right = side(); break;
    case 6: m.mm_prefix = true, m.right = 0; break;         // multimodal prefix in a causal mask
  }
  return m;
}

struct VarlenCase {
  DType dtype;
  std::vector<uint32_t> lens_q, lens_k;
  size_t hk, group, d;
  MaskSpec mask;
  size_t page = 0;  // 0 = not paged
  CacheLayout layout = CacheLayout::Separate;
  DType table_dtype = DType::I32;
  bool packed_qkv = false;  // q, k, v narrowed out of one (total, 3, h, d) tensor
  uint64_t seed = 0;
};

struct Built {
  FlashAttnVarLen op;
  Tensor q, k, v;
};

// The case's tensors on dev (the same values on every device).
Built build(const VarlenCase& c, Device dev, bool paged) {
  const auto cq = cumulative(c.lens_q), ck = cumulative(c.lens_k);
  const size_t h = c.hk * c.group, batch = c.lens_q.size();
  Built r;
  if (c.packed_qkv) {
    Tensor qkv = randn({cq.back(), 3, h, c.d}, c.dtype, dev, c.seed);
    r.q = qkv.narrow(1, 0, 1).squeeze(1);
    r.k = qkv.narrow(1, 1, 1).squeeze(1);
    r.v = qkv.narrow(1, 2, 1).squeeze(1);
  } else {
    r.q = randn({cq.back(), h, c.d}, c.dtype, dev, c.seed);
    r.k = randn({ck.back(), c.hk, c.d}, c.dtype, dev, c.seed + 1);
    r.v = randn({ck.back(), c.hk, c.d}, c.dtype, dev, c.seed + 2);
  }
  auto& op = r.op;
  op.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  op.max_seqlen_q = *std::max_element(c.lens_q.begin(), c.lens_q.end()) + (c.seed % 3);
  op.max_seqlen_k = *std::max_element(c.lens_k.begin(), c.lens_k.end()) + (c.seed % 2);
  op.seqlens_q = u32_tensor(cq, dev);
  op.seqlens_k = u32_tensor(ck, dev);
  op.window_size_left = c.mask.left;
  op.window_size_right = c.mask.right;
  op.softcap = c.mask.softcap;
  if (c.mask.alibi) {
    std::vector<float> slopes(h);
    for (size_t i = 0; i < h; ++i) slopes[i] = std::pow(2.0f, -8.0f * (i + 1) / h);
    op.alibi_slopes = Tensor::from_vec(slopes, Shape{h}, dev);
  }
  if (c.mask.mm_prefix) {
    std::vector<int32_t> ranges(batch * 2 * 2);
    for (size_t b = 0; b < batch; ++b) {
      const int32_t sk = static_cast<int32_t>(c.lens_k[b]);
      ranges[b * 4 + 0] = sk / 4, ranges[b * 4 + 1] = sk / 2 + 1;  // [sk/4, sk/2 + 1)
      ranges[b * 4 + 2] = sk, ranges[b * 4 + 3] = sk;              // empty
    }
    op.mm_prefix_ranges = Tensor::from_vec(ranges, Shape{batch, 2, 2}, dev);
  }
  if (paged) {
    PagedKv pk = make_paged(r.k, r.v, ck, c.page, c.layout, c.table_dtype, dev, c.seed + 3);
    r.k = pk.k, r.v = pk.v;
    op.block_table = pk.block_table;
    op.page_block_size = c.page;
  }
  return r;
}

void run_case(const VarlenCase& c) {
  INFO("dtype ", std::string(dtype_name(c.dtype)), ", batch ", c.lens_q.size(), ", hk ", c.hk, ", group ", c.group,
       ", d ", c.d, ", page ", c.page, ", seed ", c.seed);
  Built host = build(c, Device::cpu(), c.page > 0);
  AttnPlan ref_plan = attention::plan_varlen(host.op, host.q, host.k, host.v);
  const Ref64 ref = ref64(ref_plan.params);
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Built b = build(c, dev, c.page > 0);
    AttnPlan plan = attention::plan_varlen(b.op, b.q, b.k, b.v);
    auto [out, lse] = run_into_nan(plan);
    check_accuracy(out, b.op, b.q, b.k, b.v, ref, c.dtype);
    check_lse(lse, ref.lse);
    if (c.page > 0) {
      // The same data, not paged: the same numbers (bit for bit on the CPU).
      Built flat = build(c, dev, false);
      AttnPlan flat_plan = attention::plan_varlen(flat.op, flat.q, flat.k, flat.v);
      auto [out_flat, lse_flat] = run_into_nan(flat_plan);
      if (dev.is_cpu())
        CHECK(max_abs_diff(out, out_flat) == 0.0);
      else
        CHECK(max_abs_diff(out, out_flat) <= 2 * max_abs_diff(rounded(ref.out, c.dtype), ref.out) + 1e-5);
    }
  }
}

// Head size and lengths trade off so that every case costs about the same.
VarlenCase random_case(std::mt19937_64& gen, uint64_t seed) {
  static const size_t kHeads[] = {8, 16, 24, 32, 40, 64, 72, 96, 128, 160, 256, 384, 512};
  static const size_t kGroups[] = {1, 2, 8};
  VarlenCase c;
  c.seed = seed;
  c.dtype = gen() % 2 ? DType::BF16 : DType::F16;
  c.d = kHeads[gen() % std::size(kHeads)];
  c.group = kGroups[gen() % 3];
  c.hk = c.group == 8 ? 1 : 1 + gen() % 2;
  const size_t batch = 1 + gen() % 9;
  const size_t max_len = c.d >= 256 ? 24 : c.d >= 96 ? 48 : 80;
  for (size_t b = 0; b < batch; ++b) {
    const bool empty_q = gen() % 6 == 0, empty_k = gen() % 8 == 0;
    c.lens_q.push_back(empty_q ? 0 : 1 + gen() % max_len);
    c.lens_k.push_back(empty_k ? 0 : 1 + gen() % max_len);
  }
  c.mask = random_mask(gen);
  if (gen() % 2) {
    static const size_t kPages[] = {32, 64, 256};
    c.page = kPages[gen() % 3];
    c.layout = static_cast<CacheLayout>(gen() % 3);
    c.table_dtype = gen() % 2 ? DType::U32 : DType::I32;
  } else if (gen() % 4 == 0) {
    c.packed_qkv = true;
    c.hk = 1, c.group = 1;  // one (total, 3, h, d) tensor: q, k, v share total and heads
    c.lens_k = c.lens_q;
  }
  return c;
}

}  // namespace

TEST_CASE("attention: random varlen grid against float64 (paged and not, every mask kind)") {
  std::mt19937_64 gen(test::seed(20240601));
  for (uint64_t i = 0; i < 160; ++i) run_case(random_case(gen, 1000 + 17 * i));
}

TEST_CASE("attention: long sequences cross many key and query blocks") {
  VarlenCase c;
  c.dtype = DType::BF16;
  c.lens_q = {200, 0, 130};
  c.lens_k = {333, 7, 130};
  c.hk = 2, c.group = 2, c.d = 64, c.seed = 77;
  for (int kind = 0; kind < 3; ++kind) {
    c.mask = MaskSpec{};
    if (kind == 1) c.mask.right = 0;
    if (kind == 2) c.mask.left = 70, c.mask.right = 5;
    c.page = kind == 2 ? 64 : 0;
    c.layout = CacheLayout::Interleaved;
    run_case(c);
  }
}

TEST_CASE("attention: batched op against float64") {
  std::mt19937_64 gen(test::seed(99));
  for (int i = 0; i < 12; ++i) {
    const size_t b = 1 + gen() % 4, sq = 1 + gen() % 40, sk = 1 + gen() % 40;
    const size_t hk = 1 + gen() % 2, h = hk * (1 + gen() % 2), d = 8 * (1 + gen() % 16);
    const DType dt = gen() % 2 ? DType::BF16 : DType::F16;
    MaskSpec m = random_mask(gen);
    m.mm_prefix = false;
    INFO("case ", i, " b ", b, " sq ", sq, " sk ", sk, " h ", h, " hk ", hk, " d ", d);
    auto build_b = [&](Device dev) {
      // q as a transposed view of (b, h, sq, d): strided rows and heads.
      Tensor q = randn({b, h, sq, d}, dt, dev, 10 + i).transpose(1, 2);
      Tensor k = randn({b, sk, hk, d}, dt, dev, 20 + i);
      Tensor v = randn({b, sk, hk, d}, dt, dev, 30 + i);
      FlashAttn op;
      op.softmax_scale = 0.3f;
      op.window_size_left = m.left, op.window_size_right = m.right, op.softcap = m.softcap;
      if (m.alibi) {
        std::vector<float> s(h, 0.25f);
        op.alibi_slopes = Tensor::from_vec(s, Shape{h}, dev);
      }
      return std::make_tuple(op, q, k, v);
    };
    auto [hop, hq, hk_, hv] = build_b(Device::cpu());
    const Ref64 ref = ref64(attention::plan_batched(hop, hq, hk_, hv).params);
    for (Device dev : test::test_devices()) {
      DEVICE_CONTEXT(dev);
      auto [op, q, k, v] = build_b(dev);
      AttnPlan plan = attention::plan_batched(op, q, k, v);
      auto [out, lse] = run_into_nan(plan);
      check_accuracy(out, op, q, k, v, ref, dt);
      check_lse(lse, ref.lse);
    }
  }
}

TEST_CASE("attention: the reference path runs the same plan and raises the same errors") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor q = randn({6, 4, 16}, DType::BF16, dev, 1);
    Tensor k = randn({9, 2, 16}, DType::BF16, dev, 2);
    FlashAttnVarLen op;
    op.max_seqlen_q = 4, op.max_seqlen_k = 5;
    op.seqlens_q = u32_tensor({0, 2, 5}, dev);
    op.seqlens_k = u32_tensor({0, 4, 9}, dev);
    const std::string want =
        "flash-attn-varlen: seqlens_q ends at 5 but q has 6 rows (total_q); the last cumulative length must equal total_q";
    // a value check: on CUDA it runs on the device and raises at the next wait
    CHECK_THROWS_WITH_AS(test::checked(dev, [&] { op.forward(q, k, k); }), want.c_str(), Error);
    CHECK_THROWS_WITH_AS(test::checked(dev, [&] { attention_reference(op, q, k, k); }), want.c_str(), Error);
    FlashAttn b;
    CHECK_THROWS_WITH_AS(attention_reference(b, q, k, k), "flash-attn expects input tensors of rank 4 (q: 3, k: 3, v: 3",
                         Error);
  }
}

TEST_CASE("attention: every head size from 8 to 512 in steps of 8") {
  for (size_t d = 8; d <= 512; d += 8) {
    VarlenCase c;
    c.dtype = d % 16 ? DType::F16 : DType::BF16;
    c.lens_q = {5, 3};
    c.lens_k = {7, 0};
    c.hk = 1, c.group = 2, c.d = d, c.seed = 500 + d;
    c.mask.right = 0;
    c.page = d % 24 == 0 ? 32 : 0;
    run_case(c);
  }
}
