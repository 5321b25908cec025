// Helpers shared by the benchmarks: timing, and the workloads flash_bench defines.
#pragma once
#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cmath>
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

// ALiBi slopes of group G (flash_bench, bench_attention_op and bench/flash_peers.py): head h
// of `heads` gets 2^(-8 (h + 1) / heads).
inline std::vector<float> alibi_slopes(int heads) {
  std::vector<float> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(heads));
  return s;
}

}  // namespace wick::bench
