#include "tensor/device_fault.h"

#include <array>
#include <atomic>
#include <mutex>

#include "tensor/cuda_check.h"
#include "tensor/error.h"
#include "tensor/storage.h"

#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace wick {

namespace {

constexpr int kMaxDevices = 64;

struct Slot {
  std::atomic<bool> ready{false};         // the three pointers below are set
  DeviceFault* record = nullptr;          // device memory
  volatile int32_t* host_flag = nullptr;  // mapped host memory, as the host sees it
  int32_t* device_flag = nullptr;         // the same memory, as the device sees it
};

std::array<Slot, kMaxDevices> g_slots;
std::mutex g_slots_mutex;
std::atomic<uint64_t> g_next_call{1};
std::array<std::atomic<FaultFormatter>, 4> g_formatters{};

[[noreturn]] void bad_device(const Device& dev) {
  throw Error("S02", "no CUDA device is available for " + to_string(dev));
}

#ifdef WICK_WITH_CUDA
const Slot& slot(const Device& dev) {
  if (!dev.is_cuda() || dev.gpu_id < 0 || dev.gpu_id >= kMaxDevices) bad_device(dev);
  Slot& s = g_slots[dev.gpu_id];
  if (s.ready.load(std::memory_order_acquire)) return s;  // every call after the first
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  if (!s.ready.load(std::memory_order_relaxed)) {
    set_current_device(dev);
    void* host = nullptr;
    WICK_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int32_t), cudaHostAllocMapped));
    *static_cast<volatile int32_t*>(host) = 0;
    void* dev_flag = nullptr;
    WICK_CUDA_CHECK(cudaHostGetDevicePointer(&dev_flag, host, 0));
    void* record = nullptr;
    WICK_CUDA_CHECK(cudaMalloc(&record, sizeof(DeviceFault)));
    WICK_CUDA_CHECK(cudaMemset(record, 0, sizeof(DeviceFault)));
    s.host_flag = static_cast<volatile int32_t*>(host);
    s.device_flag = static_cast<int32_t*>(dev_flag);
    s.record = static_cast<DeviceFault*>(record);
    s.ready.store(true, std::memory_order_release);
  }
  return s;
}
#endif

}  // namespace

FaultSink fault_sink(const Device& dev) {
#ifdef WICK_WITH_CUDA
  const Slot& s = slot(dev);
  return {s.record, s.device_flag, g_next_call.fetch_add(1)};
#else
  bad_device(dev);
#endif
}

void register_fault_formatter(FaultKind kind, FaultFormatter formatter) {
  g_formatters.at(static_cast<size_t>(kind)).store(formatter);
}

void raise_device_fault(const Device& dev) {
#ifdef WICK_WITH_CUDA
  if (!dev.is_cuda() || dev.gpu_id < 0 || dev.gpu_id >= kMaxDevices) return;
  const Slot& s = g_slots[dev.gpu_id];
  if (!s.ready.load(std::memory_order_acquire) || *s.host_flag == 0) return;
  DeviceFault fault;
  set_current_device(dev);
  WICK_CUDA_CHECK(cudaMemcpy(&fault, s.record, sizeof fault, cudaMemcpyDeviceToHost));
  WICK_CUDA_CHECK(cudaMemset(s.record, 0, sizeof(DeviceFault)));
  *s.host_flag = 0;
  std::string code, message;
  const size_t kind = static_cast<size_t>(fault.kind);
  const FaultFormatter format = kind < g_formatters.size() ? g_formatters[kind].load() : nullptr;
  if (!format) throw Error("C15", "a device-side check recorded a fault of unknown kind " + std::to_string(kind));
  format(fault, code, message);
  throw Error(code, message);
#else
  (void)dev;
#endif
}

void check_device_faults(const Device& dev) {
  if (dev.is_cpu()) return;
  synchronize(dev);
}

}  // namespace wick
