// Tensor: a cheap, shared handle to (storage, layout, dtype). Copies of a Tensor share
// everything; view ops (narrow, transpose, ...) share storage and get a new Layout.
// A default-constructed Tensor is empty (defined() == false).
//
// Sizes: a shape's element count, strides and offsets fit in int64 (Shape, L23) and so does
// its byte count (L24); an allocation the device cannot meet is a wick::Error naming the
// size (S03 host, S05 GPU), never std::bad_alloc.
//
// Member functions marked [ops] are defined in ops/ (they dispatch to devices and record
// autograd nodes); those marked [autograd] in autograd/. tensor/ itself only knows storage
// and layouts.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/layout.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace wick {

namespace autograd {
struct Node;
}

class Tensor {
 public:
  Tensor() = default;
  // A tensor viewing `storage` through `layout`. Throws when the layout reaches past the storage.
  Tensor(std::shared_ptr<Storage> storage, Layout layout, DType dtype);

  // --- creation (same values on every device for the same arguments) ---
  static Tensor empty(const Shape& shape, DType dtype, Device device);  // uninitialised
  static Tensor zeros(const Shape& shape, DType dtype, Device device);
  static Tensor ones(const Shape& shape, DType dtype, Device device);                 // [ops]
  // value in dtype: rounded for a float dtype, saturated to an integer dtype's range (NaN -> 0).
  static Tensor full(const Shape& shape, double value, DType dtype, Device device);  // [ops]
  // [start, end) in steps of 1, shape (end - start). For an integer dtype every value must be
  // representable (else L25); a float dtype rounds them.
  static Tensor arange(int64_t start, int64_t end, DType dtype, Device device);
  // Standard normal samples from a seeded generator on the host (then copied to device).
  static Tensor randn(const Shape& shape, DType dtype, Device device, uint64_t seed);
  // [ops] Uniform samples in [0, 1), float dtypes. Element i is a function of (seed, i) only
  // (a counter-based generator, kernels/random_ops.h), computed where the tensor lives: the
  // same values on every device. Each value has the dtype's precision (53, 24, 11 or 8 bits),
  // so rounding never produces 1.
  static Tensor rand(const Shape& shape, DType dtype, Device device, uint64_t seed);
  // [ops] Integers uniform in [low, high), any dtype that holds every value of the range
  // exactly; same values on every device for the same seed.
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device,
                        uint64_t seed);
  // data: host memory holding shape.elem_count() elements of dtype in row-major order; copied.
  static Tensor from_bytes(const void* data, const Shape& shape, DType dtype, Device device);
  template <class T>
  static Tensor from_vec(const std::vector<T>& values, const Shape& shape, Device device) {
    if (values.size() != shape.elem_count())
      throw Error("L13", "from_vec: " + std::to_string(values.size()) + " values for shape " +
                  to_string(shape) + " (" + std::to_string(shape.elem_count()) + " elements)");
    return from_bytes(values.data(), shape, dtype_of<T>, device);
  }
  // Elements in logical (row-major) order, whatever the layout and device. T must match dtype().
  template <class T>
  std::vector<T> to_vec() const {
    if (dtype() != dtype_of<T>) throw_dtype_error(dtype_of<T>, dtype());
    check_host_buffer("to_vec", elem_count(), sizeof(T));  // S03 instead of std::bad_alloc
    std::vector<T> out(elem_count());
    copy_logical_to_host(out.data());
    return out;
  }
  // Elements converted to double, in logical order (any dtype); handy in tests and printing.
  std::vector<double> to_f64_vec() const;
  // The single element of a one-element tensor, as double.
  double item() const;

  // --- metadata ---
  bool defined() const { return impl_ != nullptr; }
  const Layout& layout() const;
  const Shape& shape() const { return layout().shape(); }
  const std::vector<size_t>& dims() const { return layout().dims(); }
  size_t dim(int64_t i) const;  // size of dim i; negative i counts from the end
  const std::vector<int64_t>& stride() const { return layout().stride(); }
  size_t rank() const { return layout().rank(); }
  size_t elem_count() const { return layout().elem_count(); }
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const { return layout().is_contiguous(); }
  const std::shared_ptr<Storage>& storage() const;
  // Base pointer advanced by start_offset, as the kernels take it. Untyped; may be device memory.
  void* data_ptr() const;
  // A process-unique id, stable for this handle's lifetime; views get their own ids.
  uint64_t id() const;
  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }

  // --- views and copies [ops] ---
  // Every dim argument may be negative, counting from the end (-1 is the last dim).
  Tensor narrow(int64_t dim, size_t start, size_t len) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of the last two dims
  Tensor permute(const DimList& dims) const;
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else an error
  // reshape({-1}), reshape({n, -1}): at most one entry is -1 and takes the size that keeps
  // the element count; the others are sizes.
  Tensor reshape(std::initializer_list<Dim> dims) const;
  Tensor reshape(const std::vector<int64_t>& dims) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;  // dim in [-rank - 1, rank]: -1 appends a last dim
  // The slice at `index` of dim, that dim removed (a view): x.select(0, 2) is x[2].
  // A negative index counts from the end.
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // dims [start_dim, end_dim] merged into one (a view when strides allow, else a copy).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor broadcast_as(const Shape& shape) const;
  Tensor contiguous() const;  // itself when already contiguous, else a compact copy
  Tensor copy() const;        // always a fresh contiguous copy
  Tensor to_dtype(DType dtype) const;
  Tensor to_device(Device device) const;

  // --- autograd ---
  bool requires_grad() const;
  // Marks this tensor as a leaf whose gradient backward() accumulates. Returns *this.
  Tensor& requires_grad(bool on);
  // The node that produced this tensor, or null for leaves and untracked tensors.
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  void set_grad_fn(std::shared_ptr<autograd::Node> node);
  // The gradient accumulated by backward() (undefined before any).
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  // Same storage and layout, no graph history.
  Tensor detach() const;
  void backward() const;                    // [autograd] scalar loss, seed 1
  void backward(const Tensor& seed) const;  // [autograd] explicit seed gradient

  // --- the common ops as methods [ops] (ops/ops.h documents each) ---
  // x.sum() and x.mean() reduce every element to a rank-0 tensor; with dims they are
  // sum(x, dims, keepdim) and mean(x, dims, keepdim).
  Tensor sum() const;
  Tensor sum(const DimList& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const DimList& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(const DimList& dims, bool keepdim = false) const;
  Tensor min() const;
  Tensor min(const DimList& dims, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor matmul(const Tensor& rhs) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor pow(double exponent) const;
  Tensor clamp(double lo, double hi) const;
  Tensor softmax(int64_t dim = -1) const;
  Tensor log_softmax(int64_t dim = -1) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  void copy_logical_to_host(void* dst) const;
};

// New tensors shaped like t, on t's device, with t's dtype or the one given.
Tensor zeros_like(const Tensor& t);
Tensor zeros_like(const Tensor& t, DType dtype);
Tensor ones_like(const Tensor& t);
Tensor ones_like(const Tensor& t, DType dtype);
Tensor full_like(const Tensor& t, double value);
Tensor full_like(const Tensor& t, double value, DType dtype);

// A header line "Tensor[[2, 3], F32, Cpu]", then the values nested by dims, one row of the
// last dim per line, aligned in one column width, as PyTorch prints them: floats with four
// decimals (scientific when the magnitudes call for it), integral floats as "3.", integers
// as they are. A tensor of more than 1000 elements shows the first and last 3 entries of
// each dim, "..." between. tensor/print.cpp.
std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace wick
