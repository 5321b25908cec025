// The dynamic shared-memory limit of a kernel, raised once per device. CUDA keeps the limit
// per (device, kernel) and refuses a launch asking for more than 48 KiB without it, so a
// kernel that runs on a second GPU needs it raised there too.
#pragma once
#include <cuda_runtime.h>

#include "tensor/cuda_check.h"

namespace wick::kernels {

constexpr int kSmemLimitDevices = 64;  // devices past this one raise the limit on every call

// `done` is the caller's per-kernel record (a static array), one entry per device.
template <class Kernel>
void raise_smem_limit_once(Kernel kernel, int bytes, bool (&done)[kSmemLimitDevices]) {
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < kSmemLimitDevices && done[dev]) return;
  WICK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (dev < kSmemLimitDevices) done[dev] = true;
}

}  // namespace wick::kernels
