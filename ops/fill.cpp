// Tensor::full and Tensor::ones: every element set to one value, converted to the dtype on
// the host (static_cast from double, the same rounding as from_vec). On the CPU a host
// buffer is copied in; on a GPU one element is converted and kernels::fill writes the rest,
// so there is no host buffer of the tensor's size and no synchronous copy (ones() seeds
// every backward()).
#ifdef WICK_WITH_CUDA
#include "kernels/fill.h"
#endif
#include "ops/op_util.h"

namespace wick {

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
#ifdef WICK_WITH_CUDA
  if (device.is_cuda()) {
    Tensor t = empty(shape, dtype, device);
    unsigned char elem[8] = {};
    visit_dtype(dtype, [&](auto zero) {
      const auto v = static_cast<decltype(zero)>(value);
      std::memcpy(elem, &v, sizeof v);
    });
    set_current_device(device);
    kernels::fill(dtype_size(dtype), t.data_ptr(), elem, static_cast<int64_t>(shape.elem_count()));
    return t;
  }
#endif
  return visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> host(shape.elem_count(), static_cast<T>(value));
    return from_bytes(host.data(), shape, dtype, device);
  });
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

}  // namespace wick
