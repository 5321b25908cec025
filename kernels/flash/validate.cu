// The check kernel: one CTA runs the checks of validate.cuh and reports the first fault.
#include "kernels/flash/validate.h"

#include <cuda_runtime.h>

#include "kernels/flash/validate.cuh"
#include "kernels/pdl.cuh"
#include "tensor/cuda_check.h"

namespace wick::kernels {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) validate_kernel(const ValidateArgs a) {
  allow_dependents_to_launch();  // the attention kernel waits for this grid to finish
  __shared__ unsigned long long s_key;
  const unsigned long long key = checks::first_fault_in_block(a.p, a.c, s_key);
  if (threadIdx.x == 0) checks::report(a.p, a.c, key);
}

}  // namespace

void flash_validate(const ValidateArgs& args, void* stream) {
  validate_kernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
