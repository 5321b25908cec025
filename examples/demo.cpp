// wick's demo: what `make demo` runs. A guided tour of varlen, paged attention, on the GPU
// when this build has CUDA and one is present, else on the CPU:
//   1. pack four sequences of different lengths into one tensor: cumulative seqlens;
//   2. page their K/V into a PagedKvCache: the token -> page map and the block table;
//   3. compute attention three ways (paged, packed, reference) and compare;
//   4. the causal mask of a chunk of 3 queries over 8 keys, read from the operator itself;
//   5. a few decode steps appending to the cache, one sequence finishing;
//   6. the five classic mistakes, each with its exact error, catalogue code and fix.
// docs/varlen-paged-attention.md explains each step; `wick explain` draws any configuration.
#include <wick.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tools/catalog.h"

using namespace wick;

namespace {

constexpr size_t kPage = 32;    // rows per cache block (a multiple of 32)
constexpr size_t kBlocks = 16;  // blocks in the cache's pool
constexpr size_t kHeads = 4;    // query heads
constexpr size_t kHeadsK = 2;   // kv heads: GQA, query head h reads kv head h / 2
constexpr size_t kDim = 64;     // head size
constexpr DType kDType = DType::BF16;

// Four sequences: the keys each already has (its history, including this step's own
// tokens), and how many of its newest tokens ask a query in this step (a prefill chunk).
const std::vector<size_t> kKeyLens = {40, 63, 9, 100};
const std::vector<size_t> kQueryLens = {3, 8, 1, 5};

std::vector<uint32_t> cumulative(const std::vector<size_t>& lens) {
  std::vector<uint32_t> cu{0};
  for (size_t n : lens) cu.push_back(cu.back() + static_cast<uint32_t>(n));
  return cu;
}

std::vector<uint32_t> u32(const std::vector<size_t>& v) { return {v.begin(), v.end()}; }

std::string join(const std::vector<uint32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vec(), y = b.to_f64_vec();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// The state the steps share: each sequence's K/V (generated once), the cache, the device.
struct Tour {
  Device dev;
  std::vector<Tensor> k_seq, v_seq;  // sequence b: (kKeyLens[b], kHeadsK, kDim)
  PagedKvCache cache;
  std::vector<uint64_t> ids = {0, 1, 2, 3};

  explicit Tour(Device d) : dev(d), cache(kBlocks, kPage, kHeadsK, kDim, kDType, d) {
    for (size_t b = 0; b < kKeyLens.size(); ++b) {
      k_seq.push_back(Tensor::randn({kKeyLens[b], kHeadsK, kDim}, kDType, dev, 100 + b));
      v_seq.push_back(Tensor::randn({kKeyLens[b], kHeadsK, kDim}, kDType, dev, 200 + b));
    }
  }
};

void step_pack() {
  std::printf("== 1. Packing: four sequences in one tensor, no padding\n");
  size_t longest = *std::max_element(kKeyLens.begin(), kKeyLens.end()), total = 0;
  for (size_t n : kKeyLens) total += n;
  std::printf("A padded batch of these key lengths would be (4, %zu, heads, dim): %zu rows, %zu of\n"
              "them real. Packed, the rows of all sequences follow one another (%zu rows), and a\n"
              "(batch + 1) U32 tensor of cumulative lengths says where each sequence starts:\n",
              longest, 4 * longest, total, total);
  std::printf("  key lengths   %-18s ->  seqlens_k = %s\n", join(u32(kKeyLens)).c_str(),
              join(cumulative(kKeyLens)).c_str());
  std::printf("  query lengths %-18s ->  seqlens_q = %s\n", join(u32(kQueryLens)).c_str(),
              join(cumulative(kQueryLens)).c_str());
  std::printf("Sequence b owns rows [seqlens[b], seqlens[b+1]). The packed K rows, one character per\n"
              "4 rows, the digit naming the sequence:\n  ");
  for (size_t b = 0; b < kKeyLens.size(); ++b)
    for (size_t r = 0; r < kKeyLens[b]; r += 4) std::printf("%zu", b);
  std::printf("\n\n");
}

// Appends in rounds of 16 tokens per sequence, as tokens of concurrent requests arrive:
// each sequence's blocks end up scattered through the pool, not consecutive.
void step_page(Tour& t) {
  std::printf("== 2. Paging: K/V in a PagedKvCache of %zu blocks x %zu rows\n", kBlocks, kPage);
  std::vector<size_t> done(kKeyLens.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t b = 0; b < kKeyLens.size(); ++b) {
      size_t n = std::min<size_t>(16, kKeyLens[b] - done[b]);
      if (n == 0) continue;
      t.cache.append(b, t.k_seq[b].narrow(0, done[b], n), t.v_seq[b].narrow(0, done[b], n));
      done[b] += n, more = true;
    }
  }
  std::printf("cache.k() is %s: (num_blocks, page_block_size, num_heads_k, head_size).\n"
              "Token t of sequence b lives in block block_table[b][t / %zu], row t %% %zu.\n",
              to_string(t.cache.k().shape()).c_str(), kPage, kPage);

  std::vector<int32_t> table = t.cache.block_table(t.ids).to_vec<int32_t>();
  const size_t cols = table.size() / t.ids.size();
  std::printf("\nblock_table (%zu x %zu, I32); entries marked * are padding: the row is longer than\n"
              "the sequence needs, the cache writes block 0 there, and no kernel reads it:\n",
              t.ids.size(), cols);
  for (size_t b = 0; b < t.ids.size(); ++b) {
    const size_t used = (kKeyLens[b] + kPage - 1) / kPage;
    std::printf("  seq %zu (%3zu tokens, %zu block%s): [", b, kKeyLens[b], used, used == 1 ? " " : "s");
    for (size_t c = 0; c < cols; ++c) std::printf("%3d%s", table[b * cols + c], c < used ? " " : "*");
    std::printf("]\n");
  }

  std::printf("\ntoken -> page map: each block of the pool, one character per 4 rows (digit = the\n"
              "sequence whose tokens fill those rows, '-' = rows not yet written):\n");
  for (size_t blk = 0; blk < kBlocks; ++blk) {
    std::string owner = "free";
    std::string rows(kPage / 4, ' ');
    for (size_t b = 0; b < t.ids.size(); ++b) {
      const auto& blocks = t.cache.blocks(b);
      auto it = std::find(blocks.begin(), blocks.end(), static_cast<int32_t>(blk));
      if (it == blocks.end()) continue;
      const size_t first = (it - blocks.begin()) * kPage;
      const size_t used = std::min(kPage, kKeyLens[b] - first);
      for (size_t r = 0; r < kPage; r += 4) rows[r / 4] = r < used ? static_cast<char>('0' + b) : '-';
      owner = "seq " + std::to_string(b) + " tokens " + std::to_string(first) + "-" +
              std::to_string(first + used - 1);
    }
    std::printf("  block %2zu |%s| %s\n", blk, rows.c_str(), owner.c_str());
  }
  std::printf("\n");
}

// The chunk of queries of this step: the newest kQueryLens[b] tokens of each sequence.
FlashAttnVarLen chunk_op(const Tour& t) {
  FlashAttnVarLen op;
  std::vector<uint32_t> cu_q = cumulative(kQueryLens);
  op.seqlens_q = Tensor::from_vec(cu_q, {cu_q.size()}, t.dev);
  op.max_seqlen_q = *std::max_element(kQueryLens.begin(), kQueryLens.end());
  op.causal = true;  // softmax_scale left unset: 1/sqrt(head_size)
  return op;
}

void step_compare(Tour& t) {
  std::printf("== 3. One attention, three ways\n");
  FlashAttnVarLen paged = chunk_op(t);
  t.cache.bind(paged, t.ids);  // block_table, seqlens_k, page_block_size, max_seqlen_k
  Tensor q = Tensor::randn({cumulative(kQueryLens).back(), kHeads, kDim}, kDType, t.dev, 7);

  FlashAttnVarLen packed = chunk_op(t);  // the same K/V, packed (total_k, kHeadsK, kDim)
  std::vector<uint32_t> cu_k = cumulative(kKeyLens);
  packed.seqlens_k = Tensor::from_vec(cu_k, {cu_k.size()}, t.dev);
  packed.max_seqlen_k = *std::max_element(kKeyLens.begin(), kKeyLens.end());
  Tensor k = cat(t.k_seq, 0), v = cat(t.v_seq, 0);

  Tensor out_paged = paged.forward(q, t.cache.k(), t.cache.v());
  Tensor out_packed = packed.forward(q, k, v);
  Tensor out_ref = attention_reference(paged, q, t.cache.k(), t.cache.v());
  std::printf("q %s (total_q, num_heads, head_size); %zu query heads share %zu kv heads (GQA):\n"
              "query head h reads kv head h / %zu. Causal: each query sees the keys up to its own\n"
              "position. out %s, %s on %s.\n",
              to_string(q.shape()).c_str(), kHeads, kHeadsK, kHeads / kHeadsK,
              to_string(out_paged.shape()).c_str(), dtype_name(out_paged.dtype()), to_string(t.dev).c_str());
  std::printf("  max |paged - packed|     = %.2e  (the same keys, through the block table or packed)\n",
              max_abs_diff(out_paged, out_packed));
  std::printf("  max |paged - reference|  = %.2e  (reference: gather, matmul, mask, softmax, matmul)\n",
              max_abs_diff(out_paged, out_ref));
  std::printf("  max |packed - reference| = %.2e  (bf16 output: one ulp near 1 is 7.8e-03)\n\n",
              max_abs_diff(out_packed, out_ref));
}

// q = 0 makes every visible key equally likely, and v = the identity makes out = P: the
// operator itself draws its mask.
void step_mask(const Tour& t) {
  constexpr size_t sq = 3, sk = 8;
  std::printf("== 4. The causal mask of a chunk of %zu queries over %zu keys\n", sq, sk);
  std::vector<float> eye(sk * sk, 0.0f);
  for (size_t j = 0; j < sk; ++j) eye[j * sk + j] = 1.0f;
  Tensor v = Tensor::from_vec(eye, {sk, 1, sk}, t.dev).to_dtype(kDType);
  Tensor q = Tensor::zeros({sq, 1, sk}, kDType, t.dev), k = Tensor::zeros({sk, 1, sk}, kDType, t.dev);
  Tensor p = flash_attn_varlen(q, k, v, Tensor::from_vec<uint32_t>({0, sq}, {2}, t.dev),
                               Tensor::from_vec<uint32_t>({0, sk}, {2}, t.dev), sq, sk, 1.0f, true);
  std::vector<double> probs = p.to_f64_vec();
  std::printf("The queries are the last %zu tokens of the sequence, so the mask is aligned\n"
              "bottom-right: query i sits at key position i + %zu - %zu and sees keys 0..i + %zu.\n"
              "The probabilities, read from the operator (q = 0, v = identity, so out = P):\n"
              "            ",
              sq, sk, sq, sk - sq);
  for (size_t j = 0; j < sk; ++j) std::printf(" key %zu", j);
  std::printf("\n");
  for (size_t i = 0; i < sq; ++i) {
    std::printf("  query %zu  ", i);
    for (size_t j = 0; j < sk; ++j) {
      double x = probs[i * sk + j];
      if (x > 0) std::printf("  %.3f", x);
      else std::printf("      .");
    }
    std::printf("\n");
  }
  std::printf("(A top-left alignment would let query 0 see key 0 only: wrong for a chunk that\n"
              "continues a sequence.)\n\n");
}

void step_decode(Tour& t) {
  std::printf("== 5. Decoding: one new token per sequence per step, appended to the cache\n");
  std::vector<size_t> len = kKeyLens;
  for (int s = 1; s <= 3; ++s) {
    if (s == 3) {
      t.cache.free(2);
      t.ids = {0, 1, 3};
      std::printf("  sequence 2 is finished: cache.free(2) returns its block to the free list\n");
    }
    std::vector<uint32_t> cu_q{0};
    for (uint64_t id : t.ids) {
      std::vector<int32_t> before = t.cache.blocks(id);
      t.cache.append(id, Tensor::randn({1, kHeadsK, kDim}, kDType, t.dev, 1000 * s + id),
                     Tensor::randn({1, kHeadsK, kDim}, kDType, t.dev, 2000 * s + id));
      if (t.cache.blocks(id).size() > before.size())
        std::printf("  step %d: seq %lu token %zu opens a new page: block %d\n", s,
                    static_cast<unsigned long>(id), len[id], t.cache.blocks(id).back());
      ++len[id];
      cu_q.push_back(cu_q.back() + 1);
    }
    FlashAttnVarLen op;
    t.cache.bind(op, t.ids);
    op.seqlens_q = Tensor::from_vec(cu_q, {cu_q.size()}, t.dev);
    op.max_seqlen_q = 1;
    op.causal = true;
    Tensor q = Tensor::randn({t.ids.size(), kHeads, kDim}, kDType, t.dev, 3000 + s);
    Tensor out = op.forward(q, t.cache.k(), t.cache.v());
    std::printf("  step %d: seqlens_k %s, %zu blocks free, max |paged - reference| = %.2e\n", s,
                join(op.seqlens_k.to_vec<uint32_t>()).c_str(), t.cache.free_blocks(),
                max_abs_diff(out, attention_reference(op, q, t.cache.k(), t.cache.v())));
  }
  std::printf("\n");
}

// Runs a call that must fail and prints the error with its catalogue entry; false when the
// call was accepted (which would be a bug in wick's checks).
bool show_mistake(int n, const char* what, const std::function<void()>& call) {
  std::printf("-- mistake %d: %s\n", n, what);
  try {
    call();
  } catch (const Error& e) {
    std::printf("%s\n", errors_doc::explain(e).c_str());
    return true;
  }
  std::printf("   (accepted: this mistake was not caught)\n\n");
  return false;
}

bool step_mistakes(const Tour& t) {
  std::printf("== 6. The five classic mistakes, caught before any kernel runs\n"
              "Each prints the exact error, its code in docs/errors.md and the fix listed there.\n\n");
  FlashAttnVarLen good = chunk_op(t);
  t.cache.bind(good, t.ids);
  const size_t total_q = good.seqlens_q.to_vec<uint32_t>().back();
  Tensor q = Tensor::randn({total_q, kHeads, kDim}, kDType, t.dev, 8);
  bool all = true;
  all &= show_mistake(1, "a block table without page_block_size", [&] {
    FlashAttnVarLen op = good;
    op.page_block_size.reset();
    op.forward(q, t.cache.k(), t.cache.v());
  });
  all &= show_mistake(2, "pages of 48 rows (K/V blocks allocated by hand)", [&] {
    FlashAttnVarLen op = good;
    Tensor k48 = Tensor::zeros({kBlocks, 48, kHeadsK, kDim}, kDType, t.dev);
    op.page_block_size = 48;
    op.forward(q, k48, k48);
  });
  all &= show_mistake(3, "page_block_size 64 for a cache of 32-row pages", [&] {
    FlashAttnVarLen op = good;
    op.page_block_size = 64;
    op.forward(q, t.cache.k(), t.cache.v());
  });
  all &= show_mistake(4, "packed rank-3 K/V with a block table", [&] {
    FlashAttnVarLen op = good;
    std::vector<Tensor> k_live;
    for (uint64_t id : t.ids) k_live.push_back(Tensor::zeros({t.cache.seq_len(id), kHeadsK, kDim}, kDType, t.dev));
    Tensor k = cat(k_live, 0);
    op.forward(q, k, k);
  });
  all &= show_mistake(5, "a batched rank-4 q (1, total_q, heads, dim) for the varlen op", [&] {
    FlashAttnVarLen op = chunk_op(t);  // not paged: packed K/V of the live sequences
    std::vector<uint32_t> cu_k{0};
    std::vector<Tensor> k_live;
    for (uint64_t id : t.ids) {
      cu_k.push_back(cu_k.back() + static_cast<uint32_t>(t.cache.seq_len(id)));
      k_live.push_back(Tensor::zeros({t.cache.seq_len(id), kHeadsK, kDim}, kDType, t.dev));
    }
    op.seqlens_k = Tensor::from_vec(cu_k, {cu_k.size()}, t.dev);
    op.max_seqlen_k = good.max_seqlen_k;
    Tensor k = cat(k_live, 0);
    op.forward(q.unsqueeze(0), k, k);
  });
  return all;
}

}  // namespace

int main() {
  try {
    Device dev = Device::cuda_available() ? Device::cuda(0) : Device::cpu();
#ifdef WICK_WITH_CUDA
    const char* why = Device::cuda_available() ? "" : " (this build has CUDA, but no GPU is visible)";
#else
    const char* why = " (a CPU-only build: no GPU was visible when it was configured)";
#endif
    std::printf("wick demo: varlen, paged attention on %s%s\n"
                "%zu query heads, %zu kv heads, head size %zu, %s\n\n",
                to_string(dev).c_str(), why, kHeads, kHeadsK, kDim, dtype_name(kDType));
    Tour tour(dev);
    step_pack();
    step_page(tour);
    step_compare(tour);
    step_mask(tour);
    step_decode(tour);
    return step_mistakes(tour) ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s", errors_doc::explain(e).c_str());
    return 1;
  }
}
