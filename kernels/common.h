// Plain-data types shared by wick's elementwise CUDA kernels and the ops that launch them.
// This header is plain C++ (no CUDA) so ops/*.cpp can build the arguments in any build;
// the kernels themselves are in kernels/*.cu.
//
// Kernel ABI (docs/architecture.md): a base pointer already advanced by the tensor's
// start_offset, and a StridedView with 64-bit dims and strides in elements. Element i
// (row-major logical order) of a view lives at ptr[sum_k idx_k(i) * stride[k]].
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/cuda_check.h"  // WICK_CUDA_CHECK, plain C++ like this header

// Marks the element formulas shared by the CPU loops in ops/ and the CUDA kernels
// (kernels/*_ops.h): host and device functions under nvcc, plain functions elsewhere.
#if defined(__CUDACC__)
#define WICK_HOST_DEVICE __host__ __device__
#else
#define WICK_HOST_DEVICE
#endif

namespace wick::kernels {

// Mirrors wick::DType's order (ops/ static_asserts this) without including tensor/.
enum class ElemType : int { U8, U32, I16, I32, I64, BF16, F16, F32, F64 };

constexpr int kMaxRank = 8;  // views of higher rank are refused by ops/ with a wick::Error

struct StridedView {
  int rank = 0;                   // entries of dims/stride in use, <= kMaxRank
  int64_t dims[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};  // elements; 0 for broadcast dims
  bool contiguous = false;        // true when stride is row-major for dims (fast path)
};

// Throws wick::Error(code, msg), code the message's docs/errors.md id ("C07"); lets .cu
// files raise errors without including tensor/.
[[noreturn]] void throw_error(const char* code, const std::string& msg);

// Streaming multiprocessors of the current CUDA device (asked once per device; CUDA builds).
int sm_count();

// The name wick::DType gives the same value ("F32", "I64", ...), so kernel guards can say
// which type they got; "ElemType(42)" for a value outside the enum (a bad integer cast).
std::string elem_type_name(ElemType t);

// Code that only moves elements (copies, gathers, where) needs one instance per element
// size, not per dtype. Calls f(U{}) with U the unsigned integer of elem_size bytes and
// returns true for 1, 2, 4 or 8; returns false (f not called) for any other size, so the
// caller raises its own error.
template <class F>
bool visit_elem_bytes(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
  }
}

}  // namespace wick::kernels
