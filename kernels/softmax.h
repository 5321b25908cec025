// Row softmax / log_softmax on CUDA over a contiguous (rows, cols) matrix, one block per row:
// pass 1 the row max, pass 2 sum(exp(x - max)), pass 3 the outputs (f32 math; f64 in f64).
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out (rows, cols) contiguous, same float type as x.
void softmax_rows(bool log, ElemType type, const void* x, void* out, int64_t rows, int64_t cols);

}  // namespace wick::kernels
