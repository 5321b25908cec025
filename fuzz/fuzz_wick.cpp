// libFuzzer entry point: the first byte picks the attention half (3 of 4 inputs) or the
// layout half. Build and run: docs/reliability.md.
#include <cstddef>
#include <cstdint>

#include "fuzz_wick.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeIntegralInRange<int>(0, 3) < 3)
    wick::fuzz::fuzz_attention(in);
  else
    wick::fuzz::fuzz_layout(in);
  return 0;
}
