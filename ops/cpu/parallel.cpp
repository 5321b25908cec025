#include "ops/cpu/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace wick::cpu {

namespace {

// The first exception thrown by any thread of a region, rethrown after it.
class FirstError {
 public:
  void capture() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
  void rethrow() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mu_;
  std::exception_ptr error_;
};

}  // namespace

int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

void parallel_run(int threads, const std::function<void(int)>& body) {
  threads = std::clamp(threads, 1, max_threads());
  if (threads == 1) return body(0);
#ifdef _OPENMP
  // The region may run fewer threads than asked (OMP_DYNAMIC): body must not assume all ran.
  FirstError err;
#pragma omp parallel num_threads(threads)
  {
    try {
      body(omp_get_thread_num());
    } catch (...) {
      err.capture();
    }
  }
  err.rethrow();
#endif
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(max_threads(), (n + grain - 1) / grain);
  if (chunks <= 1) return body(0, n);
#ifdef _OPENMP
  FirstError err;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(chunks))
  for (int64_t t = 0; t < chunks; ++t) {
    try {
      const int64_t begin = n * t / chunks, end = n * (t + 1) / chunks;
      if (begin < end) body(begin, end);
    } catch (...) {
      err.capture();
    }
  }
  err.rethrow();
#endif
}

}  // namespace wick::cpu
