// Entry point of the CUDA flash-attention backward (kernels/flash_bwd/flash_bwd.cu).
// `stream` is a cudaStream_t passed as void* so this header needs no CUDA include;
// nullptr means the legacy default stream. Every launch is checked; failures throw wick::Error.
#pragma once
#include "kernels/flash_bwd/flash_bwd_params.h"

namespace wick::kernels {

// Zeroes the scratch buffers, runs the three steps (D, dK/dV/dQ, cast) and writes
// params.dq/dk/dv completely. Any head size the forward accepts (a multiple of 8, <= 512).
void flash_bwd(const FlashBwdParams& params, void* stream);

}  // namespace wick::kernels
