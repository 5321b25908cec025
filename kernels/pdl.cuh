// Programmatic dependent launch (sm_90 and later). A kernel launched with launch_programmatic
// may begin while the kernel before it on the stream is still running (its CTAs are placed
// and its parameters loaded meanwhile); the ordering rule: it executes wait_for_prior_grid()
// before its first read or write of global memory, which returns once that kernel has
// completed and its writes are visible. A kernel that lets its dependents start early calls
// allow_dependents_to_launch(); they still wait for its completion.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace wick::kernels {

// Waits for the grid this one was launched after programmatically; a no-op after an
// ordinary launch, and compiled out before sm_90.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The kernels launched programmatically after this grid may start launching now.
__device__ __forceinline__ void allow_dependents_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// True when the code the current device runs for `kernel` was compiled for sm_90 or later
// (its PTX version), so its wait_for_prior_grid() is there: code compiled for an older
// target (run on a newer GPU through the driver's compiler) has the call compiled out and
// must not be launched programmatically. Asked once per kernel and device.
inline bool has_grid_wait(const void* kernel) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  static std::mutex mu;
  static std::unordered_map<const void*, uint64_t> known;  // kernel -> bit d: answer for device d
  static std::unordered_map<const void*, uint64_t> asked;  // kernel -> bit d: device d asked
  if (dev >= 64) return false;
  const uint64_t bit = uint64_t{1} << dev;
  std::lock_guard<std::mutex> lock(mu);
  if (asked[kernel] & bit) return known[kernel] & bit;
  cudaFuncAttributes attr{};
  const bool yes = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
  (void)cudaGetLastError();
  asked[kernel] |= bit;
  if (yes) known[kernel] |= bit;
  return yes;
}

// Launches kernel<<<grid, block, smem, st>>>(args...), programmatically where the kernel's
// code has the wait (see above), in clusters of `cluster` CTAs (thread block clusters,
// sm_90; 1 x 1 x 1: none). Returns the launch's error.
template <class... Params, class... Args>
inline cudaError_t launch_programmatic_clusters(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block,
                                                size_t smem, cudaStream_t st, const Args&... args) {
  const bool clustered = cluster.x * cluster.y * cluster.z > 1;
  const bool programmatic = has_grid_wait(reinterpret_cast<const void*>(kernel));
  if (!programmatic && !clustered) {
    kernel<<<grid, block, smem, st>>>(args...);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (programmatic) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (clustered) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x, attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr, cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

// launch_programmatic_clusters with no clusters.
template <class... Params, class... Args>
inline cudaError_t launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                       cudaStream_t st, const Args&... args) {
  return launch_programmatic_clusters(kernel, grid, dim3(1, 1, 1), block, smem, st, args...);
}

}  // namespace wick::kernels
