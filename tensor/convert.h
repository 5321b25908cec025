// Element conversions with a defined result for every input. C++ leaves a float -> integer
// conversion undefined when the value is outside the integer type (and signed integer
// overflow undefined); wick defines both, the same way on every device:
//   float -> integer: NaN becomes 0, values beyond the type's range saturate to its min or
//                     max, the rest truncate toward zero (Rust's `as`).
//   integer -> integer: the value modulo 2^bits of the target (two's complement wrapping).
//   integer add, sub, mul: wrap modulo 2^bits of the type (wrapping_op below).
// Plain constexpr functions without Eigen or CUDA headers: the CPU loops in ops/ and tensor/
// and the CUDA kernels (compiled with --expt-relaxed-constexpr) call the same code.
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

namespace wick {

// x (a float type: float or double) as the integer type I, saturating (see above).
template <class I, class F>
constexpr I saturating_cast(F x) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>);
  if (!(x == x)) return I(0);  // NaN
  // 2^digits is the first value above I's max; a power of two, so exact in F (I's max itself
  // is not: 2^63 - 1 rounds up to 2^63 in double).
  F above_max = F(1);
  for (int i = 0; i < std::numeric_limits<I>::digits; ++i) above_max *= F(2);
  if (x >= above_max) return std::numeric_limits<I>::max();
  if (x <= F(std::numeric_limits<I>::min()) - F(1)) return std::numeric_limits<I>::min();
  return static_cast<I>(x);  // |x| now truncates into range
}

// The unsigned type integer arithmetic on I wraps in: wide enough that a product of two
// values does not promote to (signed) int, as uint16_t * uint16_t would.
template <class I>
using wrap_t = std::conditional_t<(sizeof(I) <= 4), uint32_t, uint64_t>;

// a + b, a - b, a * b for an integer type I, modulo 2^bits of I.
template <class I>
constexpr I wrapping_add(I a, I b) {
  return static_cast<I>(static_cast<wrap_t<I>>(a) + static_cast<wrap_t<I>>(b));
}
template <class I>
constexpr I wrapping_sub(I a, I b) {
  return static_cast<I>(static_cast<wrap_t<I>>(a) - static_cast<wrap_t<I>>(b));
}
template <class I>
constexpr I wrapping_mul(I a, I b) {
  return static_cast<I>(static_cast<wrap_t<I>>(a) * static_cast<wrap_t<I>>(b));
}

}  // namespace wick
