// The one list of compiled tensor-core instances. Head sizes not listed run on the next
// larger instance with the extra channels zero-filled; a head size with no instance
// (WICK_FLASH_QUICK builds) and inputs the fast kernel cannot read with 16-byte accesses
// run on flash_fwd_naive.
//   prefill instances: every head dim in kFlashHeadDims, bf16 and f16
//   decode instances (kNWarps = 4 split the key tile, query heads packed into rows):
//     head dims 64 and 128, the common decode shapes
// WICK_FLASH_QUICK (a build option) keeps only d = 64 / 128, bf16, for fast iteration.
// Each kernels/flash/flash_fwd_hdim<D>.cu instantiates its D when WICK_FLASH_WANT(D).
#pragma once

#ifdef WICK_FLASH_QUICK
#define WICK_FLASH_WANT(d) ((d) == 64 || (d) == 128)
#define WICK_FLASH_WANT_F16 0
#else
#define WICK_FLASH_WANT(d) 1
#define WICK_FLASH_WANT_F16 1
#endif

namespace wick::kernels::flash {

inline constexpr int kFlashHeadDims[] = {32, 64, 96, 128, 160, 192, 224, 256, 512};
constexpr bool has_decode_variant(int d) { return d == 64 || d == 128; }

}  // namespace wick::kernels::flash
