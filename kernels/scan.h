// Running sums along one dim on CUDA. x and out are contiguous (outer, n, inner) blocks
// (ops/scan.cpp moves the scanned dim there, a copy only when x is not contiguous).
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out[o, j, i] = sum over j' <= j (reverse: j' >= j) of x[o, j', i]. Every type: f16/bf16
// accumulate in f32, integers in int64 (wrapping to the type on store).
void cumsum(ElemType type, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool reverse);

}  // namespace wick::kernels
