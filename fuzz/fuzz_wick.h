// The fuzz target's three parts and what they share. The rule all check: every input either
// runs and gives the right answer, or raises a wick::Error. Anything else is a finding: a
// crash, a sanitizer report, another exception type (libFuzzer reports it as a crash), or a
// wrong answer, which fail() turns into an abort with a message.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/error.h"

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
