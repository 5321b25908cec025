// Builds against an installed wick and checks one view and one value.
#include <wick.h>

#include <cstdio>

int main() {
  auto t = wick::Tensor::arange(0, 6, wick::DType::F32, wick::Device::cpu()).reshape({2, 3});
  auto col = t.narrow(1, 1, 1);
  auto v = col.to_vec<float>();
  bool ok = v.size() == 2 && v[0] == 1.0f && v[1] == 4.0f && col.same_storage(t);
  std::printf("consumer: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
