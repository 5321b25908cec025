// DLPack: to_dlpack describes a tensor of any layout without copying it, from_dlpack views a
// producer's memory without copying it, and each side releases the other exactly once.
#include <doctest/doctest.h>
#include <dlpack/dlpack.h>

#include "devices.h"
#include "wick.h"

using namespace wick;

namespace {

// A producer outside wick: owns a buffer and counts deleter calls.
struct Producer {
  std::vector<double> buffer;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
  int deleted = 0;

  Producer(std::vector<double> values, std::vector<int64_t> shape_, std::vector<int64_t> strides_, uint64_t byte_offset)
      : buffer(std::move(values)), shape(std::move(shape_)), strides(std::move(strides_)) {
    DLTensor& d = managed.dl_tensor;
    d.data = buffer.data();
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int>(shape.size());
    d.dtype = {kDLFloat, 64, 1};
    d.shape = shape.data();
    d.strides = strides.empty() ? nullptr : strides.data();
    d.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* m) { ++static_cast<Producer*>(m->manager_ctx)->deleted; };
  }
};

}  // namespace

TEST_CASE("dlpack: to_dlpack exports data, shape, strides, dtype and device of any layout without a copy") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor base = Tensor::arange(0, 24, DType::F32, dev).reshape({2, 3, 4});
    Tensor view = base.transpose(0, 2).narrow(1, 1, 2);  // shape [4, 2, 2], strides [1, 4, 12], offset 4
    DLManagedTensor* m = to_dlpack(view);
    const DLTensor& d = m->dl_tensor;
    CHECK(d.data == view.data_ptr());
    CHECK(d.byte_offset == 0);
    CHECK(d.ndim == 3);
    CHECK(std::vector<int64_t>(d.shape, d.shape + 3) == std::vector<int64_t>{4, 2, 2});
    CHECK(std::vector<int64_t>(d.strides, d.strides + 3) == std::vector<int64_t>{1, 4, 12});
    CHECK(d.dtype.code == kDLFloat);
    CHECK(d.dtype.bits == 32);
    CHECK(d.dtype.lanes == 1);
    CHECK(d.device.device_type == (dev.is_cpu() ? kDLCPU : kDLCUDA));
    CHECK(d.device.device_id == (dev.is_cpu() ? 0 : dev.gpu_id));
    // the export keeps the storage alive after every wick handle is gone
    std::vector<double> want = view.to_f64_vec();
    const int64_t live = Storage::live_bytes(dev.kind);
    base = Tensor();
    view = Tensor();
    CHECK(Storage::live_bytes(dev.kind) == live);
    Tensor back = from_dlpack(m);  // wick reading its own export: the same memory
    CHECK(back.data_ptr() == d.data);
    CHECK(back.stride() == std::vector<int64_t>{1, 4, 12});
    CHECK(back.to_f64_vec() == want);
    back = Tensor();  // the deleter ran: the storage is freed
    CHECK(Storage::live_bytes(dev.kind) == live - 24 * 4);
  }
  struct DtypeCase {
    DType dt;
    uint8_t code, bits;
  };
  for (DtypeCase c : {DtypeCase{DType::U8, kDLUInt, 8}, {DType::U32, kDLUInt, 32}, {DType::I16, kDLInt, 16},
                      {DType::I32, kDLInt, 32}, {DType::I64, kDLInt, 64}, {DType::BF16, kDLBfloat, 16},
                      {DType::F16, kDLFloat, 16}, {DType::F64, kDLFloat, 64}}) {
    DLManagedTensor* m = to_dlpack(Tensor::zeros({2}, c.dt, Device::cpu()));
    CHECK(m->dl_tensor.dtype.code == c.code);
    CHECK(m->dl_tensor.dtype.bits == c.bits);
    CHECK(from_dlpack(m).dtype() == c.dt);
  }
}

TEST_CASE("dlpack: from_dlpack views a producer's strided memory in place and releases it once") {
  // a (2, 3) view with strides (1, 2) starting one element in: x[i][j] = buffer[1 + i + 2 j]
  Producer p({9, 0, 1, 2, 3, 4, 5}, {2, 3}, {1, 2}, sizeof(double));
  {
    Tensor t = from_dlpack(&p.managed);
    CHECK(t.device() == Device::cpu());
    CHECK(t.dtype() == DType::F64);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.stride() == std::vector<int64_t>{1, 2});
    CHECK(t.to_f64_vec() == std::vector<double>{0, 2, 4, 1, 3, 5});
    Tensor view = t.narrow(1, 1, 2);  // views share the imported storage
    t = Tensor();
    CHECK(p.deleted == 0);
    copy_into(view, Tensor::zeros({2, 2}, DType::F64, Device::cpu()));  // writes reach the producer
    CHECK(p.buffer == std::vector<double>{9, 0, 1, 0, 0, 0, 0});
  }
  CHECK(p.deleted == 1);
  // null strides mean row-major
  Producer q({1, 2, 3, 4, 5, 6}, {3, 2}, {}, 0);
  Tensor t = from_dlpack(&q.managed);
  CHECK(t.is_contiguous());
  CHECK(t.to_f64_vec() == std::vector<double>{1, 2, 3, 4, 5, 6});
  t = Tensor();
  CHECK(q.deleted == 1);
}

TEST_CASE("dlpack: a refused import leaves the DLManagedTensor with its owner") {
  Producer p({1, 2}, {2}, {-1}, 0);
  CHECK_THROWS_AS(from_dlpack(&p.managed), Error);
  CHECK(p.deleted == 0);
}
