// Tensor::full and Tensor::ones: every element set to one value, converted to the dtype once
// on the host: rounded for a float dtype, saturated to an integer dtype's range with NaN -> 0
// (tensor/convert.h, as casts do). On the CPU the element is written in place; on a GPU
// kernels::fill writes it, so there is no host buffer of the tensor's size and no
// synchronous copy (ones() seeds every backward()).
#include <algorithm>
#include <type_traits>

#ifdef WICK_WITH_CUDA
#include "kernels/fill.h"
#endif
#include "ops/op_util.h"
#include "tensor/convert.h"

namespace wick {

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T elem;
    if constexpr (std::is_integral_v<T>) elem = saturating_cast<T>(value);
    else elem = static_cast<T>(value);
    if (device.is_cpu()) {
      std::fill_n(static_cast<T*>(t.data_ptr()), shape.elem_count(), elem);
      return;
    }
#ifdef WICK_WITH_CUDA
    set_current_device(device);
    kernels::fill(sizeof(T), t.data_ptr(), &elem, static_cast<int64_t>(shape.elem_count()));
#endif
  });
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

}  // namespace wick
