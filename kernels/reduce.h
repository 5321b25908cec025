// Row reductions on CUDA: x is a contiguous (rows, cols) matrix, one output per row.
// ops/reduce.cpp moves the reduced dims last (a permuted contiguous copy) before calling.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

enum class ReduceOp : int { Sum, Max, Min, ArgMax, ArgMin };

// out[r] = op(x[r, 0..cols)). Sum/Max/Min write `type` (f16/bf16 accumulate in f32, integers
// in int64 then wrap to the type); ArgMax/ArgMin write int64 (first index on ties). cols > 0
// for Max/Min/Arg*.
void reduce_rows(ReduceOp op, ElemType type, const void* x, int64_t rows, int64_t cols, void* out);

}  // namespace wick::kernels
