// DLPack: handing tensors to and from other frameworks (PyTorch, JAX, CuPy, NumPy) without a
// copy. The struct DLManagedTensor is defined by <dlpack/dlpack.h> (Debian's libdlpack-dev);
// include it to read the fields. wick speaks DLPack 0.6 (unversioned DLManagedTensor).
#pragma once
#include "tensor/tensor.h"

extern "C" {
struct DLManagedTensor;
}

namespace wick {

// Exports t as it is: data points at t's first element (byte_offset 0), shape and strides
// (in elements) are t's, whatever its layout, device kDLCPU or kDLCUDA with t's gpu_id, and
// the dtype is DLPack's (U8 -> uint8, BF16 -> bfloat16, ...). The result keeps t's storage
// alive until the consumer calls its deleter, exactly once, as DLPack requires.
// CUDA: wick's own streams are blocking, so a consumer working on the legacy default stream
// (PyTorch's default) sees wick's queued writes first; one on another stream must wait for
// them (synchronize(t.device())) before reading.
DLManagedTensor* to_dlpack(const Tensor& t);

// A tensor viewing `managed`'s memory (no copy), with its shape, strides and byte_offset.
// On success wick owns `managed` and calls its deleter when the last tensor viewing it is
// gone; when this throws (memory wick cannot represent: docs/errors.md, D..), ownership
// stays with the caller. Accepts kDLCPU and kDLCUDAHost memory as Cpu, kDLCUDA and
// kDLCUDAManaged as Cuda (a build with CUDA), the dtypes wick has (bool as 8-bit uint is
// U8), one lane, and strides that are not negative (null strides mean row-major).
// CUDA: wick reads the memory on its current stream; the producer's writes must be finished
// or queued on the legacy default stream.
Tensor from_dlpack(DLManagedTensor* managed);

}  // namespace wick
