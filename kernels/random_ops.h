// Counter-based random numbers: the value at (seed, index) is a pure function of the two, so
// the CPU loops in ops/random.cpp and the CUDA kernels in kernels/random.cu produce the same
// tensor for the same seed, and no element depends on which thread computes it or in what
// order. The generator is SplitMix64 evaluated at a counter: its state after index + 1 steps
// from a start derived from the seed, put through its output mixing function.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio: SplitMix64's step

// SplitMix64's output function: a bijection of 64-bit words in which every input bit
// affects every output bit.
WICK_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64 random bits for element `index` of the stream `seed`.
WICK_HOST_DEVICE inline uint64_t random_bits(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) + (index + 1) * kSplitMixGamma);
}

// The high 64 bits of the 128-bit product a * b.
WICK_HOST_DEVICE inline uint64_t mul_high64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Bits of precision of a uniform sample stored in `type`: 53 (f64), 24 (f32), 11 (f16), 8
// (bf16). A sample k * 2^-bits with k < 2^bits is exact in that type, so it never rounds to 1.
constexpr int uniform_bits(ElemType type) {
  switch (type) {
    case ElemType::F64: return 53;
    case ElemType::F16: return 11;
    case ElemType::BF16: return 8;
    default: return 24;
  }
}

// Uniform in [0, 1) with `bits` bits: the top bits of random_bits scaled by 2^-bits, exact in C.
template <class C>
WICK_HOST_DEVICE C uniform_at(uint64_t seed, uint64_t index, int bits) {
  const uint64_t k = random_bits(seed, index) >> (64 - bits);
  return static_cast<C>(k) * (C(1) / static_cast<C>(uint64_t(1) << bits));
}

// An integer uniform in [low, low + range): the top of random_bits * range (no division;
// the bias is below range / 2^64).
WICK_HOST_DEVICE inline int64_t randint_at(uint64_t seed, uint64_t index, int64_t low, uint64_t range) {
  return static_cast<int64_t>(static_cast<uint64_t>(low) + mul_high64(random_bits(seed, index), range));
}

// Dropout keeps element `index` when the top 32 random bits are >= threshold, with threshold
// = round(p * 2^32) in [0, 2^32]: probability 1 - p up to 2^-33 (threshold 2^32: never kept).
WICK_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t index, uint64_t threshold) {
  return (random_bits(seed, index) >> 32) >= threshold;
}

}  // namespace wick::kernels
