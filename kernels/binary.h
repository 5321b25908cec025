// Elementwise binary CUDA kernels over broadcast strided inputs (views already broadcast to
// the output shape, stride 0 on broadcast dims) and a contiguous output. Every ElemType.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

enum class BinaryOp : int { Add, Sub, Mul, Div, Max, Min };
enum class CmpOp : int { Eq, Ne, Lt, Le, Gt, Ge };

// out[i] = op(l[lv(i)], r[rv(i)]); out has the inputs' type. Integer division by zero gives 0.
void binary(BinaryOp op, ElemType type, const void* l, const StridedView& lv, const void* r,
            const StridedView& rv, void* out, int64_t n);
// out[i] = op(l, r) ? 1 : 0 as uint8.
void compare(CmpOp op, ElemType type, const void* l, const StridedView& lv, const void* r,
             const StridedView& rv, uint8_t* out, int64_t n);
// out[i] = c[cv(i)] ? a[av(i)] : b[bv(i)]; c is uint8, a, b and out hold elements of
// elem_size bytes (1, 2, 4 or 8): where only moves them, so one instance per size serves.
void where(size_t elem_size, const uint8_t* c, const StridedView& cv, const void* a, const StridedView& av,
           const void* b, const StridedView& bv, void* out, int64_t n);

}  // namespace wick::kernels
