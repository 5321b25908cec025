// The Hopper forward (flash_fwd_sm90.cu, sm_90a only): which calls it covers and its launch.
// flash_fwd.cu (the dispatch point) asks covers() and available(), then run(); a build
// without sm_90 in its CUDA architectures has no such kernel (WICK_FLASH_SM90 unset).
#pragma once
#include "kernels/flash/flash_params.h"

namespace wick::kernels::flash::sm90 {

// Head sizes 64, 96, 128, 192 and 256 (K/V paged in pages of a multiple of 32 rows, or not), no
// ALiBi / softcap / mm-prefix ranges, no forced split count.
// The caller has already sent decode shapes elsewhere and checked that every row is
// 16-byte aligned (flash_fwd.cu: vector_friendly).
bool covers(const FlashFwdParams& params);
// The current device is an sm_90 GPU and WICK_FLASH_SM90 is not "0" (that setting sends
// every call to the sm_80 family, for comparisons).
bool available();
// Launches the kernel on `stream` (a cudaStream_t); the caller checked covers() and
// available(). False (nothing launched) for a call covers() would refuse.
bool run(const FlashFwdParams& params, void* stream);

}  // namespace wick::kernels::flash::sm90
