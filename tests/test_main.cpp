#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tensor/device.h"

int main(int argc, char** argv) {
  if (!wick::Device::cuda_available())
    std::printf("[wick] no CUDA device: CUDA test cases are SKIPPED (CPU cases run)\n");
  else
    std::printf("[wick] CUDA device found: every device test runs on Cpu and Cuda { gpu_id: 0 }\n");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
