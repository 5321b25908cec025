// gather and scatter_add along one dim on CUDA (PyTorch's semantics). The coordinates come
// from the index tensor's shape: element e of the index (row-major over iv.dims) has
// coordinates c; the element it names in x (or dst) has the same coordinates with c[dim]
// replaced by idx[e]. idx is int64, contiguous, and range-checked on the host by ops/gather.cpp.
// Only the strides of xv, dv and sv are read (their dims may be larger than the index's).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out[e] = x[c with c[dim] = idx[e]] through xv's strides; out contiguous with iv's dims;
// elem_size 1, 2, 4 or 8 (gather only moves elements).
void gather(size_t elem_size, const void* x, const StridedView& xv, const int64_t* idx, const StridedView& iv,
            int dim, void* out);
// dst[c with c[dim] = idx[e]] += src[c] (atomicAdd: repeats accumulate, in no set order);
// dst through dv's strides, src through sv's. F32 or F64.
void scatter_add(ElemType type, void* dst, const StridedView& dv, const int64_t* idx, const StridedView& iv, int dim,
                 const void* src, const StridedView& sv);

}  // namespace wick::kernels
