#include "tensor/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "tensor/convert.h"

namespace wick {

struct Tensor::Impl {
  std::shared_ptr<Storage> storage;
  Layout layout;
  DType dtype = DType::F32;
  uint64_t id = 0;
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;
  std::shared_ptr<Impl> grad;  // accumulated gradient (a Tensor's impl)
};

namespace {
std::atomic<uint64_t> g_next_id{1};

void require_defined(const void* impl, const char* what) {
  if (!impl) throw Error("L12", std::string(what) + ": the tensor is an empty (default-constructed) tensor");
}

// x as an element of type T: saturating for integer types (tensor/convert.h), rounding
// for float types.
template <class T>
T element_from_f64(double x) {
  if constexpr (std::is_integral_v<T>) return saturating_cast<T>(x);
  else return static_cast<T>(x);
}

// arange's values [first, last] in an integer dtype: each must be representable.
void check_arange_range(int64_t first, int64_t last, DType dtype) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      using L = std::numeric_limits<T>;
      const bool fits = first >= static_cast<int64_t>(L::min()) &&
                        (last < 0 || static_cast<uint64_t>(last) <= static_cast<uint64_t>(L::max()));
      if (!fits)
        throw Error("L25", "arange: the values " + std::to_string(first) + " to " + std::to_string(last) +
                               " do not fit in " + dtype_name(dtype) + " (its range is " +
                               std::to_string(static_cast<int64_t>(L::min())) + " to " +
                               std::to_string(static_cast<uint64_t>(L::max())) + ")");
    }
  });
}

// A new contiguous tensor whose elements f(out, n) writes (out: n elements of dtype's host
// type): in place on the CPU, into one host buffer of the tensor's size (checked first) that
// is then copied to a GPU.
template <class F>
Tensor generate(const Shape& shape, DType dtype, Device device, F&& f) {
  Tensor t = Tensor::empty(shape, dtype, device);
  const size_t n = shape.elem_count();
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> host;
    T* out = static_cast<T*>(t.data_ptr());
    if (!device.is_cpu()) {
      check_host_buffer("tensor", n, sizeof(T));
      host.resize(n);
      out = host.data();
    }
    f(out, n);
    if (!device.is_cpu()) t.storage()->copy_from_host(0, host.data(), n * sizeof(T));
  });
  return t;
}
}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype) {
  if (!storage) throw Error("L10", "tensor: null storage");
  // The bytes the layout reaches: through its last element, or (empty) up to its offset, so
  // that data_ptr() points into or one past the storage. SIZE_MAX (above any storage) when
  // the product does not fit.
  size_t need = SIZE_MAX;
  const size_t reach = layout.elem_count() == 0 ? layout.start_offset() : layout.max_offset_exclusive();
  mul_size(reach, dtype_size(dtype), &need);
  if (need > storage->bytes())
    throw Error("L11", "tensor: layout " + to_string(layout.shape()) + " stride " + to_string(layout.stride()) +
                " offset " + std::to_string(layout.start_offset()) + " needs " + std::to_string(need) +
                " bytes but the storage holds " + std::to_string(storage->bytes()));
  impl_ = std::make_shared<Impl>();
  impl_->storage = std::move(storage);
  impl_->layout = std::move(layout);
  impl_->dtype = dtype;
  impl_->id = g_next_id++;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return Tensor(Storage::allocate(byte_count("tensor", shape.elem_count(), dtype_size(dtype)), device),
                Layout::contiguous(shape), dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.storage()->fill_zero();
  return t;
}

Tensor Tensor::arange(int64_t start, int64_t end, DType dtype, Device device) {
  if (end < start)
    throw Error("L14", "arange: end " + std::to_string(end) + " is before start " + std::to_string(start));
  // end - start in unsigned arithmetic: the signed difference overflows for wide ranges.
  const uint64_t n = static_cast<uint64_t>(end) - static_cast<uint64_t>(start);
  const Shape shape{static_cast<size_t>(n)};  // L23 past 2^63 - 1 elements
  if (n > 0) check_arange_range(start, end - 1, dtype);
  return generate(shape, dtype, device, [&](auto* out, size_t count) {
    using T = std::remove_pointer_t<decltype(out)>;
    for (size_t i = 0; i < count; ++i) {
      const int64_t value = start + static_cast<int64_t>(i);  // < end: no overflow
      if constexpr (std::is_integral_v<T>) out[i] = static_cast<T>(value);  // in range (checked)
      else out[i] = static_cast<T>(static_cast<double>(value));
    }
  });
}

// Box-Muller over a 64-bit Mersenne twister: the same sequence on every platform
// (std::normal_distribution's algorithm is implementation-defined).
Tensor Tensor::randn(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  return generate(shape, dtype, device, [&](auto* out, size_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    std::mt19937_64 gen(seed);
    constexpr double kTwoPi = 6.283185307179586;
    constexpr double kInv2to53 = 1.0 / 9007199254740992.0;
    auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * kInv2to53; };  // (0, 1)
    for (size_t i = 0; i < n; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform())), a = kTwoPi * uniform();
      out[i] = element_from_f64<T>(r * std::cos(a));
      if (i + 1 < n) out[i + 1] = element_from_f64<T>(r * std::sin(a));
    }
  });
}

Tensor Tensor::from_bytes(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.storage()->copy_from_host(0, data, t.storage()->bytes());
  return t;
}

void Tensor::copy_logical_to_host(void* dst) const {
  const Layout& l = layout();
  const size_t es = dtype_size(dtype());
  if (l.elem_count() == 0) return;
  // Bring the byte range the layout touches to the host once, then gather.
  size_t lo = l.start_offset(), hi = l.max_offset_exclusive();
  std::vector<unsigned char> host;
  const unsigned char* base;
  if (device().is_cpu()) {
    base = static_cast<const unsigned char*>(storage()->data()) + lo * es;
  } else {
    check_host_buffer("to_host", hi - lo, es);
    host.resize((hi - lo) * es);
    storage()->copy_to_host(lo * es, host.data(), host.size());
    base = host.data();
  }
  auto* out = static_cast<unsigned char*>(dst);
  if (l.is_contiguous()) {
    std::memcpy(out, base, l.elem_count() * es);
    return;
  }
  size_t i = 0;
  for (StridedIndex it(l); !it.done(); it.next(), ++i)
    std::memcpy(out + i * es, base + (it.offset() - lo) * es, es);
}

std::vector<double> Tensor::to_f64_vec() const {
  check_host_buffer("to_f64_vec", elem_count(), sizeof(double) + dtype_size(dtype()));
  std::vector<double> out(elem_count());
  visit_dtype(dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v(elem_count());
    copy_logical_to_host(v.data());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<double>(v[i]);
  });
  return out;
}

double Tensor::item() const {
  if (elem_count() != 1)
    throw Error("L15", "item: tensor of shape " + to_string(shape()) + " does not hold exactly one element");
  return to_f64_vec()[0];
}

const Layout& Tensor::layout() const {
  require_defined(impl_.get(), "layout");
  return impl_->layout;
}
size_t Tensor::dim(int64_t i) const { return dims()[resolve_dim("dim", i, shape(), rank(), "L16")]; }
DType Tensor::dtype() const {
  require_defined(impl_.get(), "dtype");
  return impl_->dtype;
}
Device Tensor::device() const { return storage()->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const {
  require_defined(impl_.get(), "storage");
  return impl_->storage;
}
void* Tensor::data_ptr() const {
  return static_cast<char*>(storage()->data()) + layout().start_offset() * dtype_size(dtype());
}
uint64_t Tensor::id() const {
  require_defined(impl_.get(), "id");
  return impl_->id;
}

bool Tensor::requires_grad() const { return impl_ && (impl_->requires_grad || impl_->grad_fn); }
Tensor& Tensor::requires_grad(bool on) {
  require_defined(impl_.get(), "requires_grad");
  if (on && !is_float(dtype()))
    throw Error("L17", std::string("requires_grad: only float tensors can require grad, got ") + dtype_name(dtype()));
  impl_->requires_grad = on;
  return *this;
}
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return impl_ ? impl_->grad_fn : none;
}
void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> node) {
  require_defined(impl_.get(), "set_grad_fn");
  impl_->grad_fn = std::move(node);
}
Tensor Tensor::grad() const {
  require_defined(impl_.get(), "grad");
  Tensor g;
  g.impl_ = impl_->grad;
  return g;
}
void Tensor::set_grad(const Tensor& g) const {
  require_defined(impl_.get(), "set_grad");
  impl_->grad = g.impl_;
}
Tensor Tensor::detach() const {
  require_defined(impl_.get(), "detach");
  return Tensor(impl_->storage, impl_->layout, impl_->dtype);
}

Tensor zeros_like(const Tensor& t) { return zeros_like(t, t.dtype()); }
Tensor zeros_like(const Tensor& t, DType dtype) { return Tensor::zeros(t.shape(), dtype, t.device()); }
Tensor ones_like(const Tensor& t) { return ones_like(t, t.dtype()); }
Tensor ones_like(const Tensor& t, DType dtype) { return Tensor::ones(t.shape(), dtype, t.device()); }
Tensor full_like(const Tensor& t, double value) { return full_like(t, value, t.dtype()); }
Tensor full_like(const Tensor& t, double value, DType dtype) {
  return Tensor::full(t.shape(), value, dtype, t.device());
}

}  // namespace wick
