// The demo (`make demo`) runs to the end and prints the five classic mistakes with their
// exact texts and catalogue codes, and results that agree.
#include <doctest/doctest.h>

#include <cstdio>
#include <regex>
#include <string>

#include <sys/wait.h>

#ifdef WICK_DEMO_PATH

TEST_CASE("demo: the guided tour runs and shows the five mistakes") {
  FILE* p = popen("'" WICK_DEMO_PATH "' 2>&1", "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  INFO(out);
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  for (const char* line : {
           "error A20: paged flash-attn requires page_block_size\n",
           "error A22: paged flash-attn requires page_block_size to be a multiple of 32 (got 48)\n",
           "error A21: page_block_size 64 does not match k shape [16, 32, 2, 64]\n",
           "error A12: flash-attn-varlen paged expects k/v tensors of rank 4 (k: 3, v: 3)\n",
           "error A11: flash-attn-varlen expects input tensors of rank 3 (q: 4, k: 3, v: 3\n",
       }) {
    INFO(line);
    CHECK(out.find(line) != std::string::npos);
  }
  CHECK(out.find("seqlens_k = [0, 40, 103, 112, 212]") != std::string::npos);
  CHECK(out.find("max |paged - packed|     = 0.00e+00") != std::string::npos);
  // The operator's own mask: 3 queries over 8 keys, bottom-right.
  CHECK(out.find("query 0    0.167  0.167  0.167  0.167  0.167  0.167      .      .") != std::string::npos);
  // Every reported difference from the reference is at most one bf16 ulp near 1 (2^-7; the
  // CPU path rounds P to bf16 for its P V product, as the GPU kernels do, so an output may
  // round the other way from the f32 reference's).
  std::regex diff(R"(\|[a-z]+ - reference\| *= ([0-9.e+-]+))");
  int seen = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), diff); it != std::sregex_iterator(); ++it, ++seen)
    CHECK(std::stod((*it)[1]) <= 7.82e-3);
  CHECK(seen >= 4);
}

#else
TEST_CASE("demo: not part of this build") { MESSAGE("SKIPPED: examples/ not built"); }
#endif
