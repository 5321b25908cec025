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
#include "tensor/graph.h"
#include "tensor/storage.h"
#include "tensor/stream.h"

#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

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
    // positions are made on the host whatever the device: 2^50 of them cannot be
    CHECK(code_of([&] { varlen_positions(Tensor::from_vec(std::vector<int64_t>{0, int64_t{1} << 50}, Shape{2}, dev)); }) ==
          "S03");
  }
  // the text names the size
  const std::string text = catalog::error_of([] { Tensor::ones({size_t{1} << 48}, DType::F32, Device::cpu()); });
  CHECK(text == "out of host memory allocating 1125899906842624 bytes");
}

TEST_CASE("memory (CUDA): freed blocks are reused on wick's own stream only, and handed back on request") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  Storage::release_cached(dev);
  REQUIRE(Storage::cached_bytes(dev) == 0);
  const void* first = nullptr;
  {
    Tensor a = Tensor::ones({1000}, DType::F32, dev);  // 4000 bytes: the 4096-byte class
    first = a.data_ptr();
  }
  CHECK(Storage::cached_bytes(dev) == 4096);
  {
    Tensor b = Tensor::zeros({1001}, DType::F32, dev);  // 4004 bytes: the same class, the same block
    CHECK(b.data_ptr() == first);
    CHECK(Storage::cached_bytes(dev) == 0);
    CHECK(b.to_f64_vec() == std::vector<double>(1001, 0.0));  // written after the reuse, in order
  }
  {
    Tensor big = Tensor::empty({(size_t{8} << 20) / 4 + 1}, DType::F32, dev);  // above the 8 MiB limit
  }
  CHECK(Storage::cached_bytes(dev) == 4096);
  {
    // a stream the caller set: its blocks go straight back to the runtime
    const Stream mine = create_stream(dev);
    {
      StreamGuard on(mine);
      Tensor c = Tensor::ones({1000}, DType::F32, dev);
      CHECK(c.data_ptr() != first);
    }
    CHECK(Storage::cached_bytes(dev) == 4096);
    synchronize(mine);
    destroy_stream(mine);
  }
  {
    // memory allocated while the stream is captured belongs to the graph: a graph's own
    // stream, and wick's own stream captured directly
    CudaGraph graph(dev);
    graph.begin_capture();
    { Tensor d = Tensor::zeros({1000}, DType::F32, dev); }
    graph.end_capture();
    graph.replay();
#ifdef WICK_WITH_CUDA
    const auto st = static_cast<cudaStream_t>(own_stream(dev).handle);
    REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    {
      Tensor e = Tensor::zeros({1000}, DType::F32, dev);
      CHECK(e.data_ptr() != first);
    }
    Storage::release_cached(dev);  // nothing while the stream is captured: no wait, no frees in the graph
    CHECK(Storage::cached_bytes(dev) == 4096);
    cudaGraph_t captured = nullptr;
    REQUIRE(cudaStreamEndCapture(st, &captured) == cudaSuccess);
    CHECK(cudaGraphDestroy(captured) == cudaSuccess);
#endif
  }
  CHECK(Storage::cached_bytes(dev) == 4096);
  Storage::release_cached(dev);
  CHECK(Storage::cached_bytes(dev) == 0);
  synchronize(dev);
}

TEST_CASE("memory (CUDA): the pool keeps freed memory across a synchronize; release_cached hands it back") {
  SKIP_WITHOUT_CUDA();
  const Device dev = Device::cuda(0);
  constexpr size_t kBig = size_t{64} << 20;  // above the block cache's 8 MiB: pool memory
  Storage::release_cached(dev);
  const size_t before = Storage::reserved_bytes(dev);
  { Tensor a = Tensor::empty({kBig / 4}, DType::F32, dev); }
  synchronize(dev);
  const size_t kept = Storage::reserved_bytes(dev);
  CHECK(kept >= before + kBig);  // still the pool's after the synchronize
  {
    Tensor b = Tensor::empty({kBig / 4}, DType::F32, dev);
    CHECK(Storage::reserved_bytes(dev) == kept);  // served from the kept memory
  }
  Storage::release_cached(dev);
  CHECK(Storage::reserved_bytes(dev) + kBig <= kept);
  CHECK(Storage::reserved_bytes(Device::cpu()) == 0);
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

// ---- integers: defined wrapping and saturation ----------------------------------------------

TEST_CASE("integers: add, sub and mul wrap modulo 2^bits on every device") {
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    {
      Tensor a = vec<int32_t>({L32::max(), L32::min(), 65536, -7}, dev);
      Tensor b = vec<int32_t>({1, 1, 65536, 3}, dev);
      CHECK(add(a, b).to_vec<int32_t>() == std::vector<int32_t>{L32::min(), L32::min() + 1, 131072, -4});
      CHECK(sub(b, a).to_vec<int32_t>() == std::vector<int32_t>{L32::min() + 2, L32::min() + 1, 0, 10});
      CHECK(mul(a, b).to_vec<int32_t>() == std::vector<int32_t>{L32::max(), L32::min(), 0, -21});
    }
    {
      Tensor a = vec<int64_t>({L64::max(), L64::min(), int64_t{1} << 32}, dev);
      Tensor b = vec<int64_t>({2, 1, int64_t{1} << 32}, dev);
      CHECK(add(a, b).to_vec<int64_t>() == std::vector<int64_t>{L64::min() + 1, L64::min() + 1, int64_t{1} << 33});
      CHECK(sub(a, b).to_vec<int64_t>() == std::vector<int64_t>{L64::max() - 2, L64::max(), 0});
      CHECK(mul(a, b).to_vec<int64_t>() == std::vector<int64_t>{-2, L64::min(), 0});
    }
    {
      Tensor a = vec<int16_t>({32767, 300, -32768}, dev), b = vec<int16_t>({1, 300, 1}, dev);
      CHECK(add(a, b).to_vec<int16_t>() == std::vector<int16_t>{-32768, 600, -32767});
      CHECK(mul(a, b).to_vec<int16_t>() == std::vector<int16_t>{32767, 24464, -32768});  // 90000 - 65536
      Tensor u = vec<uint8_t>({255, 0, 16}, dev), w = vec<uint8_t>({1, 1, 16}, dev);
      CHECK(add(u, w).to_vec<uint8_t>() == std::vector<uint8_t>{0, 1, 32});
      CHECK(sub(w, u).to_vec<uint8_t>() == std::vector<uint8_t>{2, 1, 0});
      CHECK(mul(u, w).to_vec<uint8_t>() == std::vector<uint8_t>{255, 0, 0});
      Tensor x = vec<uint32_t>({0, 65536}, dev), y = vec<uint32_t>({1, 65536}, dev);
      CHECK(sub(x, y).to_vec<uint32_t>() == std::vector<uint32_t>{4294967295u, 0});
      CHECK(mul(x, y).to_vec<uint32_t>() == std::vector<uint32_t>{0, 0});
    }
    // integer sums wrap in the input dtype
    CHECK(sum_all(vec<int32_t>({L32::max(), 1, 5}, dev)).item() == double(L32::min() + 5));
    CHECK(sum_all(vec<int64_t>({L64::max(), L64::max()}, dev)).to_vec<int64_t>() == std::vector<int64_t>{-2});
    CHECK(sum_all(vec<uint8_t>({200, 100, 1}, dev)).item() == 45);
    CHECK(sum(vec<int16_t>({32767, 32767, 2, 0}, dev).reshape({2, 2}), {1}).to_vec<int16_t>() ==
          std::vector<int16_t>{-2, 2});
    // and so do running sums
    CHECK(cumsum(vec<int64_t>({L64::max(), 1, 1}, dev), 0).to_vec<int64_t>() ==
          std::vector<int64_t>{L64::max(), L64::min(), L64::min() + 1});
    CHECK(cumsum(vec<uint8_t>({250, 10}, dev), 0).to_vec<uint8_t>() == std::vector<uint8_t>{250, 4});
  }
}

TEST_CASE("integers: float -> integer casts saturate (NaN -> 0), integer -> integer casts wrap") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor f = vec<float>({nan, inf, -inf, 1e10f, -1e10f, 3.9f, -3.9f, 2147483520.f}, dev);
    CHECK(cast(f, DType::I32).to_vec<int32_t>() ==
          std::vector<int32_t>{0, L32::max(), L32::min(), L32::max(), L32::min(), 3, -3, 2147483520});
    CHECK(cast(f, DType::U8).to_vec<uint8_t>() == std::vector<uint8_t>{0, 255, 0, 255, 0, 3, 0, 255});
    CHECK(cast(f, DType::U32).to_vec<uint32_t>() ==
          std::vector<uint32_t>{0, 4294967295u, 0, 4294967295u, 0, 3, 0, 2147483520u});
    CHECK(cast(f, DType::I16).to_vec<int16_t>() == std::vector<int16_t>{0, 32767, -32768, 32767, -32768, 3, -3, 32767});
    Tensor d = vec<double>({9.3e18, -9.3e18, 9007199254740993.0, -0.99}, dev);
    CHECK(cast(d, DType::I64).to_vec<int64_t>() == std::vector<int64_t>{L64::max(), L64::min(), 9007199254740992, 0});
    CHECK(cast(cast(f, DType::BF16), DType::I32).to_vec<int32_t>()[1] == L32::max());
    // integer -> integer: modulo 2^bits of the target
    CHECK(cast(vec<int16_t>({-1, 256, 300}, dev), DType::U8).to_vec<uint8_t>() == std::vector<uint8_t>{255, 0, 44});
    CHECK(cast(vec<int64_t>({(int64_t{1} << 32) + 5, -1}, dev), DType::I32).to_vec<int32_t>() ==
          std::vector<int32_t>{5, -1});
    CHECK(cast(vec<int32_t>({-1}, dev), DType::U32).to_vec<uint32_t>() == std::vector<uint32_t>{4294967295u});
    // full() saturates the same way
    CHECK(Tensor::full({2}, 1e20, DType::I32, dev).to_vec<int32_t>() == std::vector<int32_t>{L32::max(), L32::max()});
    CHECK(Tensor::full({1}, -5.0, DType::U8, dev).to_vec<uint8_t>() == std::vector<uint8_t>{0});
    CHECK(Tensor::full({1}, std::nan(""), DType::I64, dev).to_vec<int64_t>() == std::vector<int64_t>{0});
  }
}

TEST_CASE("integers: arange holds exact values and refuses a range its dtype cannot hold") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    const int64_t big = int64_t{1} << 60;  // not exact in f64 past 2^53: must not go through it
    CHECK(Tensor::arange(big, big + 3, DType::I64, dev).to_vec<int64_t>() ==
          std::vector<int64_t>{big, big + 1, big + 2});
    CHECK(Tensor::arange(-2, 2, DType::I16, dev).to_vec<int16_t>() == std::vector<int16_t>{-2, -1, 0, 1});
    CHECK(Tensor::arange(250, 256, DType::U8, dev).to_vec<uint8_t>().back() == 255);
    CHECK(code_of([&] { Tensor::arange(250, 257, DType::U8, dev); }) == "L25");
    CHECK(code_of([&] { Tensor::arange(-1, 3, DType::U32, dev); }) == "L25");
    CHECK(code_of([&] { Tensor::arange(0, (int64_t{1} << 31) + 1, DType::I32, dev); }) == "L25");
    CHECK(Tensor::arange(5, 5, DType::U8, dev).elem_count() == 0);
  }
}

// ---- copies -------------------------------------------------------------------------------

TEST_CASE("copy_into: a source that overlaps the destination is read as it was before the call") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::arange(0, 10, DType::F32, dev);
    copy_into(x.narrow(0, 1, 8), x.narrow(0, 0, 8));  // shift right by one: memmove semantics
    CHECK(x.to_vec<float>() == std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6, 7, 9});
    Tensor y = Tensor::arange(0, 10, DType::F32, dev);
    copy_into(y.narrow(0, 0, 8), y.narrow(0, 2, 8));  // shift left by two
    CHECK(y.to_vec<float>() == std::vector<float>{2, 3, 4, 5, 6, 7, 8, 9, 8, 9});
    // a square transposed onto itself: strided, overlapping
    Tensor m = Tensor::arange(0, 9, DType::I64, dev).reshape({3, 3});
    copy_into(m, m.t());
    CHECK(m.to_vec<int64_t>() == std::vector<int64_t>{0, 3, 6, 1, 4, 7, 2, 5, 8});
    // onto itself: unchanged
    Tensor z = Tensor::arange(0, 4, DType::U8, dev);
    copy_into(z, z);
    CHECK(z.to_vec<uint8_t>() == std::vector<uint8_t>{0, 1, 2, 3});
    // empty tensors: their contiguous strides hold zeros ([6, 0, 8] has stride [0, 8, 1]),
    // which is not a broadcast: nothing is written and nothing is refused
    Tensor e = Tensor::zeros({6, 0, 8}, DType::F32, dev);
    CHECK(e.stride() == std::vector<int64_t>{0, 8, 1});
    copy_into(e, Tensor::zeros({6, 0, 8}, DType::F32, dev));
    CHECK(cat({e, e}, 1).shape() == Shape{6, 0, 8});
  }
}

// ---- autograd guards ------------------------------------------------------------------------

TEST_CASE("autograd: a cast to an integer dtype ends the graph") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = vec<float>({1.7f, -2.2f, 3.5f}, dev);
    x.requires_grad(true);
    Tensor i = cast(x, DType::I32);
    CHECK_FALSE(i.requires_grad());
    CHECK(i.grad_fn() == nullptr);
    Tensor back = cast(i, DType::F32);
    CHECK_FALSE(back.requires_grad());
    CHECK(code_of([&] { sum_all(back).backward(); }) == "G01");  // no graph to differentiate
    // x * trunc(x): the integer round trip is a constant, so d/dx = trunc(x)
    sum_all(mul(x, back)).backward();
    CHECK(x.grad().to_vec<float>() == std::vector<float>{1, -2, 3});
    // float -> float casts still carry the gradient
    Tensor y = vec<float>({2.0f}, dev);
    y.requires_grad(true);
    sum_all(cast(y, DType::F64)).backward();
    CHECK(y.grad().to_vec<float>() == std::vector<float>{1});
  }
}

TEST_CASE("autograd: a tensor a backward rule saved and that was written after the forward raises G29") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    auto leaf = [&](std::vector<float> v) {
      Tensor t = vec<float>(std::move(v), dev);
      t.requires_grad(true);
      return t;
    };
    Tensor seed = Tensor::ones({2}, DType::F32, dev);
    {  // mul saves both sides: w changed -> the gradient of x would use the new w
      Tensor x = leaf({1, 2}), w = vec<float>({3, 4}, dev);
      Tensor y = mul(x, w);
      copy_into(w, vec<float>({5, 6}, dev));
      CHECK(code_of([&] { y.backward(seed); }) == "G29");
    }
    {  // exp saves its output
      Tensor x = leaf({0, 1});
      Tensor y = exp(x);
      Tensor z = mul_scalar(y, 2.0);
      copy_into(y, vec<float>({7, 7}, dev));
      CHECK(code_of([&] { z.backward(seed); }) == "G29");
    }
    {  // a write through another view of the same storage counts too
      Tensor x = leaf({1, 2}), base = vec<float>({3, 4, 5, 6}, dev);
      Tensor y = mul(x, base.narrow(0, 0, 2));
      copy_into(base.narrow(0, 2, 2), vec<float>({0, 0}, dev));
      CHECK(code_of([&] { y.backward(seed); }) == "G29");
    }
    {  // add saves nothing: modifying its input afterwards is harmless, and allowed
      Tensor x = leaf({1, 2}), b = vec<float>({3, 4}, dev);
      Tensor y = add(x, b);
      copy_into(b, vec<float>({0, 0}, dev));
      y.backward(seed);
      CHECK(x.grad().to_vec<float>() == std::vector<float>{1, 1});
    }
    {  // an optimizer step between two backward passes through one retained graph
      Tensor w = leaf({1, 2}), x = vec<float>({3, 4}, dev);
      Tensor loss = sum_all(mul(w, x));
      autograd::BackwardOptions keep;
      keep.retain_graph = true;
      keep.accumulate_into_leaves = true;
      autograd::grad(loss, keep);
      autograd::SGD sgd({w}, {0.1});
      sgd.step();
      CHECK(code_of([&] { autograd::grad(loss, keep); }) == "G29");
      // a fresh forward after the step is fine
      w.set_grad(Tensor());
      sum_all(mul(w, x)).backward();
      CHECK(w.grad().to_vec<float>() == std::vector<float>{3, 4});
    }
    {  // gather saves its index: rewriting it would scatter the gradient to other rows
      Tensor x = leaf({1, 2, 3});
      Tensor idx = vec<int64_t>({2, 0}, dev);
      Tensor y = gather(x, 0, idx);
      copy_into(idx, vec<int64_t>({1, 1}, dev));
      CHECK(code_of([&] { y.backward(seed); }) == "G29");
    }
    {  // flash attention saves q, k, v, out, lse and its index tensors
      Tensor q = randn({4, 2, 16}, DType::BF16, dev, 11), k = randn({4, 1, 16}, DType::BF16, dev, 12),
             v = randn({4, 1, 16}, DType::BF16, dev, 13);
      q.requires_grad(true);
      Tensor cu = u32_tensor({0, 4}, dev);
      Tensor out = flash_attn_varlen(q, k, v, cu, cu, 4, 4, 0.25f, true);
      Tensor go = Tensor::ones(out.shape(), out.dtype(), dev);
      copy_into(k, randn({4, 1, 16}, DType::BF16, dev, 14));
      CHECK(code_of([&] { out.backward(go); }) == "G29");
    }
  }
}

// ---- the paged cache ------------------------------------------------------------------------

TEST_CASE("PagedKvCache: a block a live sequence holds cannot be released, so no other sequence gets it") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    PagedKvCache cache(3, 32, 1, 8, DType::F32, dev);
    Tensor k7 = randn({40, 1, 8}, DType::F32, dev, 21);
    cache.append(7, k7, k7);  // blocks 0 and 1
    const std::vector<int32_t> held = cache.blocks(7);
    CHECK(code_of([&] { cache.release_block(held[0]); }) == "P16");
    // the refused release left the allocator as it was: the only free block is handed out
    const int32_t mine = cache.allocate_block();
    CHECK(mine == 2);
    CHECK(code_of([&] { cache.allocate_block(); }) == "P08");
    cache.release_block(mine);  // a block from allocate_block goes back
    Tensor k8 = randn({5, 1, 8}, DType::F32, dev, 22);
    cache.append(8, k8, k8);
    CHECK(cache.blocks(8) == std::vector<int32_t>{2});
    // sequence 7's keys are intact
    Tensor first = cache.k().narrow(0, static_cast<size_t>(held[0]), 1).reshape({32, 1, 8});
    CHECK(first.to_f64_vec() == k7.narrow(0, 0, 32).to_f64_vec());
    cache.free(7);
    cache.release_block(cache.allocate_block());  // freed blocks are ordinary free blocks again
  }
}

// ---- offsets past 2^31 and 2^32 (CPU) ------------------------------------------------------

namespace {
// An uninitialised CPU tensor of n elements: address space only until written (the pages a
// test touches are the memory it uses). nullopt, with a visible skip, where the machine
// cannot reserve it.
std::optional<Tensor> sparse_cpu(size_t n, DType dt) {
  try {
    return Tensor::empty({n}, dt, Device::cpu());
  } catch (const Error& e) {
    MESSAGE("SKIPPED: cannot reserve ", n, " elements of ", dtype_name(dt), " (", e.what(), ")");
    return std::nullopt;
  }
}
}  // namespace

TEST_CASE("offsets: views, copies, gathers and elementwise ops at 2^31 and 2^32 elements (CPU)") {
  const auto big = sparse_cpu(k2to32 + 4096, DType::U8);
  if (!big) return;
  const Device cpu = Device::cpu();
  const std::vector<size_t> starts{(size_t{1} << 31) - 1, size_t{1} << 31, k2to32 - 2, k2to32, k2to32 + 1000};
  for (size_t start : starts) {
    INFO("start ", start);
    Tensor w = big->narrow(0, start, 3);
    copy_into(w, vec<uint8_t>({11, 22, 33}, cpu));
    CHECK(w.to_vec<uint8_t>() == std::vector<uint8_t>{11, 22, 33});
    CHECK(add(w, vec<uint8_t>({1, 1, 1}, cpu)).to_vec<uint8_t>() == std::vector<uint8_t>{12, 23, 34});
    CHECK(w.layout().start_offset() == start);
  }
  // rows of 64 bytes around both boundaries, gathered by index
  Tensor rows = big->reshape({(k2to32 + 4096) / 64, 64});
  const std::vector<int64_t> ids{(int64_t{1} << 25) - 1, int64_t{1} << 25, (int64_t{1} << 26) - 1, int64_t{1} << 26};
  for (int64_t r : ids)
    copy_into(rows.narrow(0, static_cast<size_t>(r), 1), Tensor::full({1, 64}, double(r % 251), DType::U8, cpu));
  Tensor picked = index_select(rows, vec<int64_t>(ids, cpu), 0);
  std::vector<uint8_t> want;
  for (int64_t r : ids) want.insert(want.end(), 64, static_cast<uint8_t>(r % 251));
  CHECK(picked.to_vec<uint8_t>() == want);
  // a strided view whose last element sits past 2^32: stride 2^31 + 1
  Tensor strided(big->storage(), Layout(Shape{3}, {(int64_t{1} << 31) + 1}, 5), DType::U8);
  copy_into(strided, vec<uint8_t>({7, 8, 9}, cpu));
  CHECK(big->narrow(0, 5 + 2 * ((size_t{1} << 31) + 1), 1).item() == 9);
}

TEST_CASE("offsets: paged attention reads blocks past 2^31 and 2^32 elements (CPU), forward and dq") {
  // One interleaved cache (num_blocks, 2, page, hk, d) of bf16 with more than 2^32 elements;
  // the sequences use blocks on both sides of element 2^31 and 2^32. The same blocks copied
  // into a compact cache give the same outputs bit for bit.
  const size_t page = 32, hk = 1, d = 64, per_block = 2 * page * hk * d;  // 4096 elements
  const size_t num_blocks = k2to32 / per_block + 4;
  const auto flat = sparse_cpu(num_blocks * per_block, DType::BF16);
  if (!flat) return;
  const Device cpu = Device::cpu();
  Tensor cache = flat->reshape({num_blocks, 2, page, hk, d});
  Tensor k = cache.narrow(1, 0, 1).squeeze(1), v = cache.narrow(1, 1, 1).squeeze(1);
  const std::vector<int32_t> used{int32_t((size_t{1} << 31) / per_block) - 1, int32_t((size_t{1} << 31) / per_block),
                                  int32_t(k2to32 / per_block) - 1, int32_t(k2to32 / per_block),
                                  int32_t(num_blocks) - 1};
  Tensor kc = randn({used.size(), page, hk, d}, DType::BF16, cpu, 31);
  Tensor vc = randn({used.size(), page, hk, d}, DType::BF16, cpu, 32);
  for (size_t i = 0; i < used.size(); ++i) {
    copy_into(k.narrow(0, static_cast<size_t>(used[i]), 1), kc.narrow(0, i, 1));
    copy_into(v.narrow(0, static_cast<size_t>(used[i]), 1), vc.narrow(0, i, 1));
  }
  CHECK(static_cast<size_t>(used.back()) * per_block > k2to32);
  // two sequences: 70 keys over blocks used[0..2], 90 keys over used[3], used[4], used[1]
  Tensor q = randn({7, 2, d}, DType::BF16, cpu, 33);
  q.requires_grad(true);
  Tensor cu_q = u32_tensor({0, 3, 7}, cpu), cu_k = u32_tensor({0, 70, 160}, cpu);
  auto run = [&](const Tensor& kk, const Tensor& vv, std::vector<int32_t> table) {
    Tensor bt = Tensor::from_vec(table, Shape{2, 3}, cpu);
    FlashAttnVarLen op;
    op.max_seqlen_q = 4, op.max_seqlen_k = 90, op.seqlens_q = cu_q, op.seqlens_k = cu_k;
    op.block_table = bt, op.page_block_size = page, op.causal = true;
    auto [out, lse] = op.forward_with_lse(q, kk, vv);
    out.backward(Tensor::ones(out.shape(), out.dtype(), cpu));
    Tensor dq = q.grad();
    q.set_grad(Tensor());
    return std::vector<Tensor>{out, lse, dq};
  };
  const auto far = run(k, v, {used[0], used[1], used[2], used[3], used[4], used[1]});
  const auto near = run(kc, vc, {0, 1, 2, 3, 4, 1});
  for (size_t i = 0; i < far.size(); ++i) {
    INFO("output ", i);
    CHECK(far[i].to_f64_vec() == near[i].to_f64_vec());
  }
  CHECK(all_finite(far[0].to_f64_vec()));
}

// ---- the CPU backward's memory ------------------------------------------------------------

TEST_CASE("attention backward (CPU): memory is O(tokens) and k, v that need no gradient cost none") {
  // k and v: 2^18 keys broadcast from one real row (stride 0, 128 bytes); every query sees a
  // window of 33 keys. Only q requires grad: the backward must not materialise k or v, nor
  // build dk / dv (f32 copies of them would be 64 MB each).
  const Device cpu = Device::cpu();
  const size_t n = size_t{1} << 18, d = 64;
  Tensor k = randn({1, 1, d}, DType::BF16, cpu, 41).broadcast_as({n, 1, d});
  Tensor v = randn({1, 1, d}, DType::BF16, cpu, 42).broadcast_as({n, 1, d});
  Tensor q = randn({64, 2, d}, DType::BF16, cpu, 43);
  q.requires_grad(true);
  FlashAttnVarLen op;
  op.max_seqlen_q = 64, op.max_seqlen_k = n;
  op.seqlens_q = u32_tensor({0, 64}, cpu), op.seqlens_k = u32_tensor({0, static_cast<uint32_t>(n)}, cpu);
  op.causal = true, op.window_size_left = 32;
  Tensor out = op.forward(q, k, v);
  Tensor go = Tensor::ones(out.shape(), out.dtype(), cpu);
  const int64_t before = Storage::live_bytes(Device::Kind::Cpu);
  Storage::reset_peak_bytes(Device::Kind::Cpu);
  out.backward(go);
  const int64_t extra = Storage::peak_bytes(Device::Kind::Cpu) - before;
  MESSAGE("backward peak extra: ", extra, " bytes");
  CHECK(extra <= 4 * static_cast<int64_t>(q.elem_count() * 2) + (int64_t{1} << 16));
  // Every key is the same row, so every output is v's row whatever the weights: dq is 0.
  REQUIRE(q.grad().defined());
  CHECK(q.grad().shape() == q.shape());
  for (double g : q.grad().to_f64_vec()) REQUIRE(std::abs(g) <= 1e-3);
}
