// Tile shapes per head size (see FlashConfig in flash_fwd_kernel.cuh for the fields),
// chosen from H200 measurements (bench/RESULTS.md, "CUDA flash-attention"):
// - d <= 128: 128-row tiles of 4 warps x 32 rows (two mma row tiles per warp, so each K/V
//   fragment read from shared memory feeds two mmas); Q in registers up to d = 64; d = 96 /
//   128 use 32-key tiles with 3 stages, which fit 255 registers without spills (64-key tiles
//   spilled and measured 8-10% slower). Two CTAs per SM.
// - 160 <= d <= 256: O fits registers only at 16 rows per warp: 128-row tiles of 8 warps,
//   64-key tiles, 2 stages (one CTA per SM, each K/V tile serves 128 queries).
// - d = 512: output produced in two 256-channel chunks (a grid dimension) to keep O in
//   registers; 64-row tiles, 32-key tiles.
// - Decode: one 16-row tile (the query heads of a GQA group packed as rows), 4 warps
//   splitting each 64-key tile, 3-4 stages of K/V in flight: the kernel is a K/V stream.
#pragma once
#include "kernels/flash/flash_fwd_kernel.cuh"

namespace wick::kernels::flash {

template <int D> struct PrefillConfig;
template <> struct PrefillConfig<32> { using type = FlashConfig<32, 32, 4, 2, 1, 64, 3, true>; };
template <> struct PrefillConfig<64> { using type = FlashConfig<64, 64, 4, 2, 1, 64, 3, true>; };
template <> struct PrefillConfig<96> { using type = FlashConfig<96, 96, 4, 2, 1, 32, 3, false>; };
template <> struct PrefillConfig<128> { using type = FlashConfig<128, 128, 4, 2, 1, 32, 3, false>; };
template <> struct PrefillConfig<160> { using type = FlashConfig<160, 160, 8, 1, 1, 64, 2, false>; };
template <> struct PrefillConfig<192> { using type = FlashConfig<192, 192, 8, 1, 1, 64, 2, false>; };
template <> struct PrefillConfig<224> { using type = FlashConfig<224, 224, 8, 1, 1, 64, 2, false>; };
template <> struct PrefillConfig<256> { using type = FlashConfig<256, 256, 8, 1, 1, 64, 2, false>; };
template <> struct PrefillConfig<512> { using type = FlashConfig<512, 256, 4, 1, 1, 32, 2, false>; };

template <int D> struct DecodeConfig { using type = void; };
template <> struct DecodeConfig<64> { using type = FlashConfig<64, 64, 1, 1, 4, 64, 4, true>; };
template <> struct DecodeConfig<128> { using type = FlashConfig<128, 128, 1, 1, 4, 64, 3, true>; };

}  // namespace wick::kernels::flash
