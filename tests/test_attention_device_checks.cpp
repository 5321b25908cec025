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
