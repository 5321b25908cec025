#include "kernels/flash/validate.h"

#include <cuda_runtime.h>

#include "kernels/device_fault.cuh"
#include "kernels/pdl.cuh"
#include "tensor/cuda_check.h"

namespace wick::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr unsigned long long kNone = ~0ull;

__device__ unsigned long long make_key(SeqlensCheck check, int64_t index) {
  return (static_cast<unsigned long long>(check) << 56) | static_cast<unsigned long long>(index);
}

__device__ int64_t table_entry(const ValidateArgs& a, int64_t b, int64_t c) {
  const int32_t raw = a.p.block_table[b * a.p.block_table_batch_stride + c];
  return a.table_unsigned ? static_cast<int64_t>(static_cast<uint32_t>(raw)) : static_cast<int64_t>(raw);
}

__device__ int64_t pages_of(const ValidateArgs& a, int64_t b) {
  const uint32_t len = a.p.cu_seqlens_k[b + 1] - a.p.cu_seqlens_k[b];
  return (static_cast<int64_t>(len) + a.p.page_block_size - 1) / a.p.page_block_size;
}

// The smallest key of a failing check this thread sees.
__device__ unsigned long long scan(const ValidateArgs& a) {
  const FlashFwdParams& p = a.p;
  const uint32_t* q = p.cu_seqlens_q;
  const uint32_t* k = p.cu_seqlens_k;
  const int64_t B = p.batch;
  unsigned long long key = kNone;
  auto take = [&](unsigned long long k2) { key = k2 < key ? k2 : key; };
  for (int64_t b = threadIdx.x; b <= B; b += blockDim.x) {
    if (b == 0 && q[0] != 0) take(make_key(SeqlensCheck::QStart, 0));
    if (b > 0 && q[b] < q[b - 1]) take(make_key(SeqlensCheck::QOrder, b));
    if (b > 0 && k[b] < k[b - 1]) take(make_key(SeqlensCheck::KOrder, b));
    if (b == B && q[B] != static_cast<uint64_t>(p.total_q)) take(make_key(SeqlensCheck::QEnd, 0));
    if (b == B && !p.block_table && k[B] > static_cast<uint64_t>(a.total_k)) take(make_key(SeqlensCheck::KEnd, 0));
    if (b < B && q[b + 1] - q[b] > static_cast<uint32_t>(p.max_seqlen_q)) take(make_key(SeqlensCheck::QLength, b));
    if (b < B && k[b + 1] - k[b] > static_cast<uint32_t>(p.max_seqlen_k)) take(make_key(SeqlensCheck::KLength, b));
  }
  if (p.block_table) {
    // (b, c) for c < cols checks an entry; c == cols stands for the column count of b.
    const int64_t per_seq = a.table_cols + 1;
    for (int64_t f = threadIdx.x; f < B * per_seq; f += blockDim.x) {
      const int64_t b = f / per_seq, c = f % per_seq;
      const int64_t pages = pages_of(a, b);
      if (c == a.table_cols) {
        if (pages > a.table_cols) take(make_key(SeqlensCheck::Table, b * per_seq));
      } else if (c < pages) {
        const int64_t e = table_entry(a, b, c);
        if (e < 0 || e >= p.num_blocks) take(make_key(SeqlensCheck::Table, b * per_seq + 1 + c));
      }
    }
  }
  return key;
}

__global__ void __launch_bounds__(kThreads) validate_kernel(const ValidateArgs a) {
  allow_dependents_to_launch();  // the attention kernel waits for this grid to finish
  __shared__ unsigned long long s_key;
  if (threadIdx.x == 0) s_key = kNone;
  __syncthreads();
  unsigned long long key = scan(a);
  for (int o = 16; o > 0; o /= 2) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
    key = other < key ? other : key;
  }
  if (threadIdx.x % 32 == 0 && key != kNone) atomicMin(&s_key, key);
  __syncthreads();
  if (threadIdx.x != 0) return;
  key = s_key;
  *a.verdict = key == kNone ? 0u : 1u;
  if (key == kNone) return;
  // The failing check's values, read again by this one thread.
  const FlashFwdParams& p = a.p;
  const auto check = static_cast<SeqlensCheck>(key >> 56);
  const int64_t index = static_cast<int64_t>(key & ((1ull << 56) - 1));
  const uint32_t* s = check == SeqlensCheck::KOrder || check == SeqlensCheck::KLength ? p.cu_seqlens_k : p.cu_seqlens_q;
  int64_t v[7] = {static_cast<int64_t>(check), 0, 0, 0, 0, 0, 0};
  switch (check) {
    case SeqlensCheck::QStart: v[1] = s[0]; break;
    case SeqlensCheck::QOrder:
    case SeqlensCheck::KOrder: v[1] = index, v[2] = s[index], v[3] = s[index - 1]; break;
    case SeqlensCheck::QEnd: v[1] = s[p.batch], v[2] = p.total_q; break;
    case SeqlensCheck::KEnd: v[1] = p.cu_seqlens_k[p.batch], v[2] = a.total_k; break;
    case SeqlensCheck::QLength:
    case SeqlensCheck::KLength:
      v[1] = index, v[2] = s[index + 1] - s[index];
      v[3] = check == SeqlensCheck::QLength ? p.max_seqlen_q : p.max_seqlen_k;
      break;
    case SeqlensCheck::Table: {
      const int64_t per_seq = a.table_cols + 1, b = index / per_seq, c = index % per_seq - 1;
      if (c < 0) {  // W10: too few columns
        v[1] = b, v[2] = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b], v[3] = pages_of(a, b);
        v[4] = p.page_block_size, v[5] = a.table_cols, v[6] = 0;
      } else {  // W11: an entry out of range
        v[1] = b, v[2] = c, v[3] = table_entry(a, b, c), v[4] = p.num_blocks, v[6] = 1;
      }
      break;
    }
  }
  record_fault(a.sink, FaultKind::Attention, key, v, 7);
}

}  // namespace

void flash_validate(const ValidateArgs& args, void* stream) {
  validate_kernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
