#include "kernels/kv_write.h"

#include <cuda_runtime.h>

#include "kernels/device_fault.cuh"
#include "tensor/cuda_check.h"

namespace wick::kernels {
namespace {

constexpr int kThreads = 128;

// One block per new row: both caches, every head, every channel.
template <class U>
__global__ void __launch_bounds__(kThreads) kv_write_kernel(const KvWriteArgs a) {
  const int64_t i = blockIdx.x;
  const int64_t slot = a.slots[i];
  if (slot < 0 || slot >= a.num_blocks * a.page) {
    if (threadIdx.x == 0) {
      const int64_t v[4] = {i, slot, a.num_blocks, a.page};
      record_fault(a.sink, FaultKind::KvSlot, static_cast<uint64_t>(i), v, 4);
    }
    return;
  }
  const int64_t blk = slot / a.page, row = slot % a.page;
  for (int t = 0; t < 2; ++t) {
    U* dst = static_cast<U*>(a.cache[t]) + blk * a.cache_stride[t][0] + row * a.cache_stride[t][1];
    const U* src = static_cast<const U*>(a.src[t]) + i * a.src_stride[t][0];
    for (int e = threadIdx.x; e < a.heads * a.head_size; e += blockDim.x) {
      const int h = e / a.head_size, c = e % a.head_size;
      dst[h * a.cache_stride[t][2] + c] = src[h * a.src_stride[t][1] + c];
    }
  }
}

}  // namespace

void kv_write(const KvWriteArgs& a, void* stream) {
  if (a.n <= 0) return;
  const auto st = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(a.n));
  switch (a.elem_bytes) {
    case 1: kv_write_kernel<uint8_t><<<grid, kThreads, 0, st>>>(a); break;
    case 2: kv_write_kernel<uint16_t><<<grid, kThreads, 0, st>>>(a); break;
    case 4: kv_write_kernel<uint32_t><<<grid, kThreads, 0, st>>>(a); break;
    default: kv_write_kernel<uint64_t><<<grid, kThreads, 0, st>>>(a); break;  // 8: every dtype is 1-8 bytes
  }
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
