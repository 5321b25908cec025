// Entry points of the CUDA flash-attention forward (kernels/flash/*.cu).
// `stream` is a cudaStream_t passed as void* so this header needs no CUDA include;
// nullptr means the legacy default stream. Every launch is checked; failures throw wick::Error.
#pragma once
#include "kernels/flash/flash_params.h"

namespace wick::kernels {

struct DeviceChecks;  // kernels/flash/validate.h

// The fast path: picks the tensor-core prefill, paged, or split-KV decode kernel.
// checks: the call's value checks on the device (validate.h), or null (checked on the host):
// the tensor-core kernel runs them itself when it can, else a check kernel runs first.
void flash_fwd(const FlashFwdParams& params, void* stream, const DeviceChecks* checks = nullptr);

// How split-KV decode calls merge their splits on sm_90 GPUs: inside a cluster of CTAs (on,
// the default) or through global scratch (kernels/flash/flash_fwd_sm90.h, set_cluster_merge);
// the same bits either way. Does nothing in a build without the Hopper kernels. For
// comparisons (tests, benchmarks).
void flash_set_cluster_merge(bool on);

// The readable lesson kernel: follows ops/attention/cpu.cpp step by step. Slow; a second reference.
void flash_fwd_naive(const FlashFwdParams& params, void* stream);

}  // namespace wick::kernels
