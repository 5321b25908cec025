// The fuzz target's two halves and what they share. The rule both check: every input either
// runs and gives the right answer, or raises a wick::Error. Anything else is a finding: a
// crash, a sanitizer report, another exception type (libFuzzer reports it as a crash), or a
// wrong answer, which fail() turns into an abort with a message.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

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

// The flash-attention op: every entry point, paged or not, every option, any layout of
// every tensor, on the CPU; outputs compared with attention_reference.
void fuzz_attention(FuzzedDataProvider& in);

// The layout ops (narrow, transpose, permute, reshape, squeeze, unsqueeze, broadcast_as,
// contiguous, copy_into, index_select, casts, reductions, printing) on arbitrary layouts,
// each result compared with a plain model of the values.
void fuzz_layout(FuzzedDataProvider& in);

}  // namespace wick::fuzz
