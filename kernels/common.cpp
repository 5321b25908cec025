#include "kernels/common.h"

#include "tensor/error.h"

namespace wick::kernels {

void throw_error(const char* code, const std::string& msg) { throw Error(code, msg); }

std::string elem_type_name(ElemType t) {
  const int v = static_cast<int>(t);
  if (v < static_cast<int>(ElemType::U8) || v > static_cast<int>(ElemType::F64))
    return "ElemType(" + std::to_string(v) + ")";
  return dtype_name(static_cast<DType>(v));  // ops/op_util.cpp static_asserts the two enums agree
}

}  // namespace wick::kernels
