// The element formula of every binary op and comparison, for one compute type C (f32 for
// f16/bf16 storage, the type itself otherwise). The CPU loop in ops/binary.cpp and the CUDA
// kernels in kernels/binary.cu both call these, so the two devices compute the same thing.
#pragma once
#include <type_traits>

#include "kernels/binary.h"
#include "kernels/common.h"
#include "tensor/convert.h"  // wrapping_add/sub/mul

namespace wick::kernels {

// op(a, b). Integer add, sub and mul wrap modulo 2^bits (tensor/convert.h): signed overflow
// is undefined in C++. Integer division by zero yields 0 here because a kernel cannot throw;
// the CPU path raises "div: integer division by zero" before calling (ops.h states both). A signed
// MIN / -1 overflows (x86 traps with SIGFPE), so dividing by -1 is a wrapping negation.
// Max/Min return lhs on ties and whenever either side is NaN (the comparison is false).
template <class C>
WICK_HOST_DEVICE C apply_binary(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::Add:
      if constexpr (std::is_integral_v<C>) return wrapping_add(a, b);
      else return a + b;
    case BinaryOp::Sub:
      if constexpr (std::is_integral_v<C>) return wrapping_sub(a, b);
      else return a - b;
    case BinaryOp::Mul:
      if constexpr (std::is_integral_v<C>) return wrapping_mul(a, b);
      else return a * b;
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<C>) {
        if (b == C(0)) return C(0);
        if constexpr (std::is_signed_v<C>) {
          using U = std::make_unsigned_t<C>;
          if (b == C(-1)) return static_cast<C>(static_cast<U>(U(0) - static_cast<U>(a)));
        }
        return C(a / b);
      } else {
        return a / b;
      }
    case BinaryOp::Max: return a < b ? b : a;
    case BinaryOp::Min: return b < a ? b : a;
  }
  return a;
}

// op(a, b) as a truth value (stored as U8 1/0 by the callers).
template <class C>
WICK_HOST_DEVICE bool apply_compare(CmpOp op, C a, C b) {
  switch (op) {
    case CmpOp::Eq: return a == b;
    case CmpOp::Ne: return a != b;
    case CmpOp::Lt: return a < b;
    case CmpOp::Le: return a <= b;
    case CmpOp::Gt: return a > b;
    case CmpOp::Ge: return a >= b;
  }
  return false;
}

}  // namespace wick::kernels
