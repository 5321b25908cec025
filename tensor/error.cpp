#include "tensor/error.h"

#include "tensor/shape.h"

namespace wick {

void throw_rank_error(size_t expected, const Shape& got) {
  throw Error("A09", "unexpected rank, expected: " + std::to_string(expected) +
              ", got: " + std::to_string(got.rank()) + " (" + to_string(got) + ")");
}

void throw_dtype_error(DType expected, DType got) {
  throw Error("A04", std::string("unexpected dtype, expected: ") + dtype_name(expected) +
              ", got: " + dtype_name(got));
}

void throw_device_mismatch(const std::string& op, const Device& lhs, const Device& rhs) {
  throw Error("A01", "device mismatch in " + op + ", lhs: " + to_string(lhs) + ", rhs: " + to_string(rhs));
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::U8: return "U8";
    case DType::U32: return "U32";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
  }
  return "?";
}

std::string to_string(const Device& d) {
  if (d.is_cpu()) return "Cpu";
  return "Cuda { gpu_id: " + std::to_string(d.gpu_id) + " }";
}

}  // namespace wick
