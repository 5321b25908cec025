// The attention op on inputs that are not ordinary: NaN and inf propagate (as in the
// reference and PyTorch) while rows that see no key keep 0 and -inf; two runs of the same
// inputs give the same bits on every device; and on a GPU, a paged cache of more than 2^32
// elements is read correctly to its last page.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "devices.h"
#include "ops/attention/dispatch.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/plan.h"
#include "ops/attention/reference.h"
#include "ops/ops.h"
#include "test_attention_common.h"
#ifdef WICK_WITH_CUDA
#include <cuda_runtime_api.h>

#include "kernels/flash/flash_fwd.h"
#endif

using namespace wick;
using namespace wick::attn_test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// What one way of computing attention returned, in logical order: out (total_q, H, D) and,
// when the path has one, lse (H, total_q).
struct Outputs {
  std::vector<double> out, lse;
};

// One way of computing the op: the public forward, the reference, or (CUDA) one kernel.
struct Path {
  std::string name;
  std::function<Outputs(const FlashAttnVarLen&, const Tensor&, const Tensor&, const Tensor&)> run;
};

Outputs from(const std::pair<Tensor, Tensor>& r) { return {r.first.to_f64_vec(), r.second.to_f64_vec()}; }

Path op_path() {
  return {"forward_with_lse", [](const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v) {
            return from(op.forward_with_lse(q, k, v));
          }};
}
Path reference_path() {
  return {"attention_reference", [](const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v) {
            return Outputs{attention_reference(op, q, k, v).to_f64_vec(), {}};
          }};
}

#ifdef WICK_WITH_CUDA
// A kernel family run directly on a planned call: the tiled kernel with a forced split count
// (1: no split-KV; more: the split-KV combine), or the lesson kernel.
Path kernel_path(const std::string& name, bool naive, int num_splits) {
  return {name, [naive, num_splits](const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v) {
            attention::AttnPlan plan = attention::plan_varlen(op, q, k, v);
            Tensor out = Tensor::empty(plan.out_shape, plan.dtype, plan.device);
            Tensor lse = Tensor::empty(plan.lse_shape, DType::F32, plan.device);
            attention::bind_outputs(plan, out, lse);
            plan.params.num_splits = num_splits;
            // The kernels alone: no device-side value check runs before them here (the
            // inputs are valid by construction), so they must not wait for its verdict.
            plan.params.verdict = nullptr;
            set_current_device(plan.device);
            if (naive) kernels::flash_fwd_naive(plan.params, nullptr);
            else kernels::flash_fwd(plan.params, nullptr);
            synchronize(plan.device);
            return from({out, lse});
          }};
}
#endif

// The paths that compute attention on dev with NaN / inf propagation.
std::vector<Path> propagating_paths(Device dev) {
  std::vector<Path> paths{reference_path()};
  if (dev.is_cuda()) {
    paths.push_back(op_path());
#ifdef WICK_WITH_CUDA
    paths.push_back(kernel_path("tiled kernel, 1 split", false, 1));
    paths.push_back(kernel_path("tiled kernel, 3 splits", false, 3));
    paths.push_back(kernel_path("lesson kernel", true, 0));
#endif
  }
  return paths;
}

// Two sequences, causal, GQA 2/1, head size 32:
//   seq 0: 4 queries over 6 keys (query row i sits at key position i + 2)
//   seq 1: 5 queries over 3 keys (rows 0 and 1 sit before key 0: they see no key)
// Global query rows: seq 0 rows 0-3, seq 1 rows 4-8.
struct Inputs {
  static constexpr size_t H = 2, HK = 1, D = 32, total_q = 9, total_k = 9;
  std::vector<double> q = normal(total_q * H * D, 51), k = normal(total_k * HK * D, 52),
                      v = normal(total_k * HK * D, 53);
  std::optional<float> softcap;
  bool paged = false;

  void set_q(size_t row, size_t h, size_t c, double x) { q[(row * H + h) * D + c] = x; }
  void set_k(size_t key, size_t c, double x) { k[key * D + c] = x; }
  void set_v(size_t key, size_t c, double x) { v[key * D + c] = x; }

  Outputs run(const Path& path, Device dev) const {
    const Tensor tq = make(q, {total_q, H, D}, DType::BF16, dev);
    Tensor tk = make(k, {total_k, HK, D}, DType::BF16, dev), tv = make(v, {total_k, HK, D}, DType::BF16, dev);
    const std::vector<uint32_t> cu_k{0, 6, 9};
    FlashAttnVarLen op;
    op.max_seqlen_q = 5, op.max_seqlen_k = 6;
    op.seqlens_q = u32_tensor({0, 4, 9}, dev), op.seqlens_k = u32_tensor(cu_k, dev);
    op.causal = true, op.softcap = softcap;
    if (paged) {
      PagedKv kv = make_paged(tk, tv, cu_k, 32, CacheLayout::Separate, DType::I32, dev, 54);
      tk = kv.k, tv = kv.v, op.block_table = kv.block_table, op.page_block_size = 32;
    }
    return path.run(op, tq, tk, tv);
  }
};

size_t out_at(size_t row, size_t h, size_t c) { return (row * Inputs::H + h) * Inputs::D + c; }
size_t lse_at(size_t row, size_t h) { return h * Inputs::total_q + row; }

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

// got against clean, row by row: rows in `nan_rows` ({row, head}) have every out channel NaN
// (and lse NaN); every other row is exactly clean's.
void check_nan_rows(const Outputs& got, const Outputs& clean, const std::vector<std::pair<size_t, size_t>>& nan_rows) {
  for (size_t row = 0; row < Inputs::total_q; ++row)
    for (size_t h = 0; h < Inputs::H; ++h) {
      INFO("row ", row, " head ", h);
      const bool nan = std::find(nan_rows.begin(), nan_rows.end(), std::make_pair(row, h)) != nan_rows.end();
      for (size_t c = 0; c < Inputs::D; ++c) {
        const double x = got.out[out_at(row, h, c)];
        if (nan) REQUIRE(std::isnan(x));
        else REQUIRE(same_bits(x, clean.out[out_at(row, h, c)]));
      }
      if (got.lse.empty()) continue;
      const double l = got.lse[lse_at(row, h)];
      if (nan) REQUIRE(std::isnan(l));
      else REQUIRE(same_bits(l, clean.lse[lse_at(row, h)]));
    }
}

void check_nonfinite(const Path& path, Device dev, bool paged) {
  INFO("path: ", path.name, ", paged: ", paged);
  Inputs base;
  base.paged = paged;
  const Outputs clean = base.run(path, dev);
  // the rows of seq 1 that see no key: 0 and -inf
  for (size_t row : {4, 5})
    for (size_t h = 0; h < Inputs::H; ++h) {
      REQUIRE(clean.out[out_at(row, h, 0)] == 0.0);
      if (!clean.lse.empty()) REQUIRE(clean.lse[lse_at(row, h)] == -kInf);
    }
  {  // a NaN in one q row: that row (that head) only
    Inputs in = base;
    in.set_q(1, 0, 3, kNaN);
    check_nan_rows(in.run(path, dev), clean, {{1, 0}});
  }
  {  // a NaN in key 4 of seq 0: the rows that see it (positions 4 and 5: rows 2 and 3), every
     // head of the group; rows 0 and 1 (positions 2, 3) never see it
    Inputs in = base;
    in.set_k(4, 0, kNaN);
    check_nan_rows(in.run(path, dev), clean, {{2, 0}, {2, 1}, {3, 0}, {3, 1}});
  }
  {  // a NaN in a row that sees no key (seq 1, row 0): it still sees no key
    Inputs in = base;
    in.set_q(4, 1, 0, kNaN);
    check_nan_rows(in.run(path, dev), clean, {});
  }
  {  // softcap = inf: cap(x) = inf * tanh(0) is NaN for every seen key; unseen rows stay 0 / -inf
    Inputs in = base;
    in.softcap = std::numeric_limits<float>::infinity();
    std::vector<std::pair<size_t, size_t>> seen;
    for (size_t row = 0; row < Inputs::total_q; ++row)
      if (row != 4 && row != 5) seen.push_back({row, 0}), seen.push_back({row, 1});
    check_nan_rows(in.run(path, dev), clean, seen);
  }
  {  // a NaN in one channel of v at key 4: the rows that see key 4 get NaN in that channel,
     // their other channels and their lse are unchanged
    Inputs in = base;
    in.set_v(4, 5, kNaN);
    const Outputs got = in.run(path, dev);
    for (size_t row : {2, 3})
      for (size_t h = 0; h < Inputs::H; ++h) {
        INFO("row ", row, " head ", h);
        for (size_t c = 0; c < Inputs::D; ++c) {
          const double x = got.out[out_at(row, h, c)];
          if (c == 5) REQUIRE(std::isnan(x));
          else REQUIRE(same_bits(x, clean.out[out_at(row, h, c)]));
        }
        if (!got.lse.empty()) REQUIRE(same_bits(got.lse[lse_at(row, h)], clean.lse[lse_at(row, h)]));
      }
  }
}

}  // namespace

TEST_CASE("attention: NaN and inf propagate; rows that see no key keep 0 and -inf (reference and CUDA kernels)") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    for (const Path& path : propagating_paths(dev))
      for (bool paged : {false, true}) check_nonfinite(path, dev, paged);
  }
}

// The CPU forward's propagation is ops/attention/cpu.cpp's (its online softmax and final
// division), changed separately from the kernels: the same assertions, run on its own.
TEST_CASE("attention: NaN and inf propagate on the CPU flash path" * doctest::may_fail()) {
  for (bool paged : {false, true}) check_nonfinite(op_path(), Device::cpu(), paged);
}

TEST_CASE("attention: +inf in a key gives NaN where the reference does and the reference's values elsewhere") {
  // +inf * q: a row whose q channel 0 is positive gets a +inf logit (NaN); a negative one a
  // -inf logit (that key weighs 0).
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Inputs in;
    in.set_k(1, 0, kInf);
    in.set_q(0, 0, 0, 1.0), in.set_q(0, 1, 0, -1.0);
    const Outputs ref = in.run(reference_path(), dev);
    CHECK(std::isnan(ref.out[out_at(0, 0, 0)]));
    CHECK(std::isfinite(ref.out[out_at(0, 1, 0)]));
    std::vector<Path> paths = propagating_paths(dev);
    paths.erase(paths.begin());  // the reference itself
    for (const Path& path : paths) {
      INFO("path: ", path.name);
      const Outputs got = in.run(path, dev);
      for (size_t i = 0; i < got.out.size(); ++i) {
        INFO("element ", i);
        REQUIRE(std::isnan(got.out[i]) == std::isnan(ref.out[i]));
        if (!std::isnan(ref.out[i])) REQUIRE(std::abs(got.out[i] - ref.out[i]) <= 3e-2 * (1 + std::abs(ref.out[i])));
      }
    }
  }
}

TEST_CASE("attention: inf and NaN in rows past a sequence's keys never reach its outputs (d64 to d256; packed and paged)") {
  // Two sequences whose first ends inside a key tile (200 keys: inside a 128-key and a 64-key
  // tile). Packed K/V: the rows after it are the second sequence's, so inf in the first rows
  // of the second sequence's K and V may change only the second sequence's outputs. Paged K/V
  // (page 64): the rest of the first sequence's last page and the spare blocks hold NaN, which
  // must change nothing. These head sizes take the GPU's fastest kernels (on an H200 the
  // copy-engine kernel, which copies whole tiles and must clear the rows past the end itself).
  constexpr size_t H = 4, HK = 2;
  const std::vector<uint32_t> lq{150, 90}, lk{200, 300};
  const auto cq = cumulative(lq), ck = cumulative(lk);
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    for (size_t D : {64, 96, 128, 192, 256}) {
      INFO("head size ", D);
      const std::vector<double> q = normal(cq.back() * H * D, 81), k = normal(ck.back() * HK * D, 82),
                                v = normal(ck.back() * HK * D, 83);
      auto run = [&](const std::vector<double>& kk, const std::vector<double>& vv, bool paged,
                     std::optional<double> unused) {
        FlashAttnVarLen op;
        op.max_seqlen_q = 150, op.max_seqlen_k = 300;
        op.seqlens_q = u32_tensor(cq, dev), op.seqlens_k = u32_tensor(ck, dev);
        Tensor tk = make(kk, {ck.back(), HK, D}, DType::BF16, dev), tv = make(vv, {ck.back(), HK, D}, DType::BF16, dev);
        if (paged) {
          PagedKv kv = make_paged(tk, tv, ck, 64, CacheLayout::Separate, DType::I32, dev, 84, unused);
          tk = kv.k, tv = kv.v, op.block_table = kv.block_table, op.page_block_size = 64;
        }
        return from(op.forward_with_lse(make(q, {cq.back(), H, D}, DType::BF16, dev), tk, tv));
      };
      auto same_rows = [&](const Outputs& got, const Outputs& want, size_t rows) {
        for (size_t i = 0; i < rows * H * D; ++i) {
          INFO("out element ", i);
          REQUIRE(same_bits(got.out[i], want.out[i]));
        }
        for (size_t h = 0; h < H; ++h)
          for (size_t r = 0; r < rows; ++r) {
            INFO("lse of head ", h, " row ", r);
            REQUIRE(same_bits(got.lse[h * cq.back() + r], want.lse[h * cq.back() + r]));
          }
      };
      {
        INFO("packed K/V, inf in the second sequence's first keys and values");
        const Outputs clean = run(k, v, false, std::nullopt);
        REQUIRE(all_finite(clean.out));
        std::vector<double> kk = k, vv = v;
        for (size_t t = lk[0]; t < lk[0] + 8; ++t)
          for (size_t c = 0; c < HK * D; ++c) kk[t * HK * D + c] = kInf, vv[t * HK * D + c] = -kInf;
        same_rows(run(kk, vv, false, std::nullopt), clean, lq[0]);
      }
      {
        INFO("paged K/V, NaN in every cache row no sequence uses");
        const Outputs clean = run(k, v, true, std::nullopt);
        REQUIRE(all_finite(clean.out));
        same_rows(run(k, v, true, kNaN), clean, cq.back());
      }
    }
  }
}

// ---- determinism ----------------------------------------------------------------------------

namespace {

// The raw bytes of a tensor in logical order (bf16/f16/f32 read as their bit patterns).
std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(t.elem_count() * dtype_size(t.dtype()));
  const Tensor c = t.contiguous().to_device(Device::cpu());
  std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

struct Run {
  std::string name;
  std::function<std::pair<Tensor, Tensor>(Device)> call;
};

std::vector<Run> determinism_runs() {
  std::vector<Run> runs;
  runs.push_back({"varlen prefill, causal, GQA 8/2, d64", [](Device dev) {
                    const std::vector<uint32_t> lq{37, 130, 1}, lk{37, 200, 300};
                    const auto cq = cumulative(lq), ck = cumulative(lk);
                    FlashAttnVarLen op;
                    op.max_seqlen_q = 130, op.max_seqlen_k = 300, op.causal = true;
                    op.seqlens_q = u32_tensor(cq, dev), op.seqlens_k = u32_tensor(ck, dev);
                    return op.forward_with_lse(randn({cq.back(), 8, 64}, DType::BF16, dev, 61),
                                               randn({ck.back(), 2, 64}, DType::BF16, dev, 62),
                                               randn({ck.back(), 2, 64}, DType::BF16, dev, 63));
                  }});
  runs.push_back({"paged decode (split-KV on a GPU), softcap, ALiBi, window, f16 d128", [](Device dev) {
                    const std::vector<uint32_t> lk{900, 1500, 33, 640};
                    const auto ck = cumulative(lk);
                    Tensor k = randn({ck.back(), 2, 128}, DType::F16, dev, 64),
                           v = randn({ck.back(), 2, 128}, DType::F16, dev, 65);
                    PagedKv kv = make_paged(k, v, ck, 64, CacheLayout::Interleaved, DType::U32, dev, 66);
                    FlashAttnVarLen op;
                    op.max_seqlen_q = 1, op.max_seqlen_k = 1500, op.softcap = 30.f, op.window_size_left = 700;
                    op.seqlens_q = u32_tensor({0, 1, 2, 3, 4}, dev), op.seqlens_k = u32_tensor(ck, dev);
                    op.block_table = kv.block_table, op.page_block_size = 64;
                    std::vector<double> slopes{0.5, 0.25, 0.125, 0.0625, 0.03, 0.02, 0.01, 0.005};
                    op.alibi_slopes = make(slopes, {8}, DType::F32, dev);
                    return op.forward_with_lse(randn({4, 8, 128}, DType::F16, dev, 67), kv.k, kv.v);
                  }});
  runs.push_back({"batched, sliding window, bf16 d96", [](Device dev) {
                    FlashAttn op;
                    op.window_size_left = 50, op.window_size_right = 3;
                    return op.forward_with_lse(randn({2, 150, 4, 96}, DType::BF16, dev, 68),
                                               randn({2, 170, 4, 96}, DType::BF16, dev, 69),
                                               randn({2, 170, 4, 96}, DType::BF16, dev, 70));
                  }});
  return runs;
}

}  // namespace

TEST_CASE("attention: two runs of the same inputs give the same bits (forward on every device)") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    for (const Run& r : determinism_runs()) {
      INFO(r.name);
      const auto a = r.call(dev), b = r.call(dev);
      CHECK(bytes_of(a.first) == bytes_of(b.first));
      CHECK(bytes_of(a.second) == bytes_of(b.second));
      CHECK(all_finite(a.first.to_f64_vec()));
    }
  }
}

// ---- a paged cache of more than 2^32 elements on a GPU ----------------------------------------

TEST_CASE("attention (CUDA): a bf16 paged cache of more than 2^32 elements is read to its last page") {
  SKIP_WITHOUT_CUDA();
#ifdef WICK_WITH_CUDA
  // (num_blocks, 2, page, hk, d) interleaved, 131072 elements per block; 33280 blocks hold
  // 4.36e9 elements (8.7 GB). The sequences use blocks at the start, around element 2^31 and
  // past 2^32 (the last ones).
  const Device gpu = Device::cuda(0);
  const size_t page = 64, hk = 8, d = 128, per_block = 2 * page * hk * d;
  const size_t num_blocks = (size_t{1} << 32) / per_block + 512;
  const size_t need = num_blocks * per_block * 2;
  size_t free_bytes = 0, total_bytes = 0;
  set_current_device(gpu);
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  if (free_bytes < need + (size_t{1} << 30)) {
    MESSAGE("SKIPPED: needs ", need + (size_t{1} << 30), " bytes of free GPU memory, has ", free_bytes);
    return;
  }
  Tensor cache = Tensor::empty({num_blocks, 2, page, hk, d}, DType::BF16, gpu);
  Tensor k = cache.narrow(1, 0, 1).squeeze(1), v = cache.narrow(1, 1, 1).squeeze(1);
  const int32_t nb = static_cast<int32_t>(num_blocks), mid = int32_t((size_t{1} << 31) / per_block);
  // 3 decode sequences and one prefill, 19 pages in all; the table is shuffled across the cache
  const std::vector<uint32_t> lq{1, 1, 64, 1}, lk{300, 64, 320, 500};
  const std::vector<int32_t> used{nb - 1, 0, mid,      nb - 2,   mid - 1, nb - 3, 7,      nb - 512, nb - 4, mid + 1,
                                  3,      nb - 5, nb - 6, mid + 2, 1,       nb - 7, nb - 8, 2,        nb - 9};
  const size_t cols = 8;
  std::vector<int32_t> far(4 * cols, 0), near(4 * cols, 0);
  size_t next = 0;
  for (size_t b = 0; b < 4; ++b)
    for (size_t pg = 0; pg * page < lk[b]; ++pg, ++next) far[b * cols + pg] = used[next], near[b * cols + pg] = int32_t(next);
  REQUIRE(next == used.size());
  Tensor kc = randn({used.size(), page, hk, d}, DType::BF16, gpu, 71);
  Tensor vc = randn({used.size(), page, hk, d}, DType::BF16, gpu, 72);
  for (size_t i = 0; i < used.size(); ++i) {
    copy_into(k.narrow(0, static_cast<size_t>(used[i]), 1), kc.narrow(0, i, 1));
    copy_into(v.narrow(0, static_cast<size_t>(used[i]), 1), vc.narrow(0, i, 1));
  }
  const auto cq = cumulative(lq), ck = cumulative(lk);
  auto run = [&](const Tensor& kk, const Tensor& vv, const std::vector<int32_t>& table, Device dev) {
    FlashAttnVarLen op;
    op.max_seqlen_q = 64, op.max_seqlen_k = 500, op.causal = true;
    op.seqlens_q = u32_tensor(cq, dev), op.seqlens_k = u32_tensor(ck, dev);
    op.block_table = Tensor::from_vec(table, Shape{4, cols}, dev), op.page_block_size = page;
    Tensor q = randn({cq.back(), 32, d}, DType::BF16, dev, 73);
    return op.forward_with_lse(q, kk, vv);
  };
  const auto big = run(k, v, far, gpu);
  const auto compact = run(kc, vc, near, gpu);
  // the same kernels over the same values: the same bits, wherever the pages lie
  CHECK(bytes_of(big.first) == bytes_of(compact.first));
  CHECK(bytes_of(big.second) == bytes_of(compact.second));
  // and the CPU path on the compact copy agrees within bf16 rounding
  const auto cpu = run(kc.to_device(Device::cpu()), vc.to_device(Device::cpu()), near, Device::cpu());
  const std::vector<double> g = big.first.to_f64_vec(), c = cpu.first.to_f64_vec();
  CHECK(all_finite(g));
  CHECK(max_abs_diff(g, c) <= 2e-2);
  CHECK(max_abs_diff(big.second.to_f64_vec(), cpu.second.to_f64_vec()) <= 1e-3);
#endif
}
