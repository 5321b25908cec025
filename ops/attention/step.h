// Plan once, run many: the batch layout of one decode or prefill step, checked on the host
// once and reused by every layer's attention call.
//
// The candle-style calls take seqlens and block tables as device tensors, so on CUDA their
// values are checked on the device every call (docs/errors.md, "How errors surface on
// CUDA"). A serving loop already holds them on the host (PagedKvCache keeps every length and
// block id there): plan_step checks them there, uploads them once without waiting, and
// returns the op every layer calls; its calls launch the attention kernels and nothing
// else. update_step writes a new step's values into the same device tensors, so a captured
// CUDA graph of a whole step (tensor/graph.h) replays with new lengths.
//
//   StepLayout step = cache.step_layout(ids, query_lens);     // host values
//   FlashAttnVarLen op = plan_step(step, dev);                 // once per step
//   op.causal = true;
//   for (layer ...) out[layer] = op.forward(q[layer], k_cache[layer], v_cache[layer]);
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/attention/op.h"
#include "tensor/device.h"

namespace wick {

struct StepLayout {
  std::vector<uint32_t> seqlens_q;  // (batch + 1) cumulative query lengths, from 0
  std::vector<uint32_t> seqlens_k;  // (batch + 1) cumulative key lengths, from 0
  size_t max_seqlen_q = 0;          // >= every query length (for graphs: the largest any step has)
  size_t max_seqlen_k = 0;          // >= every key length (likewise)
  // Paged K/V: (batch, block_table_cols) block ids, row-major; empty when not paged.
  std::vector<int32_t> block_table;
  size_t block_table_cols = 0;
  std::optional<size_t> page_block_size;
};

// Checks the layout's values on the host: W04, W05 and W08 on the lengths, W10 on the
// columns (and W14 on the table's size). The checks that need q or k (W06: seqlens_q ends at
// q's rows; W07: seqlens_k ends within k's rows; W11: every used block id names one of k's
// blocks) run at each call, on the host, against what is recorded here. Then uploads the tables to `device` (no wait) and returns an op with
// seqlens_q, seqlens_k, max lengths, block_table and page_block_size set; set the scale, mask
// and the rest, and call forward on every layer. Its calls do no device-side checks, as long
// as its seqlens and block_table are the tensors made here. Change their values only through
// update_step: the calls trust the values checked here, and the Hopper decode reads them
// before the kernel before it on the stream has finished (no kernel may write them).
FlashAttnVarLen plan_step(const StepLayout& layout, const Device& device);

// Writes a new step's layout into the tensors of an op made by plan_step (no wait), after the
// same checks: the same batch size and block-table columns, max lengths no larger than the
// op's (a captured graph keeps the launch shapes it was captured with). op's max lengths stay.
void update_step(FlashAttnVarLen& op, const StepLayout& layout);

}  // namespace wick
