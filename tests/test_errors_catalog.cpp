// Every message of the tensor, storage, ops, autograd and CUDA-runtime layers, triggered and
// compared byte for byte with what docs/errors.md catalogues, plus the sync rule for those
// sections (the attention sections are test_attention_errors.cpp's). Entries that need a GPU
// or a particular build print a visible skip elsewhere.
#include <doctest/doctest.h>

#include <dlpack/dlpack.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "autograd/custom_op.h"
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/optim.h"
#include "devices.h"
#include "io/dlpack.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "errors_catalog.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/ops.h"
#include "tensor/device_fault.h"
#include "tensor/cuda_check.h"
#include "tensor/grad_node.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"
#ifdef WICK_WITH_CUDA
#include <cuda_runtime_api.h>

#include "kernels/copy.h"
#include "kernels/cublas_gemm.h"
#include "kernels/fill.h"
#include "kernels/flash/flash_fwd.h"
#include "kernels/gather.h"
#include "kernels/random.h"
#include "kernels/flash_bwd/flash_bwd.h"
#include "kernels/index.h"
#include "kernels/norm.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "kernels/unary.h"
#endif

using namespace wick;
using wick::catalog::error_of;
using wick::catalog::Raised;
using wick::catalog::raised_by;

namespace {

// Where an entry can run.
enum class Where {
  Devices,         // every available device, the same text (with {dev} and {kind} filled in)
  Cpu,             // the CPU only (a CPU-only path, or host memory)
  Gpu,             // needs a CUDA device; runs with Device::cuda(0)
  CudaBuild,       // needs a build with CUDA (kernels called directly), no GPU needed
  CpuOnlyBuild,    // only a build without CUDA can raise it
  CudaBuildNoGpu,  // only a build with CUDA on a machine without a GPU can raise it
};

struct Entry {
  std::string id;
  std::string templ;  // as docs/errors.md writes it
  Where where;
  std::function<Raised(Device)> trigger;
  std::string expected;  // exact text; {dev} is the device (to_string), {kind} is cpu or cuda
};

using D = Device;
using Grads = std::vector<Tensor>;

std::string fill(std::string s, Device dev) {
  auto put = [&](const std::string& key, const std::string& value) {
    for (size_t p; (p = s.find(key)) != std::string::npos;) s.replace(p, key.size(), value);
  };
  put("{dev}", to_string(dev));
  put("{kind}", dev.is_cpu() ? "cpu" : "cuda");
  return s;
}

Tensor x234(Device d) { return Tensor::randn({2, 3, 4}, DType::F32, d, 1); }
Tensor f64_leaf(Device d) {
  Tensor x = Tensor::from_vec(std::vector<double>{0.5, -1.5, 2.0}, Shape{3}, d);
  x.requires_grad(true);
  return x;
}
// A fresh output recorded with `backward` as its rule, its one input x.
Tensor recorded(const Tensor& x, const std::string& name, autograd::BackwardFn backward) {
  return autograd::record(x.detach().copy(), name, {x}, std::move(backward));
}
autograd::CustomOp cube_op() {
  autograd::CustomOp op;
  op.name = "cube";
  op.cpu_forward = op.cuda_forward = [](const Grads& in) { return Grads{mul(mul(in[0], in[0]), in[0])}; };
  op.backward = [](const Grads& in, const Grads&, const Tensor& g) {
    return Grads{mul_scalar(mul(g, mul(in[0], in[0])), 3.0)};
  };
  return op;
}

// A call into kernels/, compiled only where the kernels exist (the entry is skipped elsewhere).
#ifdef WICK_WITH_CUDA
#define KERNEL_CALL(...) [] { __VA_ARGS__; }
int cublas_not_supported() { return 15; }  // CUBLAS_STATUS_NOT_SUPPORTED
kernels::CublasGemm gemm_1x1x1() {
  kernels::CublasGemm g;
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = g.batch = 1;
  return g;
}
kernels::FlashFwdParams flash_params(int head_size, int num_heads, int num_heads_k) {
  kernels::FlashFwdParams p;
  p.head_size = head_size, p.num_heads = num_heads, p.num_heads_k = num_heads_k;
  return p;
}
// Backward parameters with every pointer null (the guards run before any is read).
kernels::FlashBwdParams flash_bwd_params(int head_size, int num_heads, int num_heads_k) {
  kernels::FlashBwdParams p;
  p.fwd = flash_params(head_size, num_heads, num_heads_k);
  return p;
}
// Params with the forward's outputs and dO bound (addresses never read: the scratch check
// comes first) and no scratch buffers; the unaligned q makes the kernels add dK, dV in f32.
kernels::FlashBwdParams flash_bwd_with_outputs() {
  static float placeholder[4];
  kernels::FlashBwdParams p = flash_bwd_params(64, 4, 2);
  p.fwd.out = placeholder, p.fwd.lse = placeholder, p.dout = placeholder;
  p.fwd.q = reinterpret_cast<char*>(placeholder) + 2;
  return p;
}
#else
#define KERNEL_CALL(...) [] {}
#endif

// WICK_CUDA_CHECK on a failing status: what it raises, or (expected) the exact text it must
// produce (file and line of the check itself).
Raised cuda_check_text(bool expected) {
  int line = 0;
  Raised got = raised_by([&] {
    auto failing = [] { return 101; };
    line = __LINE__; WICK_CUDA_CHECK(failing());  // one line: the message names this line
  });
#ifdef WICK_WITH_CUDA
  const std::string name = "invalid device ordinal";
#else
  const std::string name = "CUDA error";
#endif
  return expected ? Raised{"CUDA error 101 (" + name + ") in failing() at " + std::string(__FILE__) + ":" +
                               std::to_string(line), "C01"}
                  : got;
}

#ifdef WICK_WITH_CUDA
Raised cublas_check_text(bool expected) {
  int line = 0;
  Raised got = raised_by([&] { line = __LINE__; WICK_CUBLAS_CHECK(cublas_not_supported()); });
  return expected ? Raised{"cuBLAS error 15 (CUBLAS_STATUS_NOT_SUPPORTED) in cublas_not_supported() at " +
                               std::string(__FILE__) + ":" + std::to_string(line), "C02"}
                  : got;
}
#endif

std::vector<Entry> tensor_entries() {
  std::vector<Entry> e;
  e.push_back({"L01", "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).narrow(3, 0, 1); }); },
               "narrow: dim 3 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)"});
  e.push_back({"L01", "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).unsqueeze(4); }); },
               "unsqueeze: dim 4 out of range for shape [2, 3, 4] (rank 3, valid dims -4..=3)"});
  e.push_back({"L02", "narrow: shape {shape:?}, dim {dim}: start {start} + len {len} exceeds size {size}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).narrow(1, 2, 2); }); },
               "narrow: shape [2, 3, 4], dim 1: start 2 + len 2 exceeds size 3"});
  e.push_back({"L03", "permute: shape {shape:?}, dims {dims:?} is not a permutation of 0..{rank}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).permute({0, 0, 1}); }); },
               "permute: shape [2, 3, 4], dims [0, 0, 1] is not a permutation of 0..3"});
  e.push_back({"L04", "broadcast_as: cannot broadcast {shape:?} to {target:?}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).broadcast_as({3, 3, 4}); }); },
               "broadcast_as: cannot broadcast [2, 3, 4] to [3, 3, 4]"});
  e.push_back({"L05", "reshape: cannot reshape {shape:?} ({n} elements) to {target:?} ({target_n} elements)", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).reshape({5, 5}); }); },
               "reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)"});
  e.push_back({"L06", "reshape: cannot view {shape:?} with stride {stride:?} as {target:?} without a copy; call contiguous() first",
               Where::Devices, [](D d) { return raised_by([&] { x234(d).transpose(1, 2).reshape({24}); }); },
               "reshape: cannot view [2, 4, 3] with stride [12, 1, 4] as [24] without a copy; call contiguous() first"});
  e.push_back({"L07", "squeeze: shape {shape:?}, dim {dim} has size {size}, not 1", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).squeeze(0); }); },
               "squeeze: shape [2, 3, 4], dim 0 has size 2, not 1"});
  e.push_back({"L08", "t: shape {shape:?} has rank < 2", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::ones({3}, DType::F32, d).t(); }); },
               "t: shape [3] has rank < 2"});
  e.push_back({"L09", "layout: stride {stride:?} does not match shape {shape:?}", Where::Cpu,
               [](D) { return raised_by([] { Layout l(Shape{2, 3}, {1}, 0); }); },
               "layout: stride [1] does not match shape [2, 3]"});
  e.push_back({"L10", "tensor: null storage", Where::Cpu,
               [](D) { return raised_by([] { Tensor t(nullptr, Layout::contiguous(Shape{2}), DType::F32); }); },
               "tensor: null storage"});
  e.push_back({"L11", "tensor: layout {shape:?} stride {stride:?} offset {offset} needs {need} bytes but the storage holds {bytes}",
               Where::Devices,
               [](D d) { return raised_by([&] { Tensor t(Storage::allocate(8, d), Layout::contiguous(Shape{4}), DType::F32); }); },
               "tensor: layout [4] stride [1] offset 0 needs 16 bytes but the storage holds 8"});
  e.push_back({"L12", "{op}: {what} is an empty (default-constructed) tensor", Where::Cpu,
               [](D) { return raised_by([] { Tensor().dtype(); }); },
               "dtype: the tensor is an empty (default-constructed) tensor"});
  e.push_back({"L12", "{op}: {what} is an empty (default-constructed) tensor", Where::Devices,
               [](D d) { return raised_by([&] { matmul(Tensor(), x234(d)); }); },
               "matmul: lhs is an empty (default-constructed) tensor"});
  e.push_back({"L12", "{op}: {what} is an empty (default-constructed) tensor", Where::Devices,
               [](D d) { return raised_by([&] { mul(x234(d), Tensor()); }); },
               "mul: rhs is an empty (default-constructed) tensor"});
  e.push_back({"L12", "{op}: {what} is an empty (default-constructed) tensor", Where::Cpu,
               [](D) { return raised_by([] { Tensor().backward(); }); },
               "backward: the output is an empty (default-constructed) tensor"});
  e.push_back({"L13", "from_vec: {n} values for shape {shape:?} ({elems} elements)", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::from_vec(std::vector<float>{1, 2, 3}, Shape{2, 2}, d); }); },
               "from_vec: 3 values for shape [2, 2] (4 elements)"});
  e.push_back({"L14", "arange: end {end} is before start {start}", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::arange(3, 1, DType::I64, d); }); },
               "arange: end 1 is before start 3"});
  e.push_back({"L15", "item: tensor of shape {shape:?} does not hold exactly one element", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::ones({2}, DType::F32, d).item(); }); },
               "item: tensor of shape [2] does not hold exactly one element"});
  e.push_back({"L16", "dim: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).dim(5); }); },
               "dim: dim 5 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)"});
  e.push_back({"L17", "requires_grad: only float tensors can require grad, got {dt:?}", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::arange(0, 3, DType::I64, d).requires_grad(true); }); },
               "requires_grad: only float tensors can require grad, got I64"});
  e.push_back({"L18", "layout: stride {stride:?} has a negative entry (shape {shape:?})", Where::Cpu,
               [](D) { return raised_by([] { Layout l(Shape{2, 3}, {3, -1}, 2); }); },
               "layout: stride [3, -1] has a negative entry (shape [2, 3])"});
  e.push_back({"L03", "permute: shape {shape:?}, dims {dims:?} is not a permutation of 0..{rank}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).permute({-4, 0, 1}); }); },
               "permute: shape [2, 3, 4], dims [-4, 0, 1] is not a permutation of 0..3"});
  e.push_back({"L19", "reshape: {dims:?} may hold one -1 (the size to infer) and no other negative size", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).reshape({-1, -1}); }); },
               "reshape: [-1, -1] may hold one -1 (the size to infer) and no other negative size"});
  e.push_back({"L19", "reshape: {dims:?} may hold one -1 (the size to infer) and no other negative size", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).reshape({4, -2}); }); },
               "reshape: [4, -2] may hold one -1 (the size to infer) and no other negative size"});
  e.push_back({"L20", "reshape: cannot infer the -1 in {dims:?} for shape {shape:?} ({n} elements)", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).reshape({5, -1}); }); },
               "reshape: cannot infer the -1 in [5, -1] for shape [2, 3, 4] (24 elements)"});
  e.push_back({"L20", "reshape: cannot infer the -1 in {dims:?} for shape {shape:?} ({n} elements)", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).reshape({0, -1}); }); },
               "reshape: cannot infer the -1 in [0, -1] for shape [2, 3, 4] (24 elements)"});
  e.push_back({"L21", "flatten: start_dim {start} comes after end_dim {end} for shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).flatten(2, 0); }); },
               "flatten: start_dim 2 comes after end_dim 0 for shape [2, 3, 4]"});
  e.push_back({"L22", "select: index {i} out of range for dim {dim} of size {size} (shape {shape:?})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d)[2]; }); },
               "select: index 2 out of range for dim 0 of size 2 (shape [2, 3, 4])"});
  e.push_back({"L22", "select: index {i} out of range for dim {dim} of size {size} (shape {shape:?})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).select(-1, -5); }); },
               "select: index -5 out of range for dim -1 of size 4 (shape [2, 3, 4])"});
  e.push_back({"L01", "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).transpose(-4, 0); }); },
               "transpose: dim -4 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)"});
  e.push_back({"L23", "shape {shape:?} is too large: its nonzero dims multiply to 2^63 or more (element counts, strides and "
               "offsets must fit in int64)", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::zeros({size_t{1} << 32, size_t{1} << 32}, DType::U8, d); }); },
               "shape [4294967296, 4294967296] is too large: its nonzero dims multiply to 2^63 or more (element counts, "
               "strides and offsets must fit in int64)"});
  e.push_back({"L23", "shape {shape:?} is too large: its nonzero dims multiply to 2^63 or more (element counts, strides and "
               "offsets must fit in int64)", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).narrow(0, 0, 1).broadcast_as({SIZE_MAX, 3, 4}); }); },
               "shape [18446744073709551615, 3, 4] is too large: its nonzero dims multiply to 2^63 or more (element counts, "
               "strides and offsets must fit in int64)"});
  e.push_back({"L24", "{op}: {n} elements of {size} bytes take 2^63 bytes or more", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::empty({size_t{1} << 61}, DType::F64, d); }); },
               "tensor: 2305843009213693952 elements of 8 bytes take 2^63 bytes or more"});
  e.push_back({"L24", "{op}: {n} elements of {size} bytes take 2^63 bytes or more", Where::Devices,
               [](D d) {
                 Tensor wide = Tensor::ones({1}, DType::F64, d).broadcast_as({size_t{1} << 61});  // a view: no bytes
                 return raised_by([&] { wide.to_vec<double>(); });
               },
               "to_vec: 2305843009213693952 elements of 8 bytes take 2^63 bytes or more"});
  e.push_back({"L25", "arange: the values {first} to {last} do not fit in {dt:?} (its range is {min} to {max})", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::arange(0, 300, DType::U8, d); }); },
               "arange: the values 0 to 299 do not fit in U8 (its range is 0 to 255)"});
  e.push_back({"L25", "arange: the values {first} to {last} do not fit in {dt:?} (its range is {min} to {max})", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::arange(-40000, 5, DType::I16, d); }); },
               "arange: the values -40000 to 4 do not fit in I16 (its range is -32768 to 32767)"});
  e.push_back({"L12", "{op}: {what} is an empty (default-constructed) tensor", Where::Devices,
               [](D d) {
                 PagedKvCache cache(2, 32, 1, 8, DType::BF16, d);
                 return raised_by([&] { cache.append(1, Tensor(), Tensor()); });
               },
               "PagedKvCache::append: k_new is an empty (default-constructed) tensor"});
  // candle's generic helpers, catalogued with the attention entries, raised here too.
  e.push_back({"A09", "unexpected rank, expected: {expected}, got: {got} ({shape:?})", Where::Cpu,
               [](D) { return raised_by([] { Shape{8}.dims2(); }); },
               "unexpected rank, expected: 2, got: 1 ([8])"});
  e.push_back({"A04", "unexpected dtype, expected: {expected:?}, got: {got:?}", Where::Devices,
               [](D d) { return raised_by([&] { x234(d).to_vec<double>(); }); },
               "unexpected dtype, expected: F64, got: F32"});
  return e;
}

std::vector<Entry> storage_entries() {
  std::vector<Entry> e;
  e.push_back({"S01", "this build of wick has no CUDA support (configure with WICK_CUDA=ON)", Where::CpuOnlyBuild,
               [](D) { return raised_by([] { Tensor::zeros({2}, DType::F32, Device::cuda(0)); }); },
               "this build of wick has no CUDA support (configure with WICK_CUDA=ON)"});
  e.push_back({"S02", "no CUDA device is available for {device:?}", Where::CudaBuildNoGpu,
               [](D) { return raised_by([] { Tensor::zeros({2}, DType::F32, Device::cuda(0)); }); },
               "no CUDA device is available for Cuda { gpu_id: 0 }"});
  e.push_back({"S03", "out of host memory allocating {bytes} bytes", Where::Cpu,
               [](D) { return raised_by([] { Tensor::empty({size_t{1} << 60}, DType::U8, Device::cpu()); }); },
               "out of host memory allocating 1152921504606846976 bytes"});
  e.push_back({"S03", "out of host memory allocating {bytes} bytes", Where::Cpu,
               [](D) {
                 // a broadcast view holds 8 bytes; reading it out would take 2^50
                 Tensor wide = Tensor::ones({1}, DType::F64, Device::cpu()).broadcast_as({size_t{1} << 47});
                 return raised_by([&] { wide.to_vec<double>(); });
               },
               "out of host memory allocating 1125899906842624 bytes"});
  e.push_back({"S05", "out of memory on {device:?} allocating {bytes} bytes", Where::Gpu,
               [](D d) { return raised_by([&] { Tensor::empty({size_t{1} << 50}, DType::U8, d); }); },
               "out of memory on Cuda { gpu_id: 0 } allocating 1125899906842624 bytes"});
  e.push_back({"S04", "{op}: byte range [{begin}, {end}) outside storage of {bytes} bytes", Where::Devices,
               [](D d) {
                 auto s = Storage::allocate(16, d);
                 const char buf[8] = {};
                 return raised_by([&] { s->copy_from_host(10, buf, 8); });
               },
               "copy_from_host: byte range [10, 18) outside storage of 16 bytes"});
  return e;
}

std::vector<Entry> ops_entries() {
  std::vector<Entry> e;
  const auto f32 = [](std::vector<float> v, Shape s, D d) { return Tensor::from_vec(std::move(v), s, d); };
  e.push_back({"O01", "{op}: unsupported dtype {dt:?} on {device:?}", Where::Devices,
               [](D d) { return raised_by([&] { neg(Tensor::arange(0, 3, DType::I64, d)); }); },
               "neg: unsupported dtype I64 on {dev}"});
  e.push_back({"O01", "{op}: unsupported dtype {dt:?} on {device:?}", Where::Devices,
               [](D d) {
                 Tensor a = Tensor::ones({2, 2}, DType::I32, d);
                 return raised_by([&] { matmul(a, a); });
               },
               "matmul: unsupported dtype I32 on {dev}"});
  e.push_back({"O03", "dtype mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}", Where::Devices,
               [](D d) { return raised_by([&] { add(Tensor::ones({2}, DType::F32, d), Tensor::ones({2}, DType::F16, d)); }); },
               "dtype mismatch in add, lhs: F32, rhs: F16"});
  e.push_back({"O04", "shape mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}", Where::Devices,
               [](D d) { return raised_by([&] { add(Tensor::ones({2, 3}, DType::F32, d), Tensor::ones({4}, DType::F32, d)); }); },
               "shape mismatch in add, lhs: [2, 3], rhs: [4]"});
  e.push_back({"O01", "{op}: unsupported dtype {dt:?} on {device:?}", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::rand({2}, DType::I32, d, 0); }); },
               "rand: unsupported dtype I32 on {dev}"});
  e.push_back({"O01", "{op}: unsupported dtype {dt:?} on {device:?}", Where::Devices,
               [](D d) {
                 Tensor x = Tensor::ones({2, 2}, DType::I64, d);
                 return raised_by([&] { scatter_add(x, 0, x, x); });
               },
               "scatter_add: unsupported dtype I64 on {dev}"});
  e.push_back({"O23", "clamp: needs lo <= hi, got lo {lo}, hi {hi}", Where::Devices,
               [](D d) { return raised_by([&] { clamp(x234(d), 1.0, 0.5); }); }, "clamp: needs lo <= hi, got lo 1, hi 0.5"});
  e.push_back({"O24", "randint: low {low} must be below high {high}", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::randint(5, 5, {3}, DType::I64, d, 0); }); },
               "randint: low 5 must be below high 5"});
  e.push_back({"O25", "randint: [{low}, {high}) does not fit in {dt:?} (every value must convert exactly)", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::randint(0, 300, {3}, DType::U8, d, 0); }); },
               "randint: [0, 300) does not fit in U8 (every value must convert exactly)"});
  e.push_back({"O25", "randint: [{low}, {high}) does not fit in {dt:?} (every value must convert exactly)", Where::Devices,
               [](D d) { return raised_by([&] { Tensor::randint(-3000, 0, {3}, DType::F16, d, 0); }); },
               "randint: [-3000, 0) does not fit in F16 (every value must convert exactly)"});
  e.push_back({"O26", "dropout: p must be in [0, 1], got {p}", Where::Devices,
               [](D d) { return raised_by([&] { dropout(x234(d), 1.5, 0); }); }, "dropout: p must be in [0, 1], got 1.5"});
  e.push_back({"O27", "{op}: index has rank {r} but {what} has rank {r2}; they must match", Where::Devices,
               [](D d) {
                 return raised_by([&] { gather(x234(d), 1, Tensor::zeros({2}, DType::I64, d)); });
               },
               "gather: index has rank 1 but x has rank 3; they must match"});
  e.push_back({"O27", "{op}: index has rank {r} but {what} has rank {r2}; they must match", Where::Devices,
               [](D d) {
                 Tensor x = Tensor::zeros({2, 3}, DType::F32, d);
                 return raised_by([&] { scatter_add(x, 0, Tensor::zeros({1, 3}, DType::I64, d), Tensor::ones({3}, DType::F32, d)); });
               },
               "scatter_add: index has rank 2 but src has rank 1; they must match"});
  e.push_back({"O28", "{op}: index shape {shape:?} is larger than {what} shape {shape2:?} at dim {d}", Where::Devices,
               [](D d) {
                 return raised_by([&] { gather(Tensor::zeros({2, 3}, DType::F32, d), 1, Tensor::zeros({3, 1}, DType::I64, d)); });
               },
               "gather: index shape [3, 1] is larger than x shape [2, 3] at dim 0"});
  e.push_back({"O28", "{op}: index shape {shape:?} is larger than {what} shape {shape2:?} at dim {d}", Where::Devices,
               [](D d) {
                 Tensor x = Tensor::zeros({2, 3}, DType::F32, d);
                 return raised_by([&] { scatter_add(x, 0, Tensor::zeros({2, 3}, DType::I64, d), Tensor::ones({2, 2}, DType::F32, d)); });
               },
               "scatter_add: index shape [2, 3] is larger than src shape [2, 2] at dim 1"});
  e.push_back({"O17", "{op}: index {i} out of range for dim {dim} of size {size} (shape {shape:?})", Where::Devices,
               [](D d) {
                 Tensor idx = Tensor::from_vec(std::vector<int64_t>{0, 3}, Shape{2, 1}, d);
                 return raised_by([&] { gather(Tensor::zeros({2, 3}, DType::F32, d), -1, idx); });
               },
               "gather: index 3 out of range for dim 1 of size 3 (shape [2, 3])"});
  e.push_back({"O16", "{op}: indices must be U32, I32 or I64, got {dt:?}", Where::Devices,
               [](D d) { return raised_by([&] { one_hot(Tensor::zeros({2}, DType::F32, d), 3); }); },
               "one_hot: indices must be U32, I32 or I64, got F32"});
  e.push_back({"O29", "one_hot: index {i} is outside [0, {num_classes})", Where::Devices,
               [](D d) {
                 return raised_by([&] { one_hot(Tensor::from_vec(std::vector<int32_t>{0, 3}, Shape{2}, d), 3); });
               },
               "one_hot: index 3 is outside [0, 3)"});
  e.push_back({"O30", "{op}: {what} must have shape (N, C), got {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { cross_entropy(x234(d), Tensor::zeros({2}, DType::I64, d)); }); },
               "cross_entropy: logits must have shape (N, C), got [2, 3, 4]"});
  e.push_back({"O30", "{op}: {what} must have shape (N, C), got {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { nll_loss(Tensor::zeros({3}, DType::F32, d), Tensor::zeros({3}, DType::I64, d)); }); },
               "nll_loss: log_probs must have shape (N, C), got [3]"});
  e.push_back({"O31", "{op}: targets must have shape [{n}] for {what} {shape:?}, got {tshape:?}", Where::Devices,
               [](D d) {
                 return raised_by([&] { cross_entropy(Tensor::zeros({4, 5}, DType::F32, d), Tensor::zeros({3}, DType::I64, d)); });
               },
               "cross_entropy: targets must have shape [4] for logits [4, 5], got [3]"});
  e.push_back({"O32", "{op}: target {t} at position {n} is outside [0, {c}){ignored}", Where::Devices,
               [](D d) {
                 Tensor t = Tensor::from_vec(std::vector<int64_t>{0, 3}, Shape{2}, d);
                 return raised_by([&] { cross_entropy(Tensor::zeros({2, 3}, DType::F32, d), t); });
               },
               "cross_entropy: target 3 at position 1 is outside [0, 3)"});
  e.push_back({"O32", "{op}: target {t} at position {n} is outside [0, {c}){ignored}", Where::Devices,
               [](D d) {
                 Tensor t = Tensor::from_vec(std::vector<int64_t>{-1, -100}, Shape{2}, d);
                 return raised_by([&] { nll_loss(Tensor::zeros({2, 3}, DType::F32, d), t, -100); });
               },
               "nll_loss: target -1 at position 0 is outside [0, 3) and is not ignore_index -100"});
  e.push_back({"O33", "{op}: needs rank >= 2, got shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { tril(Tensor::ones({3}, DType::F32, d)); }); }, "tril: needs rank >= 2, got shape [3]"});
  e.push_back({"O34", "rope: positions shape {shape:?} must be a leading part of x's shape {x_shape:?} (without its last dim)",
               Where::Devices,
               [](D d) { return raised_by([&] { rope(Tensor::zeros({4, 2, 8}, DType::F32, d), Tensor::zeros({3}, DType::I64, d)); }); },
               "rope: positions shape [3] must be a leading part of x's shape [4, 2, 8] (without its last dim)"});
  e.push_back({"O35", "rope: rotary_dim {rd} must be even and at most head_dim {d}", Where::Devices,
               [](D d) {
                 return raised_by([&] {
                   rope(Tensor::zeros({4, 8}, DType::F32, d), Tensor::zeros({4}, DType::I64, d), 1e4, RopeStyle::HalfRotation, 5);
                 });
               },
               "rope: rotary_dim 5 must be even and at most head_dim 8"});
  e.push_back({"O36", "varlen_positions: {which} must have rank 1 and at least one entry, got shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { varlen_positions(Tensor::zeros({0}, DType::U32, d)); }); },
               "varlen_positions: cu_seqlens must have rank 1 and at least one entry, got shape [0]"});
  e.push_back({"O37", "varlen_positions: {which} {values:?} is not cumulative from 0 (entry {i})", Where::Devices,
               [](D d) {
                 return raised_by([&] { varlen_positions(Tensor::from_vec(std::vector<uint32_t>{0, 5, 3}, Shape{3}, d)); });
               },
               "varlen_positions: cu_seqlens [0, 5, 3] is not cumulative from 0 (entry 2)"});
  e.push_back({"O38", "varlen_positions: cu_seqlens_k has {n} entries but cu_seqlens has {m}", Where::Devices,
               [](D d) {
                 return raised_by([&] {
                   varlen_positions(Tensor::from_vec(std::vector<uint32_t>{0, 1, 2}, Shape{3}, d),
                                    Tensor::from_vec(std::vector<uint32_t>{0, 1}, Shape{2}, d));
                 });
               },
               "varlen_positions: cu_seqlens_k has 2 entries but cu_seqlens has 3"});
  e.push_back({"O39", "varlen_positions: sequence {b} has {sq} queries but only {sk} keys", Where::Devices,
               [](D d) {
                 return raised_by([&] {
                   varlen_positions(Tensor::from_vec(std::vector<uint32_t>{0, 3}, Shape{2}, d),
                                    Tensor::from_vec(std::vector<uint32_t>{0, 2}, Shape{2}, d));
                 });
               },
               "varlen_positions: sequence 0 has 3 queries but only 2 keys"});
  e.push_back({"O22",
               "copy_into: dst (shape {shape:?}, stride {stride:?}) is a broadcast view: dim {d} has stride 0, so several "
               "elements would be written to one place",
               Where::Devices,
               [](D d) {
                 return raised_by([&] {
                   copy_into(Tensor::zeros({3}, DType::F32, d).broadcast_as({2, 3}), Tensor::ones({2, 3}, DType::F32, d));
                 });
               },
               "copy_into: dst (shape [2, 3], stride [0, 1]) is a broadcast view: dim 0 has stride 0, so several elements "
               "would be written to one place"});
  e.push_back({"O21", "shape mismatch in matmul, lhs: {lhs:?}, rhs: {rhs:?}: {reason}", Where::Devices,
               [](D d) { return raised_by([&] { matmul(Tensor::ones({2, 3}, DType::F32, d), Tensor::ones({2, 3}, DType::F32, d)); }); },
               "shape mismatch in matmul, lhs: [2, 3], rhs: [2, 3]: inner dims differ: lhs k (its last dim) is 3, rhs k "
               "(its second-to-last dim) is 2"});
  e.push_back({"O21", "shape mismatch in matmul, lhs: {lhs:?}, rhs: {rhs:?}: {reason}", Where::Devices,
               [](D d) { return raised_by([&] { matmul(Tensor::ones({3}, DType::F32, d), Tensor::ones({3, 2}, DType::F32, d)); }); },
               "shape mismatch in matmul, lhs: [3], rhs: [3, 2]: both sides need rank >= 2 (lhs has rank 1, rhs rank 2)"});
  e.push_back({"O21", "shape mismatch in matmul, lhs: {lhs:?}, rhs: {rhs:?}: {reason}", Where::Devices,
               [](D d) {
                 return raised_by([&] { matmul(Tensor::ones({2, 2, 3}, DType::F32, d), Tensor::ones({3, 3, 2}, DType::F32, d)); });
               },
               "shape mismatch in matmul, lhs: [2, 2, 3], rhs: [3, 3, 2]: batch dims [2] and [3] do not broadcast"});
  e.push_back({"O05", "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { argmax(Tensor::ones({2, 3}, DType::F32, d), 2); }); },
               "argmax: dim 2 out of range for shape [2, 3] (rank 2, valid dims -2..=1)"});
  e.push_back({"O06", "{op}: dim {dim} appears twice in {dims:?} for shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { sum(Tensor::ones({2, 3}, DType::F32, d), {1, 1}); }); },
               "sum: dim 1 appears twice in [1, 1] for shape [2, 3]"});
  e.push_back({"O05", "{op}: dim {dim} out of range for shape {shape:?} (rank {rank}, valid dims {valid})", Where::Devices,
               [](D d) { return raised_by([&] { sum(x234(d), {-4}); }); },
               "sum: dim -4 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)"});
  e.push_back({"O06", "{op}: dim {dim} appears twice in {dims:?} for shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { sum(x234(d), {2, -1}); }); },
               "sum: dim 2 appears twice in [2, -1] for shape [2, 3, 4]"});
  e.push_back({"O07", "{op}: shape {shape:?} has rank {rank}, CUDA kernels take at most {max} dims (call contiguous() and reshape first)",
               Where::Gpu,
               [](D d) { return raised_by([&] { neg(Tensor::ones({1, 1, 1, 1, 1, 1, 1, 1, 2}, DType::F32, d)); }); },
               "neg: shape [1, 1, 1, 1, 1, 1, 1, 1, 2] has rank 9, CUDA kernels take at most 8 dims (call contiguous() and "
               "reshape first)"});
  e.push_back({"O08", "div: integer division by zero", Where::Cpu,
               [](D d) {
                 Tensor a = Tensor::from_vec(std::vector<int32_t>{6, 1}, Shape{2}, d);
                 Tensor b = Tensor::from_vec(std::vector<int32_t>{3, 0}, Shape{2}, d);
                 return raised_by([&] { div(a, b); });
               },
               "div: integer division by zero"});
  e.push_back({"O09", "where: condition must be U8, got {dt:?}", Where::Devices,
               [](D d) {
                 Tensor a = Tensor::ones({2}, DType::F32, d);
                 return raised_by([&] { where(a, a, a); });
               },
               "where: condition must be U8, got F32"});
  e.push_back({"O10", "{op}: needs rank >= 1, got shape []", Where::Devices,
               [](D d) { return raised_by([&] { softmax(Tensor::ones(Shape{}, DType::F32, d)); }); },
               "softmax: needs rank >= 1, got shape []"});
  e.push_back({"O11", "{op}: {param} must have shape [{d}] for x of shape {x_shape:?}, got {shape:?}", Where::Devices,
               [f32](D d) {
                 Tensor x = Tensor::randn({2, 4}, DType::F32, d, 2);
                 return raised_by([&] { rms_norm(x, f32({1, 1, 1}, Shape{3}, d), 1e-5); });
               },
               "rms_norm: weight must have shape [4] for x of shape [2, 4], got [3]"});
  e.push_back({"O12", "{op}: cannot reduce over an empty dim of shape {shape:?}", Where::Devices,
               [](D d) { return raised_by([&] { max(Tensor::ones({2, 0}, DType::F32, d), {1}); }); },
               "max: cannot reduce over an empty dim of shape [2, 0]"});
  e.push_back({"O13", "sum_to: cannot sum {shape:?} down to {target:?}", Where::Devices,
               [](D d) { return raised_by([&] { sum_to(Tensor::ones({2, 3}, DType::F32, d), Shape{4}); }); },
               "sum_to: cannot sum [2, 3] down to [4]"});
  e.push_back({"O14", "cat: empty list of tensors", Where::Cpu, [](D) { return raised_by([] { cat({}, 0); }); },
               "cat: empty list of tensors"});
  e.push_back({"O15", "shape mismatch in cat for dim {dim}, shape for arg 1: {shape:?} shape for arg {i}: {shape_i:?}",
               Where::Devices,
               [](D d) {
                 return raised_by([&] { cat({Tensor::ones({2, 3}, DType::F32, d), Tensor::ones({2, 4}, DType::F32, d)}, 0); });
               },
               "shape mismatch in cat for dim 0, shape for arg 1: [2, 3] shape for arg 2: [2, 4]"});
  e.push_back({"O16", "{op}: indices must be U32, I32 or I64, got {dt:?}", Where::Devices,
               [](D d) {
                 return raised_by([&] { index_select(x234(d), Tensor::zeros({2}, DType::F32, d), 0); });
               },
               "index_select: indices must be U32, I32 or I64, got F32"});
  e.push_back({"O16", "{op}: indices must be U32, I32 or I64, got {dt:?}", Where::Devices,
               [](D d) {
                 return raised_by([&] { embedding(Tensor::zeros({2}, DType::F32, d), Tensor::ones({3, 2}, DType::F32, d)); });
               },
               "embedding: indices must be U32, I32 or I64, got F32"});
  e.push_back({"O17", "{op}: index {i} out of range for dim {dim} of size {size} (shape {shape:?})", Where::Devices,
               [](D d) {
                 Tensor idx = Tensor::from_vec(std::vector<int64_t>{0, 5}, Shape{2}, d);
                 return raised_by([&] { index_select(x234(d), idx, 1); check_device_faults(d); });
               },
               "index_select: index 5 out of range for dim 1 of size 3 (shape [2, 3, 4])"});
  e.push_back({"O17", "{op}: index {i} out of range for dim {dim} of size {size} (shape {shape:?})", Where::Devices,
               [](D d) {
                 Tensor ids = Tensor::from_vec(std::vector<int64_t>{1, 4}, Shape{2}, d);
                 return raised_by([&] { embedding(ids, Tensor::ones({3, 2}, DType::F32, d)); check_device_faults(d); });
               },
               "embedding: index 4 out of range for dim 0 of size 3 (shape [3, 2])"});
  e.push_back({"O18", "index_select: indices must have rank 1, got shape {shape:?}", Where::Devices,
               [](D d) {
                 Tensor idx = Tensor::from_vec(std::vector<int64_t>{0, 1}, Shape{1, 2}, d);
                 return raised_by([&] { index_select(x234(d), idx, 0); });
               },
               "index_select: indices must have rank 1, got shape [1, 2]"});
  e.push_back({"O19", "embedding: table must have rank 2 (vocab, hidden), got shape {shape:?}", Where::Devices,
               [](D d) {
                 Tensor ids = Tensor::from_vec(std::vector<int64_t>{0, 1}, Shape{2}, d);
                 return raised_by([&] { embedding(ids, x234(d)); });
               },
               "embedding: table must have rank 2 (vocab, hidden), got shape [2, 3, 4]"});
  // candle's device mismatch (catalogued as A01) from an elementwise op.
  e.push_back({"A01", "device mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}", Where::Gpu,
               [](D d) { return raised_by([&] { add(Tensor::ones({2}, DType::F32, d), Tensor::ones({2}, DType::F32, D::cpu())); }); },
               "device mismatch in add, lhs: Cuda { gpu_id: 0 }, rhs: Cpu"});
  return e;
}

std::vector<Entry> autograd_entries() {
  std::vector<Entry> e;
  e.push_back({"G01", "backward: the tensor {shape:?} does not require grad and has no graph (computed under NoGradGuard, "
               "detached, or from inputs none of which requires grad)",
               Where::Devices, [](D d) { return raised_by([&] { Tensor::ones({1}, DType::F32, d).backward(); }); },
               "backward: the tensor [1] does not require grad and has no graph (computed under NoGradGuard, detached, "
               "or from inputs none of which requires grad)"});
  e.push_back({"G02", "backward: the seed gradient must match the output {shape:?} {dt:?} on {device:?}, got {seed}",
               Where::Devices,
               [](D d) {
                 Tensor y = mul(f64_leaf(d), f64_leaf(d));
                 return raised_by([&] { y.backward(Tensor::ones({2}, DType::F64, d)); });
               },
               "backward: the seed gradient must match the output [3] F64 on {dev}, got [2] F64 on {dev}"});
  e.push_back({"G03", "backward: the output has shape {shape:?} ({n} elements); without a seed only a single-element loss "
               "can be differentiated, pass a seed gradient of the output's shape: backward(seed)",
               Where::Devices, [](D d) { return raised_by([&] { mul(f64_leaf(d), f64_leaf(d)).backward(); }); },
               "backward: the output has shape [3] (3 elements); without a seed only a single-element loss can be "
               "differentiated, pass a seed gradient of the output's shape: backward(seed)"});
  e.push_back({"G04", "backward: the graph through '{op}' was freed by an earlier backward pass; pass retain_graph = true "
               "to the first pass to run backward through the same graph twice",
               Where::Devices,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 Tensor loss = sum_all(mul(x, x));
                 loss.backward();
                 return raised_by([&] { loss.backward(); });
               },
               "backward: the graph through 'sum' was freed by an earlier backward pass; pass retain_graph = true to "
               "the first pass to run backward through the same graph twice"});
  e.push_back({"G05", "backward of '{op}': the rule returned {n} gradients for {m} inputs", Where::Devices,
               [](D d) {
                 Tensor y = recorded(f64_leaf(d), "twice", [](const Tensor& g) { return Grads{g, g}; });
                 return raised_by([&] { y.backward(Tensor::ones({3}, DType::F64, d)); });
               },
               "backward of 'twice': the rule returned 2 gradients for 1 inputs"});
  e.push_back({"G06", "backward of '{op}': gradient for input {i} is {shape:?} {dt:?} on {device:?} but the input is "
               "{in_shape:?} {in_dt:?} on {in_device:?}",
               Where::Devices,
               [](D d) {
                 Tensor y = recorded(f64_leaf(d), "short", [](const Tensor& g) { return Grads{g.narrow(0, 0, 2)}; });
                 return raised_by([&] { y.backward(Tensor::ones({3}, DType::F64, d)); });
               },
               "backward of 'short': gradient for input 0 is [2] F64 on {dev} but the input is [3] F64 on {dev}"});
  e.push_back({"G07", "backward of '{op}': the node has no backward rule", Where::Devices,
               [](D d) {
                 Tensor y = recorded(f64_leaf(d), "opaque", nullptr);
                 return raised_by([&] { y.backward(Tensor::ones({3}, DType::F64, d)); });
               },
               "backward of 'opaque': the node has no backward rule"});
  e.push_back({"G08", "backward: cannot sum two gradients of {what} with shapes {a:?} and {b:?}", Where::Devices,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 x.set_grad(Tensor::ones({2}, DType::F64, d));
                 return raised_by([&] { sum_all(x).backward(); });
               },
               "backward: cannot sum two gradients of leaf [3] with shapes [2] and [3]"});
  e.push_back({"G09", "backward: cannot sum two gradients of {what} with dtypes {a:?} and {b:?}", Where::Devices,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 x.set_grad(Tensor::ones({3}, DType::F32, d));
                 return raised_by([&] { sum_all(x).backward(); });
               },
               "backward: cannot sum two gradients of leaf [3] with dtypes F32 and F64"});
  e.push_back({"G10", "backward: cannot sum two gradients of {what} on {a:?} and {b:?}", Where::Gpu,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 x.set_grad(Tensor::ones({3}, DType::F64, D::cpu()));
                 return raised_by([&] { sum_all(x).backward(); });
               },
               "backward: cannot sum two gradients of leaf [3] on Cpu and Cuda { gpu_id: 0 }"});
  // ---- custom ops ----
  e.push_back({"G11", "custom op: the op has no name (set CustomOp::name)", Where::Devices,
               [](D d) {
                 autograd::CustomOp op = cube_op();
                 op.name.clear();
                 return raised_by([&] { op({f64_leaf(d)}); });
               },
               "custom op: the op has no name (set CustomOp::name)"});
  e.push_back({"G12", "custom op '{name}': called with no inputs", Where::Cpu,
               [](D) { return raised_by([] { cube_op()({}); }); }, "custom op 'cube': called with no inputs"});
  e.push_back({"G13", "custom op '{name}': input {i} is an empty (default-constructed) tensor", Where::Devices,
               [](D d) { return raised_by([&] { cube_op()({f64_leaf(d), Tensor()}); }); },
               "custom op 'cube': input 1 is an empty (default-constructed) tensor"});
  e.push_back({"G14", "custom op '{name}': no {cpu|cuda} forward, so it cannot run on {device:?} inputs", Where::Devices,
               [](D d) {
                 autograd::CustomOp op = cube_op();
                 op.cpu_forward = op.cuda_forward = nullptr;
                 return raised_by([&] { op({f64_leaf(d)}); });
               },
               "custom op 'cube': no {kind} forward, so it cannot run on {dev} inputs"});
  e.push_back({"G15", "custom op '{name}': input {i} requires grad but the op has no backward; set CustomOp::backward, "
               "run it under NoGradGuard, or pass detached inputs",
               Where::Devices,
               [](D d) {
                 autograd::CustomOp op = cube_op();
                 op.backward = nullptr;
                 return raised_by([&] { op({f64_leaf(d)}); });
               },
               "custom op 'cube': input 0 requires grad but the op has no backward; set CustomOp::backward, run it "
               "under NoGradGuard, or pass detached inputs"});
  e.push_back({"G16", "custom op '{name}': the {cpu|cuda} forward returned no output", Where::Devices,
               [](D d) {
                 autograd::CustomOp op = cube_op();
                 op.cpu_forward = op.cuda_forward = [](const Grads&) { return Grads{}; };
                 return raised_by([&] { op({f64_leaf(d)}); });
               },
               "custom op 'cube': the {kind} forward returned no output"});
  e.push_back({"G17", "custom op '{name}': forward output {i} is on {device:?} but the inputs are on {inputs_device:?}",
               Where::Gpu,
               [](D d) {
                 autograd::CustomOp op = cube_op();
                 op.cuda_forward = [](const Grads& in) { return Grads{in[0].to_device(D::cpu())}; };
                 return raised_by([&] { op({f64_leaf(d)}); });
               },
               "custom op 'cube': forward output 0 is on Cpu but the inputs are on Cuda { gpu_id: 0 }"});
  e.push_back({"A01", "device mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}", Where::Gpu,
               [](D d) { return raised_by([&] { cube_op()({f64_leaf(D::cpu()), f64_leaf(d)}); }); },
               "device mismatch in cube, lhs: Cpu, rhs: Cuda { gpu_id: 0 }"});
  e.push_back({"G29", "backward of '{op}': a tensor it saved ({shape:?} {dt:?}) was modified in place after the forward (its "
               "storage is at version {now}, the forward saw version {then}); modify a copy, or run the forward again after "
               "the change", Where::Devices,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 Tensor w = Tensor::from_vec(std::vector<double>{1, 2, 3}, Shape{3}, d);
                 Tensor y = mul(x, w);
                 copy_into(w, Tensor::zeros({3}, DType::F64, d));
                 return raised_by([&] { y.backward(Tensor::ones({3}, DType::F64, d)); });
               },
               "backward of 'mul': a tensor it saved ([3] F64) was modified in place after the forward (its storage is at "
               "version 2, the forward saw version 1); modify a copy, or run the forward again after the change"});
  // ---- gradcheck ----
  e.push_back({"G18", "gradcheck: the function's output is an empty (default-constructed) tensor", Where::Cpu,
               [](D d) { return raised_by([&] { autograd::gradcheck([](const Grads&) { return Tensor(); }, {f64_leaf(d)}); }); },
               "gradcheck: the function's output is an empty (default-constructed) tensor"});
  e.push_back({"G19", "gradcheck: the function must return a float tensor, got {dt:?}", Where::Cpu,
               [](D d) {
                 return raised_by([&] { autograd::gradcheck([](const Grads& in) { return gt(in[0], in[0]); }, {f64_leaf(d)}); });
               },
               "gradcheck: the function must return a float tensor, got U8"});
  e.push_back({"G20", "gradcheck: the output {shape:?} has no graph: the function does not depend on its inputs through "
               "recorded ops",
               Where::Cpu,
               [](D d) {
                 return raised_by([&] { autograd::gradcheck([](const Grads& in) { return in[0].detach(); }, {f64_leaf(d)}); });
               },
               "gradcheck: the output [3] has no graph: the function does not depend on its inputs through recorded ops"});
  e.push_back({"G21", "gradcheck: every input must be a float tensor (capture index or mask tensors in f)", Where::Cpu,
               [](D) {
                 Tensor idx = Tensor::arange(0, 3, DType::I64, D::cpu());
                 return raised_by([&] { autograd::gradcheck([](const Grads& in) { return in[0]; }, {idx}); });
               },
               "gradcheck: every input must be a float tensor (capture index or mask tensors in f)"});
  e.push_back({"G22", "gradcheck_device: the output on {device:?} has {n} elements, on Cpu {m}", Where::Cpu,
               [](D) {
                 // The device run sees f32 inputs, the reference f64: a function that differs by
                 // dtype shows the check on the CPU alone.
                 auto f = [](const Grads& in) {
                   Tensor y = mul(in[0], in[0]);
                   return in[0].dtype() == DType::F64 ? y : y.narrow(0, 0, 2);
                 };
                 return raised_by([&] { autograd::gradcheck_device(f, {f64_leaf(D::cpu())}, D::cpu()); });
               },
               "gradcheck_device: the output on Cpu has 2 elements, on Cpu 3"});
  // ---- optimizers ----
  e.push_back({"G23", "{optimizer}: parameter {i} is an empty (default-constructed) tensor", Where::Cpu,
               [](D) { return raised_by([] { autograd::SGD({Tensor()}, {0.1}); }); }, "SGD: parameter 0 is an empty (default-constructed) tensor"});
  e.push_back({"G24", "{optimizer}: parameter {i} has dtype {dt:?}; parameters must be float", Where::Devices,
               [](D d) { return raised_by([&] { autograd::AdamW({Tensor::arange(0, 3, DType::I64, d)}, {}); }); },
               "AdamW: parameter 0 has dtype I64; parameters must be float"});
  e.push_back({"G25", "{optimizer}: parameter {i} {shape:?} is computed by '{op}', not a leaf; pass the tensors that were "
               "created with requires_grad(true)",
               Where::Devices,
               [](D d) {
                 Tensor x = f64_leaf(d);
                 return raised_by([&] { autograd::SGD({x, mul(x, x)}, {0.1}); });
               },
               "SGD: parameter 1 [3] is computed by 'mul', not a leaf; pass the tensors that were created with "
               "requires_grad(true)"});
  e.push_back({"G26", "{optimizer}: parameter {i} {shape:?} does not require grad", Where::Devices,
               [](D d) { return raised_by([&] { autograd::AdamW({Tensor::ones({1}, DType::F32, d)}, {}); }); },
               "AdamW: parameter 0 [1] does not require grad"});
  e.push_back({"G27", "{optimizer}: parameter {i} {shape:?} is not contiguous", Where::Devices,
               [](D d) {
                 Tensor mt = Tensor::randn({2, 3}, DType::F64, d, 1).t();
                 mt.requires_grad(true);
                 return raised_by([&] { autograd::SGD({mt}, {0.1}); });
               },
               "SGD: parameter 0 [3, 2] is not contiguous"});
  e.push_back({"G28", "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum {momentum}, dampening {dampening})",
               Where::Devices,
               [](D d) {
                 autograd::SGDOptions o;
                 o.nesterov = true;
                 o.momentum = 0.9;
                 o.dampening = 0.5;
                 return raised_by([&] { autograd::SGD({f64_leaf(d)}, o); });
               },
               "SGD: nesterov needs momentum > 0 and dampening 0 (got momentum 0.9, dampening 0.5)"});
  return e;
}

std::vector<Entry> cuda_entries() {
  std::vector<Entry> e;
  // The macro's text is checked in every build (a CPU-only build names the code only).
  e.push_back({"C01", "CUDA error {code} ({name}) in {expr} at {file}:{line}", Where::Cpu,
               [](D) { return cuda_check_text(false); }, cuda_check_text(true).what});
#ifdef WICK_WITH_CUDA
  const std::string cublas_expected = cublas_check_text(true).what;
#else
  const std::string cublas_expected =
      "cuBLAS error 15 (CUBLAS_STATUS_NOT_SUPPORTED) in cublas_not_supported() at " + std::string(__FILE__) + ":0";
#endif
  e.push_back({"C02", "cuBLAS error {status} ({name}) in {expr} at {file}:{line}", Where::CudaBuild,
               [](D) {
#ifdef WICK_WITH_CUDA
                 return cublas_check_text(false);
#else
                 return Raised{};
#endif
               },
               cublas_expected});
  // The kernels' own guards, behind the op layer's checks: reached only by calling kernels/
  // directly, which the calls below do (each throws before touching a pointer or the GPU).
  auto kernel_entry = [&](const char* id, const char* templ, Where where, std::function<void()> f,
                          const char* expected) {
    e.push_back({id, templ, where, [f](D) { return raised_by(f); }, expected});
  };
  kernel_entry("C03", "cuBLAS: invalid device {device}", Where::CudaBuild,
               KERNEL_CALL(kernels::gemm(kernels::ElemType::F32, -1, gemm_1x1x1(), nullptr, nullptr, nullptr)),
               "cuBLAS: invalid device -1");
  kernel_entry("C04", "cuBLAS gemm: F32, F64, F16 or BF16 only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::gemm(kernels::ElemType::I32, 0, gemm_1x1x1(), nullptr, nullptr, nullptr)),
               "cuBLAS gemm: F32, F64, F16 or BF16 only, got I32");
  kernel_entry("C05", "CUDA kernel: unknown element type, got {type}", Where::CudaBuild,
               KERNEL_CALL(kernels::reduce_rows(kernels::ReduceOp::Sum, static_cast<kernels::ElemType>(42), nullptr, 1,
                                                1, nullptr)),
               "CUDA kernel: unknown element type, got ElemType(42)");
  kernel_entry("C06", "{kernel} kernel: float types only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::unary(kernels::UnaryOp::Neg, kernels::ElemType::I32, nullptr,
                                          kernels::StridedView{}, nullptr, 1, 0, 0)),
               "unary kernel: float types only, got I32");
  kernel_entry("C06", "{kernel} kernel: float types only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::softmax_rows(false, kernels::ElemType::I64, nullptr, nullptr, 1, 1)),
               "softmax kernel: float types only, got I64");
  kernel_entry("C07", "{kernel} kernel: element size must be 1, 2, 4 or 8, got {size}", Where::CudaBuild,
               KERNEL_CALL(kernels::copy_strided(3, nullptr, kernels::StridedView{}, nullptr, kernels::StridedView{}, 1)),
               "copy kernel: element size must be 1, 2, 4 or 8, got 3");
  kernel_entry("C07", "{kernel} kernel: element size must be 1, 2, 4 or 8, got {size}", Where::CudaBuild,
               KERNEL_CALL(kernels::index_select(16, nullptr, 1, 1, 1, nullptr, 1, nullptr, kernels::IndexCheck{})),
               "index_select kernel: element size must be 1, 2, 4 or 8, got 16");
  kernel_entry("C07", "{kernel} kernel: element size must be 1, 2, 4 or 8, got {size}", Where::CudaBuild,
               KERNEL_CALL(kernels::fill(3, nullptr, nullptr, 1)), "fill kernel: element size must be 1, 2, 4 or 8, got 3");
  kernel_entry("C08", "index_add kernel: F32 or F64 only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::index_add(kernels::ElemType::F16, nullptr, 1, 1, 1, nullptr, 1, nullptr)),
               "index_add kernel: F32 or F64 only, got F16");
  kernel_entry("C16", "scatter_add kernel: F32 or F64 only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::scatter_add(kernels::ElemType::BF16, nullptr, kernels::StridedView{}, nullptr,
                                                kernels::StridedView{}, 0, nullptr, kernels::StridedView{})),
               "scatter_add kernel: F32 or F64 only, got BF16");
  kernel_entry("C07", "{kernel} kernel: element size must be 1, 2, 4 or 8, got {size}", Where::CudaBuild,
               KERNEL_CALL(kernels::gather(3, nullptr, kernels::StridedView{}, nullptr, kernels::StridedView{}, 0, nullptr)),
               "gather kernel: element size must be 1, 2, 4 or 8, got 3");
  kernel_entry("C06", "{kernel} kernel: float types only, got {type:?}", Where::CudaBuild,
               KERNEL_CALL(kernels::fill_uniform(kernels::ElemType::I32, nullptr, 1, 0)), "rand kernel: float types only, got I32");
  kernel_entry("C09", "{kernel} kernel: more than 2^31 - 1 rows, got {rows}", Where::CudaBuild,
               KERNEL_CALL(kernels::rms_norm_rows(kernels::ElemType::F32, nullptr, nullptr, nullptr, int64_t{1} << 31, 1,
                                                  1e-5)),
               "norm kernel: more than 2^31 - 1 rows, got 2147483648");
  kernel_entry("C10", "flash_fwd: head_size {head_size} is outside 1..512", Where::CudaBuild,
               KERNEL_CALL(kernels::flash_fwd(flash_params(520, 2, 1), nullptr)),
               "flash_fwd: head_size 520 is outside 1..512");
  kernel_entry("C11", "flash_fwd: num_heads {num_heads} is not a multiple of num_heads_k {num_heads_k}",
               Where::CudaBuild, KERNEL_CALL(kernels::flash_fwd(flash_params(64, 3, 2), nullptr)),
               "flash_fwd: num_heads 3 is not a multiple of num_heads_k 2");
  kernel_entry("C12", "flash_fwd_naive: head_size {head_size} is larger than {max}, the largest the kernels support",
               Where::CudaBuild, KERNEL_CALL(kernels::flash_fwd_naive(flash_params(520, 2, 1), nullptr)),
               "flash_fwd_naive: head_size 520 is larger than 512, the largest the kernels support");
  kernel_entry("C17", "flash_bwd: head_size {head_size} is outside [1, 512]", Where::CudaBuild,
               KERNEL_CALL(kernels::flash_bwd(flash_bwd_params(520, 2, 1), nullptr)),
               "flash_bwd: head_size 520 is outside [1, 512]");
  kernel_entry("C18", "flash_bwd: num_heads {num_heads} is not a multiple of num_heads_k {num_heads_k}",
               Where::CudaBuild, KERNEL_CALL(kernels::flash_bwd(flash_bwd_params(64, 3, 2), nullptr)),
               "flash_bwd: num_heads 3 is not a multiple of num_heads_k 2");
  kernel_entry("C19", "flash_bwd: the forward's out and lse and the gradient of out are required", Where::CudaBuild,
               KERNEL_CALL(kernels::flash_bwd(flash_bwd_params(64, 4, 2), nullptr)),
               "flash_bwd: the forward's out and lse and the gradient of out are required");
  kernel_entry("C20", "flash_bwd: the f32 scratch buffers dsum, dq_accum{, dk_accum and dv_accum} are required",
               Where::CudaBuild, KERNEL_CALL(kernels::flash_bwd(flash_bwd_with_outputs(), nullptr)),
               "flash_bwd: the f32 scratch buffers dsum, dq_accum, dk_accum and dv_accum are required");
  return e;
}


// A file in the temp folder holding `bytes`; returns its path.
std::string scratch_file(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("wick_catalog_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// A safetensors file: the 8-byte little-endian length of `header`, the header, `data_bytes` zero bytes.
std::string st_file(const std::string& name, const std::string& header, size_t data_bytes, uint64_t claimed_len = 0) {
  const uint64_t n = claimed_len ? claimed_len : header.size();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return scratch_file(name, bytes + header + std::string(data_bytes, '\0'));
}

Raised load_error(const std::string& path) {
  return raised_by([&] { load_safetensors(path); });
}

// A DLManagedTensor over a static f64 buffer, for the refusals (none of them takes ownership).
struct Dl {
  double buffer[4] = {1, 2, 3, 4};
  int64_t shape[1] = {2};
  int64_t strides[1] = {1};
  DLManagedTensor m{};
  Dl() {
    m.dl_tensor.data = buffer;
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = 1;
    m.dl_tensor.dtype = {kDLFloat, 64, 1};
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
  }
};

Raised dl_error(const std::function<void(Dl&)>& edit) {
  Dl dl;
  edit(dl);
  return raised_by([&] { from_dlpack(&dl.m); });
}

std::vector<Entry> io_entries() {
  std::vector<Entry> e;
  auto add = [&](const char* id, const char* templ, std::function<Raised()> trigger, std::string expected) {
    e.push_back({id, templ, Where::Cpu, [trigger](D) { return trigger(); }, std::move(expected)});
  };
  const std::string tmp = std::filesystem::temp_directory_path().string();
  const std::string dir = tmp + "/wick_catalog_dir";
  std::filesystem::create_directories(dir);
  add("T01", "{op}: cannot {action} {path}: {reason}", [] { return load_error("/no/such/dir/model.safetensors"); },
      "load_safetensors: cannot open /no/such/dir/model.safetensors: No such file or directory");
  add("T01", "{op}: cannot {action} {path}: {reason}", [dir] { return load_error(dir); },
      "load_safetensors: cannot read " + dir + ": Is a directory");
  add("T01", "{op}: cannot {action} {path}: {reason}",
      [] { return raised_by([] { save_safetensors("/no/such/dir/model.safetensors", {}); }); },
      "save_safetensors: cannot open /no/such/dir/model.safetensors: No such file or directory");
  const std::string p = tmp + "/wick_catalog_";
  add("T02", "load_safetensors: {path}: the file has {n} bytes, fewer than the 8 of the header length",
      [] { return load_error(scratch_file("f02", "abcde")); },
      "load_safetensors: " + p + "f02: the file has 5 bytes, fewer than the 8 of the header length");
  add("T03", "load_safetensors: {path}: the header length {n} is larger than the {m} bytes after it",
      [] { return load_error(st_file("f03", std::string(10, ' '), 0, 100)); },
      "load_safetensors: " + p + "f03: the header length 100 is larger than the 10 bytes after it");
  std::string parse_detail;
  try {
    const nlohmann::json unreachable = nlohmann::json::parse(R"({"a": )");
    parse_detail = unreachable.dump();
  } catch (const nlohmann::json::parse_error& err) {
    parse_detail = err.what();
  }
  add("T04", "load_safetensors: {path}: the header is not valid JSON: {detail}",
      [] { return load_error(st_file("f04", R"({"a": )", 0)); },
      "load_safetensors: " + p + "f04: the header is not valid JSON: " + parse_detail);
  add("T05", "load_safetensors: {path}: the header is not a JSON object", [] { return load_error(st_file("f05", "[1, 2]", 0)); },
      "load_safetensors: " + p + "f05: the header is not a JSON object");
  const char* f06 = "load_safetensors: {path}: tensor '{name}' {problem}";
  const std::vector<std::pair<std::string, std::string>> bad_entries = {
      {R"({"w": 3})", "is not a JSON object"},
      {R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", "has no \"dtype\" string"},
      {R"({"w": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})",
       "has dtype \"I8\", which wick cannot hold (it reads U8, U32, I16, I32, I64, BF16, F16, F32, F64, and BOOL as U8)"},
      {R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "has no \"shape\" array of non-negative integers"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
       "has no \"data_offsets\" pair [begin, end] of integers with begin <= end"},
      {R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
       "has shape [4294967296, 4294967296], too large to address"},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "spans 8 bytes but shape [3] of F32 needs 12"},
  };
  for (size_t i = 0; i < bad_entries.size(); ++i) {
    const std::string name = "f06_" + std::to_string(i), header = bad_entries[i].first;
    add("T06", f06, [name, header] { return load_error(st_file(name, header, 8)); },
        "load_safetensors: " + p + name + ": tensor 'w' " + bad_entries[i].second);
  }
  add("T07",
      "load_safetensors: {path}: the data offsets must tile the data section without gaps or overlaps, but tensor "
      "'{name}' starts at byte {begin}, not {expected}",
      [] {
        return load_error(st_file("f07",
                                  R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                                  R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                                  12));
      },
      "load_safetensors: " + p +
          "f07: the data offsets must tile the data section without gaps or overlaps, but tensor 'b' starts at byte 8, not 4");
  add("T08", "load_safetensors: {path}: the data offsets end at byte {end} but the data section has {size} bytes",
      [] { return load_error(st_file("f08", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8)); },
      "load_safetensors: " + p + "f08: the data offsets end at byte 4 but the data section has 8 bytes");
  add("T09", "load_safetensors: {path}: __metadata__ is not an object of strings{detail}",
      [] { return load_error(st_file("f09", R"({"__metadata__": {"step": 3}})", 0)); },
      "load_safetensors: " + p + "f09: __metadata__ is not an object of strings (the value of 'step' is not a string)");
  add("T09", "load_safetensors: {path}: __metadata__ is not an object of strings{detail}",
      [] { return load_error(st_file("f09b", R"({"__metadata__": "x"})", 0)); },
      "load_safetensors: " + p + "f09b: __metadata__ is not an object of strings");
  add("T10", "load_safetensors: {path}: the header names '{name}' twice",
      [] {
        return load_error(st_file("f10",
                                  R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                                  R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                                  2));
      },
      "load_safetensors: " + p + "f10: the header names 'w' twice");
  add("T11", "save_safetensors: the name '__metadata__' is reserved for the metadata",
      [p] {
        return raised_by([&] { save_safetensors(p + "f11", {{"__metadata__", Tensor::zeros({1}, DType::F32, D::cpu())}}); });
      },
      "save_safetensors: the name '__metadata__' is reserved for the metadata");
  add("T12", "save_safetensors: tensor '{name}' is an empty (default-constructed) tensor",
      [p] { return raised_by([&] { save_safetensors(p + "f12", {{"w", Tensor()}}); }); },
      "save_safetensors: tensor 'w' is an empty (default-constructed) tensor");
  // ---- DLPack ----
  add("L12", "{op}: {what} is an empty (default-constructed) tensor", [] { return raised_by([] { to_dlpack(Tensor()); }); },
      "to_dlpack: the tensor is an empty (default-constructed) tensor");
  add("D01", "from_dlpack: the DLManagedTensor pointer is null", [] { return raised_by([] { from_dlpack(nullptr); }); },
      "from_dlpack: the DLManagedTensor pointer is null");
  add("D02", "from_dlpack: device type {type} is not one wick can use (kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged)",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.device.device_type = kDLOpenCL; }); },
      "from_dlpack: device type 4 is not one wick can use (kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged)");
  e.push_back({"D03", "from_dlpack: the tensor lives on a CUDA device and this build of wick has no CUDA support",
               Where::CpuOnlyBuild, [](D) { return dl_error([](Dl& d) { d.m.dl_tensor.device.device_type = kDLCUDA; }); },
               "from_dlpack: the tensor lives on a CUDA device and this build of wick has no CUDA support"});
  add("D04", "from_dlpack: dtype code {code}, {bits} bits, {lanes} lanes has no wick dtype",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.dtype = {kDLComplex, 64, 1}; }); },
      "from_dlpack: dtype code 5, 64 bits, 1 lanes has no wick dtype");
  add("D04", "from_dlpack: dtype code {code}, {bits} bits, {lanes} lanes has no wick dtype",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.dtype = {kDLFloat, 32, 4}; }); },
      "from_dlpack: dtype code 2, 32 bits, 4 lanes has no wick dtype");
  add("D05", "from_dlpack: ndim {ndim} with shape {shape} is not a valid shape",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.ndim = -1; }); },
      "from_dlpack: ndim -1 with shape [] is not a valid shape");
  add("D05", "from_dlpack: ndim {ndim} with shape {shape} is not a valid shape",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.shape = nullptr; }); },
      "from_dlpack: ndim 1 with shape null is not a valid shape");
  add("D06", "from_dlpack: strides {strides:?} (shape {shape:?}) have a negative entry; wick's strides only move forward",
      [] { return dl_error([](Dl& d) { d.strides[0] = -1; }); },
      "from_dlpack: strides [-1] (shape [2]) have a negative entry; wick's strides only move forward");
  add("D07", "from_dlpack: byte_offset {n} is not a multiple of the element size {size}",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.byte_offset = 3; }); },
      "from_dlpack: byte_offset 3 is not a multiple of the element size 8");
  add("D08", "from_dlpack: data is null for a tensor of shape {shape:?}",
      [] { return dl_error([](Dl& d) { d.m.dl_tensor.data = nullptr; }); },
      "from_dlpack: data is null for a tensor of shape [2]");
  return e;
}

std::vector<Entry> nn_entries() {
  std::vector<Entry> e;
  auto lin_sd = [] { return nn::Linear(4, 8, true, DType::F32, D::cpu(), 1).state_dict(); };
  e.push_back({"N01", "load_state_dict: '{name}' is an empty (default-constructed) tensor in the state dict", Where::Cpu,
               [lin_sd](D) {
                 auto sd = lin_sd();
                 sd["weight"] = Tensor();
                 return raised_by([&] { nn::Linear(4, 8).load_state_dict(sd); });
               },
               "load_state_dict: 'weight' is an empty (default-constructed) tensor in the state dict"});
  e.push_back({"N02", "load_state_dict: '{name}' has shape {shape:?} in the state dict but {shape2:?} in the module",
               Where::Devices,
               [lin_sd](D d) {
                 return raised_by([&] { nn::Linear(4, 3, true, DType::F32, d).load_state_dict(lin_sd()); });
               },
               "load_state_dict: 'weight' has shape [8, 4] in the state dict but [3, 4] in the module"});
  e.push_back({"N03", "load_state_dict: the state dict lacks {n} parameter(s) of the module: {names}", Where::Cpu,
               [lin_sd](D) {
                 auto sd = lin_sd();
                 sd.erase("bias");
                 return raised_by([&] { nn::Linear(4, 8).load_state_dict(sd); });
               },
               "load_state_dict: the state dict lacks 1 parameter(s) of the module: bias"});
  e.push_back({"N04", "load_state_dict: the state dict has {n} name(s) the module does not: {names}", Where::Cpu,
               [lin_sd](D) {
                 auto sd = lin_sd();
                 for (int i = 0; i < 6; ++i) sd["extra" + std::to_string(i)] = Tensor::zeros({1}, DType::F32, D::cpu());
                 return raised_by([&] { nn::Linear(4, 8).load_state_dict(sd); });
               },
               "load_state_dict: the state dict has 6 name(s) the module does not: extra0, extra1, extra2, extra3, extra4, "
               "... (6 in all)"});
  e.push_back({"N05", "clip_grad_norm: max_norm must be >= 0, got {max_norm}", Where::Cpu,
               [](D) { return raised_by([] { nn::clip_grad_norm({}, -1.0); }); }, "clip_grad_norm: max_norm must be >= 0, got -1"});
  e.push_back({"N06",
               "CosineSchedule: needs 0 < total_steps and warmup_steps <= total_steps, got total_steps {total}, warmup_steps "
               "{warmup}",
               Where::Cpu, [](D) { return raised_by([] { nn::CosineSchedule(1e-3, 100, 200); }); },
               "CosineSchedule: needs 0 < total_steps and warmup_steps <= total_steps, got total_steps 100, warmup_steps 200"});
  return e;
}

std::vector<Entry> catalogue() {
  std::vector<Entry> all;
  for (auto part : {tensor_entries(), storage_entries(), ops_entries(), autograd_entries(), cuda_entries(), io_entries(), nn_entries()})
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

#ifdef WICK_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// Why an entry cannot run here ("" when it can).
std::string skip_reason(Where w) {
  const bool gpu = Device::cuda_available();
  switch (w) {
    case Where::Gpu: return gpu ? "" : "no CUDA device";
    case Where::CudaBuild: return kCudaBuild ? "" : "a build without CUDA";
    case Where::CpuOnlyBuild: return kCudaBuild ? "a build with CUDA" : "";
    case Where::CudaBuildNoGpu: return kCudaBuild && !gpu ? "" : (kCudaBuild ? "a CUDA device is present" : "a build without CUDA");
    default: return "";
  }
}

// Messages no test can trigger, and why.
const std::set<std::string> kUntestable = {
    // An op's CUDA branch in a build without CUDA: such a build cannot make a CUDA tensor
    // (allocation raises S01 first).
    "O02",
    // cuBLAS's 32-bit sizes: needs a batch or matrix dim above 2^31 - 1 in one GEMM, i.e. an
    // output of several GiB at least, allocated before the check.
    "O20",
    // The flash kernels' launch guards: need a GPU whose shared memory cannot hold a kernel
    // instance, or more than 65535 head slots, both refused earlier by the plan's checks.
    "C13", "C14",
    // A device-side fault of a kind no layer formats: every layer that launches device
    // checks registers its formatter first (tensor/device_fault.h).
    "C15",
};

}  // namespace

TEST_CASE("error catalogue: every tensor, storage, ops, autograd and CUDA entry raises its exact text") {
  for (const Entry& e : catalogue()) {
    INFO(e.id, ": ", e.templ);
    // The expected text fits the documented template, whether or not it can run here.
    CHECK(catalog::matches_template(fill(e.expected, e.where == Where::Gpu ? Device::cuda(0) : Device::cpu()), e.templ));
    const std::string why = skip_reason(e.where);
    if (!why.empty()) {
      MESSAGE("SKIPPED (", why, "): ", e.id, " ", e.expected);
      continue;
    }
    std::vector<Device> devices;
    if (e.where == Where::Devices) devices = test::test_devices();
    else if (e.where == Where::Gpu) devices = {Device::cuda(0)};
    else devices = {Device::cpu()};
    for (Device dev : devices) {
      DEVICE_CONTEXT(dev);
      const std::string expected = fill(e.expected, dev);
      CHECK(catalog::matches_template(expected, e.templ));
      catalog::check_raised(e.trigger(dev), e.id, expected);
    }
  }
}

TEST_CASE("error catalogue: a real CUDA failure carries the runtime's code, name and place") {
  SKIP_WITHOUT_CUDA();
  // cudaSetDevice on an ordinal that does not exist, through the allocator.
  const Raised raised = raised_by([] { Tensor::zeros({2}, DType::F32, Device::cuda(99)); });
  const std::string& got = raised.what;
  INFO(got);
  CHECK(raised.code == "C01");
  CHECK(catalog::matches_template(got, "CUDA error {code} ({name}) in {expr} at {file}:{line}"));
  CHECK(got.rfind("CUDA error 101 (invalid device ordinal) in cudaSetDevice(dev.gpu_id) at ", 0) == 0);
  CHECK(got.find("tensor/storage.cpp:") != std::string::npos);
#ifdef WICK_WITH_CUDA
  // The failed call is also the runtime's "last error"; clear it so the next kernel launch
  // check does not report it.
  cudaGetLastError();
#endif
}

TEST_CASE("error catalogue: docs/errors.md lists exactly these sections' messages") {
  const std::string md = catalog::read_errors_md();
  REQUIRE_MESSAGE(!md.empty(), "docs/errors.md not found (run from the repository root)");
  const auto docs = catalog::documented_messages(md);
  std::map<std::string, std::string> tested;
  for (const Entry& e : catalogue()) tested[e.id] = e.templ;
  catalog::check_sections_in_sync(docs, "LSOGCTDN", tested, kUntestable);
  // Every section of the file belongs to one of the catalogue tests (F: test_npy.cpp).
  for (const auto& entry : docs) {
    const std::string &id = entry.first, &templ = entry.second;
    INFO(id, ": ", templ);
    CHECK(std::string("AWXP" "LSOGC" "F" "TDN").find(id[0]) != std::string::npos);
  }
}

TEST_CASE("error catalogue: two faults in an op, the earlier check wins") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    // dtype (O03) before shapes (O04)
    CHECK(error_of([&] { add(Tensor::ones({2, 3}, DType::F32, dev), Tensor::ones({4}, DType::F16, dev)); }) ==
          "dtype mismatch in add, lhs: F32, rhs: F16");
    // an unsupported dtype (O01) after the pair checks, before matmul's shapes
    Tensor a = Tensor::ones({2, 3}, DType::I32, dev);
    CHECK(error_of([&] { matmul(a, Tensor::ones({2, 3}, DType::F32, dev)); }) ==
          "dtype mismatch in matmul, lhs: I32, rhs: F32");
    // reduction dims are checked in ascending order: the repeated 1 (O06) before the 5 (O05)
    CHECK(error_of([&] { sum(a, {5, 1, 1}); }) == "sum: dim 1 appears twice in [5, 1, 1] for shape [2, 3]");
  }
}
