// Index map: block r reduces row r of a contiguous (rows, cols) x: x[r * cols + c], c in
// [0, cols), threads striding over c, then a block-wide combine. Mirrors ops/reduce.cpp's
// cpu_reduce_rows (sums accumulate in f64 for floats on CPU, f32/f64 here; ints in uint64, wrapping).
#include <type_traits>

#include "kernels/device_utils.h"
#include "kernels/reduce.h"

namespace wick::kernels {

namespace {

template <class T>
__global__ void sum_rows_kernel(const T* x, int64_t cols, T* out) {
  // integers sum in unsigned 64 bits: wrapping, as the CPU's (a signed sum could overflow)
  using A = std::conditional_t<std::is_integral_v<T>, unsigned long long, acc_t<T>>;
  const T* row = x + blockIdx.x * cols;
  A s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += static_cast<A>(load(row[c]));
  s = block_sum<A>(s);
  if (threadIdx.x == 0) out[blockIdx.x] = store<T>(static_cast<acc_t<T>>(s));
}

// Max/Min (and their arg forms): each thread keeps (value, first index), then a shared-memory
// tree combine that prefers the smaller index on ties.
template <class T>
__global__ void extreme_rows_kernel(ReduceOp op, const T* x, int64_t cols, void* out) {
  using C = acc_t<T>;
  const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
  const T* row = x + blockIdx.x * cols;
  __shared__ C vals[kThreads];
  __shared__ int64_t idxs[kThreads];
  C best = load(row[0]);
  int64_t at = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    C v = load(row[c]);
    if (want_max ? v > best : v < best) { best = v; at = c; }
  }
  vals[threadIdx.x] = best;
  idxs[threadIdx.x] = at;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      C v = vals[threadIdx.x + s];
      int64_t j = idxs[threadIdx.x + s];
      C& b = vals[threadIdx.x];
      bool better = want_max ? v > b : v < b;
      if (better || (v == b && j < idxs[threadIdx.x])) { b = v; idxs[threadIdx.x] = j; }
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) static_cast<int64_t*>(out)[blockIdx.x] = idxs[0];
  else static_cast<T*>(out)[blockIdx.x] = store<T>(vals[0]);
}

}  // namespace

void reduce_rows(ReduceOp op, ElemType type, const void* x, int64_t rows, int64_t cols, void* out) {
  if (rows == 0) return;
  const unsigned grid = blocks_per_row(rows, "reduce kernel: more than 2^31 - 1 rows");
  visit_all(type, [&](auto zero) {
    using T = decltype(zero);
    const T* px = static_cast<const T*>(x);
    if (op == ReduceOp::Sum)
      sum_rows_kernel<T><<<grid, kThreads, 0, launch_stream()>>>(px, cols, static_cast<T*>(out));
    else
      extreme_rows_kernel<T><<<grid, kThreads, 0, launch_stream()>>>(op, px, cols, out);
  });
  WICK_CUDA_CHECK(cudaGetLastError());
}

}  // namespace wick::kernels
