// The CPU's run-time code paths outside attention: the GEMM behind matmul (its default entry,
// each library's GEMM the build has, and Eigen's copy for every path this CPU supports), for
// every operand layout, against a double loop; and the thread pool.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/parallel.h"
#include "seed.h"

using namespace wick;

namespace {

void check_gemm(int64_t m, int64_t n, int64_t k, uint64_t seed) {
  MESSAGE("seed ", seed, ", best path ", std::string(cpu::isa_name(cpu::best_isa())), ", large f32 products on ",
          std::string(cpu::gemm_library_name(cpu::gemm_library())));
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist;
  // A stored with a padded leading dimension in either order; B likewise.
  const int64_t pad = 3;
  std::vector<float> abuf((m + pad) * (k + pad)), bbuf((k + pad) * (n + pad));
  for (auto& x : abuf) x = dist(gen);
  for (auto& x : bbuf) x = dist(gen);
  for (bool a_row : {true, false})
    for (bool b_row : {true, false}) {
      const int64_t lda = a_row ? k + pad : m + pad, ldb = b_row ? n + pad : k + pad;
      auto A = [&](int64_t i, int64_t j) { return double(a_row ? abuf[i * lda + j] : abuf[j * lda + i]); };
      auto B = [&](int64_t i, int64_t j) { return double(b_row ? bbuf[i * ldb + j] : bbuf[j * ldb + i]); };
      // p = -3, -2: MKL's and oneDNN's GEMM (where the build has them), p = -1: the default
      // entry (a library's GEMM for a large product), p >= 0: Eigen's copy for each path
      for (int p = -3; p <= static_cast<int>(cpu::best_isa()); ++p) {
        const auto isa = static_cast<cpu::Isa>(std::max(p, 0));
        const auto lib = p == -3 ? cpu::GemmLibrary::Mkl : cpu::GemmLibrary::Onednn;
        const std::string path = p < -1 ? cpu::gemm_library_name(lib) : p < 0 ? "default" : cpu::isa_name(isa);
        INFO("path ", path, ", a row-major ", a_row, ", b row-major ", b_row);
        std::vector<float> c(m * n, std::nanf(""));
        if (p < -1) {
          const bool ran = cpu::gemm_on(lib, m, n, k, {abuf.data(), lda, a_row}, {bbuf.data(), ldb, b_row}, c.data());
          CHECK((ran || lib != cpu::gemm_library()));  // the library the build picked always runs
          if (!ran) continue;
        } else if (p < 0) {
          cpu::gemm<float>(m, n, k, {abuf.data(), lda, a_row}, {bbuf.data(), ldb, b_row}, c.data());
        } else {
          cpu::gemm<float>(m, n, k, {abuf.data(), lda, a_row}, {bbuf.data(), ldb, b_row}, c.data(), isa);
        }
        double err = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t t = 0; t < k; ++t) s += A(i, t) * B(t, j);
            err = std::max(err, std::abs(s - double(c[i * n + j])));
          }
        CHECK(err < 1e-3 * std::sqrt(double(k) / 128));  // f32 sums of k products of unit normals
      }
    }
}

}  // namespace

TEST_CASE("cpu gemm: every code path and operand layout against a double loop") {
  check_gemm(67, 45, 130, test::seed(1900));  // not multiples of any vector width: one thread
  // Large enough to split over the pool (when it has threads): block edges inside the rows
  // and columns.
  check_gemm(301, 263, 129, test::seed(1901));
}

TEST_CASE("cpu pool: parallel_for covers every index once and rethrows a chunk's error") {
  std::vector<std::atomic<int>> hits(100000);
  cpu::parallel_for(static_cast<int64_t>(hits.size()), 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (auto& h : hits) REQUIRE(h.load() == 1);
  CHECK_THROWS_AS(cpu::parallel_for(100000, 10, [](int64_t, int64_t e) {
                    if (e == 100000) throw std::runtime_error("the last chunk");
                  }),
                  std::runtime_error);
  // Inside a parallel region the pool does not nest: one thread.
  std::atomic<int> inner_max{0};
  cpu::parallel_run(cpu::max_threads(), [&](int) { inner_max = std::max(inner_max.load(), cpu::max_threads()); });
  if (cpu::max_threads() > 1) CHECK(inner_max.load() == 1);
}
