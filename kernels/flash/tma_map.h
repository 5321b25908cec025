// Host side of the tensor memory accelerator (hopper.cuh, tma_load_4d): the description of
// a 4-d tensor of 16-bit elements that a kernel copies boxes of. Made on the host for each
// call (no device work, no allocation) through the driver's cuTensorMapEncodeTiled, found at
// run time through the CUDA runtime, so wick links no driver library.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace wick::kernels::flash {

// Describes a tensor of 16-bit elements with extents dims[0..3] (dims[0] innermost and
// contiguous) and byte strides strides[0..2] of dims 1..3, read in boxes of box[0..3]
// elements into shared memory with the 128-byte swizzle (box[0] * 2 must be 128), zeros
// outside the extents. False when the driver has no encoder or refuses the description
// (strides not multiples of 16 bytes, extents past 2^32, a misaligned base): the caller
// then takes a path that does not use the copy engine.
inline bool encode_map_4d(CUtensorMap& map, const void* base, const uint64_t dims[4], const uint64_t strides[3],
                          const uint32_t box[4]) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    (void)cudaGetLastError();
    return reinterpret_cast<Encode>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace wick::kernels::flash
