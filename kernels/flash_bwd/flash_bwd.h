// Entry point of the CUDA flash-attention backward (kernels/flash_bwd/flash_bwd.cu).
// `stream` is a cudaStream_t passed as void* so this header needs no CUDA include;
// nullptr means the legacy default stream. Every launch is checked; failures throw wick::Error.
#pragma once
#include "kernels/flash_bwd/flash_bwd_params.h"

namespace wick::kernels {

// Zeroes the scratch buffers, runs the three steps (D, dK/dV/dQ, cast) and writes
// params.dq/dk/dv completely. Any head size the forward accepts (a multiple of 8, <= 512).
void flash_bwd(const FlashBwdParams& params, void* stream);

// Whether flash_bwd adds dK and dV into params.dk_accum / dv_accum (which must then be
// allocated) rather than storing them into dk / dv directly: when the K/V cache is paged or
// the scalar kernels run (params.scalar, or a row of q, k, v or dO not 16-byte aligned).
bool flash_bwd_accumulates_kv(const FlashBwdParams& params);

}  // namespace wick::kernels
