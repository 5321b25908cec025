// Timing helper shared by the CPU benchmarks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <chrono>
#include <functional>
#include <vector>

namespace wick::bench {

// Median wall time of `reps` calls of f, in seconds, after one warm-up call (page faults,
// packing buffers, library handles).
inline double median_seconds(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// flash_bench's workload A: 32 sequence lengths in [128, 4096] from a 64-bit LCG (the same
// in bench/flash_peers.py and bench/bwd_peers.py).
inline std::vector<uint32_t> varlen_lengths() {
  uint64_t x = 12345;
  std::vector<uint32_t> v;
  for (int i = 0; i < 32; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(static_cast<uint32_t>(128 + (x >> 33) % (4096 - 128 + 1)));
  }
  return v;
}

}  // namespace wick::bench
