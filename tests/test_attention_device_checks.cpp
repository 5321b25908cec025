// Value checks of CUDA calls on the device (kernels/flash/validate.h, tensor/device_fault.h):
// a call with bad cumulative lengths or block-table entries returns at once with NaN outputs,
// and the first fault is raised at the next call that waits for the device, with the same
// text and code as the host-side check (strict mode) gives at the call.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "devices.h"
#include "errors_catalog.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/step.h"
#include "ops/ops.h"
#include "tensor/graph.h"
#include "tensor/device_fault.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;

namespace {

// Two sequences (q 2 + 4 rows, k 4 + 5 rows), GQA 4/2, d16; `paged` uses 5 blocks of 32.
struct Call {
  Device dev;
  Tensor q, k, v;
  FlashAttnVarLen op;
  Call(Device d, bool paged) : dev(d) {
    q = randn({6, 4, 16}, DType::BF16, dev, 1);
    op.max_seqlen_q = 4, op.max_seqlen_k = 5;
    op.seqlens_q = u32_tensor({0, 2, 6}, dev);
    op.seqlens_k = u32_tensor({0, 4, 9}, dev);
    if (paged) {
      k = randn({5, 32, 2, 16}, DType::BF16, dev, 2);
      v = randn({5, 32, 2, 16}, DType::BF16, dev, 3);
      op.block_table = Tensor::from_vec(std::vector<uint32_t>{0, 1, 2, 3}, Shape{2, 2}, dev);
      op.page_block_size = 32;
    } else {
      k = randn({9, 2, 16}, DType::BF16, dev, 2);
      v = randn({9, 2, 16}, DType::BF16, dev, 3);
    }
  }
};

bool all_nan(const Tensor& t) {
  for (double x : t.to_f64_vec())
    if (!std::isnan(x)) return false;
  return true;
}

// The (code, text) check_device_faults raises, or ("", "<no error>").
std::pair<std::string, std::string> raised(const Device& dev) {
  try {
    check_device_faults(dev);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {"", "<no error>"};
}

}  // namespace

TEST_CASE("attention device checks: a bad call returns NaN and raises at the next wait") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  Call c(dev, false);
  c.op.seqlens_k = u32_tensor({0, 5, 4}, dev);  // not cumulative
  auto [out, lse] = c.op.forward_with_lse(c.q, c.k, c.v);  // no throw: nothing waited
  const auto [code, text] = raised(dev);
  CHECK(code == "W05");
  CHECK(text == "flash-attn-varlen: seqlens_k must be non-decreasing (cumulative lengths), but seqlens_k[2] = 4 < "
                "seqlens_k[1] = 5");
  CHECK(all_nan(out));  // the defined output of a faulted call
  CHECK(all_nan(lse));
  CHECK(raised(dev).second == "<no error>");  // raised once, then cleared
}

TEST_CASE("attention device checks: the earliest faulting call wins; a copy to the host raises it") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  Call first(dev, false), second(dev, false);
  first.op.seqlens_q = u32_tensor({0, 2, 5}, dev);   // ends at 5, q has 6 rows
  second.op.seqlens_q = u32_tensor({1, 2, 6}, dev);  // does not start at 0
  const Tensor out1 = first.op.forward(first.q, first.k, first.v);
  const Tensor out2 = second.op.forward(second.q, second.k, second.v);
  const std::string text = catalog::error_of([&] { (void)out2.to_f64_vec(); });
  CHECK(text == "flash-attn-varlen: seqlens_q ends at 5 but q has 6 rows (total_q); the last cumulative length must "
                "equal total_q");
  CHECK(all_nan(out1));
  CHECK(all_nan(out2));
  CHECK(raised(dev).second == "<no error>");
}

TEST_CASE("attention device checks: block-table faults, unsigned entries print unsigned") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  Call c(dev, true);
  c.op.block_table = Tensor::from_vec(std::vector<uint32_t>{0, 1, 2, 2147483653u}, Shape{2, 2}, dev);
  c.op.seqlens_k = u32_tensor({0, 4, 40}, dev);
  c.op.max_seqlen_k = 36;
  const Tensor out = c.op.forward(c.q, c.k, c.v);
  auto [code, text] = raised(dev);
  CHECK(code == "W11");
  CHECK(text == "flash-attn-varlen: block_table[1][1] = 2147483653 is outside [0, 5) (k has 5 blocks)");
  CHECK(all_nan(out));
  // too few columns for sequence 1 (70 keys need 3 blocks of 32)
  c.op.block_table = Tensor::from_vec(std::vector<uint32_t>{0, 1, 2, 3}, Shape{2, 2}, dev);
  c.op.seqlens_k = u32_tensor({0, 4, 74}, dev);
  c.op.max_seqlen_k = 70;
  (void)c.op.forward(c.q, c.k, c.v);
  std::tie(code, text) = raised(dev);
  CHECK(code == "W10");
  CHECK(text == "flash-attn-varlen: sequence 1 has 70 key tokens, which need 3 blocks of 32, but block_table has "
                "only 2 columns");
}

TEST_CASE("attention device checks: a valid call computes what strict mode computes, bit for bit") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  for (bool paged : {false, true}) {
    Call c(dev, paged);
    c.op.causal = true;
    const std::vector<double> fast = c.op.forward(c.q, c.k, c.v).to_f64_vec();
    c.op.strict_checks = true;
    const std::vector<double> strict = c.op.forward(c.q, c.k, c.v).to_f64_vec();
    CHECK(fast == strict);
    CHECK(raised(dev).second == "<no error>");
  }
}

// Where the checks run depends on the call (kernels/flash/validate.h): in the forward
// kernel's own CTAs for decode shapes with few index values (split-KV included), in a check
// kernel first for larger block tables and for the Hopper prefill kernel. Each case's fault
// must read as strict mode's error at the call, with NaN outputs; the same call made valid
// must compute what strict mode computes.
TEST_CASE("attention device checks: the forward kernel's own checks and the check kernel agree with strict mode") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  struct Case {
    const char* name;
    size_t sq, sk, h, hk, d, page, cols;  // per sequence (two sequences); page 0: packed k/v
  };
  const std::vector<Case> cases = {
      {"decode, split-KV, packed", 1, 700, 8, 2, 128, 0, 0},
      {"decode, split-KV, paged 64", 1, 700, 8, 2, 128, 64, 12},
      {"decode, paged 32, a table of 1100 columns", 1, 700, 8, 2, 64, 32, 1100},
      {"prefill, d128", 100, 300, 4, 2, 128, 0, 0},
  };
  uint64_t seed = 500;
  for (const Case& c : cases) {
    INFO("case: ", c.name);
    const Tensor q = randn({2 * c.sq, c.h, c.d}, DType::BF16, dev, seed++);
    Tensor k, v;
    FlashAttnVarLen op;
    op.max_seqlen_q = c.sq, op.max_seqlen_k = c.sk;
    op.seqlens_q = u32_tensor({0, static_cast<uint32_t>(c.sq), static_cast<uint32_t>(2 * c.sq)}, dev);
    op.seqlens_k = u32_tensor({0, static_cast<uint32_t>(c.sk), static_cast<uint32_t>(2 * c.sk)}, dev);
    std::vector<uint32_t> table;
    size_t blocks = 0;
    if (c.page > 0) {
      const size_t pages = (c.sk + c.page - 1) / c.page;
      blocks = 2 * pages + 1;
      for (size_t b = 0; b < 2; ++b)
        for (size_t col = 0; col < c.cols; ++col) table.push_back(col < pages ? static_cast<uint32_t>(2 * col + b) : 0u);
      k = randn({blocks, c.page, c.hk, c.d}, DType::BF16, dev, seed++);
      v = randn({blocks, c.page, c.hk, c.d}, DType::BF16, dev, seed++);
      op.block_table = Tensor::from_vec(table, Shape{2, c.cols}, dev);
      op.page_block_size = c.page;
    } else {
      k = randn({2 * c.sk, c.hk, c.d}, DType::BF16, dev, seed++);
      v = randn({2 * c.sk, c.hk, c.d}, DType::BF16, dev, seed++);
    }
    op.causal = true;
    // valid: the same numbers either way
    const std::vector<double> fast = op.forward(q, k, v).to_f64_vec();
    op.strict_checks = true;
    CHECK(op.forward(q, k, v).to_f64_vec() == fast);
    op.strict_checks = false;
    CHECK(raised(dev).second == "<no error>");

    auto same_fault = [&](const FlashAttnVarLen& bad, const char* code) {
      const Tensor out = bad.forward(q, k, v);
      const auto deferred = raised(dev);
      CHECK(all_nan(out));
      FlashAttnVarLen strict = bad;
      strict.strict_checks = true;
      CHECK(deferred.first == code);
      CHECK(deferred.second == catalog::error_of([&] { (void)strict.forward(q, k, v); }));
    };
    FlashAttnVarLen bad = op;
    bad.max_seqlen_k = c.sk - 1;  // sequence 0's keys exceed it
    same_fault(bad, "W08");
    bad = op;
    bad.seqlens_q = u32_tensor({0, static_cast<uint32_t>(c.sq), static_cast<uint32_t>(2 * c.sq - 1)}, dev);
    same_fault(bad, "W06");
    if (c.page > 0) {
      std::vector<uint32_t> broken = table;
      broken[c.cols + 3] = static_cast<uint32_t>(blocks);  // sequence 1, column 3: one past the last block
      bad = op;
      bad.block_table = Tensor::from_vec(broken, Shape{2, c.cols}, dev);
      same_fault(bad, "W11");
    }
  }
}

TEST_CASE("attention device checks: the backward of a faulted call gives NaN gradients") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  Call c(dev, false);
  c.op.seqlens_q = u32_tensor({0, 3, 6}, dev);  // sequence 0 has 3 queries, max_seqlen_q 4: valid
  c.op.seqlens_k = u32_tensor({0, 9, 4}, dev);  // not cumulative
  c.q.requires_grad(true), c.k.requires_grad(true), c.v.requires_grad(true);
  Tensor out = c.op.forward(c.q, c.k, c.v);
  out.backward(Tensor::ones(out.shape(), out.dtype(), dev));
  CHECK(raised(dev).first == "W05");
  CHECK(all_nan(c.q.grad()));
  CHECK(all_nan(c.k.grad()));
  CHECK(all_nan(c.v.grad()));
}

// ---- plan once, run many (ops/attention/step.h) --------------------------------------------

namespace {

// Three sequences in a paged cache: histories of 70, 5 and 130 tokens, then `q_lens` new
// queries each, appended so they are keys too.
struct Served {
  Device dev;
  PagedKvCache cache;
  std::vector<uint64_t> ids{7, 8, 9};
  Served(Device d, const std::vector<size_t>& hist) : dev(d), cache(16, 64, 2, 32, DType::BF16, d) {
    for (size_t b = 0; b < ids.size(); ++b)
      cache.append(ids[b], randn({hist[b], 2, 32}, DType::BF16, d, 10 + b), randn({hist[b], 2, 32}, DType::BF16, d, 20 + b));
  }
};

}  // namespace

TEST_CASE("attention plan_step: one planned op serves every layer, and matches the unplanned call") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Served s(dev, {70, 5, 130});
    const std::vector<size_t> q_lens{1, 3, 2};
    const StepLayout l = s.cache.step_layout(s.ids, q_lens);
    CHECK(l.seqlens_k == std::vector<uint32_t>{0, 70, 75, 205});
    CHECK(l.seqlens_q == std::vector<uint32_t>{0, 1, 4, 6});
    CHECK(l.max_seqlen_k == 130);
    CHECK(l.block_table_cols == 3);
    FlashAttnVarLen planned = plan_step(l, dev);
    planned.causal = true;
    FlashAttnVarLen plain;  // the same call built the candle way
    s.cache.bind(plain, s.ids);
    plain.seqlens_q = u32_tensor({0, 1, 4, 6}, dev);
    plain.max_seqlen_q = 3;
    plain.causal = true;
    for (int layer = 0; layer < 2; ++layer) {
      const Tensor q = randn({6, 4, 32}, DType::BF16, dev, 100 + layer);
      CHECK(planned.forward(q, s.cache.k(), s.cache.v()).to_f64_vec() ==
            plain.forward(q, s.cache.k(), s.cache.v()).to_f64_vec());
    }
  }
}

TEST_CASE("attention plan_step: the checks that need q or k run at the call, with the catalogue's texts") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Served s(dev, {70, 5, 130});
    StepLayout l = s.cache.step_layout(s.ids, {1, 1, 1});
    FlashAttnVarLen op = plan_step(l, dev);
    const Tensor q = randn({3, 4, 32}, DType::BF16, dev, 1);
    // a block id past the cache given to the cache's k, v (16 blocks)
    l.block_table[1] = 40;
    FlashAttnVarLen bad = plan_step(l, dev);
    CHECK(catalog::error_of([&] { bad.forward(q, s.cache.k(), s.cache.v()); }) ==
          "flash-attn-varlen: block_table[0][1] = 40 is outside [0, 16) (k has 16 blocks)");
    // seqlens_q planned for 3 query rows, called with 4
    CHECK(catalog::error_of([&] { op.forward(randn({4, 4, 32}, DType::BF16, dev, 2), s.cache.k(), s.cache.v()); }) ==
          "flash-attn-varlen: seqlens_q ends at 3 but q has 4 rows (total_q); the last cumulative length must "
          "equal total_q");
    // checked at plan time
    l.block_table[1] = 1;
    l.seqlens_k = {0, 70, 60, 205};
    CHECK(catalog::error_of([&] { plan_step(l, dev); }) ==
          "flash-attn-varlen: seqlens_k must be non-decreasing (cumulative lengths), but seqlens_k[2] = 60 < "
          "seqlens_k[1] = 70");
    // replacing a planned tensor brings back the ordinary checks
    op.seqlens_q = u32_tensor({0, 1, 2, 3}, dev);
    CHECK_NOTHROW(op.forward(q, s.cache.k(), s.cache.v()));
  }
}

TEST_CASE("attention write_kv_slots and reserve write where append would") {
  // (dtype, head size, source row width): 16-byte pieces; rows of 20 bytes; rows of 48 bytes
  // read from a wider tensor whose head stride (56 bytes) is not a multiple of 16, and one
  // whose is (64); rows of 256 16-byte pieces, more than a CUDA block has threads
  struct Rows {
    DType dt;
    size_t d, width;
  };
  const Rows cases[] = {{DType::F16, 16, 16},  {DType::F32, 5, 5},     {DType::BF16, 24, 28},
                        {DType::BF16, 24, 32}, {DType::F32, 512, 512}};
  for (Device dev : test::test_devices()) {
    for (const Rows& rc : cases) {
      const DType dt = rc.dt;
      const size_t d = rc.d, width = rc.width;
      DEVICE_CONTEXT(dev);
      INFO("dtype ", dtype_name(dt), " d ", d, " source width ", width);
      PagedKvCache a(8, 32, 2, d, dt, dev), b(8, 32, 2, d, dt, dev);
      auto rows = [&](size_t n, uint64_t seed) { return randn({n, 2, width}, dt, dev, seed).narrow(2, 0, d); };
      const Tensor k1 = rows(40, 1), v1 = rows(40, 2), k2 = rows(30, 3), v2 = rows(30, 4);
      a.append(1, k1, v1);
      a.append(1, k2, v2);
      for (const auto& [k, v] : {std::pair{k1, v1}, std::pair{k2, v2}}) {
        const std::vector<int64_t> slots = b.reserve(1, k.dim(0));
        write_kv_slots(b.k(), b.v(), k, v, Tensor::from_vec(slots, Shape{slots.size()}, dev));
      }
      CHECK(b.seq_len(1) == 70);
      CHECK(b.blocks(1) == a.blocks(1));
      CHECK(b.k().to_f64_vec() == a.k().to_f64_vec());
      CHECK(b.v().to_f64_vec() == a.v().to_f64_vec());
    }
  }
}

TEST_CASE("attention CUDA graph: a captured multi-layer decode step replays with new lengths") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  constexpr int kLayers = 4;
  const size_t hk = 2, h = 8, d = 64, page = 64;
  PagedKvCache cache(64, page, hk, d, DType::BF16, dev);  // bookkeeping; layer 0's K/V
  std::vector<Tensor> kc{cache.k()}, vc{cache.v()};
  for (int l = 1; l < kLayers; ++l) {
    kc.push_back(Tensor::zeros(cache.k().shape(), DType::BF16, dev));
    vc.push_back(Tensor::zeros(cache.v().shape(), DType::BF16, dev));
  }
  const std::vector<uint64_t> ids{1, 2};
  // prompts of 100 and 37 tokens in every layer
  for (size_t b = 0; b < ids.size(); ++b) {
    const size_t n = b == 0 ? 100 : 37;
    const std::vector<int64_t> slots = cache.reserve(ids[b], n);
    const Tensor st = Tensor::from_vec(slots, Shape{n}, dev);
    for (int l = 0; l < kLayers; ++l)
      write_kv_slots(kc[l], vc[l], randn({n, hk, d}, DType::BF16, dev, 50 + l * 2 + b),
                     randn({n, hk, d}, DType::BF16, dev, 60 + l * 2 + b), st);
  }
  // The step's fixed buffers: new K/V rows, their slots, q, and outputs per layer.
  std::vector<Tensor> k_new, v_new, q, out, lse;
  for (int l = 0; l < kLayers; ++l) {
    k_new.push_back(Tensor::zeros({2, hk, d}, DType::BF16, dev));
    v_new.push_back(Tensor::zeros({2, hk, d}, DType::BF16, dev));
    q.push_back(Tensor::zeros({2, h, d}, DType::BF16, dev));
    out.push_back(Tensor::empty({2, h, d}, DType::BF16, dev));
    lse.push_back(Tensor::empty({h, 2}, DType::F32, dev));
  }
  const Tensor slots = Tensor::zeros({2}, DType::I64, dev);
  // One decode step: reserve a token per sequence, then per layer write its K/V and attend.
  auto next_layout = [&] {
    std::vector<int64_t> s;
    for (uint64_t id : ids) s.push_back(cache.reserve(id, 1)[0]);
    copy_into(slots, Tensor::from_vec(s, Shape{2}, dev));
    return cache.step_layout(ids, {1, 1}, /*min_cols=*/8, /*min_max_seqlen_k=*/512, /*min_max_seqlen_q=*/1);
  };
  auto fill_inputs = [&](uint64_t seed) {
    for (int l = 0; l < kLayers; ++l) {
      copy_into(k_new[l], randn({2, hk, d}, DType::BF16, dev, seed + 3 * l));
      copy_into(v_new[l], randn({2, hk, d}, DType::BF16, dev, seed + 3 * l + 1));
      copy_into(q[l], randn({2, h, d}, DType::BF16, dev, seed + 3 * l + 2));
    }
  };
  FlashAttnVarLen op = plan_step(next_layout(), dev);
  op.causal = true;
  auto step = [&] {
    for (int l = 0; l < kLayers; ++l) {
      write_kv_slots(kc[l], vc[l], k_new[l], v_new[l], slots);
      op.forward_into(q[l], kc[l], vc[l], out[l], lse[l]);
    }
  };
  fill_inputs(1000);
  step();  // eager first: one-time set-up happens outside the capture
  CudaGraph graph(dev);
  for (int s = 0; s < 3; ++s) {
    // the next step: new slots and lengths in the same tensors, new inputs
    update_step(op, next_layout());
    fill_inputs(2000 + 100 * s);
    if (s == 0) {
      graph.begin_capture();
      step();
      graph.end_capture();
    }
    graph.replay();
    // the same step computed without the graph: the reference, from the cache the replay wrote
    for (int l = 0; l < kLayers; ++l) {
      FlashAttnVarLen plain;
      cache.bind(plain, ids);
      plain.seqlens_q = u32_tensor({0, 1, 2}, dev);
      plain.max_seqlen_q = 1;
      plain.max_seqlen_k = op.max_seqlen_k;  // the same split-KV count, so the same bits
      plain.causal = true;
      INFO("step ", s, " layer ", l);
      CHECK(out[l].to_f64_vec() == plain.forward(q[l], kc[l], vc[l]).to_f64_vec());
    }
  }
  CHECK(cache.seq_len(1) == 104);
}

// A planned step's lengths and block table change only through update_step's copies from the
// host, so the Hopper decode reads them before it waits for the kernel before it (here the
// K/V write of the step's new tokens, launched right before). Eager steps that each update the
// tables must each see their own: the same bits as the call built the candle way, which reads
// them after the wait (and checks them on the device).
TEST_CASE("attention plan_step: eager decode steps see the tables update_step wrote") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  const size_t hk = 8, h = 32, d = 128;
  PagedKvCache cache(96, 64, hk, d, DType::BF16, dev);
  const std::vector<uint64_t> ids{3, 4, 5};
  const std::vector<size_t> prompt{900, 64, 1990};
  for (size_t b = 0; b < ids.size(); ++b)
    cache.append(ids[b], randn({prompt[b], hk, d}, DType::BF16, dev, 30 + b),
                 randn({prompt[b], hk, d}, DType::BF16, dev, 40 + b));
  FlashAttnVarLen op;
  for (int s = 0; s < 4; ++s) {
    std::vector<int64_t> slots;
    for (uint64_t id : ids) slots.push_back(cache.reserve(id, 1)[0]);
    const StepLayout layout = cache.step_layout(ids, {1, 1, 1}, /*min_cols=*/40, /*min_max_seqlen_k=*/2100,
                                                /*min_max_seqlen_q=*/1);
    if (s == 0) {
      op = plan_step(layout, dev);
      op.causal = true;
    } else {
      update_step(op, layout);
    }
    write_kv_slots(cache.k(), cache.v(), randn({3, hk, d}, DType::BF16, dev, 60 + s),
                   randn({3, hk, d}, DType::BF16, dev, 70 + s), Tensor::from_vec(slots, Shape{3}, dev));
    const Tensor q = randn({3, h, d}, DType::BF16, dev, 80 + s);
    const std::vector<double> got = op.forward(q, cache.k(), cache.v()).to_f64_vec();
    FlashAttnVarLen plain;
    cache.bind(plain, ids);
    plain.seqlens_q = u32_tensor({0, 1, 2, 3}, dev);
    plain.max_seqlen_q = 1;
    plain.max_seqlen_k = op.max_seqlen_k;  // the same split-KV count, so the same bits
    plain.causal = true;
    INFO("step ", s);
    CHECK(got == plain.forward(q, cache.k(), cache.v()).to_f64_vec());
  }
  CHECK(cache.seq_len(5) == 1994);
}

TEST_CASE("gather device checks: a bad CUDA index gives zero rows and raises O17 at the next wait") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  const Tensor table = Tensor::ones({3, 2}, DType::F32, dev);
  const Tensor ids = Tensor::from_vec(std::vector<int64_t>{1, -2, 4, 0}, Shape{4}, dev);
  const Tensor rows = embedding(ids, table);  // no throw: nothing waited
  const auto [code, text] = raised(dev);
  CHECK(code == "O17");
  CHECK(text == "embedding: index -2 out of range for dim 0 of size 3 (shape [3, 2])");  // the first bad id
  CHECK(rows.to_f64_vec() == std::vector<double>{1, 1, 0, 0, 0, 0, 1, 1});
}
