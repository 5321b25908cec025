// DType: the element types a Tensor can hold, their sizes, names and host types.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/half.h"  // f16, bf16: the host storage types of F16 and BF16

namespace wick {

enum class DType { U8, U32, I16, I32, I64, BF16, F16, F32, F64 };

// Size of one element in bytes.
constexpr size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::U8: return 1;
    case DType::I16: case DType::BF16: case DType::F16: return 2;
    case DType::U32: case DType::I32: case DType::F32: return 4;
    case DType::I64: case DType::F64: return 8;
  }
  return 0;
}

// Debug-style name, as candle prints it: "F32", "BF16", ...
const char* dtype_name(DType dt);
inline std::string to_string(DType dt) { return dtype_name(dt); }

constexpr bool is_float(DType dt) {
  return dt == DType::BF16 || dt == DType::F16 || dt == DType::F32 || dt == DType::F64;
}

// dtype_of<T>: the DType whose host storage type is T.
template <class T> struct DTypeOf;
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::U32; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::I16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::F16; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls f(T{}) with T the host type of dt; the one switch over dtypes that ops reuse.
template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::U8: return f(uint8_t{});
    case DType::U32: return f(uint32_t{});
    case DType::I16: return f(int16_t{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    case DType::BF16: return f(bf16{});
    case DType::F16: return f(f16{});
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
  }
  return f(float{});
}

}  // namespace wick
