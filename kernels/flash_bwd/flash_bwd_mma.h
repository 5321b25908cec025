// Entries of the tensor-core backward (kernels/flash_bwd/flash_bwd_mma.cuh), instantiated for
// head sizes up to 64, 128 and 256 by kernels/flash_bwd/flash_bwd_hdim<D>.cu.
#pragma once
#include <cuda_runtime.h>

#include "kernels/flash_bwd/flash_bwd_params.h"

namespace wick::kernels::flash_bwd_mma {

// The deterministic form of instance kD on `st` (the key-tile kernel for dK and dV, then the
// q kernel for dQ); the f32 buffers are zero and dsum is computed.
template <int kD, class Elem>
void launch(const FlashBwdParams& bp, cudaStream_t st);
// The fused form (one kernel, dQ by atomics: faster, dQ's last bits vary run to run), same
// conditions.
template <int kD, class Elem>
void launch_fused(const FlashBwdParams& bp, cudaStream_t st);

}  // namespace wick::kernels::flash_bwd_mma
