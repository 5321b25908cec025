// Gather / scatter-add along one dim on CUDA. x is viewed as a contiguous (outer, dim, inner)
// block; indices are int64, checked on the device: an index outside [0, dim) is never
// followed (its output rows are 0, its gradient rows are dropped) and index_select records
// the first one (the smallest position j) as a device fault (tensor/device_fault.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"
#include "tensor/device_fault.h"

namespace wick::kernels {

// What index_select records for a bad index: values[0] becomes the index, values[1..n) are
// the caller's (what its message prints).
struct IndexCheck {
  FaultSink sink;
  int64_t values[16] = {};
  int n = 1;
};

// out[o, j, i] = x[o, idx[j], i]; out is (outer, n_idx, inner) contiguous; elem_size 1/2/4/8.
void index_select(size_t elem_size, const void* x, int64_t outer, int64_t dim, int64_t inner,
                  const int64_t* idx, int64_t n_idx, void* out, const IndexCheck& check);
// dst[o, idx[j], i] += src[o, j, i] (atomic, so repeated indices accumulate). F32 or F64.
void index_add(ElemType type, void* dst, int64_t outer, int64_t dim, int64_t inner, const int64_t* idx,
               int64_t n_idx, const void* src);

}  // namespace wick::kernels
