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

// The range check reads CPU indices where they lie: index views with an offset, or with a
// stride (made contiguous first), are read through their layout, on every device, both for
// the values selected and for the error.
TEST_CASE("ops: index_select reads offset and strided index views, and checks them") {
  for (Device dev : test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::randn({5, 3}, DType::F32, dev, 21);
    auto xv = x.to_f64_vec();
    auto rows = [&](std::vector<size_t> r) {
      std::vector<double> v;
      for (size_t i : r)
        for (size_t h = 0; h < 3; ++h) v.push_back(xv[i * 3 + h]);
      return v;
    };
    Tensor all = Tensor::from_vec<int64_t>({7, 4, 1, 0, 8, 2, 6}, {7}, dev);
    CHECK(index_select(x, all.narrow(0, 1, 3), 0).to_f64_vec() == rows({4, 1, 0}));  // offset 1
    CHECK_THROWS_WITH_AS(checked(dev, [&] { index_select(x, all.narrow(0, 3, 3), 0); }),                   // {0, 8, 2}
                         "index_select: index 8 out of range for dim 0 of size 5 (shape [5, 3])", Error);
    Tensor pairs = Tensor::from_vec<int64_t>({3, 9, 0, 9, 4, 9}, {3, 2}, dev);
    Tensor col0 = pairs.narrow(1, 0, 1).squeeze(1);  // {3, 0, 4}: stride 2
    Tensor col1 = pairs.narrow(1, 1, 1).squeeze(1);  // {9, 9, 9}: stride 2, offset 1
    CHECK(index_select(x, col0, 0).to_f64_vec() == rows({3, 0, 4}));
    CHECK_THROWS_WITH_AS(checked(dev, [&] { index_select(x, col1, 0); }), "index_select: index 9 out of range for dim 0 of size 5 (shape [5, 3])",
                         Error);
    Tensor ids32 = Tensor::from_vec<int32_t>({2, -3}, {2}, dev);  // cast to I64 first, then checked
    CHECK_THROWS_WITH_AS(checked(dev, [&] { embedding(ids32, x); }), "embedding: index -3 out of range for dim 0 of size 5 (shape [5, 3])", Error);
  }
}
