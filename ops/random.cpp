// Random tensors (Tensor::rand, Tensor::randint) and dropout. Every value is a pure function
// of (seed, element index), evaluated by kernels/random_ops.h on the CPU here and in
// kernels/random.cu on CUDA: the same tensor on every device for the same seed.
// Backward rule:
//   dropout: g * mask / (1 - p), the mask recomputed from the seed (nothing is stored)
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/random.h"
#include "kernels/random_ops.h"
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

using Grads = std::vector<Tensor>;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// True when every integer in [low, high) converts to dtype exactly.
bool range_fits(DType dtype, int64_t low, int64_t high) {
  bool fits = false;
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      fits = low >= static_cast<int64_t>(std::numeric_limits<T>::lowest()) &&
             (std::is_same_v<T, int64_t> || high - 1 <= static_cast<int64_t>(std::numeric_limits<T>::max()));
    } else {
      // Integers up to 2^bits are exact in a float type with `bits` bits of precision.
      const int bits = kernels::uniform_bits(ktype(dtype));
      const double limit = std::ldexp(1.0, bits);
      fits = std::fabs(static_cast<double>(low)) <= limit && std::fabs(static_cast<double>(high - 1)) <= limit;
    }
  });
  return fits;
}

// out = x * mask * scale for the mask drawn from (seed, threshold); no autograd node.
Tensor dropout_fwd(const Tensor& x, uint64_t seed, uint64_t threshold, double scale) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.elem_count() == 0) return out;
  if (x.device().is_cpu()) {
    visit_float("dropout", x, [&](auto zero) {
      using T = decltype(zero);
      using C = compute_t<T>;
      const T* in = cpu_base<T>(x);
      T* o = cpu_base_mut<T>(out);
      const C s = static_cast<C>(scale);
      for_each_offset(x.layout(), [&](size_t i, size_t off) {
        o[i] = static_cast<T>(kernels::dropout_keep(seed, i, threshold) ? static_cast<C>(in[off]) * s : C(0));
      });
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(x.device());
  kernels::dropout(ktype(x.dtype()), x.data_ptr(), kview("dropout", x.layout()), out.data_ptr(),
                   static_cast<int64_t>(x.elem_count()), seed, threshold, scale);
#else
  no_cuda("dropout");
#endif
  return out;
}

}  // namespace

Tensor Tensor::rand(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  if (!is_float(dtype)) unsupported("rand", dtype, device);
  Tensor out = Tensor::empty(shape, dtype, device);
  if (out.elem_count() == 0) return out;
  const int bits = kernels::uniform_bits(ktype(dtype));
  if (device.is_cpu()) {
    visit_float("rand", out, [&](auto zero) {
      using T = decltype(zero);
      T* o = cpu_base_mut<T>(out);
      for (size_t i = 0; i < out.elem_count(); ++i)
        o[i] = static_cast<T>(kernels::uniform_at<compute_t<T>>(seed, i, bits));
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(device);
  kernels::fill_uniform(ktype(dtype), out.data_ptr(), static_cast<int64_t>(out.elem_count()), seed);
#else
  no_cuda("rand");
#endif
  return out;
}

Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device, uint64_t seed) {
  if (low >= high)
    throw Error("O24", "randint: low " + std::to_string(low) + " must be below high " + std::to_string(high));
  if (!range_fits(dtype, low, high))
    throw Error("O25", "randint: [" + std::to_string(low) + ", " + std::to_string(high) + ") does not fit in " +
                           dtype_name(dtype) + " (every value must convert exactly)");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  Tensor out = Tensor::empty(shape, dtype, device);
  if (out.elem_count() == 0) return out;
  if (device.is_cpu()) {
    visit_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* o = cpu_base_mut<T>(out);
      for (size_t i = 0; i < out.elem_count(); ++i)
        o[i] = static_cast<T>(static_cast<compute_t<T>>(kernels::randint_at(seed, i, low, range)));
    });
    return out;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(device);
  kernels::fill_randint(ktype(dtype), out.data_ptr(), static_cast<int64_t>(out.elem_count()), seed, low, range);
#else
  no_cuda("randint");
#endif
  return out;
}

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  check_defined("dropout", x);
  require_float("dropout", x);
  if (!(p >= 0 && p <= 1)) throw Error("O26", "dropout: p must be in [0, 1], got " + num(p));
  constexpr double kTwo32 = 4294967296.0;
  const uint64_t threshold = static_cast<uint64_t>(std::llround(p * kTwo32));
  const double scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
  Tensor out = dropout_fwd(x, seed, threshold, scale);
  if (!autograd::should_record(x)) return out;
  return autograd::record(out, "dropout", {x}, [seed, threshold, scale](const Tensor& g) {
    return Grads{dropout_fwd(g, seed, threshold, scale)};
  });
}

}  // namespace wick
