// libFuzzer entry point: the input's last byte picks the attention part (3 of 4 inputs), the
// layout part or the compute part (1 of 8 each). Build and run: docs/reliability.md.
#include <cstddef>
#include <cstdint>

#include "fuzz_wick.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
    case 3: wick::fuzz::fuzz_layout(in); break;
    case 7: wick::fuzz::fuzz_ops(in); break;
    default: wick::fuzz::fuzz_attention(in);
  }
  return 0;
}
