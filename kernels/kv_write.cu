#include "kernels/kv_write.h"

#include <cuda_runtime.h>

#include "kernels/common.h"
#include "kernels/device_fault.cuh"
#include "kernels/pdl.cuh"
#include "tensor/cuda_check.h"

namespace wick::kernels {
namespace {

constexpr int kThreads = 128;

// One block per new row: both caches, every head, every channel. Each thread loads all it
// copies before it stores (one memory round trip per pass rather than one per element),
// in 16-byte pieces where the rows allow.
// Launched programmatically: it waits for the kernel before it. It lets the next kernel
// (the attention reading these rows, in a decode step) launch early only when `a.early_next`,
// which kv_write() sets for small writes (early_next_launch says why).
template <class U>
__global__ void __launch_bounds__(kThreads) kv_write_kernel(const KvWriteArgs a) {
  wait_for_prior_grid();
  if (a.early_next) allow_dependents_to_launch();
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
  U* dst[2];
  const U* src[2];
  uintptr_t misaligned = (a.head_size * sizeof(U)) % 16;
  for (int t = 0; t < 2; ++t) {
    dst[t] = static_cast<U*>(a.cache[t]) + blk * a.cache_stride[t][0] + row * a.cache_stride[t][1];
    src[t] = static_cast<const U*>(a.src[t]) + i * a.src_stride[t][0];
    misaligned |= reinterpret_cast<uintptr_t>(dst[t]) % 16 | reinterpret_cast<uintptr_t>(src[t]) % 16 |
                  (a.cache_stride[t][2] * sizeof(U)) % 16 | (a.src_stride[t][1] * sizeof(U)) % 16;
  }
  if (!misaligned) {
    // 16-byte pieces: a head's row is `per_head` of them
    const int per_head = static_cast<int>(a.head_size * sizeof(U) / 16), total = a.heads * per_head;
    for (int e = threadIdx.x; e < total; e += blockDim.x) {
      const int h = e / per_head, c = (e % per_head) * static_cast<int>(16 / sizeof(U));
      const uint4 k = *reinterpret_cast<const uint4*>(src[0] + h * a.src_stride[0][1] + c);
      const uint4 v = *reinterpret_cast<const uint4*>(src[1] + h * a.src_stride[1][1] + c);
      *reinterpret_cast<uint4*>(dst[0] + h * a.cache_stride[0][2] + c) = k;
      *reinterpret_cast<uint4*>(dst[1] + h * a.cache_stride[1][2] + c) = v;
    }
    return;
  }
  constexpr int kBatch = 4;  // elements per thread per pass, of each cache
  const int total = a.heads * a.head_size;
  for (int e0 = threadIdx.x; e0 < total; e0 += kBatch * blockDim.x) {
    U x[2][kBatch];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int e = e0 + j * blockDim.x, h = e / a.head_size, c = e % a.head_size;
        if (e < total) x[t][j] = src[t][h * a.src_stride[t][1] + c];
      }
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int e = e0 + j * blockDim.x, h = e / a.head_size, c = e % a.head_size;
        if (e < total) dst[t][h * a.cache_stride[t][2] + c] = x[t][j];
      }
  }
}

// Whether the attention after a write of `rows` rows of `heads` heads may be placed while the
// write still runs: only for writes of at most a quarter as many row-heads as SMs. A decode
// step's attention at that size is a split grid of about one CTA per SM, and an early start
// hides its launch behind the write (on the H200, a 32-layer step at B = 1 ctx 512 replayed
// 3.5-4.5% faster). Larger writes keep the plain order: the attention's CTAs would be placed
// while the write's still hold SMs, and some SMs would get two of them (B = 16 ctx 4096
// lost 5.7%; with the sm_80 decode, B = 8 ctx 4096 took 56 us per layer against 43;
// bench/RESULTS.md).
bool early_next_launch(int64_t rows, int heads) { return rows * heads * 4 <= sm_count(); }

}  // namespace

void kv_write(const KvWriteArgs& args, void* stream) {
  if (args.n <= 0) return;
  KvWriteArgs a = args;
  a.early_next = early_next_launch(a.n, a.heads);
  const auto st = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(a.n));
  cudaError_t err;
  switch (a.elem_bytes) {
    case 1: err = launch_programmatic(kv_write_kernel<uint8_t>, grid, dim3(kThreads), 0, st, a); break;
    case 2: err = launch_programmatic(kv_write_kernel<uint16_t>, grid, dim3(kThreads), 0, st, a); break;
    case 4: err = launch_programmatic(kv_write_kernel<uint32_t>, grid, dim3(kThreads), 0, st, a); break;
    default:  // 8: every dtype is 1-8 bytes
      err = launch_programmatic(kv_write_kernel<uint64_t>, grid, dim3(kThreads), 0, st, a);
      break;
  }
  WICK_CUDA_CHECK(err);
}

}  // namespace wick::kernels
