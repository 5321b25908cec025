// Gather / scatter-add along one dim on CUDA. x is viewed as a contiguous (outer, dim, inner)
// block; indices are int64 and already range-checked on the host by ops/shape_ops.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out[o, j, i] = x[o, idx[j], i]; out is (outer, n_idx, inner) contiguous; elem_size 1/2/4/8.
void index_select(size_t elem_size, const void* x, int64_t outer, int64_t dim, int64_t inner,
                  const int64_t* idx, int64_t n_idx, void* out);
// dst[o, idx[j], i] += src[o, j, i] (atomic, so repeated indices accumulate). F32 or F64.
void index_add(ElemType type, void* dst, int64_t outer, int64_t dim, int64_t inner, const int64_t* idx,
               int64_t n_idx, const void* src);

}  // namespace wick::kernels
