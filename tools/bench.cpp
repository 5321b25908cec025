// `wick bench`: the varlen attention operator timed end to end (checks, allocation, the
// kernel) on the CPU and on the GPU when one is present, with a progress display.
// FLOPs count the two matmuls over the keys each row sees: 4 * visible pairs * head_size
// per head.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>

#include "tools/catalog.h"
#include "tools/commands.h"

namespace wick::cli {

namespace {

struct Case {
  Device dev;
  size_t d;
  bool causal;
};

// One line rewritten in place on a terminal; whole lines otherwise (logs, pipes).
class Progress {
 public:
  Progress(bool on, size_t total) : on_(on && isatty(STDERR_FILENO)), total_(total) {}
  void show(size_t done, const std::string& what) {
    if (!on_) return;
    const int width = 24, filled = static_cast<int>(width * done / std::max<size_t>(1, total_));
    std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40s", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total_, what.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (on_) std::fprintf(stderr, "\r%90s\r", "");
  }

 private:
  bool on_;
  size_t total_;
};

}  // namespace

int bench(const BenchOptions& opt, std::ostream& out) {
  try {
    std::vector<size_t> lens = opt.seqlens;
    if (lens.empty()) lens = {256, 366, 475, 585, 695, 805, 914, 1024};
    std::vector<uint32_t> cu{0};
    double pairs_full = 0, pairs_causal = 0;
    for (size_t n : lens) {
      cu.push_back(cu.back() + static_cast<uint32_t>(n));
      pairs_full += static_cast<double>(n) * n, pairs_causal += static_cast<double>(n) * (n + 1) / 2;
    }
    const size_t total = cu.back(), max_len = *std::max_element(lens.begin(), lens.end());
    std::vector<Case> cases;
    std::vector<Device> devices;
    if (opt.cpu) devices.push_back(Device::cpu());
    if (opt.cuda && Device::cuda_available()) devices.push_back(Device::cuda(0));
    for (Device dev : devices)
      for (size_t d : opt.head_dims)
        for (bool causal : {false, true}) cases.push_back({dev, d, causal});

    out << "varlen flash-attention, " << lens.size() << " sequences (" << total << " tokens, longest " << max_len
        << "), " << opt.heads << " heads, bf16; median of " << opt.reps << " runs after one warm-up"
        << (opt.cuda && !Device::cuda_available() ? " (no GPU visible: CPU only)" : "") << "\n";
    out << "  " << std::left << std::setw(20) << "device" << std::setw(6) << "d" << std::setw(8) << "mask"
        << std::right << std::setw(10) << "ms" << std::setw(10) << "GFLOP/s" << "\n";
    Progress progress(opt.progress, cases.size() * (opt.reps + 1));
    size_t step = 0;
    for (const Case& c : cases) {
      FlashAttnVarLen op;
      op.seqlens_q = op.seqlens_k = Tensor::from_vec(cu, {cu.size()}, c.dev);
      op.max_seqlen_q = op.max_seqlen_k = max_len;
      op.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      if (c.causal) op.window_size_right = 0;
      Tensor q = Tensor::randn({total, opt.heads, c.d}, DType::BF16, c.dev, 1);
      Tensor k = Tensor::randn({total, opt.heads, c.d}, DType::BF16, c.dev, 2);
      Tensor v = Tensor::randn({total, opt.heads, c.d}, DType::BF16, c.dev, 3);
      const std::string name = to_string(c.dev) + " d=" + std::to_string(c.d) + (c.causal ? " causal" : " full");
      std::vector<double> times;
      for (int r = 0; r <= opt.reps; ++r) {
        progress.show(step++, name + (r == 0 ? " warm-up" : " run " + std::to_string(r)));
        auto t0 = std::chrono::steady_clock::now();
        op.forward(q, k, v);
        synchronize(c.dev);
        if (r > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      const double s = times[times.size() / 2];
      const double flops = 4.0 * (c.causal ? pairs_causal : pairs_full) * static_cast<double>(c.d * opt.heads);
      progress.clear();
      out << "  " << std::left << std::setw(20) << to_string(c.dev) << std::setw(6) << c.d << std::setw(8)
          << (c.causal ? "causal" : "full") << std::right << std::fixed << std::setprecision(2) << std::setw(10)
          << s * 1e3 << std::setw(10) << flops / s * 1e-9 << std::defaultfloat << "\n";
      out.flush();
    }
    progress.show(step, "done");
    progress.clear();
    return 0;
  } catch (const Error& e) {
    out << errors_doc::explain(e);
    return 1;
  }
}

}  // namespace wick::cli
