// The generic path: the F32 tile kernels over plain floats (one lane), for CPUs without
// AVX2 and as the baseline the tests compare every other path with.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/attention/cpu_tiles.h"
#include "tensor/dtype.h"

namespace wick::attention::tiles {

namespace {

struct Simd {
  using V = float;
  static constexpr int W = 1;
  static constexpr int kScoreRows = 4, kScoreVecs = 4, kPvRows = 4, kPvVecs = 4;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) { return a < b ? b : a; }
  static float hmax(V v) { return v; }
  static float hsum(V v) { return v; }
  static V exp(V v) { return std::exp(v); }
  static float to_f32(uint16_t bits, bool is_bf16) {
    return is_bf16 ? static_cast<float>(bf16::from_bits(bits)) : static_cast<float>(f16::from_bits(bits));
  }
  static void cvt_row(const uint16_t* src, float* dst, int n, bool bf16) {
    for (int i = 0; i < n; ++i) dst[i] = to_f32(src[i], bf16);
  }
  static void store_row(const float* o, float factor, int d, bool is_bf16, uint16_t* dst) {
    for (int c = 0; c < d; ++c) {
      const float x = o[c] * factor;
      if (is_bf16) {
        dst[c] = bf16(x).bits();
      } else {
        dst[c] = f16(x).bits();
      }
    }
  }
  static bool nonfinite(const uint16_t* src, int n, bool bf16) {
    const uint16_t e = bf16 ? 0x7F80 : 0x7C00;
    bool bad = false;
    for (int i = 0; i < n; ++i) bad |= (src[i] & e) == e;
    return bad;
  }
};

#include "ops/attention/cpu_tiles_f32.inc"

}  // namespace

const Kernels& generic_kernels() {
  static const Kernels k = f32_kernels(cpu::Isa::Generic);
  return k;
}

}  // namespace wick::attention::tiles
