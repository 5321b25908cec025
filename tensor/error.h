// Error: the one exception type wick throws. what() is the exact, testable message.
// The helpers below build candle's generic messages byte for byte.
#pragma once
#include <stdexcept>
#include <string>

#include "tensor/cuda_check.h"  // WICK_CUDA_CHECK
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace wick {

class Shape;

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// "unexpected rank, expected: 2, got: 1 ([8])"
[[noreturn]] void throw_rank_error(size_t expected, const Shape& got);
// "unexpected dtype, expected: U32, got: F32"
[[noreturn]] void throw_dtype_error(DType expected, DType got);
// "device mismatch in flash-attn, lhs: Cpu, rhs: Cuda { gpu_id: 0 }"
[[noreturn]] void throw_device_mismatch(const std::string& op, const Device& lhs, const Device& rhs);

}  // namespace wick
