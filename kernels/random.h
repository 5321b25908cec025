// Random tensors and dropout on CUDA: the formulas of kernels/random_ops.h, which the CPU
// loops in ops/random.cpp evaluate too, so both devices give the same values per seed.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// out[i] = uniform_at(seed, i, uniform_bits(type)), i < n; float types; out contiguous.
void fill_uniform(ElemType type, void* out, int64_t n, uint64_t seed);
// out[i] = randint_at(seed, i, low, range) converted to type (exact: ops/ checks the range
// fits the type); every type; out contiguous.
void fill_randint(ElemType type, void* out, int64_t n, uint64_t seed, int64_t low, uint64_t range);
// out[i] = dropout_keep(seed, i, threshold) ? x[xv(i)] * scale : 0; float types (f32 math
// for f16/bf16); out contiguous.
void dropout(ElemType type, const void* x, const StridedView& xv, void* out, int64_t n, uint64_t seed,
             uint64_t threshold, double scale);

}  // namespace wick::kernels
