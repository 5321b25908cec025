// f16 and bf16: the host storage types of DType::F16 (IEEE binary16) and DType::BF16
// (bfloat16, the top half of an f32). Two bytes each, trivially copyable, standard layout,
// so a std::vector<f16> holds exactly the bytes a tensor stores.
//
// They are storage types, not arithmetic types: a value converts to float implicitly (exact),
// and from float (or any arithmetic type, through float) explicitly, rounding to nearest
// even. Comparisons and arithmetic therefore happen in float: a + b is a float.
//   f16 h(0.1f);                 // rounds: 0.0999755859375
//   float x = h;                 // exact
//   f16 y = f16::from_bits(0x7c00);  // +inf; y.bits() == 0x7c00
//
// Special values: inf stays inf, a NaN stays a NaN (float -> f16/bf16 gives the quiet NaN
// 0x7e00 / 0x7fc0 with the sign kept), a finite float too large for the format rounds to
// inf, f16 subnormals (down to 2^-24) are exact both ways.
// Plain C++17 (no <bit>), so CUDA host code can include it too.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace wick {

namespace half_detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Shifts m right by `shift` (1..31) bits, rounding to nearest, ties to even.
inline uint32_t shift_round_even(uint32_t m, int shift) {
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
}

// float -> binary16 bits (1 sign, 5 exponent with bias 15, 10 mantissa bits).
inline uint16_t f16_bits_from_float(float f) {
  uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN: quiet NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (65504 + half an ulp) and inf: inf
  if (u >= 0x38800000u) {                       // >= 2^-14: a normal f16
    // Rebias the exponent (127 -> 15) and drop 13 mantissa bits with rounding. A carry out
    // of the mantissa bumps the exponent, which is the right answer.
    const uint32_t rebiased = u - (112u << 23);
    return sign | static_cast<uint16_t>(shift_round_even(rebiased, 13));
  }
  if (u <= 0x33000000u) return sign;  // <= 2^-25 (half the smallest subnormal, a tie to 0)
  // A subnormal f16: the value in units of 2^-24, rounded. The float is normal here, so
  // value = m * 2^(e - 150) with the implicit bit in m; in units of 2^-24 that is
  // m >> (126 - e), with 126 - e in [14, 24]. Rounding up to 0x400 gives the smallest normal.
  const int e = static_cast<int>(u >> 23);
  const uint32_t m = (u & 0x7fffffu) | 0x800000u;
  return sign | static_cast<uint16_t>(shift_round_even(m, 126 - e));
}

inline float float_from_f16_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);  // +-0
  // Subnormal: mant * 2^-24. Normalise so the leading one becomes the implicit bit.
  uint32_t e = 113;
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

// float -> bfloat16 bits: the top 16 bits of the float, rounded to nearest even.
inline uint16_t bf16_bits_from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
  return static_cast<uint16_t>(shift_round_even(u, 16) & 0xffffu);
}

inline float float_from_bf16_bits(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace half_detail

struct f16 {
  f16() = default;  // +0
  explicit f16(float f) : bits_(half_detail::f16_bits_from_float(f)) {}
  // Any other arithmetic type converts through float (a double is rounded twice).
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  explicit f16(T v) : f16(static_cast<float>(v)) {}
  operator float() const { return half_detail::float_from_f16_bits(bits_); }

  static f16 from_bits(uint16_t bits) {
    f16 h;
    h.bits_ = bits;
    return h;
  }
  uint16_t bits() const { return bits_; }

 private:
  uint16_t bits_ = 0;
};

struct bf16 {
  bf16() = default;  // +0
  explicit bf16(float f) : bits_(half_detail::bf16_bits_from_float(f)) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  explicit bf16(T v) : bf16(static_cast<float>(v)) {}
  operator float() const { return half_detail::float_from_bf16_bits(bits_); }

  static bf16 from_bits(uint16_t bits) {
    bf16 h;
    h.bits_ = bits;
    return h;
  }
  uint16_t bits() const { return bits_; }

 private:
  uint16_t bits_ = 0;
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);
static_assert(std::is_trivially_copyable_v<f16> && std::is_trivially_copyable_v<bf16>);
static_assert(std::is_standard_layout_v<f16> && std::is_standard_layout_v<bf16>);

}  // namespace wick
