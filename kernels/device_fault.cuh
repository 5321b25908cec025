// Recording a device-side fault (tensor/device_fault.h) from a kernel. Any thread may call
// record_fault; the record keeps the first faulting call's smallest key:
//   - the first call to fault claims the record (its id replaces 0); faults of other calls
//     are dropped until the host has raised and cleared it;
//   - inside the claiming call, a fault with a smaller key replaces a larger one, under a
//     spin lock taken by one thread at a time (threads of one warp must not call it
//     together: reduce to one lane first);
//   - the mapped host flag is set last, after a system-wide fence, so once the host has
//     waited for the kernel it sees a complete record.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/device_fault.h"

namespace wick::kernels {

__device__ inline void record_fault(const FaultSink& sink, FaultKind kind, uint64_t key, const int64_t* values,
                                    int n) {
  DeviceFault* rec = sink.record;
  while (atomicCAS(&rec->lock, 0, 1) != 0) {
  }
  __threadfence();
  volatile DeviceFault* v = rec;
  const bool claim = v->call == 0;
  if (claim || (v->call == sink.call && key < v->key)) {
    v->call = sink.call;
    v->kind = static_cast<int32_t>(kind);
    v->key = key;
    for (int i = 0; i < n && i < 16; ++i) v->values[i] = values[i];
  }
  __threadfence_system();
  if (claim) *static_cast<volatile int32_t*>(sink.flag) = 1;
  __threadfence();
  atomicExch(&rec->lock, 0);
}

}  // namespace wick::kernels
