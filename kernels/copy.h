// Strided copies and dtype casts on CUDA.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// dst[dv(i)] = src[sv(i)] for i < n, both views of one logical shape; elem_size 1, 2, 4 or 8.
// Contiguous src and dst take a flat fast path.
void copy_strided(size_t elem_size, const void* src, const StridedView& sv, void* dst,
                  const StridedView& dv, int64_t n);
// dst[i] = convert<to>(src[sv(i)]); dst contiguous. Integer -> integer converts exactly
// through int64, every other pair through f64 (f16/bf16 round to nearest even).
void cast(ElemType from, const void* src, const StridedView& sv, ElemType to, void* dst, int64_t n);

}  // namespace wick::kernels
