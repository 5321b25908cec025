#include "kernels/common.h"

#include <cuda_runtime.h>

#include <atomic>

#include "tensor/error.h"

namespace wick::kernels {

void throw_error(const char* code, const std::string& msg) { throw Error(code, msg); }

int sm_count() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};  // 0: not asked yet
  int dev = 0;
  WICK_CUDA_CHECK(cudaGetDevice(&dev));
  int sms = dev < kMaxDevices ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    WICK_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (dev < kMaxDevices) cached[dev].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

std::string elem_type_name(ElemType t) {
  const int v = static_cast<int>(t);
  if (v < static_cast<int>(ElemType::U8) || v > static_cast<int>(ElemType::F64))
    return "ElemType(" + std::to_string(v) + ")";
  return dtype_name(static_cast<DType>(v));  // ops/op_util.cpp static_asserts the two enums agree
}

}  // namespace wick::kernels
