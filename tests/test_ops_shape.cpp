// cat, index_select and embedding against plain loops, on every device and layout.
#include "test_ops_util.h"

using namespace wick;
using namespace wick::test;

TEST_CASE("ops: cat along each dim of strided inputs") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
      INFO(dtype_name(dt));
      Tensor a = cast(Tensor::randn({2, 3, 4}, DType::F64, dev, 1), dt);
      Tensor b = cast(Tensor::randn({2, 4, 3}, DType::F64, dev, 2), dt).transpose(1, 2);  // (2, 3, 4) strided
      Tensor c = cast(Tensor::randn({2, 3, 9}, DType::F64, dev, 3), dt).narrow(2, 5, 4);  // (2, 3, 4) offset
      for (size_t dim = 0; dim < 3; ++dim) {
        INFO("dim ", dim);
        Tensor out = cat({a, b, c}, dim);
        std::vector<size_t> d = a.dims();
        d[dim] *= 3;
        CHECK(out.dims() == d);
        auto av = a.to_f64_vec(), bv = b.to_f64_vec(), cv = c.to_f64_vec();
        std::vector<double> want(out.elem_count());
        for (size_t i = 0; i < want.size(); ++i) {
          auto idx = unravel(i, d);
          size_t which = idx[dim] / a.dim(dim);
          idx[dim] %= a.dim(dim);
          size_t flat = (idx[0] * 3 + idx[1]) * 4 + idx[2];
          want[i] = which == 0 ? av[flat] : which == 1 ? bv[flat] : cv[flat];
        }
        CHECK(out.to_f64_vec() == want);
      }
    }
  }
}

TEST_CASE("ops: index_select with each index dtype and dim, and embedding") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({4, 6, 5}, DType::F32, dev, 11).permute({1, 0, 2});  // (6, 4, 5) strided
    auto xv = x.to_f64_vec();
    const std::vector<int64_t> ids{3, 0, 3, 2};
    for (DType it : {DType::I64, DType::I32, DType::U32})
      for (size_t dim = 0; dim < 3; ++dim) {
        INFO(dtype_name(it), " dim ", dim);
        Tensor idx = cast(Tensor::from_vec<int64_t>(ids, {4}, dev), it);
        Tensor out = index_select(x, idx, dim);
        std::vector<size_t> d = x.dims();
        d[dim] = ids.size();
        CHECK(out.dims() == d);
        std::vector<double> want(out.elem_count());
        for (size_t i = 0; i < want.size(); ++i) {
          auto ix = unravel(i, d);
          ix[dim] = static_cast<size_t>(ids[ix[dim]]);
          want[i] = xv[(ix[0] * 4 + ix[1]) * 5 + ix[2]];
        }
        CHECK(out.to_f64_vec() == want);
      }
    Tensor table = Tensor::randn({10, 3}, DType::F16, dev, 12);
    Tensor tok = Tensor::from_vec<uint32_t>({9, 1, 1, 4, 0, 7}, {2, 3}, dev);
    Tensor e = embedding(tok, table);
    CHECK(e.dims() == std::vector<size_t>{2, 3, 3});
    auto tv = table.to_f64_vec(), ev = e.to_f64_vec();
    const std::vector<size_t> tk{9, 1, 1, 4, 0, 7};
    for (size_t i = 0; i < 6; ++i)
      for (size_t h = 0; h < 3; ++h) CHECK(ev[i * 3 + h] == tv[tk[i] * 3 + h]);
  }
}
