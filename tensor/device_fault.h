// Faults found on the device. Checks that need the values of device tensors (cumulative
// lengths, block-table entries, gather indices) run inside kernels on the stream of the call,
// so a call never waits for the device. A kernel that finds a bad value records the call's
// first fault in the device's fault record; the fault is raised as a wick::Error at the next
// call that waits for that device (a copy to the host, synchronize(), check_device_faults())
// with exactly the text a host-side check gives.
//
// The record is plain data shared with the kernels (kernels/device_fault.cuh writes it):
// one per device, claimed by the first call that faults and kept until it is raised, so the
// error is always that of the earliest faulting call, and inside a call that of the first
// failing check in the host checks' order (the smallest `key`).
#pragma once
#include <cstdint>
#include <string>

#include "tensor/device.h"

namespace wick {

// Who formats a record into a message (the layer that launched the check).
enum class FaultKind : int32_t { None = 0, Attention = 1, Index = 2, KvSlot = 3 };

struct DeviceFault {
  int32_t lock = 0;      // taken while a kernel writes the record
  int32_t kind = 0;      // FaultKind
  uint64_t call = 0;     // the call that claimed the record (0: free)
  uint64_t key = 0;      // order of the fault inside its call (smaller = earlier check)
  int64_t values[16] = {};  // what the formatter needs (indices, lengths, sizes)
};

// The device pointers a kernel needs to record a fault for one call.
struct FaultSink {
  DeviceFault* record = nullptr;  // device memory
  int32_t* flag = nullptr;        // mapped host memory: set to 1 once a fault is recorded
  uint64_t call = 0;              // this call's id (never 0)
};

// The sink for one checked call on dev (a CUDA device): the device's record and a fresh
// call id. The record is allocated on the device's first use (once, blocking).
FaultSink fault_sink(const Device& dev);

// Formats a record of one kind into (catalogue code, exact message). The layer that launches
// checks of that kind registers its formatter before its first launch.
using FaultFormatter = void (*)(const DeviceFault& fault, std::string& code, std::string& message);
void register_fault_formatter(FaultKind kind, FaultFormatter formatter);

// Raises the recorded fault of dev, if any, as a wick::Error and clears the record. Callers
// have waited for the device already (the record is complete); cheap when there is none: one
// read of host memory.
void raise_device_fault(const Device& dev);

// Waits for every queued call on dev and raises its first recorded fault, if any: the
// explicit check after a run of asynchronous calls. No-op for the CPU.
void check_device_faults(const Device& dev);

}  // namespace wick
