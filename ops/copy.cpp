// Copies between layouts, dtypes and devices: Tensor::contiguous/copy/to_dtype/to_device,
// cast and copy_into. Backward: a copy passes grad through; a cast casts it back; a device
// move moves it back.
#include "kernels/copy.h"
#include "ops/op_util.h"
#include "tensor/convert.h"

namespace wick {

using namespace ops_detail;

namespace {

// dst[dst.layout] = src[src.layout] with U the unsigned integer of one element's size.
template <class U>
void cpu_copy(const Tensor& dst, const Tensor& src) {
  U* d = cpu_base_mut<U>(dst);
  const U* s = cpu_base<U>(src);
  if (dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(d + dst.layout().start_offset(), s + src.layout().start_offset(), src.elem_count() * sizeof(U));
    return;
  }
  for_each_offsets<2>({&dst.layout(), &src.layout()},
                      [&](size_t, const std::array<size_t, 2>& o) { d[o[0]] = s[o[1]]; });
}

// One element of a cast: integer -> integer wraps, float -> integer saturates (NaN -> 0),
// both as tensor/convert.h defines them; the CUDA cast kernel does the same.
template <class D, class S>
D convert(S s) {
  if constexpr (std::is_integral_v<D> && std::is_integral_v<S>) return static_cast<D>(s);
  else if constexpr (std::is_integral_v<S>) return static_cast<D>(static_cast<double>(s));
  else if constexpr (std::is_integral_v<D>) return saturating_cast<D>(static_cast<double>(s));
  else if constexpr (std::is_same_v<S, double> || std::is_same_v<D, double>)
    return static_cast<D>(static_cast<double>(s));
  else return static_cast<D>(static_cast<float>(s));  // float, f16, bf16 among themselves
}

void cpu_cast(const Tensor& src, const Tensor& out) {
  visit_dtype(src.dtype(), [&](auto s0) {
    using S = decltype(s0);
    visit_dtype(out.dtype(), [&](auto d0) {
      using D = decltype(d0);
      const S* s = cpu_base<S>(src);
      D* d = cpu_base_mut<D>(out);
      parallel_for_each_offset(src.layout(), [&](size_t i, size_t off) { d[i] = convert<D>(s[off]); });
    });
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  check_pair("copy_into", dst, src, "dst", "src");
  if (!(dst.shape() == src.shape())) throw_shape_mismatch("copy_into", dst.shape(), src.shape());
  if (src.elem_count() == 0) return;  // nothing to write (an empty shape's strides may be 0)
  // A stride-0 dim of size > 1 (a broadcast view) maps several elements to one storage
  // element: the writes would collide and all but one value would be lost.
  for (size_t d = 0; d < dst.rank(); ++d)
    if (dst.dims()[d] > 1 && dst.stride()[d] == 0)
      throw Error("O22", "copy_into: dst (shape " + to_string(dst.shape()) + ", stride " + to_string(dst.stride()) +
                  ") is a broadcast view: dim " + std::to_string(d) +
                  " has stride 0, so several elements would be written to one place");
  const size_t es = dtype_size(src.dtype());
  dst.storage()->bump_version();  // dst's storage changes: backward rules that saved it must know (G29)
  if (dst.same_storage(src)) {
    if (dst.layout() == src.layout()) return;  // a copy onto itself changes nothing
    // Ranges of one storage that intersect: reading src while dst is written would see
    // values already overwritten (and memcpy on overlapping bytes is undefined). Copy src
    // aside first, then from there.
    const Layout &ld = dst.layout(), &ls = src.layout();
    if (ld.start_offset() < ls.max_offset_exclusive() && ls.start_offset() < ld.max_offset_exclusive()) {
      Tensor aside = Tensor::empty(src.shape(), src.dtype(), src.device());
      copy_into(aside, src.detach());
      copy_into(dst, aside);
      return;
    }
  }
  if (src.device().is_cpu()) {
    // Every dtype has 1, 2, 4 or 8 bytes, so the visit always finds its size.
    kernels::visit_elem_bytes(es, [&](auto zero) { cpu_copy<decltype(zero)>(dst, src); });
    return;
  }
#ifdef WICK_WITH_CUDA
  set_current_device(src.device());
  kernels::copy_strided(es, src.data_ptr(), kview("copy", src.layout()), dst.data_ptr(),
                        kview("copy", dst.layout()), static_cast<int64_t>(src.elem_count()));
#else
  no_cuda("copy");
#endif
}

Tensor Tensor::copy() const {
  check_defined("copy", *this, "the tensor");
  Tensor out = Tensor::empty(shape(), dtype(), device());
  copy_into(out, detach());
  return autograd::record(out, "copy", {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const {
  check_defined("contiguous", *this, "the tensor");
  return is_contiguous() ? *this : copy();
}

Tensor cast(const Tensor& x, DType dtype) {
  check_defined("to_dtype", x);
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  if (x.elem_count() > 0) {
    if (x.device().is_cpu()) {
      cpu_cast(x, out);
    } else {
#ifdef WICK_WITH_CUDA
      set_current_device(x.device());
      kernels::cast(ktype(x.dtype()), x.data_ptr(), kview("to_dtype", x.layout()), ktype(dtype),
                    out.data_ptr(), static_cast<int64_t>(x.elem_count()));
#else
      no_cuda("to_dtype");
#endif
    }
  }
  const DType from = x.dtype();
  return autograd::record(out, "to_dtype", {x}, [from](const Tensor& g) {
    return std::vector<Tensor>{cast(g, from)};
  });
}

Tensor Tensor::to_dtype(DType dtype) const { return cast(*this, dtype); }

Tensor Tensor::to_device(Device device) const {
  check_defined("to_device", *this, "the tensor");
  if (this->device() == device) return *this;
  Tensor src = detach().contiguous();
  Tensor out = Tensor::empty(shape(), dtype(), device);
  const size_t es = dtype_size(dtype());
  Storage::copy(*src.storage(), src.layout().start_offset() * es, *out.storage(), 0, elem_count() * es);
  const Device from = this->device();
  return autograd::record(out, "to_device", {*this}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to_device(from)};
  });
}

}  // namespace wick
