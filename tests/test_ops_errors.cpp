// Every op misuse raises wick::Error with an exact, testable message.
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

TEST_CASE("ops errors: shape, dtype and device mismatches name the op and both sides") {
  Device cpu = Device::cpu();
  Tensor a = Tensor::randn({2, 3}, DType::F32, cpu, 1);
  Tensor b = Tensor::randn({4}, DType::F32, cpu, 2);
  check_error([&] { (void)add(a, b); }, "shape mismatch in add, lhs: [2, 3], rhs: [4]");
  check_error([&] { (void)(a * b); }, "shape mismatch in mul, lhs: [2, 3], rhs: [4]");
  check_error([&] { (void)lt(a, b); }, "shape mismatch in lt, lhs: [2, 3], rhs: [4]");
  check_error([&] { (void)sub(a, a.to_dtype(DType::F16)); }, "dtype mismatch in sub, lhs: F32, rhs: F16");
  check_error([&] { (void)matmul(a, Tensor::randn({4, 5}, DType::F32, cpu, 3)); },
              "shape mismatch in matmul, lhs: [2, 3], rhs: [4, 5]: inner dims differ: lhs k (its last dim) is 3, "
              "rhs k (its second-to-last dim) is 4");
  check_error([&] { (void)matmul(b, a); }, "shape mismatch in matmul, lhs: [4], rhs: [2, 3]: both sides need rank >= 2 (lhs has rank 1, rhs rank 2)");
  check_error([&] { (void)matmul(Tensor::randn({2, 2, 3}, DType::F32, cpu, 4), Tensor::randn({3, 3, 1}, DType::F32, cpu, 5)); },
              "shape mismatch in matmul, lhs: [2, 2, 3], rhs: [3, 3, 1]: batch dims [2] and [3] do not broadcast");
  check_error([&] { (void)cat({a, Tensor::randn({3, 3}, DType::F32, cpu, 6)}, 1); },
              "shape mismatch in cat for dim 1, shape for arg 1: [2, 3] shape for arg 2: [3, 3]");
  check_error([&] { (void)copy_into(a, b); }, "shape mismatch in copy_into, lhs: [2, 3], rhs: [4]");
  if (Device::cuda_available()) {
    Tensor g = b.to_device(Device::cuda(0));
    check_error([&] { (void)add(b, g); }, "device mismatch in add, lhs: Cpu, rhs: Cuda { gpu_id: 0 }");
    check_error([&] { (void)matmul(g, a); }, "device mismatch in matmul, lhs: Cuda { gpu_id: 0 }, rhs: Cpu");
  } else {
    MESSAGE("SKIPPED: device-mismatch texts need a CUDA device");
  }
}

TEST_CASE("ops errors: unsupported dtypes name the op, dtype and device") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    const std::string on = " on " + to_string(dev);
    Tensor i = Tensor::from_vec<int64_t>({1, 2, 3, 4}, {2, 2}, dev);
    check_error([&] { (void)exp(i); }, "exp: unsupported dtype I64" + on);
    check_error([&] { (void)gelu(i); }, "gelu: unsupported dtype I64" + on);
    check_error([&] { (void)softmax(i); }, "softmax: unsupported dtype I64" + on);
    check_error([&] { (void)mean(i, {0}); }, "mean: unsupported dtype I64" + on);
    check_error([&] { (void)matmul(i, i); }, "matmul: unsupported dtype I64" + on);
    check_error([&] { (void)rms_norm(i, i.narrow(0, 0, 1).squeeze(0), 1e-5); }, "rms_norm: unsupported dtype I64" + on);
  }
}

TEST_CASE("ops errors: dims, indices and argument shapes") {
  Device cpu = Device::cpu();
  Tensor x = Tensor::randn({2, 3}, DType::F32, cpu, 7);
  check_error([&] { (void)sum(x, {2}); }, "sum: dim 2 out of range for shape [2, 3] (rank 2, valid dims -2..=1)");
  check_error([&] { (void)sum(x, {1, 1}); }, "sum: dim 1 appears twice in [1, 1] for shape [2, 3]");
  check_error([&] { (void)argmax(x, 5); }, "argmax: dim 5 out of range for shape [2, 3] (rank 2, valid dims -2..=1)");
  check_error([&] { (void)max(Tensor::zeros({2, 0}, DType::F32, cpu), {1}); },
              "max: cannot reduce over an empty dim of shape [2, 0]");
  check_error([&] { (void)softmax(Tensor::full({}, 1.0, DType::F32, cpu)); }, "softmax: needs rank >= 1, got shape []");
  check_error([&] { (void)where(x, x, x); }, "where: condition must be U8, got F32");
  check_error([&] { (void)rms_norm(x, Tensor::ones({4}, DType::F32, cpu), 1e-5); },
              "rms_norm: weight must have shape [3] for x of shape [2, 3], got [4]");
  check_error([&] { (void)layer_norm(x, Tensor::ones({3}, DType::F32, cpu), Tensor::ones({3, 1}, DType::F32, cpu), 1e-5); },
              "layer_norm: bias must have shape [3] for x of shape [2, 3], got [3, 1]");
  Tensor table = Tensor::randn({5, 2}, DType::F32, cpu, 8);
  check_error([&] { (void)index_select(table, Tensor::from_vec<int64_t>({0, 5}, {2}, cpu), 0); },
              "index_select: index 5 out of range for dim 0 of size 5 (shape [5, 2])");
  check_error([&] { (void)index_select(table, Tensor::from_vec<int32_t>({-1}, {1}, cpu), 0); },
              "index_select: index -1 out of range for dim 0 of size 5 (shape [5, 2])");
  check_error([&] { (void)index_select(table, Tensor::from_vec<float>({0.f}, {1}, cpu), 0); },
              "index_select: indices must be U32, I32 or I64, got F32");
  check_error([&] { (void)index_select(table, Tensor::from_vec<int64_t>({0, 1}, {1, 2}, cpu), 0); },
              "index_select: indices must have rank 1, got shape [1, 2]");
  check_error([&] { (void)embedding(Tensor::from_vec<int64_t>({0}, {1}, cpu), x.reshape({6})); },
              "embedding: table must have rank 2 (vocab, hidden), got shape [6]");
  check_error([&] { (void)cat({}, 0); }, "cat: empty list of tensors");
  check_error([&] { (void)cat({x}, 2); }, "cat: dim 2 out of range for shape [2, 3] (rank 2, valid dims -2..=1)");
  check_error([&] { (void)sum_to(x, Shape{4}); }, "sum_to: cannot sum [2, 3] down to [4]");
}

TEST_CASE("ops errors: an empty (default-constructed) input is reported under the op's name") {
  Tensor x = Tensor::randn({2, 3}, DType::F32, Device::cpu(), 9);
  Tensor none;
  // The argument is named: lhs/rhs for binary ops, x for unary ones.
  const std::string empty = " is an empty (default-constructed) tensor";
  check_error([&] { (void)add(x, none); }, "add: rhs" + empty);
  check_error([&] { (void)sub(none, x); }, "sub: lhs" + empty);
  check_error([&] { (void)mul(x, none); }, "mul: rhs" + empty);
  check_error([&] { (void)div(none, x); }, "div: lhs" + empty);
  check_error([&] { (void)maximum(x, none); }, "maximum: rhs" + empty);
  check_error([&] { (void)minimum(none, x); }, "minimum: lhs" + empty);
  check_error([&] { (void)log(none); }, "log: x" + empty);
  check_error([&] { (void)relu(none); }, "relu: x" + empty);
  check_error([&] { (void)gelu(none); }, "gelu: x" + empty);
  check_error([&] { (void)silu(none); }, "silu: x" + empty);
  check_error([&] { (void)powf(none, 2.0); }, "powf: x" + empty);
  check_error([&] { (void)exp(none); }, "exp: x" + empty);
}
