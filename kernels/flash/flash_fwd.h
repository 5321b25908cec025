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

// The readable lesson kernel: follows ops/attention/cpu.cpp step by step. Slow; a second reference.
void flash_fwd_naive(const FlashFwdParams& params, void* stream);

}  // namespace wick::kernels
