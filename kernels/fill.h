// Filling a contiguous device buffer with one value, on the device (no host round trip).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

// dst[i] = *value for i < n, on the current stream (asynchronous: the value is read on the
// host before the launch returns). dst is a device pointer to n contiguous elements of
// elem_size bytes (1, 2, 4 or 8); value points to one element of that size on the host.
void fill(size_t elem_size, void* dst, const void* value, int64_t n);

}  // namespace wick::kernels
