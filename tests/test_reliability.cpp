// Reliability: sizes that would wrap, allocations that cannot succeed, integer arithmetic and
// casts with defined results, overlapping copies, the autograd guards (no gradient through
// an integer cast; a saved tensor modified after the forward), the paged cache's block
// ownership, offsets past 2^31 and 2^32, and the CPU backward's memory. Every case asserts
// the exact outcome (a value, or the catalogue code of the error raised).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "devices.h"
#include "errors_catalog.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/reference.h"
#include "ops/ops.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;

namespace {

// The catalogue code of the wick::Error f raises; "<no error>" when it returns, and
// "<other exception>" when it throws anything but a wick::Error (std::bad_alloc, ...).
std::string code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code().empty() ? std::string("<uncoded: ") + e.what() + ">" : e.code();
  } catch (...) {
    return "<other exception>";
  }
  return "<no error>";
}

template <class T>
Tensor vec(std::vector<T> v, Device dev) {
  const size_t n = v.size();
  return Tensor::from_vec(std::move(v), Shape{n}, dev);
}

constexpr size_t k2to32 = size_t{1} << 32;

}  // namespace

// ---- sizes ----------------------------------------------------------------------------------

TEST_CASE("sizes: a shape whose elements, strides or bytes would wrap is refused where it is made") {
  // Each used to wrap silently: [2^32, 2^32] counted 0 elements and got 0 bytes of storage.
  CHECK(code_of([] { Shape s{k2to32, k2to32}; }) == "L23");
  CHECK(code_of([] { Shape s{SIZE_MAX}; }) == "L23");
  CHECK(code_of([] { Shape s{0, size_t{1} << 40, size_t{1} << 40}; }) == "L23");  // strides would wrap
  CHECK(code_of([] { Shape s{size_t{1} << 62, 2}; }) == "L23");
  CHECK(code_of([] { Shape s{(size_t{1} << 62) - 1, 2}; }) == "<no error>");  // 2^63 - 2 fits
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    CHECK(code_of([&] { Tensor::zeros({SIZE_MAX}, DType::F32, dev); }) == "L23");
    CHECK(code_of([&] { Tensor::ones({k2to32, k2to32}, DType::F32, dev); }) == "L23");
    Tensor x = Tensor::ones({1, 3}, DType::F32, dev);
    CHECK(code_of([&] { x.broadcast_as({k2to32, k2to32, 3}); }) == "L23");
    CHECK(code_of([&] { x.reshape({k2to32, k2to32}); }) == "L23");
    // bytes: 2^61 F64 elements fit a shape but not 2^63 bytes
    CHECK(code_of([&] { Tensor::empty({size_t{1} << 61}, DType::F64, dev); }) == "L24");
    // a broadcast view is legal (no storage); reading it out is checked
    Tensor wide = x.broadcast_as({size_t{1} << 40, 3});
    CHECK(wide.elem_count() == (size_t{3} << 40));
    CHECK(code_of([&] { wide.to_vec<float>(); }) == "S03");
    CHECK(code_of([&] { wide.to_f64_vec(); }) == "S03");
  }
}

TEST_CASE("sizes: views of empty layouts with huge strides form no overflowing offsets or strides") {
  // A layout with a zero dim addresses nothing, so its strides are unbounded; views of it must
  // not multiply them (signed overflow) nor move its offset out of the storage.
  auto storage = Storage::allocate(64, Device::cpu());
  const int64_t huge = std::numeric_limits<int64_t>::max();
  Tensor t(storage, Layout(Shape{0, 3}, {huge, huge}, 2), DType::F32);
  CHECK(t.reshape({3, 0}).shape() == Shape{3, 0});
  CHECK(t.unsqueeze(1).shape() == Shape{0, 1, 3});
  CHECK(t.narrow(1, 2, 1).layout().start_offset() == 2);
  CHECK(t.narrow(1, 3, 0).shape() == Shape{0, 0});
  // an empty layout's offset still lies within the storage (at most one past its end)
  CHECK(code_of([&] { Tensor(storage, Layout(Shape{0}, {1}, 16), DType::F32); }) == "<no error>");
  CHECK(code_of([&] { Tensor(storage, Layout(Shape{0}, {1}, size_t{1} << 60), DType::F32); }) ==
        "L11");
}

TEST_CASE("sizes: allocations that cannot succeed are wick::Error naming the size, never std::bad_alloc") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    const std::string oom = dev.is_cpu() ? "S03" : "S05";
    CHECK(code_of([&] { Tensor::ones({size_t{1} << 48}, DType::F32, dev); }) == oom);
    CHECK(code_of([&] { Tensor::randn({size_t{1} << 48}, DType::F32, dev, 1); }) == oom);
    CHECK(code_of([&] { Tensor::full({size_t{1} << 48}, 2.0, DType::F64, dev); }) == oom);
    // the whole i64 range: 2^64 - 1 values
    CHECK(code_of([&] {
            Tensor::arange(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), DType::I64, dev);
          }) == "L23");
    CHECK(code_of([&] { Tensor::arange(0, int64_t{1} << 50, DType::I64, dev); }) == oom);
  }
  // the text names the size
  const std::string text = catalog::error_of([] { Tensor::ones({size_t{1} << 48}, DType::F32, Device::cpu()); });
  CHECK(text == "out of host memory allocating 1125899906842624 bytes");
}

TEST_CASE("sizes: printing reads only the elements it shows") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    // 2^40 x 3 elements as a broadcast view of 3 values: reading them all would need 12 TB
    Tensor row = vec<float>({1.5f, -2.0f, 3.0f}, dev).unsqueeze(0);
    const std::string s = to_string(row.broadcast_as({size_t{1} << 40, 3}));
    CHECK(s.rfind("Tensor[[1099511627776, 3], F32, " + to_string(dev) + "]\n", 0) == 0);
    CHECK(s.find("...") != std::string::npos);
    CHECK(s.find("1.5000, -2.0000,  3.0000") != std::string::npos);
  }
}
