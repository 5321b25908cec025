// write_kv_slots (declared in paged_kv_cache.h): new K/V rows into a paged cache at slots
// read on the device, so a decode step's destinations can change between graph replays.
#include <cstring>
#include <string>

#include "ops/attention/paged_kv_cache.h"
#include "tensor/device_fault.h"
#include "tensor/stream.h"
#ifdef WICK_WITH_CUDA
#include "kernels/kv_write.h"
#endif

namespace wick {

namespace {

constexpr const char* kOp = "write_kv_slots";

std::string describe(const Tensor& t) {
  if (!t.defined()) return "an empty tensor";
  return to_string(t.shape()) + " " + dtype_name(t.dtype()) + " on " + to_string(t.device()) +
         (t.rank() > 0 && t.stride().back() != 1 ? " (channels strided)" : "");
}

// P14: the argument is not what the call needs; wanted() gives the text of what it needs
// (built only for the message: a decode step calls this once per layer).
template <class Wanted>
void expect(bool ok, const char* name, const Tensor& t, Wanted wanted) {
  if (!ok) throw Error("P14", std::string(kOp) + ": " + name + " is " + describe(t) + ", expected " + wanted());
}

std::string p13_message(int64_t i, int64_t slot, int64_t num_blocks, int64_t page) {
  return std::string(kOp) + ": slots[" + std::to_string(i) + "] = " + std::to_string(slot) +
         " is outside the cache's " + std::to_string(num_blocks * page) + " rows (" + std::to_string(num_blocks) +
         " blocks of " + std::to_string(page) + ")";
}

[[maybe_unused]] void format_slot_fault(const DeviceFault& f, std::string& code, std::string& message) {
  code = "P13";
  message = p13_message(f.values[0], f.values[1], f.values[2], f.values[3]);
}

}  // namespace

void write_kv_slots(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k_new, const Tensor& v_new,
                    const Tensor& slots) {
  const bool cache_ok = k_cache.defined() && k_cache.rank() == 4 && k_cache.stride().back() == 1;
  expect(cache_ok, "k_cache", k_cache,
         [] { return std::string("a (num_blocks, page, num_heads_k, head_size) tensor with channel stride 1"); });
  const Device dev = k_cache.device();
  const DType dt = k_cache.dtype();
  const auto d = k_cache.shape().dims4();
  // t must be a `shape` tensor of the cache's dtype, on its device, with channel stride 1
  auto expect_like_cache = [&](const Tensor& t, const char* name, const Shape& shape, const char* note) {
    expect(t.defined() && t.shape() == shape && t.dtype() == dt && t.device() == dev && t.stride().back() == 1, name, t,
           [&] {
             return to_string(shape) + " " + dtype_name(dt) + " on " + to_string(dev) + " with channel stride 1 (" +
                    note + ")";
           });
  };
  expect_like_cache(v_cache, "v_cache", k_cache.shape(), "k_cache's");
  const size_t n = k_new.defined() && k_new.rank() == 3 ? k_new.dim(0) : 0;
  const Shape rows{n, d[2], d[3]};
  expect_like_cache(k_new, "k_new", rows, "n_new, num_heads_k, head_size");
  expect_like_cache(v_new, "v_new", rows, "n_new, num_heads_k, head_size");
  expect(slots.defined() && slots.shape() == Shape{n} && slots.dtype() == DType::I64 && slots.device() == dev &&
             slots.is_contiguous(),
         "slots", slots, [&] { return to_string(Shape{n}) + " I64 on " + to_string(dev) + ", contiguous"; });
  if (n == 0) return;
  const int64_t num_blocks = static_cast<int64_t>(d[0]), page = static_cast<int64_t>(d[1]);
  const size_t es = dtype_size(dt);
  if (dev.is_cpu()) {
    const auto* s = static_cast<const int64_t*>(slots.data_ptr());
    for (size_t i = 0; i < n; ++i)
      if (s[i] < 0 || s[i] >= num_blocks * page)
        throw Error("P13", p13_message(static_cast<int64_t>(i), s[i], num_blocks, page));
    for (size_t i = 0; i < n; ++i) {
      const int64_t blk = s[i] / page, row = s[i] % page;
      for (int t = 0; t < 2; ++t) {
        const Tensor& cache = t == 0 ? k_cache : v_cache;
        const Tensor& src = t == 0 ? k_new : v_new;
        auto* dst = static_cast<char*>(cache.data_ptr());
        const auto* from = static_cast<const char*>(src.data_ptr());
        const auto& cs = cache.stride();
        const auto& ss = src.stride();
        for (size_t h = 0; h < d[2]; ++h)
          std::memcpy(dst + (blk * cs[0] + row * cs[1] + static_cast<int64_t>(h) * cs[2]) * es,
                      from + (static_cast<int64_t>(i) * ss[0] + static_cast<int64_t>(h) * ss[1]) * es, d[3] * es);
      }
    }
    return;
  }
#ifdef WICK_WITH_CUDA
  register_fault_formatter(FaultKind::KvSlot, format_slot_fault);
  kernels::KvWriteArgs a;
  const Tensor* caches[2] = {&k_cache, &v_cache};
  const Tensor* srcs[2] = {&k_new, &v_new};
  for (int t = 0; t < 2; ++t) {
    a.cache[t] = caches[t]->data_ptr();
    a.src[t] = srcs[t]->data_ptr();
    for (int j = 0; j < 3; ++j) a.cache_stride[t][j] = caches[t]->stride()[j];
    for (int j = 0; j < 2; ++j) a.src_stride[t][j] = srcs[t]->stride()[j];
  }
  a.slots = static_cast<const int64_t*>(slots.data_ptr());
  a.n = static_cast<int64_t>(n), a.num_blocks = num_blocks, a.page = page;
  a.heads = static_cast<int>(d[2]), a.head_size = static_cast<int>(d[3]), a.elem_bytes = static_cast<int>(es);
  a.sink = fault_sink(dev);
  set_current_device(dev);
  kernels::kv_write(a, current_stream(dev).handle);
#endif
}

}  // namespace wick
