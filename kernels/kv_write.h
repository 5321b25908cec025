// Writing new K/V rows into a paged cache at slots given on the device (slot s = row
// s % page of block s / page), so the destinations of a decode step can change between
// replays of a captured graph. Plain structs and pointers; ops/attention/kv_write.cpp checks.
#pragma once
#include <cstdint>

#include "tensor/device_fault.h"

namespace wick::kernels {

struct KvWriteArgs {
  void* cache[2] = {};            // k, v caches: (num_blocks, page, hk, d), channel stride 1
  int64_t cache_stride[2][3] = {};  // block, row, head strides of each cache (elements)
  const void* src[2] = {};        // k_new, v_new: (n, hk, d), channel stride 1
  int64_t src_stride[2][2] = {};  // row, head strides
  const int64_t* slots = nullptr;  // (n) contiguous, device
  int64_t n = 0, num_blocks = 0, page = 0;
  int heads = 0, head_size = 0, elem_bytes = 2;
  FaultSink sink;  // a slot outside [0, num_blocks * page) is recorded here and not written
  bool early_next = false;  // set by kv_write(): the next kernel may launch before this one ends
};

void kv_write(const KvWriteArgs& args, void* stream);

}  // namespace wick::kernels
