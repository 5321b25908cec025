// Tensor: a cheap, shared handle to (storage, layout, dtype). Copies of a Tensor share
// everything; view ops (narrow, transpose, ...) share storage and get a new Layout.
// A default-constructed Tensor is empty (defined() == false).
//
// Member functions marked [ops] are defined in ops/ (they dispatch to devices and record
// autograd nodes); those marked [autograd] in autograd/. tensor/ itself only knows storage
// and layouts.
#pragma once
#include <cstdint>
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
  static Tensor full(const Shape& shape, double value, DType dtype, Device device);  // [ops]
  // [start, end) in steps of 1, shape (end - start).
  static Tensor arange(int64_t start, int64_t end, DType dtype, Device device);
  // Standard normal samples from a seeded generator on the host (then copied to device).
  static Tensor randn(const Shape& shape, DType dtype, Device device, uint64_t seed);
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
  size_t dim(size_t i) const;
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
  Tensor narrow(size_t dim, size_t start, size_t len) const;
  Tensor transpose(size_t dim0, size_t dim1) const;
  Tensor t() const;  // transpose of the last two dims
  Tensor permute(const std::vector<size_t>& dims) const;
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else an error
  Tensor squeeze(size_t dim) const;
  Tensor unsqueeze(size_t dim) const;
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

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  void copy_logical_to_host(void* dst) const;
};

// "Tensor[[2, 3], F32, Cpu]" followed by the values, nested by dims (long dims elided).
std::string to_string(const Tensor& t);

}  // namespace wick
