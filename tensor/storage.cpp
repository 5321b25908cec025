#include "tensor/storage.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda_check.h"
#include "tensor/device_fault.h"
#include "tensor/error.h"
#include "tensor/shape.h"
#include "tensor/stream.h"

#ifdef __linux__
#include <sys/sysinfo.h>
#endif
#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace wick {

namespace {
constexpr size_t kCpuAlignment = 64;
std::atomic<int64_t> g_live_cpu{0};
std::atomic<int64_t> g_live_cuda{0};
std::atomic<int64_t> g_peak_cpu{0};
std::atomic<int64_t> g_peak_cuda{0};

void count_allocation(std::atomic<int64_t>& live, std::atomic<int64_t>& peak, size_t bytes) {
  const int64_t now = live += static_cast<int64_t>(bytes);
  for (int64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
  }
}

[[noreturn]] [[maybe_unused]] void no_cuda() {
  throw Error("S01", "this build of wick has no CUDA support (configure with WICK_CUDA=ON)");
}

[[noreturn]] void out_of_host_memory(size_t bytes) {
  throw Error("S03", "out of host memory allocating " + std::to_string(bytes) + " bytes");
}

// RAM + swap of this machine in bytes (kMaxSize when unknown): no host allocation above it
// can succeed, so it is refused before the allocator is asked.
size_t host_memory_limit() {
  static const size_t limit = [] {
#ifdef __linux__
    struct sysinfo si {};
    if (sysinfo(&si) == 0) {
      size_t total = 0;
      if (mul_size(static_cast<size_t>(si.totalram) + si.totalswap, si.mem_unit, &total)) return total;
    }
#endif
    return kMaxSize;
  }();
  return limit;
}
#ifdef WICK_WITH_CUDA
// Freed CUDA blocks kept for reuse. A Storage's memory goes back on the stream it was
// allocated on; when that is wick's own stream of the device (tensor/stream.h), a block of
// at most kMaxBlock bytes is kept here instead, and the next allocation of the same size
// class on that stream takes it without a runtime call (the runtime's stream-ordered
// allocate and free take about a microsecond each on the host, a visible part of a small
// op's call). Reuse on the same stream is safe by stream order: the work that used the
// block was queued before any work of its next owner. Not used while the stream is being
// captured into a CUDA graph (memory allocated during a capture belongs to the graph), nor
// for streams set with StreamGuard. At most kMaxBytes per device are kept; a device's blocks
// go back to the runtime when an allocation there fails (which is then retried once) and on
// Storage::release_cached.
class BlockCache {
 public:
  static constexpr size_t kMaxBlock = size_t{8} << 20;
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  static constexpr int kMaxDevices = 64;

  // The bytes a cached block of a request has: blocks of one size class are
  // interchangeable. Multiples of 512 bytes up to 4 KiB, then of a quarter of the next lower
  // power of two (at most a fifth of a block unused).
  static size_t size_class(size_t bytes) {
    size_t step = 512;
    while (step * 8 <= bytes) step *= 2;  // step = pow2floor(bytes) / 4 from 4 KiB on
    return (bytes + step - 1) / step * step;
  }

  void* take(int gpu, size_t cls) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_[gpu].find(cls);
    if (it == free_[gpu].end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    kept_[gpu] -= cls;
    return p;
  }
  // False when the device's share is full (the caller frees the block).
  bool keep(int gpu, size_t cls, void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_[gpu] + cls > kMaxBytes) return false;
    free_[gpu][cls].push_back(p);
    kept_[gpu] += cls;
    return true;
  }
  // Frees every kept block of gpu on its stream; the caller made gpu current.
  void release(int gpu, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [cls, blocks] : free_[gpu])
      for (void* p : blocks) (void)cudaFreeAsync(p, stream);
    free_[gpu].clear();
    kept_[gpu] = 0;
  }
  size_t kept(int gpu) {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_[gpu];
  }

 private:
  std::mutex mu_;
  std::array<std::unordered_map<size_t, std::vector<void*>>, kMaxDevices> free_;
  std::array<size_t, kMaxDevices> kept_{};
};

// Never destroyed: storages may die during static destruction.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

// The runtime's pool of a device (what cudaMallocAsync draws from).
cudaMemPool_t device_pool(int gpu) {
  cudaMemPool_t pool = nullptr;
  WICK_CUDA_CHECK(cudaDeviceGetMemPool(&pool, gpu));
  return pool;
}

// By default the pool gives its unused memory back to the device at every synchronize, so
// a step that synchronizes once (a training step reading its loss) maps all of its large
// buffers afresh each time, a cost on the host before the first kernel can run. The pool of
// each device wick allocates on keeps its memory instead; Storage::release_cached gives it
// back.
void keep_pool_memory(int gpu) {
  static std::array<std::once_flag, BlockCache::kMaxDevices> once;
  if (gpu < 0 || gpu >= BlockCache::kMaxDevices) return;
  std::call_once(once[gpu], [gpu] {
    uint64_t keep = UINT64_MAX;
    WICK_CUDA_CHECK(cudaMemPoolSetAttribute(device_pool(gpu), cudaMemPoolAttrReleaseThreshold, &keep));
  });
}

bool capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;  // unknown: take the runtime's path
  }
  return status != cudaStreamCaptureStatusNone;
}

// Hands the kept blocks of gpu back to its pool, and the pool's unused memory to the device
// once the frees queued on `stream` (wick's own stream of gpu) are done; a free still queued
// on another stream stays in the pool. Nothing while `stream` is being captured (a free
// would become part of the graph, and a capture cannot be waited for). Errors throw when
// `strict`, else they are consumed (the caller has a failure of its own to report).
void release_memory(int gpu, cudaStream_t stream, bool strict) {
  if (capturing(stream)) return;
  block_cache().release(gpu, stream);
  cudaError_t status = cudaStreamSynchronize(stream);
  if (status == cudaSuccess) status = cudaMemPoolTrimTo(device_pool(gpu), 0);
  if (strict) WICK_CUDA_CHECK(status);
  (void)cudaGetLastError();
}
#endif
}  // namespace

size_t byte_count(const char* op, size_t n, size_t elem_size) {
  size_t bytes = 0;
  if (!mul_size(n, elem_size, &bytes))
    throw Error("L24", std::string(op) + ": " + std::to_string(n) + " elements of " + std::to_string(elem_size) +
                           " bytes take 2^63 bytes or more");
  return bytes;
}

void check_host_buffer(const char* op, size_t n, size_t elem_size) {
  const size_t bytes = byte_count(op, n, elem_size);
  if (bytes > host_memory_limit()) out_of_host_memory(bytes);
}

namespace detail {
void throw_cuda_error(int code, const char* expr, const char* file, int line) {
#ifdef WICK_WITH_CUDA
  const char* what = cudaGetErrorString(static_cast<cudaError_t>(code));
  // A failed launch also leaves its error as the runtime's last error; clear it, so that a
  // later, unrelated check does not raise it again (sticky errors stay whatever is done).
  (void)cudaGetLastError();
#else
  const char* what = "CUDA error";
#endif
  throw Error("C01", std::string("CUDA error ") + std::to_string(code) + " (" + what + ") in " + expr +
              " at " + file + ":" + std::to_string(line));
}
}  // namespace detail

bool Device::cuda_available() {
#ifdef WICK_WITH_CUDA
  static const bool available = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return available;
#else
  return false;
#endif
}

void set_current_device(const Device& dev) {
  if (dev.is_cpu()) return;
#ifdef WICK_WITH_CUDA
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == dev.gpu_id) return;  // the common case: no switch
  WICK_CUDA_CHECK(cudaSetDevice(dev.gpu_id));
#else
  no_cuda();
#endif
}

void synchronize(const Device& dev) {
  if (dev.is_cpu()) return;
#ifdef WICK_WITH_CUDA
  set_current_device(dev);
  WICK_CUDA_CHECK(cudaDeviceSynchronize());
  raise_device_fault(dev);
#else
  no_cuda();
#endif
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  // The owner exists before the memory does, so a throw after the allocation cannot leak
  // it; data_ and bytes_ are set (and counted) only once the memory is there.
  std::shared_ptr<Storage> s(new Storage(nullptr, 0, device));
  if (device.is_cpu()) {
    if (bytes > host_memory_limit()) out_of_host_memory(bytes);  // (also keeps the rounding below exact)
    size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    s->data_ = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
    if (!s->data_) out_of_host_memory(bytes);
    s->bytes_ = bytes;
    count_allocation(g_live_cpu, g_peak_cpu, bytes);
  } else {
#ifdef WICK_WITH_CUDA
    if (!Device::cuda_available()) throw Error("S02", "no CUDA device is available for " + to_string(device));
    set_current_device(device);
    const Stream stream = current_stream(device);
    s->stream_ = stream.handle;
    if (bytes) {
      const int gpu = device.gpu_id;
      const bool cacheable = bytes <= BlockCache::kMaxBlock && gpu < BlockCache::kMaxDevices &&
                             stream.handle == own_stream(device).handle && !capturing(stream.handle);
      const size_t want = cacheable ? BlockCache::size_class(bytes) : bytes;
      if (cacheable) s->data_ = block_cache().take(gpu, want);
      if (!s->data_) {
        const auto st = static_cast<cudaStream_t>(s->stream_);
        keep_pool_memory(gpu);
        cudaError_t status = cudaMallocAsync(&s->data_, want, st);
        if (status == cudaErrorMemoryAllocation && gpu < BlockCache::kMaxDevices) {
          (void)cudaGetLastError();  // consumed: the next launch check must not report it
          release_memory(gpu, static_cast<cudaStream_t>(own_stream(device).handle), false);
          status = cudaMallocAsync(&s->data_, want, st);
        }
        if (status == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();
          throw Error("S05", "out of memory on " + to_string(device) + " allocating " + std::to_string(bytes) +
                                 " bytes");
        }
        WICK_CUDA_CHECK(status);
      }
      s->cached_ = cacheable;
    }
    s->bytes_ = bytes;
    count_allocation(g_live_cuda, g_peak_cuda, bytes);
#else
    no_cuda();
#endif
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t bytes, Device device, std::function<void()> release) {
  std::shared_ptr<Storage> s(new Storage(data, bytes, device));
  s->release_ = std::move(release);
  return s;
}

Storage::~Storage() {
  if (release_) {
    // A destructor must not throw; the owner's release is its own affair.
    try {
      release_();
    } catch (...) {
    }
    return;
  }
  if (device_.is_cpu()) {
    std::free(data_);
    g_live_cpu -= static_cast<int64_t>(bytes_);
    return;
  }
#ifdef WICK_WITH_CUDA
  if (data_ && cached_ && !capturing(stream_) &&
      block_cache().keep(device_.gpu_id, BlockCache::size_class(bytes_), data_)) {
    data_ = nullptr;  // kept for the next allocation of its size on this stream
  }
  if (data_) {
    // A destructor must not throw, nor leave traces on the caller's thread: the caller's
    // current device is restored, and an error from these calls is consumed here, so that
    // the next WICK_CUDA_CHECK(cudaGetLastError()) after some kernel launch does not report
    // it as that kernel's.
    int previous = -1;
    bool failed = cudaGetDevice(&previous) != cudaSuccess;
    failed |= cudaSetDevice(device_.gpu_id) != cudaSuccess;
    failed |= cudaFreeAsync(data_, static_cast<cudaStream_t>(stream_)) != cudaSuccess;
    if (previous >= 0 && previous != device_.gpu_id) failed |= cudaSetDevice(previous) != cudaSuccess;
    if (failed) (void)cudaGetLastError();
  }
  g_live_cuda -= static_cast<int64_t>(bytes_);
#endif
}

size_t Storage::cached_bytes(const Device& device) {
#ifdef WICK_WITH_CUDA
  if (!device.is_cuda() || device.gpu_id < 0 || device.gpu_id >= BlockCache::kMaxDevices) return 0;
  return block_cache().kept(device.gpu_id);
#else
  (void)device;
  return 0;
#endif
}

void Storage::release_cached(const Device& device) {
#ifdef WICK_WITH_CUDA
  if (!device.is_cuda() || device.gpu_id < 0 || device.gpu_id >= BlockCache::kMaxDevices) return;
  set_current_device(device);
  release_memory(device.gpu_id, static_cast<cudaStream_t>(own_stream(device).handle), true);
#else
  (void)device;
#endif
}

size_t Storage::reserved_bytes(const Device& device) {
#ifdef WICK_WITH_CUDA
  if (!device.is_cuda() || !Device::cuda_available()) return 0;
  uint64_t bytes = 0;
  WICK_CUDA_CHECK(cudaMemPoolGetAttribute(device_pool(device.gpu_id), cudaMemPoolAttrReservedMemCurrent, &bytes));
  return static_cast<size_t>(bytes);
#else
  (void)device;
  return 0;
#endif
}

int64_t Storage::live_bytes(Device::Kind kind) {
  return kind == Device::Kind::Cpu ? g_live_cpu.load() : g_live_cuda.load();
}

int64_t Storage::peak_bytes(Device::Kind kind) {
  return kind == Device::Kind::Cpu ? g_peak_cpu.load() : g_peak_cuda.load();
}

void Storage::reset_peak_bytes(Device::Kind kind) {
  if (kind == Device::Kind::Cpu) g_peak_cpu = g_live_cpu.load();
  else g_peak_cuda = g_live_cuda.load();
}

static void check_range(const Storage& s, size_t off, size_t bytes, const char* op) {
  if (off > s.bytes() || bytes > s.bytes() - off)
    throw Error("S04", std::string(op) + ": byte range [" + std::to_string(off) + ", " +
                std::to_string(off + bytes) + ") outside storage of " + std::to_string(s.bytes()) +
                " bytes");
}

void Storage::copy_from_host(size_t dst_off, const void* src, size_t bytes) {
  check_range(*this, dst_off, bytes, "copy_from_host");
  if (bytes == 0) return;
  bump_version();
  char* dst = static_cast<char*>(data_) + dst_off;
  if (device_.is_cpu()) { std::memcpy(dst, src, bytes); return; }
#ifdef WICK_WITH_CUDA
  set_current_device(device_);
  WICK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                  static_cast<cudaStream_t>(current_stream(device_).handle)));
#endif
}

void Storage::copy_to_host(size_t src_off, void* dst, size_t bytes) const {
  check_range(*this, src_off, bytes, "copy_to_host");
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + src_off;
  if (device_.is_cpu()) { std::memcpy(dst, src, bytes); return; }
#ifdef WICK_WITH_CUDA
  set_current_device(device_);
  const auto stream = static_cast<cudaStream_t>(current_stream(device_).handle);
  WICK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  WICK_CUDA_CHECK(cudaStreamSynchronize(stream));
  raise_device_fault(device_);  // the copy waited for the stream: a recorded fault is complete
#endif
}

void Storage::copy(const Storage& src, size_t src_off, Storage& dst, size_t dst_off, size_t bytes) {
  check_range(src, src_off, bytes, "copy");
  check_range(dst, dst_off, bytes, "copy");
  if (bytes == 0) return;
  dst.bump_version();
  const char* s = static_cast<const char*>(src.data_) + src_off;
  char* d = static_cast<char*>(dst.data_) + dst_off;
  if (src.device_.is_cpu() && dst.device_.is_cpu()) { std::memcpy(d, s, bytes); return; }
  if (src.device_.is_cpu()) { dst.copy_from_host(dst_off, s, bytes); return; }
  if (dst.device_.is_cpu()) { src.copy_to_host(src_off, d, bytes); return; }
#ifdef WICK_WITH_CUDA
  if (src.device_ == dst.device_) {
    set_current_device(dst.device_);
    WICK_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice,
                                    static_cast<cudaStream_t>(current_stream(dst.device_).handle)));
  } else {
    WICK_CUDA_CHECK(cudaMemcpyPeer(d, dst.device_.gpu_id, s, src.device_.gpu_id, bytes));
  }
#endif
}

void Storage::fill_zero() {
  if (bytes_ == 0) return;
  bump_version();
  if (device_.is_cpu()) { std::memset(data_, 0, bytes_); return; }
#ifdef WICK_WITH_CUDA
  set_current_device(device_);
  WICK_CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes_, static_cast<cudaStream_t>(current_stream(device_).handle)));
#endif
}

}  // namespace wick
