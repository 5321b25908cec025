#include "tensor/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

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

// Converts host doubles into `dtype` elements at dst.
void store_from_f64(const std::vector<double>& src, DType dtype, void* dst) {
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(dst);
    for (size_t i = 0; i < src.size(); ++i) out[i] = static_cast<T>(src[i]);
  });
}

Tensor from_f64(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  store_from_f64(values, dtype, bytes.data());
  return Tensor::from_bytes(bytes.data(), shape, dtype, device);
}
}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype) {
  if (!storage) throw Error("L10", "tensor: null storage");
  size_t need = 0;
  if (__builtin_mul_overflow(layout.max_offset_exclusive(), dtype_size(dtype), &need)) need = SIZE_MAX;
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
  return Tensor(Storage::allocate(shape.elem_count() * dtype_size(dtype), device),
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
  std::vector<double> v(static_cast<size_t>(end - start));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(start + static_cast<int64_t>(i));
  return from_f64(v, Shape{v.size()}, dtype, device);
}

// Box-Muller over a 64-bit Mersenne twister: the same sequence on every platform
// (std::normal_distribution's algorithm is implementation-defined).
Tensor Tensor::randn(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  std::mt19937_64 gen(seed);
  constexpr double kTwoPi = 6.283185307179586;
  constexpr double kInv2to53 = 1.0 / 9007199254740992.0;
  auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * kInv2to53; };  // (0, 1)
  std::vector<double> v(shape.elem_count());
  for (size_t i = 0; i < v.size(); i += 2) {
    double r = std::sqrt(-2.0 * std::log(uniform())), a = kTwoPi * uniform();
    v[i] = r * std::cos(a);
    if (i + 1 < v.size()) v[i + 1] = r * std::sin(a);
  }
  return from_f64(v, shape, dtype, device);
}

Tensor Tensor::from_bytes(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.storage()->copy_from_host(0, data, shape.elem_count() * dtype_size(dtype));
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
