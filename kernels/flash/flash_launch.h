// Host-side entry of one compiled head-size instance (defined in flash_launch.cuh,
// instantiated by kernels/flash/flash_fwd_hdim<D>.cu as kernels/flash/flash_instances.h lists).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/flash/flash_params.h"
#include "kernels/flash/validate.h"

namespace wick::kernels::flash {

// An environment switch of the flash kernels (for comparisons): on unless set to "0".
inline bool not_switched_off(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::strcmp(v, "0") == 0);
}

// The rows of a decode tile for this call: the longest sequence's query rows times the GQA
// group (the group's query heads packed as rows).
inline int64_t decode_rows(const FlashFwdParams& p) {
  const int max_sq = p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q;
  return static_cast<int64_t>(max_sq) * (p.num_heads / p.num_heads_k);
}

// Runs the tensor-core forward on head-size instance D (D >= params.head_size).
// decode: use the decode tile shape with the GQA group packed into rows (the caller checked
// that max_seqlen_q * group fits one 16-row tile and that the instance has the variant).
// checks: the call's value checks (validate.h), or null when they ran already or are not
// wanted; the kernel runs them itself when it can, else a check kernel runs first.
template <int D, FlashDType DT>
void run_flash_hdim(const FlashFwdParams& params, void* stream, bool decode, const DeviceChecks* checks);

// The workspace of an eager launch on `stream` (current device): `counters` holds at least
// `tiles` zeroed counters (the kernel resets each after use, so one array serves every launch
// on the stream: the split-KV tiles' counters, or the Hopper forward's tile claims) and
// `scratch` at least `floats` floats for the split-KV partials.
// Made on the stream's first split launch and grown when a launch needs more, stream-ordered
// (no host wait); a grown buffer's predecessor is kept, never freed, so a launch that
// obtained it from another thread stays valid (the memory held is at most twice the largest
// need). While the stream is being captured by a CudaGraph, that graph's arrays instead
// (tensor/graph.h: they live as long as the graph). False while it is captured any other way
// (the captured scratch is then the graph's, and a separate combine kernel merges) or when
// `tiles` exceeds the counters' capacity: the caller allocates per launch.
struct SplitWorkspace {
  int* counters = nullptr;
  float* scratch = nullptr;
};
bool split_workspace(void* stream, int64_t tiles, size_t floats, SplitWorkspace& out);

}  // namespace wick::kernels::flash
