// Storage: a device buffer of raw bytes, shared by every view of a tensor.
// CPU memory is 64-byte aligned; CUDA memory comes from the runtime's stream-ordered
// pool (cudaMallocAsync on the device's current stream, tensor/stream.h), and goes back to
// it on that same stream when the last view is gone. Blocks of up to 8 MiB allocated on
// wick's own stream are kept for reuse on that stream instead (at most 256 MiB per device;
// storage.cpp, BlockCache). The pool keeps the memory it gets back across synchronizes (the
// runtime's default is to hand it to the device at each one); release_cached hands both
// back.
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace wick {

class Storage {
 public:
  // Uninitialised bytes on device. A zero-byte request still yields a valid Storage. A
  // request the device cannot meet is a wick::Error naming the size: S03 on the host (also
  // raised up front for more than the machine's RAM + swap), S05 on a GPU.
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device);
  // Memory wick did not allocate (a tensor imported without a copy): `bytes` bytes at data on
  // device, handed back by calling release() once, when the last tensor viewing it is gone.
  // Not counted by live_bytes.
  static std::shared_ptr<Storage> wrap(void* data, size_t bytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

  // Byte copies between this storage and host memory, on the device's current stream.
  // To the host waits for that stream (and raises a recorded device fault); from the host
  // does not wait: the source bytes are staged before it returns.
  void copy_from_host(size_t dst_byte_offset, const void* src, size_t bytes);
  void copy_to_host(size_t src_byte_offset, void* dst, size_t bytes) const;
  // Byte copy between two storages on any devices (synchronous when a host is involved).
  static void copy(const Storage& src, size_t src_off, Storage& dst, size_t dst_off, size_t bytes);
  void fill_zero();

  // The number of writes into this storage so far (Storage's own copies and fills, copy_into,
  // optimizer steps). Autograd records it for the tensors a backward rule saves and refuses
  // to run the rule once it moved (G29). Views share their storage, so they share the count.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Bytes of freed CUDA blocks kept for reuse on device (0 for the CPU), and handing them
  // back: to the runtime's pool, and the pool's unused memory to the device. release_cached
  // waits for wick's own stream of the device first (memory freed on a stream the caller set
  // goes back once that stream has passed the free), and does nothing while that stream is
  // being captured into a graph. An allocation that fails does the same by itself before it
  // gives up.
  static size_t cached_bytes(const Device& device);
  static void release_cached(const Device& device);
  // Bytes the runtime's pool of a CUDA device holds, in use or not (0 for the CPU).
  static size_t reserved_bytes(const Device& device);

  // Bytes currently allocated through Storage on each kind of device; for leak tests.
  static int64_t live_bytes(Device::Kind kind);
  // The most live_bytes(kind) reached since the last reset_peak_bytes(kind) (or the start);
  // for tests that bound an op's memory.
  static int64_t peak_bytes(Device::Kind kind);
  static void reset_peak_bytes(Device::Kind kind);

 private:
  Storage(void* data, size_t bytes, Device device) : data_(data), bytes_(bytes), device_(device) {}
  void* data_;
  size_t bytes_;
  Device device_;
  void* stream_ = nullptr;  // CUDA: the stream the memory was allocated on (and is freed on)
  bool cached_ = false;     // CUDA: a size-class block that may go back to the cache
  std::function<void()> release_;  // set for wrapped memory: called instead of freeing
  std::atomic<uint64_t> version_{0};
};

// n elements of elem_size bytes, in bytes; throws L24 ("{op}: ... take 2^63 bytes or more")
// when that is above kMaxSize. Every byte count of a tensor's elements is formed here.
size_t byte_count(const char* op, size_t n, size_t elem_size);

// Throws S03 when a host buffer of n elements of elem_size bytes cannot be had (more than the
// machine's RAM + swap), or L24 when its byte count does not fit. Host code that sizes a
// std::vector by a tensor calls it first, so a huge request is a wick::Error, never
// std::bad_alloc or std::length_error (nor an abort under AddressSanitizer).
void check_host_buffer(const char* op, size_t n, size_t elem_size);

// Makes dev the current CUDA device (no-op for CPU or a CPU-only build).
void set_current_device(const Device& dev);
// Waits for all work queued on dev (no-op for CPU).
void synchronize(const Device& dev);

}  // namespace wick
