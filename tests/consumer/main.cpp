// Built against an installed wick with a plain C++ compiler. Runs one op of each layer on
// the CPU: a view, a matmul (linked with the cuBLAS path when wick was built with CUDA),
// flash_attn_varlen (linked with the CUDA kernels then) and a backward pass.
#include <wick.h>

#include <cstdio>
#include <vector>

// With WICK_CONSUMER_NO_CUDA_HEADERS (a wick built with CUDA, and a compiler that does not
// find the toolkit's headers by itself), seeing cuda_runtime.h means an include directory
// of the toolkit reached this build through the package.
#if defined(WICK_CONSUMER_NO_CUDA_HEADERS) && __has_include(<cuda_runtime.h>)
#error "cuda_runtime.h is visible: the installed wick hands its consumers a CUDA include directory"
#endif

namespace {
bool check(bool ok, const char* what) {
  std::printf("consumer: %-40s %s\n", what, ok ? "ok" : "WRONG");
  return ok;
}
}  // namespace

int main() {
  using namespace wick;
  const Device cpu = Device::cpu();
  bool ok = true;

  Tensor t = Tensor::arange(0, 6, DType::F32, cpu).reshape({2, 3});
  Tensor col = t.narrow(1, 1, 1);
  auto v = col.to_vec<float>();
  ok &= check(v.size() == 2 && v[0] == 1.0f && v[1] == 4.0f && col.same_storage(t), "narrow is a view");

  // [[0 1 2] [3 4 5]] x [[1] [1] [1]] = [[3] [12]]
  auto m = matmul(t, Tensor::ones({3, 1}, DType::F32, cpu)).to_vec<float>();
  ok &= check(m.size() == 2 && m[0] == 3.0f && m[1] == 12.0f, "matmul");

  // One sequence of one token, head size 8: the only key has weight 1, so out == v.
  std::vector<bf16> qv, vv;
  for (int i = 0; i < 8; ++i) {
    qv.push_back(bf16(0.5f * i));
    vv.push_back(bf16(1.25f - i));
  }
  Tensor q = Tensor::from_vec(qv, {1, 1, 8}, cpu);
  Tensor kv = Tensor::from_vec(vv, {1, 1, 8}, cpu);
  Tensor cu = Tensor::from_vec<uint32_t>({0, 1}, {2}, cpu);
  auto out = flash_attn_varlen(q, kv, kv, cu, cu, 1, 1, 0.125f, true).to_vec<bf16>();
  bool same = out.size() == 8;
  for (size_t i = 0; same && i < 8; ++i) same = float(out[i]) == float(vv[i]);
  ok &= check(same, "flash_attn_varlen");

  // d(sum(x * x))/dx = 2x
  Tensor x = Tensor::from_vec<float>({1.0f, -3.0f}, {2}, cpu);
  x.requires_grad(true);
  sum_all(x * x).backward();
  auto g = x.grad().to_vec<float>();
  ok &= check(g.size() == 2 && g[0] == 2.0f && g[1] == -6.0f, "backward");

  std::printf("consumer: CUDA device available: %s\n", Device::cuda_available() ? "yes" : "no");
  return ok ? 0 : 1;
}
