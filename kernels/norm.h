// Row normalisations on CUDA over a contiguous (rows, cols) x with weight/bias (cols), one block
// per row; statistics in f32 (f64 for f64), output in x's type.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out[r, c] = x[r, c] / sqrt(mean_c(x[r]^2) + eps) * w[c]
void rms_norm_rows(ElemType type, const void* x, const void* w, void* out, int64_t rows, int64_t cols,
                   double eps);
// out[r, c] = (x[r, c] - mean) / sqrt(var + eps) * w[c] + b[c]   (biased variance)
void layer_norm_rows(ElemType type, const void* x, const void* w, const void* b, void* out, int64_t rows,
                     int64_t cols, double eps);

}  // namespace wick::kernels
