// DLPack export and import. Export wraps a handle to the tensor (so its storage lives as long
// as the consumer holds the DLManagedTensor) next to the shape and stride arrays DLPack
// points at; import wraps the producer's memory in a Storage whose release calls the
// producer's deleter.
#include "io/dlpack.h"

#include <dlpack/dlpack.h>

#include <cstdio>

namespace wick {

namespace {

// DLPack 0.8 added a bool type code; producers that speak it (PyTorch 2) export bool as
// (6, 8 bits). The 0.6 header has no name for it.
constexpr uint8_t kDLBoolCode = 6;

struct Exported {
  Tensor tensor;  // keeps the storage alive
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

void delete_exported(DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

DLDataType dl_dtype(DType dt) {
  DLDataType d{};
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(8 * dtype_size(dt));
  switch (dt) {
    case DType::U8: case DType::U32: d.code = kDLUInt; break;
    case DType::I16: case DType::I32: case DType::I64: d.code = kDLInt; break;
    case DType::BF16: d.code = kDLBfloat; break;
    case DType::F16: case DType::F32: case DType::F64: d.code = kDLFloat; break;
  }
  return d;
}

bool wick_dtype(const DLDataType& d, DType& out) {
  if (d.lanes != 1) return false;
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16, DType::F32,
                   DType::F64}) {
    const DLDataType w = dl_dtype(dt);
    if (w.code == d.code && w.bits == d.bits) {
      out = dt;
      return true;
    }
  }
  if (d.code == kDLBoolCode && d.bits == 8) {
    out = DType::U8;
    return true;
  }
  return false;
}

std::string list_text(const int64_t* v, int n) {
  if (!v) return "null";
  return to_string(std::vector<int64_t>(v, v + (n > 0 ? n : 0)));
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
  if (!t.defined()) throw Error("L12", "to_dlpack: the tensor is an empty (default-constructed) tensor");
  auto* e = new Exported;
  e->tensor = t.detach();
  e->shape.assign(t.dims().begin(), t.dims().end());
  e->strides = t.stride();
  DLTensor& d = e->managed.dl_tensor;
  d.data = t.data_ptr();
  d.device.device_type = t.device().is_cpu() ? kDLCPU : kDLCUDA;
  d.device.device_id = t.device().is_cpu() ? 0 : t.device().gpu_id;
  d.ndim = static_cast<int>(t.rank());
  d.dtype = dl_dtype(t.dtype());
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_exported;
  return &e->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  if (!managed) throw Error("D01", "from_dlpack: the DLManagedTensor pointer is null");
  const DLTensor& d = managed->dl_tensor;
  Device device;
  switch (d.device.device_type) {
    case kDLCPU: case kDLCUDAHost: device = Device::cpu(); break;
    case kDLCUDA: case kDLCUDAManaged:
#ifdef WICK_WITH_CUDA
      device = Device::cuda(d.device.device_id);
      break;
#else
      throw Error("D03", "from_dlpack: the tensor lives on a CUDA device and this build of wick has no CUDA support");
#endif
    default:
      throw Error("D02", "from_dlpack: device type " + std::to_string(static_cast<int>(d.device.device_type)) +
                             " is not one wick can use (kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged)");
  }
  DType dtype;
  if (!wick_dtype(d.dtype, dtype))
    throw Error("D04", "from_dlpack: dtype code " + std::to_string(d.dtype.code) + ", " + std::to_string(d.dtype.bits) +
                           " bits, " + std::to_string(d.dtype.lanes) + " lanes has no wick dtype");
  bool shape_ok = d.ndim >= 0 && (d.ndim == 0 || d.shape);
  for (int i = 0; shape_ok && i < d.ndim; ++i) shape_ok = d.shape[i] >= 0;
  if (!shape_ok)
    throw Error("D05", "from_dlpack: ndim " + std::to_string(d.ndim) + " with shape " + list_text(d.shape, d.ndim) +
                           " is not a valid shape");
  const Shape shape(std::vector<size_t>(d.shape, d.shape + d.ndim));
  std::vector<int64_t> strides = d.strides ? std::vector<int64_t>(d.strides, d.strides + d.ndim) : shape.stride_contiguous();
  for (int64_t s : strides)
    if (s < 0)
      throw Error("D06", "from_dlpack: strides " + to_string(strides) + " (shape " + to_string(shape) +
                             ") have a negative entry; wick's strides only move forward");
  const size_t es = dtype_size(dtype);
  if (d.byte_offset % es != 0)
    throw Error("D07", "from_dlpack: byte_offset " + std::to_string(d.byte_offset) +
                           " is not a multiple of the element size " + std::to_string(es));
  if (!d.data && shape.elem_count() > 0)
    throw Error("D08", "from_dlpack: data is null for a tensor of shape " + to_string(shape));
  Layout layout(shape, strides, static_cast<size_t>(d.byte_offset / es));
  size_t bytes = 0;
  if (__builtin_mul_overflow(layout.max_offset_exclusive(), es, &bytes))
    throw Error("D05", "from_dlpack: ndim " + std::to_string(d.ndim) + " with shape " + list_text(d.shape, d.ndim) +
                           " is not a valid shape");
  auto storage = Storage::wrap(d.data, bytes, device, [managed] {
    if (managed->deleter) managed->deleter(managed);
  });
  return Tensor(std::move(storage), std::move(layout), dtype);
}

}  // namespace wick
