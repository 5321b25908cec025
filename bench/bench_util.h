// Timing helper shared by the CPU benchmarks.
#pragma once
#include <algorithm>
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

}  // namespace wick::bench
