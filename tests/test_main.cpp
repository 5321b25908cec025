#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "seed.h"
#include "tensor/device.h"

int main(int argc, char** argv) {
  if (!wick::Device::cuda_available())
    std::printf("[wick] no CUDA device: CUDA test cases are SKIPPED (CPU cases run)\n");
  else
    std::printf("[wick] CUDA device found: every device test runs on Cpu and Cuda { gpu_id: 0 }\n");
  std::printf("[wick] randomized tests: base seed %llu (set WICK_TEST_SEED to replay or to draw new inputs)\n",
              static_cast<unsigned long long>(wick::test::base_seed()));
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
