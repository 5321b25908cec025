// The one CPU thread pool: OpenMP's, shared by matmul (Eigen's GEMM runs on it), the
// attention forward and the other heavy CPU ops. Its size is the machine's (the threads this
// process may run on; OMP_NUM_THREADS overrides). Work started from inside a parallel region
// runs on the calling thread: the pool never nests, so it never oversubscribes the cores.
// Small work stays on the calling thread (the grain below), where a fork would cost more
// than it saves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace wick::cpu {

// Threads the pool runs (>= 1); 1 inside a parallel region.
int max_threads();

// Calls body(begin, end) over [0, n) split into contiguous chunks, one per pool thread (fewer
// when n / grain is smaller: each chunk has at least `grain` items, and n <= grain runs
// inline). An exception from any chunk is rethrown on the caller once all chunks are done.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// Runs body(thread_index) on `threads` pool threads (clamped to [1, max_threads()]), for
// work that divides itself (a shared atomic counter, for example). Exceptions as above.
void parallel_run(int threads, const std::function<void(int)>& body);

}  // namespace wick::cpu
