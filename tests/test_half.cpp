// f16 and bf16 (tensor/half.h): every one of the 65536 bit patterns of each format decodes to
// the value its fields say and round-trips through float; float -> half rounding is checked
// against a plain reference (nearest value in a sorted table of every finite value, ties to
// the even pattern, past the top to inf) on every tie and its neighbours, on a sweep of the
// float bit patterns and on random floats (tests/seed.h: WICK_TEST_SEED replays them).
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "seed.h"
#include "tensor/dtype.h"

using namespace wick;

namespace {

float from_bits32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string hex(uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", u);
  return buf;
}

// A two-byte float format: exponent and mantissa widths; the bias follows.
struct Format {
  int exp_bits, mant_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t inf_bits() const { return static_cast<uint16_t>(((1u << exp_bits) - 1) << mant_bits); }
  bool is_nan(uint16_t b) const { return (b & 0x7fffu) > inf_bits(); }
  // The value the fields of b spell, computed the textbook way.
  double decode(uint16_t b) const {
    const int e = (b >> mant_bits) & ((1 << exp_bits) - 1);
    const int m = b & ((1 << mant_bits) - 1);
    const double sign = (b & 0x8000u) ? -1.0 : 1.0;
    if (e == (1 << exp_bits) - 1) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, 1 - bias() - mant_bits);
    return sign * std::ldexp((1 << mant_bits) + m, e - bias() - mant_bits);
  }
};
constexpr Format kF16{5, 10};
constexpr Format kBF16{8, 7};

// Round-to-nearest-even by table look-up: the non-negative finite values in order, then one
// more entry at the next power of two standing for inf (an even pattern, so a tie with the
// largest finite value, whose mantissa is odd, goes to inf as IEEE rounding says).
struct Reference {
  Format fmt;
  std::vector<double> value;
  std::vector<uint16_t> bits;
  explicit Reference(Format f) : fmt(f) {
    for (uint32_t b = 0; b < f.inf_bits(); ++b) {
      value.push_back(f.decode(static_cast<uint16_t>(b)));
      bits.push_back(static_cast<uint16_t>(b));
    }
    value.push_back(std::ldexp(1.0, f.bias() + 1));
    bits.push_back(f.inf_bits());
  }
  uint16_t round(float x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (std::isnan(x)) return 0xffff;  // compared with is_nan below, never as bits
    const double a = std::fabs(static_cast<double>(x));
    if (a >= value.back()) return sign | fmt.inf_bits();
    const size_t hi = std::upper_bound(value.begin(), value.end(), a) - value.begin();  // value[hi] > a
    const size_t lo = hi - 1;                                                          // value[lo] <= a
    const double dlo = a - value[lo], dhi = value[hi] - a;
    size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((bits[lo] & 1) ? hi : lo);
    return sign | bits[pick];
  }
};

template <class H>
uint16_t convert(float x) {
  return H(x).bits();
}

// Checks H(x) against the reference; counts and reports the first few mismatches.
template <class H>
struct Checker {
  const Reference& ref;
  size_t checked = 0, bad = 0;
  void operator()(float x) {
    ++checked;
    const uint16_t got = convert<H>(x);
    bool ok;
    if (std::isnan(x))
      ok = ref.fmt.is_nan(got) && ((got & 0x8000u) != 0) == std::signbit(x);
    else
      ok = got == ref.round(x);
    if (!ok && ++bad <= 5)
      FAIL_CHECK("float bits ", hex(bits32(x)), " (", x, ") -> ", hex(got), ", want ", std::isnan(x) ? std::string("a NaN of that sign") : hex(ref.round(x)));
  }
};

// Feeds the checker every tie between neighbouring values (and the floats on either side of
// it), every value itself with its float neighbours, a strided sweep of all float bit
// patterns, random floats and the special values.
template <class H>
void check_rounding(const Reference& ref, uint64_t seed) {
  Checker<H> c{ref};
  for (size_t i = 0; i + 1 < ref.value.size(); ++i) {
    const float v = static_cast<float>(ref.value[i]);
    const float mid = static_cast<float>((ref.value[i] + ref.value[i + 1]) / 2);
    REQUIRE(static_cast<double>(mid) == (ref.value[i] + ref.value[i + 1]) / 2);  // ties are floats
    for (float s : {1.0f, -1.0f}) {
      for (float x : {v, std::nextafter(v, 0.0f), std::nextafter(v, INFINITY), mid, std::nextafter(mid, 0.0f),
                      std::nextafter(mid, INFINITY)})
        c(s * x);
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) c(from_bits32(static_cast<uint32_t>(u)));
  std::mt19937_64 gen(seed);
  for (int i = 0; i < 1000000; ++i) c(from_bits32(static_cast<uint32_t>(gen())));
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                            65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e-8f, 5.9604645e-8f, 2.9802322e-8f,
                            from_bits32(0x7fc00000u), from_bits32(0xffc00000u), from_bits32(0x7f800001u),
                            from_bits32(0xff800001u), from_bits32(0x7fffffffu)};
  for (float x : specials) c(x);
  CHECK(c.bad == 0);
  MESSAGE(c.checked, " floats checked (random ones from seed ", seed, ")");
}

// Every pattern decodes to the value its fields spell; every non-NaN pattern survives
// bits -> float -> bits; a NaN stays a NaN of the same sign.
template <class H>
void check_round_trip(Format fmt) {
  size_t bad = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = H::from_bits(bits);
    const double want = fmt.decode(bits);
    const uint16_t back = H(f).bits();
    bool ok;
    if (fmt.is_nan(bits))
      ok = std::isnan(f) && std::signbit(f) == ((bits & 0x8000u) != 0) && fmt.is_nan(back) &&
           (back & 0x8000u) == (bits & 0x8000u);
    else
      ok = static_cast<double>(f) == want && std::signbit(f) == ((bits & 0x8000u) != 0) && back == bits;
    if (!ok && ++bad <= 5) FAIL_CHECK("pattern ", hex(b), " -> ", f, " -> ", hex(back), " (want ", want, ")");
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("half: f16 and bf16 are two plain bytes") {
  static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);
  static_assert(std::is_trivially_copyable_v<f16> && std::is_standard_layout_v<bf16>);
  CHECK(f16().bits() == 0);
  CHECK(bf16{}.bits() == 0);
  f16 h(1.0f);
  uint16_t raw;
  std::memcpy(&raw, &h, 2);
  CHECK(raw == 0x3c00);
  CHECK(bf16(1.0f).bits() == 0x3f80);
  CHECK(f16(-2.0f).bits() == 0xc000);
  CHECK(f16(65504.0f).bits() == 0x7bff);
  CHECK(f16(65520.0f).bits() == 0x7c00);  // the tie above the largest finite rounds to inf
  CHECK(f16(5.9604645e-8f).bits() == 0x0001);  // 2^-24, the smallest subnormal
  CHECK(f16(2.9802322e-8f).bits() == 0x0000);  // 2^-25, a tie, rounds to the even 0
}

TEST_CASE("half: every f16 bit pattern decodes exactly and round-trips through float") {
  check_round_trip<f16>(kF16);
}

TEST_CASE("half: every bf16 bit pattern decodes exactly and round-trips through float") {
  check_round_trip<bf16>(kBF16);
}

TEST_CASE("half: float -> f16 rounds to nearest even, overflows to inf, keeps subnormals") {
  check_rounding<f16>(Reference(kF16), test::seed(20240607));
}

TEST_CASE("half: float -> bf16 rounds to nearest even and overflows to inf") {
  check_rounding<bf16>(Reference(kBF16), test::seed(20240608));
}

TEST_CASE("half: other arithmetic types convert through float; arithmetic is float arithmetic") {
  for (double d : {0.1, 1.0 / 3.0, 65519.999, -1e-7, 1e300}) {
    CHECK(f16(d).bits() == f16(static_cast<float>(d)).bits());
    CHECK(bf16(d).bits() == bf16(static_cast<float>(d)).bits());
  }
  CHECK(f16(3).bits() == 0x4200);
  CHECK(bf16(int64_t{-1}).bits() == 0xbf80);
  CHECK(static_cast<double>(f16(0.1f)) == 0.0999755859375);
  const f16 a(1.5f), b(2.0f);
  CHECK(a < b);
  CHECK(a != b);
  CHECK(a == f16(1.5));
  CHECK(a + b == 3.5f);
  CHECK(-a == -1.5f);
  CHECK(f16(bf16(0.1f)).bits() == f16(static_cast<float>(bf16(0.1f))).bits());  // through float
  CHECK(std::isnan(static_cast<float>(f16::from_bits(0x7e00))));
  CHECK(f16::from_bits(0x7c00) == INFINITY);
}

// Eigen's half and bfloat16 (host-side software conversion) give the same bits for every
// non-NaN float of a sweep and every pattern's value.
TEST_CASE("half: agrees with Eigen's half and bfloat16 conversions") {
  size_t bad = 0;
  auto one = [&](float x) {
    const uint16_t e16 = Eigen::numext::bit_cast<uint16_t>(Eigen::half(x));
    const uint16_t eb16 = Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x));
    if (!std::isnan(x)) {
      bad += f16(x).bits() != e16;
      bad += bf16(x).bits() != eb16;
    }
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65537) one(from_bits32(static_cast<uint32_t>(u)));
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = f16::from_bits(static_cast<uint16_t>(b));
    one(x);
    if (!std::isnan(x)) bad += x != static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(static_cast<uint16_t>(b)));
  }
  CHECK(bad == 0);
}
