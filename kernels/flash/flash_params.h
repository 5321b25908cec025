// FlashFwdParams: everything a flash-attention forward needs, as plain data.
// ops/attention/plan.cpp fills it (after every argument check); the CPU path
// (ops/attention/cpu.cpp) and the CUDA kernels (kernels/flash/) read the same struct
// through the functions of kernels/flash/contract.h, which spell out its index maps and
// semantics, so both devices compute the same function from the same numbers.
// All strides are in elements, 64-bit; pointers are already advanced by start_offset.
#pragma once
#include <cstdint>

namespace wick::kernels {

enum class FlashDType : int { F16 = 0, BF16 = 1 };

struct FlashFwdParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // may be null: then no LSE is written

  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;

  const uint32_t* cu_seqlens_q = nullptr;  // (batch + 1), cumulative; null for the batched op
  const uint32_t* cu_seqlens_k = nullptr;  // (batch + 1), cumulative; null for the batched op
  int batch = 0;
  int seqlen_q = 0, seqlen_k = 0;          // batched op: every sequence's length
  int max_seqlen_q = 0, max_seqlen_k = 0;  // upper bounds (checked by the plan)
  int64_t total_q = 0;                     // rows of q (varlen) or batch * seqlen_q
  // Rows of k and of v (varlen, not paged): how far bulk copies of K/V tiles may read. 0 =
  // not given: kernels that need it are not used.
  int64_t kv_rows = 0;
  int num_heads = 0, num_heads_k = 0, head_size = 0;

  // Paged K/V (null block_table = not paged). Entries are in [0, num_blocks): the plan
  // checked every entry a sequence uses, so kernels read no stray memory.
  const int32_t* block_table = nullptr;  // u32 or i32 storage read as i32
  int64_t block_table_batch_stride = 0;
  // Columns of each table row; 0 = not given. Entries below it exist whatever the call's
  // values, so a kernel may read them before the checks pass (the Hopper decode does).
  int64_t block_table_cols = 0;
  int page_block_size = 0;
  int64_t num_blocks = 0;

  float softmax_scale = 1.0f;
  float softcap = 0.0f;                  // 0 = off
  const float* alibi_slopes = nullptr;   // (num_heads) f32, null = no ALiBi
  // The mask window after candle's conversion (plan.cpp): key t is in the window of the
  // query at key position pos when pos - window_left <= t <= pos + window_right; -1 leaves
  // that side open. The conversion leaves either both sides open or neither (a missing
  // side becomes max_seqlen_k, as open as none since no sequence has more keys): causal
  // arrives as window_left = max_seqlen_k, window_right = 0.
  int window_left = -1, window_right = -1;

  // mm_prefix_ranges: (batch, mm_max_ranges, 2) i32, ranges [start, end) in key positions.
  const int32_t* mm_prefix_ranges = nullptr;
  int64_t mm_batch_stride = 0, mm_range_stride = 0;
  int mm_max_ranges = 0;

  FlashDType dtype = FlashDType::BF16;
  int num_splits = 0;  // split-KV: 0 = choose by heuristic, n >= 1 = force n splits

  // Set when the index values are checked on the device (validate.h: by a check kernel
  // launched before this call on the same stream, or by the forward kernel's own CTAs, which
  // write it for the backward): nonzero at *verdict means a check failed.
  // The kernels then read nothing but the verdict, and write NaN to every out and lse
  // element of the (contiguous, varlen) outputs. Null: the values were checked on the host.
  const uint32_t* verdict = nullptr;
  // Set for the calls of an op made by plan_step: its cumulative lengths and block table are
  // written only by copies from the host (plan_step, update_step), never by a kernel, so a
  // kernel launched while the one before it still runs may read them before it waits for
  // that kernel (the Hopper decode does).
  bool tables_settled = false;
};

}  // namespace wick::kernels
