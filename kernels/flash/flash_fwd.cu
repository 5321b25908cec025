// flash_fwd: the single dispatch point of the CUDA forward. On an sm_90 GPU the calls the
// Hopper kernel covers go to it (flash_fwd_sm90.h); otherwise it picks the head-size instance
// (kernels/flash/flash_instances.h), the decode shape when the GQA group of every query
// row fits one 16-row tile, and falls back to the lesson kernel for inputs the tensor-core
// kernel cannot read with 16-byte accesses (head size not a multiple of 8, misaligned base
// pointer or stride) or head sizes this build has no instance for.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/flash/flash_fwd.h"
#include "kernels/flash/flash_fwd_sm90.h"
#include "kernels/flash/flash_instances.h"
#include "kernels/flash/flash_launch.h"
#include "kernels/flash/validate.h"
#include "tensor/cuda_check.h"
#include "tensor/error.h"
#include "tensor/graph.h"

namespace wick::kernels {
namespace {

constexpr int kMaxHeadSize = 512;
constexpr int kDecodeRows = 16;  // rows of the decode tile (DecodeConfig::kBlockM)

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }
bool strides_ok(int64_t a, int64_t b, int64_t c) { return a % 8 == 0 && b % 8 == 0 && c % 8 == 0; }

// Can every 8-channel chunk of q, k, v and out be moved with one 16-byte access?
bool vector_friendly(const FlashFwdParams& p) {
  return p.head_size % 8 == 0 && aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.out) &&
         strides_ok(p.q_batch_stride, p.q_row_stride, p.q_head_stride) &&
         strides_ok(p.k_batch_stride, p.k_row_stride, p.k_head_stride) &&
         strides_ok(p.v_batch_stride, p.v_row_stride, p.v_head_stride) &&
         strides_ok(p.o_batch_stride, p.o_row_stride, p.o_head_stride);
}

// Runs the smallest compiled instance of the one list (kFlashHeadDims) that holds
// head_size; false when this build has none (the caller falls back).
template <FlashDType DT, size_t... I>
bool dispatch_dtype(const FlashFwdParams& p, void* stream, bool decode_shape, const DeviceChecks* checks,
                    std::index_sequence<I...>) {
  bool done = false;
  auto try_dim = [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if constexpr (WICK_FLASH_WANT(D) && (DT == FlashDType::BF16 || WICK_FLASH_WANT_F16)) {
      if (!done && p.head_size <= D) {
        flash::run_flash_hdim<D, DT>(p, stream, decode_shape && flash::has_decode_variant(D), checks);
        done = true;
      }
    }
  };
  (try_dim(std::integral_constant<int, flash::kFlashHeadDims[I]>{}), ...);
  return done;
}

template <FlashDType DT>
bool dispatch_dtype(const FlashFwdParams& p, void* stream, bool decode_shape, const DeviceChecks* checks) {
  constexpr size_t kCount = sizeof(flash::kFlashHeadDims) / sizeof(flash::kFlashHeadDims[0]);
  return dispatch_dtype<DT>(p, stream, decode_shape, checks, std::make_index_sequence<kCount>{});
}

}  // namespace

void flash_set_cluster_merge(bool on) {
#if WICK_FLASH_SM90
  flash::sm90::set_cluster_merge(on);
#else
  (void)on;
#endif
}

void flash_fwd(const FlashFwdParams& p, void* stream, const DeviceChecks* checks) {
  if (p.head_size <= 0 || p.head_size > kMaxHeadSize)
    throw Error("C10", "flash_fwd: head_size " + std::to_string(p.head_size) + " is outside 1..512");
  if (p.num_heads_k <= 0 || p.num_heads % p.num_heads_k != 0)
    throw Error("C11", "flash_fwd: num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_heads_k " +
                std::to_string(p.num_heads_k));
  // Every path but the tensor-core instances runs the check kernel first.
  auto check_first = [&] {
    if (checks) flash_validate(ValidateArgs{p, *checks}, stream);
    checks = nullptr;
  };
  if (p.batch <= 0 || p.num_heads <= 0 || p.total_q <= 0) {
    check_first();
    return;
  }
  if (!vector_friendly(p)) {
    check_first();
    flash_fwd_naive(p, stream);
    return;
  }
  const bool decode_shape = flash::decode_rows(p) <= kDecodeRows;
#if WICK_FLASH_SM90
  // the Hopper decode takes up to 32 rows (decode_covers)
  if (flash::sm90::decode_covers(p) && flash::sm90::available() && flash::sm90::run_decode(p, stream, checks))
    return;
  if (!decode_shape && flash::sm90::covers(p) && flash::sm90::available()) {
    check_first();
    if (flash::sm90::run(p, stream)) return;
  }
#endif
  const bool done = p.dtype == FlashDType::BF16 ? dispatch_dtype<FlashDType::BF16>(p, stream, decode_shape, checks)
                                                : dispatch_dtype<FlashDType::F16>(p, stream, decode_shape, checks);
  if (!done) {
    check_first();
    flash_fwd_naive(p, stream);
  }
}

}  // namespace wick::kernels

namespace wick::kernels::flash {

bool split_workspace(void* stream, int64_t tiles, size_t floats, SplitWorkspace& out) {
  constexpr int64_t kCounters = int64_t(1) << 16;  // per stream (256 KiB)
  if (tiles > kCounters) return false;
  auto st = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  WICK_CUDA_CHECK(cudaStreamIsCapturing(st, &capture));
  if (capture != cudaStreamCaptureStatusNone)  // a CudaGraph's own arrays, or none
    return ::wick::graph_workspace(stream, static_cast<size_t>(tiles), floats, &out.counters, &out.scratch);
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  struct Entry {
    int* counters = nullptr;
    float* scratch = nullptr;
    size_t floats = 0;
  };
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, Entry> entries;
  const std::lock_guard<std::mutex> lock(mu);
  Entry& e = entries[{dev, st}];
  if (e.counters == nullptr) {
    void* mem = nullptr;
    WICK_CUDA_CHECK(cudaMallocAsync(&mem, kCounters * sizeof(int), st));
    WICK_CUDA_CHECK(cudaMemsetAsync(mem, 0, kCounters * sizeof(int), st));
    e.counters = static_cast<int*>(mem);
  }
  if (e.floats < floats) {
    const size_t grown = std::max(floats, 2 * e.floats);
    void* mem = nullptr;
    WICK_CUDA_CHECK(cudaMallocAsync(&mem, grown * sizeof(float), st));
    e.scratch = static_cast<float*>(mem), e.floats = grown;
  }
  out.counters = e.counters, out.scratch = e.scratch;
  return true;
}

}  // namespace wick::kernels::flash
