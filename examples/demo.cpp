// wick's demo: what `make demo` runs. A short tour, on every available device:
//   1. tensors and views: narrow/transpose share storage, strides tell the story;
//   2. a matmul;
//   3. varlen paged attention, the headline operator: a PagedKvCache holds four sequences
//      of different lengths in shuffled 64-row blocks, one chunk of new queries per
//      sequence attends causally to its whole history, and the result is compared with the
//      plain reference computation (gather -> matmul -> mask -> softmax -> matmul).
#include <wick.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

using namespace wick;

namespace {

void show_views() {
  std::printf("== tensors and views\n");
  Tensor x = Tensor::arange(0, 12, DType::F32, Device::cpu()).reshape({3, 4});
  Tensor col = x.narrow(1, 1, 2);  // columns 1..2: offset 1, strides unchanged
  Tensor xt = x.t();               // strides swapped, no copy
  std::printf("x  %s stride %s offset %zu\n", to_string(x.shape()).c_str(),
              to_string(x.stride()).c_str(), x.layout().start_offset());
  std::printf("x.narrow(1, 1, 2) stride %s offset %zu shares storage: %s\n",
              to_string(col.stride()).c_str(), col.layout().start_offset(),
              col.same_storage(x) ? "yes" : "no");
  std::printf("x.t() %s stride %s contiguous: %s\n%s\n", to_string(xt.shape()).c_str(),
              to_string(xt.stride()).c_str(), xt.is_contiguous() ? "yes" : "no",
              to_string(xt).c_str());
}

void show_matmul(Device dev) {
  Tensor a = Tensor::randn({256, 512}, DType::F32, dev, 1);
  Tensor b = Tensor::randn({512, 128}, DType::F32, dev, 2);
  Tensor c = matmul(a, b.t().contiguous().t());  // a transposed view goes straight in
  Tensor row_sum = sum(c, {1});
  std::printf("matmul on %s: (256, 512) x (512, 128) -> %s, sum of row 0 = %.4f\n",
              to_string(dev).c_str(), to_string(c.shape()).c_str(), row_sum.to_f64_vec()[0]);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vec(), y = b.to_f64_vec();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

void show_paged_attention(Device dev) {
  constexpr size_t kPage = 64, kHeads = 8, kHeadsK = 2, kDim = 64;  // GQA: 4 query heads per kv head
  const std::vector<size_t> history = {700, 64, 1500, 3};           // tokens already cached
  const std::vector<size_t> chunk = {32, 1, 128, 7};                // new queries per sequence
  PagedKvCache cache(/*num_blocks=*/64, kPage, kHeadsK, kDim, DType::BF16, dev);

  // Each sequence's cache holds its history plus the new chunk's own keys (as in a real
  // prefill step). Appending round-robin, a page at a time, scatters every sequence's
  // blocks through the pool instead of keeping them consecutive.
  std::vector<uint64_t> ids = {0, 1, 2, 3};
  std::vector<size_t> filled(ids.size(), 0);
  uint64_t seed = 10;
  for (bool more = true; more;) {
    more = false;
    for (uint64_t id : ids) {
      size_t n = std::min(kPage, history[id] + chunk[id] - filled[id]);
      if (n == 0) continue;
      cache.append(id, Tensor::randn({n, kHeadsK, kDim}, DType::BF16, dev, seed++),
                   Tensor::randn({n, kHeadsK, kDim}, DType::BF16, dev, seed++));
      filled[id] += n;
      more = true;
    }
  }

  std::vector<uint32_t> cu_q = {0};
  for (size_t n : chunk) cu_q.push_back(cu_q.back() + static_cast<uint32_t>(n));
  size_t total_q = cu_q.back();
  FlashAttnVarLen op;
  cache.bind(op, ids);  // block_table, seqlens_k, page_block_size, max_seqlen_k
  op.seqlens_q = Tensor::from_vec(cu_q, {cu_q.size()}, dev);
  op.max_seqlen_q = *std::max_element(chunk.begin(), chunk.end());
  op.softmax_scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  op.window_size_right = 0;  // causal, aligned bottom-right: the chunk sits at the end
  Tensor q = Tensor::randn({total_q, kHeads, kDim}, DType::BF16, dev, 99);

  auto t0 = std::chrono::steady_clock::now();
  auto [out, lse] = op.forward_with_lse(q, cache.k(), cache.v());
  synchronize(dev);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Tensor ref = attention_reference(op, q, cache.k(), cache.v());

  std::printf("paged varlen attention on %s: 4 sequences, history %zu/%zu/%zu/%zu + chunk "
              "%zu/%zu/%zu/%zu, page %zu, %zu blocks used\n",
              to_string(dev).c_str(), history[0], history[1], history[2], history[3], chunk[0],
              chunk[1], chunk[2], chunk[3], kPage, cache.num_blocks() - cache.free_blocks());
  std::printf("  out %s  lse %s  first call %.2f ms\n", to_string(out.shape()).c_str(),
              to_string(lse.shape()).c_str(), ms);
  std::printf("  max |flash - reference| = %.2e (bf16 output: one ulp near 1 is 7.8e-3)\n",
              max_abs_diff(out, ref));
}

}  // namespace

int main() {
  try {
    show_views();
    std::vector<Device> devices{Device::cpu()};
    if (Device::cuda_available()) devices.push_back(Device::cuda(0));
    else std::printf("(no CUDA device: showing the CPU only)\n");
    std::printf("\n== matmul\n");
    for (Device d : devices) show_matmul(d);
    std::printf("\n== flash-attention\n");
    for (Device d : devices) show_paged_attention(d);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
