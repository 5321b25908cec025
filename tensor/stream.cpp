#include "tensor/stream.h"

#include <array>
#include <mutex>

#include "tensor/device_fault.h"
#include "tensor/cuda_check.h"
#include "tensor/error.h"
#include "tensor/storage.h"

#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace wick {

namespace {

constexpr int kMaxDevices = 64;

void check_cuda_device(const Device& dev) {
  if (!dev.is_cuda() || !Device::cuda_available() || dev.gpu_id < 0 || dev.gpu_id >= kMaxDevices)
    throw Error("S02", "no CUDA device is available for " + to_string(dev));
}

#ifdef WICK_WITH_CUDA
// wick's own stream per device, shared by every thread; created once.
std::array<cudaStream_t, kMaxDevices> g_default{};
std::once_flag g_default_once[kMaxDevices];

cudaStream_t default_stream(int gpu) {
  std::call_once(g_default_once[gpu], [gpu] {
    int previous = 0;
    WICK_CUDA_CHECK(cudaGetDevice(&previous));
    WICK_CUDA_CHECK(cudaSetDevice(gpu));
    WICK_CUDA_CHECK(cudaStreamCreateWithFlags(&g_default[gpu], cudaStreamDefault));
    WICK_CUDA_CHECK(cudaSetDevice(previous));
  });
  return g_default[gpu];
}

// The streams this thread set (null: wick's own).
thread_local std::array<cudaStream_t, kMaxDevices> t_current{};
#endif

}  // namespace

Stream current_stream(const Device& dev) {
  check_cuda_device(dev);
#ifdef WICK_WITH_CUDA
  cudaStream_t s = t_current[dev.gpu_id];
  return {dev, s ? s : default_stream(dev.gpu_id)};
#else
  return {dev, nullptr};
#endif
}

void* current_stream_handle() {
#ifdef WICK_WITH_CUDA
  int gpu = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&gpu));
  if (gpu < 0 || gpu >= kMaxDevices) check_cuda_device(Device::cuda(gpu));
  cudaStream_t s = t_current[gpu];
  return s ? s : default_stream(gpu);
#else
  return nullptr;
#endif
}

Stream own_stream(const Device& dev) {
  check_cuda_device(dev);
#ifdef WICK_WITH_CUDA
  return {dev, default_stream(dev.gpu_id)};
#else
  return {dev, nullptr};
#endif
}

Stream create_stream(const Device& dev) {
  check_cuda_device(dev);
#ifdef WICK_WITH_CUDA
  set_current_device(dev);
  cudaStream_t s = nullptr;
  WICK_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
  return {dev, s};
#else
  return {dev, nullptr};
#endif
}

void destroy_stream(const Stream& stream) {
#ifdef WICK_WITH_CUDA
  if (stream.handle) WICK_CUDA_CHECK(cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle)));
#else
  (void)stream;
#endif
}

StreamGuard::StreamGuard(const Stream& stream) {
  check_cuda_device(stream.device);
#ifdef WICK_WITH_CUDA
  previous_ = {stream.device, t_current[stream.device.gpu_id]};
  was_set_ = true;
  t_current[stream.device.gpu_id] = static_cast<cudaStream_t>(stream.handle);
#endif
}

StreamGuard::~StreamGuard() {
#ifdef WICK_WITH_CUDA
  if (was_set_) t_current[previous_.device.gpu_id] = static_cast<cudaStream_t>(previous_.handle);
#endif
}

void synchronize(const Stream& stream) {
#ifdef WICK_WITH_CUDA
  WICK_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
  raise_device_fault(stream.device);
#else
  (void)stream;
#endif
}

}  // namespace wick
