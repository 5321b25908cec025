// The value checks of a varlen call (docs/parity.md section 5: W04-W08 on the cumulative
// lengths, W10-W11 on the block table), run on the device so the call never waits for it.
// They find the first failing check in the host checks' order (the key below), write the
// call's verdict, and record that fault in the device's fault record (tensor/device_fault.h)
// with the values its message prints. Two places run them: the tensor-core forward's own
// CTAs, each checking before it reads through an index value, when that kernel is the call's
// only kernel and the checks are few (kChecksInKernelMax cells; flash_launch.cuh); else
// flash_validate, one CTA launched before the kernels, which then read the verdict.
#pragma once
#include <cstdint>

#include "kernels/flash/flash_params.h"
#include "tensor/device_fault.h"

namespace wick::kernels {

// Which check failed, in the order the host runs them; the record's key is
// (check << 56) | index, so the smallest key is the host's first failure.
enum class SeqlensCheck : int64_t {
  QStart = 0,        // W04: seqlens_q[0] != 0                       index 0
  QOrder = 1,        // W05: seqlens_q[b] < seqlens_q[b - 1]           index b
  KOrder = 2,        // W05: seqlens_k                                 index b
  QEnd = 3,          // W06: seqlens_q[batch] != total_q               index 0
  KEnd = 4,          // W07: seqlens_k[batch] > total_k (not paged)    index 0
  QLength = 5,       // W08: a query length above max_seqlen_q         index b
  KLength = 6,       // W08: a key length above max_seqlen_k           index b
  Table = 7,         // W10 (index b * (cols + 1)) or W11 (index b * (cols + 1) + 1 + c)
};

// What the checks need besides the call's params (cu_seqlens_*, batch, max lengths, total_q,
// paging).
struct DeviceChecks {
  int64_t total_k = 0;          // rows of packed k (not paged)
  int64_t table_cols = 0;       // block_table columns (paged)
  bool table_unsigned = false;  // block_table is U32 (entries print as unsigned)
  uint32_t* verdict = nullptr;  // out: 0 when every check passed, else 1
  FaultSink sink;
};

struct ValidateArgs {
  FlashFwdParams p;
  DeviceChecks c;
};

// The index values the checks read: batch + 1 cumulative lengths of q and of k, and per
// sequence its block-table row plus its column count.
inline int64_t check_cells(const FlashFwdParams& p, const DeviceChecks& c) {
  return p.batch + 1 + (p.block_table ? p.batch * (c.table_cols + 1) : 0);
}
// Up to this many cells every CTA of the forward checks them itself (at most 8 per thread of
// a 128-thread CTA: two rounds of loads, no extra launch); above it one check kernel runs
// first.
constexpr int64_t kChecksInKernelMax = 1024;

// The record's values, by check (values[0] is the check):
//   QStart: first | QOrder/KOrder: b, s[b], s[b - 1] | QEnd: last, total_q |
//   KEnd: last, total_k | QLength/KLength: b, length, max |
//   Table W10: b, length, pages, page_block_size, cols, -1 |
//   Table W11: b, c, entry, num_blocks, 0, 1  (values[6] tells W10 from W11)
// The check kernel: one CTA, launched on `stream` before the kernels that read the verdict.
void flash_validate(const ValidateArgs& args, void* stream);

}  // namespace wick::kernels
