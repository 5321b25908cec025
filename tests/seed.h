// Seeds of the randomized tests. Every random input derives from one base seed: 0 unless the
// environment variable WICK_TEST_SEED is set, printed when the test binary starts, so a
// failure seen with one base seed replays with WICK_TEST_SEED=<that seed>, and a run with a
// new base seed draws fresh inputs for every randomized case.
#pragma once
#include <cstdint>
#include <cstdlib>

namespace wick::test {

inline uint64_t base_seed() {
  static const uint64_t base = [] {
    const char* env = std::getenv("WICK_TEST_SEED");
    return env ? std::strtoull(env, nullptr, 10) : uint64_t{0};
  }();
  return base;
}

// The seed of one random draw: `salt` (a case's own constant) moved by the base seed. With
// the default base 0 it is salt itself.
inline uint64_t seed(uint64_t salt) { return salt + base_seed() * 0x9E3779B97F4A7C15ull; }

}  // namespace wick::test
