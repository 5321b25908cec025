// The Hopper backward (flash_bwd_sm90.cu, sm_90a only): which calls it covers and its
// launch. flash_bwd.cu (the dispatch point) asks covers() and flash::sm90::available(), then
// launch(); a build without sm_90 in its CUDA architectures has no such kernel
// (WICK_FLASH_SM90 unset).
#pragma once
#include <cuda_runtime.h>

#include "kernels/flash_bwd/flash_bwd_params.h"

namespace wick::kernels::flash_bwd_sm90 {

// Head sizes up to 128 (multiples of 8), K/V not paged, no ALiBi / softcap / mm-prefix
// ranges, not deterministic (dQ is added with atomics). The caller has checked that every
// row of q, k, v and dO is 16-byte aligned (flash_bwd.cu: tensor_core_friendly).
bool covers(const FlashBwdParams& bp);
// dK, dV (stored in the output dtype: bp.kv_direct) and dQ (added into bp.dq_accum) on `st`;
// dsum is computed and the buffers are zero.
void launch(const FlashBwdParams& bp, cudaStream_t st);

}  // namespace wick::kernels::flash_bwd_sm90
