// The Hopper forward (flash_fwd_sm90.cu, sm_90a only): which calls it covers and its launch.
// flash_fwd.cu (the dispatch point) asks covers() and available(), then run(); a build
// without sm_90 in its CUDA architectures has no such kernel (WICK_FLASH_SM90 unset).
#pragma once
#include "kernels/flash/flash_params.h"
#include "kernels/flash/validate.h"

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

// The Hopper decode (flash_decode_sm90.cu): the decode shape (every sequence's query rows
// times the GQA group fit 16 rows; 32 at head sizes up to 128) at head sizes 64, 96, 128,
// 192 and 256, K/V paged in pages of a multiple of 32 rows or not, every score modifier (the
// general ones in instances of their own); false with WICK_FLASH_SM90_DECODE=0. The caller
// checked vector_friendly and available().
bool decode_covers(const FlashFwdParams& params);
// Launches it on `stream` with the call's value checks (validate.h; null: none). False
// (nothing launched, no check run) when the copy engine cannot describe K/V or split
// partials would need the combine kernel (no cluster merge, and a capture made directly
// through the CUDA runtime): the sm_80 kernel takes the call.
bool run_decode(const FlashFwdParams& params, void* stream, const DeviceChecks* checks);
// Split decode calls merge their splits' partials inside a cluster of CTAs (the splits of
// one tile, at most 8, merged through each other's shared memory) when the GPU holds such
// clusters as well as it holds the CTAs without; off, through global scratch, as the sm_80 kernel does.
// Both give the same bits. On by default; WICK_FLASH_CLUSTER_MERGE=0 turns it off at
// start-up, this at any time (for comparisons: tests, benchmarks).
void set_cluster_merge(bool on);

}  // namespace wick::kernels::flash::sm90
