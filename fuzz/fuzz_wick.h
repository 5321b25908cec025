// The fuzz target's three parts and what they share. The rule all check: every input either
// runs and gives the right answer, or raises a wick::Error. Anything else is a finding: a
// crash, a sanitizer report, another exception type (libFuzzer reports it as a crash), or a
// wrong answer, which fail() turns into an abort with a message.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace wick::fuzz {

// A wrong answer: print why and abort (libFuzzer saves the input that did it).
[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz finding: %s\n", why.c_str());
  std::abort();
}

// Runs f; true when it returned, false when it raised a wick::Error (an accepted outcome).
// Any other exception leaves this function and ends the run as a finding.
inline bool runs(const std::function<void()>& f) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Every part runs on the CPU (the sanitizers' and the model's side).
inline const Device kCpu = Device::cpu();

// The number of elements of a shape of `dims` (the fuzz parts keep them small: no overflow).
inline size_t count(const std::vector<size_t>& dims) {
  size_t n = 1;
  for (size_t d : dims) n *= d;
  return n;
}

// How an operand of `dims` is reached from the tensor that stores it (the leaf): the leaf
// holds the dims in another order, each padded by a few elements (a narrow picks the
// window), and dims marked wide stored as 1 and broadcast back to their size (stride 0).
struct View {
  std::vector<size_t> dims, leaf, start, len;  // start and len per leaf dim
  std::vector<int64_t> back;                   // the operand's dim d is leaf dim back[d]
  bool any_wide = false;

  Tensor apply(const Tensor& t) const {
    Tensor x = t;
    for (size_t i = 0; i < leaf.size(); ++i) x = x.narrow(static_cast<int64_t>(i), start[i], len[i]);
    x = x.permute(DimList(back));
    return any_wide ? x.broadcast_as(Shape(dims)) : x;
  }
};

// A view the input picks: the leaf's dim order, then per leaf dim whether it is wide (a dim
// other than 1, one input in wide_one_in; 0: never), its padding (0 to max_pad) and where
// the window starts.
inline View pick_view(FuzzedDataProvider& in, const std::vector<size_t>& dims, int wide_one_in, size_t max_pad) {
  const size_t rank = dims.size();
  View v;
  v.dims = dims;
  std::vector<size_t> perm(rank);  // leaf dim i holds the operand's dim perm[i]
  std::iota(perm.begin(), perm.end(), size_t{0});
  for (size_t i = rank; i-- > 1;) std::swap(perm[i], perm[in.ConsumeIntegralInRange<size_t>(0, i)]);
  v.leaf.resize(rank), v.start.resize(rank), v.len.resize(rank), v.back.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t d = perm[i];
    const bool wide =
        wide_one_in > 0 && dims[d] != 1 && in.ConsumeIntegralInRange<int>(0, wide_one_in - 1) == wide_one_in - 1;
    v.any_wide = v.any_wide || wide;
    v.len[i] = wide ? 1 : dims[d];
    const size_t pad = in.ConsumeIntegralInRange<size_t>(0, max_pad);
    v.leaf[i] = v.len[i] + pad;
    v.start[i] = in.ConsumeIntegralInRange<size_t>(0, pad);
    v.back[d] = static_cast<int64_t>(i);
  }
  return v;
}

// Row-major index <-> coordinates over dims.
inline std::vector<size_t> unravel(size_t i, const std::vector<size_t>& dims) {
  std::vector<size_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) idx[k] = i % dims[k], i /= dims[k];
  return idx;
}
inline size_t ravel(const std::vector<size_t>& idx, const std::vector<size_t>& dims) {
  size_t i = 0;
  for (size_t k = 0; k < dims.size(); ++k) i = i * dims[k] + idx[k];
  return i;
}

// The flash-attention op: every entry point, paged or not, every option, any layout of
// every tensor, on the CPU; outputs compared with attention_reference.
void fuzz_attention(FuzzedDataProvider& in);

// The layout ops (narrow, transpose, permute, reshape, squeeze, unsqueeze, broadcast_as,
// contiguous, copy_into, index_select, casts, reductions, printing) on arbitrary layouts,
// each result compared with a plain model of the values.
void fuzz_layout(FuzzedDataProvider& in);

// The compute ops (arithmetic with broadcasting and with scalars, comparisons, where,
// reductions, argmax/argmin, cumsum, softmax, norms, matmul, cat, gather, scatter_add,
// one_hot, embedding, tril/triu, losses, rope, varlen_positions, dropout, clamp, float maps)
// on operands of any layout, each result compared with a model in double precision.
void fuzz_ops(FuzzedDataProvider& in);

// One of fuzz_ops's cases: a session of PagedKvCache calls (append, reserve and
// write_kv_slots, free, the block allocator, the tables) against a model of its contents.
void fuzz_paged_cache(FuzzedDataProvider& in);

// One of fuzz_ops's cases: a differentiable op on views of f64 leaves, its gradients against
// central differences (autograd::gradcheck).
void fuzz_gradients(FuzzedDataProvider& in);

}  // namespace wick::fuzz
