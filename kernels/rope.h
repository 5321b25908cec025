// Rotary position embedding on CUDA; the element formula is kernels/rope_ops.h's.
#pragma once
#include <cstdint>

#include "kernels/common.h"
#include "kernels/rope_ops.h"

namespace wick::kernels {

// x, out: contiguous (rows, row_len) with row_len a multiple of head_dim; positions: rows
// int64. out[r, k] = rope_element(p, k % head_dim, positions[r], x's head at k). Float types.
void rope(ElemType type, const void* x, void* out, const int64_t* positions, const RopeParams& p);

}  // namespace wick::kernels
