// The attention plan: every argument check of the flash-attention ops, in candle's order with
// candle's exact text (docs/parity.md, sections 2 and 3), then wick's stricter checks
// (section 5), and the FlashFwdParams that the CPU path and every CUDA kernel consume.
//
// Every check of the op's arguments lives here: the CPU path, the CUDA kernels and the
// reference path all start from a plan, so a CPU-only machine raises exactly the error a GPU
// run would. (The kernels keep guards of their own preconditions, C10-C14 in docs/errors.md,
// for callers that build FlashFwdParams by hand; a planned call never trips them.)
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/flash/flash_params.h"
#include "kernels/flash/validate.h"
#include "ops/attention/op.h"
#include "ops/attention/step.h"
#include "tensor/tensor.h"

namespace wick::attention {

struct AttnPlan {
  // Inputs filled by plan_*(); out/lse pointers and o_*/lse_* strides by bind_outputs().
  kernels::FlashFwdParams params;
  Device device;          // q's device (every input is on it; checked)
  DType dtype;            // q's dtype: F16 or BF16
  Shape out_shape;        // q's shape
  Shape lse_shape;        // varlen (num_heads, total_q); batched (batch, num_heads, seqlen_q)
  bool varlen = false;
  bool paged = false;
  bool deterministic = false;  // the op's field or WICK_DETERMINISTIC=1: the backward's dQ order
  // The small index tensors params points into, undefined when the op has none: the
  // cumulative lengths (varlen), the block table (paged), the mm-prefix ranges, and the
  // ALiBi slopes (a compact copy when the op's were strided). Held so the pointers stay
  // valid as long as the plan; host code reads them through HostTables.
  Tensor seqlens_q, seqlens_k, block_table, mm_prefix_ranges, alibi_slopes;
  // Set when the value checks (W04-W08, W10-W11) run on the device: a varlen call on CUDA
  // tensors outside strict mode. What they need besides params (the fault sink is added at
  // launch), and the call's verdict (params.verdict and device_checks->verdict point into
  // it; the backward reads it too).
  std::optional<kernels::DeviceChecks> device_checks;
  Tensor verdict;
};

// What plan_step (step.h) checked on the host, kept with the op it returns: the identity of
// the device tensors it made, and what the calls' k-dependent checks need.
struct StepTables {
  const void* seqlens_q = nullptr;  // data pointers of the op's tensors made by plan_step
  const void* seqlens_k = nullptr;
  const void* block_table = nullptr;
  int64_t last_q = 0;                    // seqlens_q's last entry (total_q it was planned for)
  std::vector<uint32_t> host_seqlens_k;  // cumulative
  std::vector<int32_t> host_table;       // (batch, cols), row-major
  int64_t cols = 0, page = 0;
  int64_t min_entry = 0, max_entry = -1;  // the smallest and largest block id a sequence uses
};

// plan_step's host checks of a layout (those that do not need q or k), and the tables the
// calls' remaining checks read. Throws wick::Error with the messages the call would give.
std::shared_ptr<StepTables> check_step(const StepLayout& layout);

// "flash-attn-varlen": q (total_q, h, d); k, v (total_k, hk, d) or paged
// (num_blocks, page, hk, d). Throws wick::Error with candle's text on the first failing check.
AttnPlan plan_varlen(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v);

// "flash-attn": q (b, sq, h, d); k, v (b, sk, hk, d).
AttnPlan plan_batched(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v);

// Points the plan at the output tensors (out like q's shape, contiguous, q's dtype; lse of
// lse_shape, contiguous, f32; both on the plan's device) and fills the o_*/lse_* strides.
void bind_outputs(AttnPlan& plan, const Tensor& out, const Tensor& lse);

// A plan's params with every index pointer (cumulative lengths, block table, mm-prefix
// ranges, ALiBi slopes) on the host: the plan's own for a CPU plan, host copies for a CUDA
// plan. The q/k/v/out/lse pointers are left as they are. For host code that walks the
// contract (contract.h) on a plan of any device: the reference and the host backward.
class HostTables {
 public:
  explicit HostTables(const AttnPlan& plan);
  HostTables(const HostTables&) = delete;
  HostTables& operator=(const HostTables&) = delete;
  const kernels::FlashFwdParams& params() const { return params_; }

 private:
  kernels::FlashFwdParams params_;
  std::vector<uint32_t> cu_q_, cu_k_;
  std::vector<int32_t> block_table_, mm_;
  std::vector<float> slopes_;
};

}  // namespace wick::attention
