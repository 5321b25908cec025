// Error: the one exception type wick throws. what() is the exact, testable message; code()
// is its stable entry in the catalogue docs/errors.md ("A25", "L03", ...), so callers and
// tests can match an error without matching its text. The helpers below build candle's
// generic messages byte for byte.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace wick {

class Shape;

class Error : public std::runtime_error {
 public:
  // code: the catalogue id of the message's template (docs/errors.md).
  Error(std::string code, const std::string& msg) : std::runtime_error(msg), code_(std::move(code)) {}
  // Every wick error carries its code: a message without one does not compile.
  explicit Error(const std::string& msg) = delete;
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// "unexpected rank, expected: 2, got: 1 ([8])"
[[noreturn]] void throw_rank_error(size_t expected, const Shape& got);
// "unexpected dtype, expected: U32, got: F32"
[[noreturn]] void throw_dtype_error(DType expected, DType got);
// "device mismatch in flash-attn, lhs: Cpu, rhs: Cuda { gpu_id: 0 }"
[[noreturn]] void throw_device_mismatch(const std::string& op, const Device& lhs, const Device& rhs);

}  // namespace wick
