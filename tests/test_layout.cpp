// Exact-value layout tests: every view's shape, stride and start_offset (candle's
// tests/layout_tests.rs style), and every misuse's message.
#include <doctest/doctest.h>

#include <array>
#include <vector>

#include "tensor/layout.h"
#include "tensor/tensor.h"

using namespace wick;
using V = std::vector<int64_t>;

TEST_CASE("layout: contiguous strides and offsets") {
  Layout l = Layout::contiguous({2, 3, 4});
  CHECK(l.stride() == V{12, 4, 1});
  CHECK(l.start_offset() == 0);
  CHECK(l.is_contiguous());
  CHECK_FALSE(l.is_fortran_contiguous());
  CHECK(l.contiguous_offsets() == std::make_pair(size_t{0}, size_t{24}));
  CHECK(Layout::contiguous({}).stride().empty());
  CHECK(Layout::contiguous({5}).is_fortran_contiguous());
}

TEST_CASE("layout: narrow moves the offset by stride*start") {
  Layout l = Layout::contiguous({2, 3, 4});
  Layout n = l.narrow(1, 1, 2);
  CHECK(n.dims() == std::vector<size_t>{2, 2, 4});
  CHECK(n.stride() == V{12, 4, 1});
  CHECK(n.start_offset() == 4);
  CHECK_FALSE(n.is_contiguous());
  Layout n0 = l.narrow(0, 1, 1);
  CHECK(n0.start_offset() == 12);
  CHECK(n0.is_contiguous());
  CHECK(n0.contiguous_offsets() == std::make_pair(size_t{12}, size_t{24}));
  Layout n2 = l.narrow(2, 3, 1);
  CHECK(n2.start_offset() == 3);
  CHECK(n2.narrow(2, 0, 0).elem_count() == 0);
}

TEST_CASE("layout: transpose and permute swap dims and strides") {
  Layout l = Layout::contiguous({2, 3, 4});
  Layout t = l.transpose(0, 2);
  CHECK(t.dims() == std::vector<size_t>{4, 3, 2});
  CHECK(t.stride() == V{1, 4, 12});
  CHECK(t.is_fortran_contiguous());
  Layout p = l.permute({1, 2, 0});
  CHECK(p.dims() == std::vector<size_t>{3, 4, 2});
  CHECK(p.stride() == V{4, 1, 12});
  CHECK(p.offsets() == std::vector<size_t>{0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17,
                                           6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23});
}

TEST_CASE("layout: size-1 dims are ignored by the contiguity test") {
  Layout l(Shape{1, 3, 1, 2}, V{99, 2, 7, 1}, 5);
  CHECK(l.is_contiguous());
  CHECK(Layout(Shape{3, 1}, V{1, 1}, 0).is_contiguous());
  CHECK_FALSE(Layout(Shape{3, 2}, V{1, 3}, 0).is_contiguous());
}

TEST_CASE("layout: broadcast_as sets stride 0 on new and size-1 dims") {
  Layout l = Layout::contiguous({3, 1}).narrow(0, 1, 2);
  Layout b = l.broadcast_as({4, 2, 5});
  CHECK(b.dims() == std::vector<size_t>{4, 2, 5});
  CHECK(b.stride() == V{0, 1, 0});
  CHECK(b.start_offset() == 1);
  CHECK(b.offsets().size() == 40);
  CHECK(b.max_offset_exclusive() == 3);
}

TEST_CASE("layout: reshape views where strides allow") {
  Layout l = Layout::contiguous({2, 3, 4}).narrow(0, 1, 1);
  Layout r = l.reshape({3, 2, 2});
  CHECK(r.stride() == V{4, 2, 1});
  CHECK(r.start_offset() == 12);
  // Splitting a strided dim and merging a contiguous run inside a non-contiguous layout.
  Layout qkv = Layout::contiguous({5, 3, 2, 8}).narrow(1, 1, 1);  // (5, 1, 2, 8), row stride 48
  Layout m = qkv.reshape({5, 16});
  CHECK(m.stride() == V{48, 1});
  CHECK(m.start_offset() == 16);
  Layout s = Layout::contiguous({4, 6}).narrow(1, 0, 4).reshape({2, 2, 2, 2});
  CHECK(s.stride() == V{12, 6, 2, 1});
  Layout u = Layout::contiguous({6}).reshape({1, 6, 1});
  CHECK(u.dims() == std::vector<size_t>{1, 6, 1});
}

TEST_CASE("layout: squeeze and unsqueeze") {
  Layout l = Layout::contiguous({2, 1, 3});
  CHECK(l.squeeze(1).dims() == std::vector<size_t>{2, 3});
  CHECK(l.squeeze(1).stride() == V{3, 1});
  Layout u = Layout::contiguous({2, 3}).unsqueeze(1);
  CHECK(u.dims() == std::vector<size_t>{2, 1, 3});
  CHECK(u.stride() == V{3, 3, 1});
  CHECK(Layout::contiguous({2, 3}).unsqueeze(2).stride() == V{3, 1, 1});
}

TEST_CASE("layout: misuse raises messages naming op, shape and dims") {
  Layout l = Layout::contiguous({2, 3, 4});
  CHECK_THROWS_WITH_AS(l.narrow(3, 0, 1), "narrow: dim 3 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)", Error);
  CHECK_THROWS_WITH_AS(l.narrow(1, 2, 2), "narrow: shape [2, 3, 4], dim 1: start 2 + len 2 exceeds size 3", Error);
  CHECK_THROWS_WITH_AS(l.transpose(0, 5), "transpose: dim 5 out of range for shape [2, 3, 4] (rank 3, valid dims -3..=2)", Error);
  CHECK_THROWS_WITH_AS(l.permute({0, 0, 1}), "permute: shape [2, 3, 4], dims [0, 0, 1] is not a permutation of 0..3", Error);
  CHECK_THROWS_WITH_AS(l.broadcast_as({3, 3, 4}), "broadcast_as: cannot broadcast [2, 3, 4] to [3, 3, 4]", Error);
  CHECK_THROWS_WITH_AS(l.broadcast_as({3, 4}), "broadcast_as: cannot broadcast [2, 3, 4] to [3, 4]", Error);
  CHECK_THROWS_WITH_AS(l.reshape({5, 5}), "reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)", Error);
  CHECK_THROWS_WITH_AS(l.transpose(1, 2).reshape({24}),
                       "reshape: cannot view [2, 4, 3] with stride [12, 1, 4] as [24] without a copy; call contiguous() first", Error);
  CHECK_THROWS_WITH_AS(l.squeeze(0), "squeeze: shape [2, 3, 4], dim 0 has size 2, not 1", Error);
  CHECK_THROWS_WITH_AS(l.unsqueeze(4), "unsqueeze: dim 4 out of range for shape [2, 3, 4] (rank 3, valid dims -4..=3)", Error);
}

TEST_CASE("shape: dimsN and the rank error text") {
  Shape s{8};
  CHECK(s.dims1() == 8);
  CHECK_THROWS_WITH_AS(s.dims2(), "unexpected rank, expected: 2, got: 1 ([8])", Error);
  CHECK_THROWS_WITH_AS(Shape{}.dims1(), "unexpected rank, expected: 1, got: 0 ([])", Error);
  CHECK(to_string(Shape{2048, 128, 1}) == "[2048, 128, 1]");
  CHECK(to_string(Device::cuda(0)) == "Cuda { gpu_id: 0 }");
  CHECK(to_string(Device::cpu()) == "Cpu");
  CHECK(std::string(dtype_name(DType::BF16)) == "BF16");
}

TEST_CASE("tensor: views share storage; to_vec reads any layout") {
  Tensor t = Tensor::arange(0, 24, DType::F32, Device::cpu()).reshape({2, 3, 4});
  Tensor v = t.permute({2, 0, 1}).narrow(0, 1, 2);
  CHECK(v.same_storage(t));
  CHECK(v.dims() == std::vector<size_t>{2, 2, 3});
  CHECK(v.to_vec<float>() == std::vector<float>{1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22});
  CHECK_THROWS_WITH_AS(v.to_vec<double>(), "unexpected dtype, expected: F64, got: F32", Error);
  Tensor r1 = Tensor::randn({5}, DType::F64, Device::cpu(), 7);
  Tensor r2 = Tensor::randn({5}, DType::F64, Device::cpu(), 7);
  CHECK(r1.to_vec<double>() == r2.to_vec<double>());
  CHECK(r1.to_vec<double>() != Tensor::randn({5}, DType::F64, Device::cpu(), 8).to_vec<double>());
  CHECK_THROWS_WITH_AS(Tensor::from_vec<float>({1, 2, 3}, {2, 2}, Device::cpu()),
                       "from_vec: 3 values for shape [2, 2] (4 elements)", Error);
}

TEST_CASE("layout: negative or overflowing strides cannot pass the storage bound") {
  CHECK_THROWS_WITH_AS(Layout(Shape{2, 3}, V{-3, 1}, 3), "layout: stride [-3, 1] has a negative entry (shape [2, 3])",
                       Error);
  Layout huge(Shape{5, 2}, V{int64_t{1} << 62, 1}, 0);  // 4 * 2^62 = 2^64: past size_t
  CHECK(huge.max_offset_exclusive() == SIZE_MAX);
  CHECK(Layout(Shape{1, 2}, V{int64_t{1} << 62, 1}, 5).max_offset_exclusive() == 7);  // size-1 dims add nothing
  auto storage = Storage::allocate(64, Device::cpu());
  CHECK_THROWS_AS(Tensor(storage, huge, DType::F32), Error);
  CHECK_THROWS_AS(Tensor(storage, Layout(Shape{2}, V{int64_t{1} << 61}, 0), DType::F64), Error);  // bytes overflow
}

TEST_CASE("layout: StridedIndex walks a temporary layout in logical order") {
  // The iterator keeps its own dims and strides: the Layout below dies before the walk.
  std::vector<size_t> got;
  for (StridedIndex it(Layout::contiguous({2, 3, 4}).narrow(1, 1, 2).transpose(0, 1)); !it.done(); it.next())
    got.push_back(it.offset());
  CHECK(got == std::vector<size_t>{4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23});
}

TEST_CASE("layout: for_each_offsets walks several layouts in lockstep") {
  using Pairs = std::vector<std::array<size_t, 2>>;
  auto walk2 = [](const Layout& a, const Layout& b) {
    Pairs got;
    size_t expect_i = 0;
    for_each_offsets<2>({&a, &b}, [&](size_t i, const std::array<size_t, 2>& o) {
      CHECK(i == expect_i++);  // logical indices in order, each once
      got.push_back(o);
    });
    return got;
  };
  // Both contiguous, different start offsets: the fast path adds i to each base.
  CHECK(walk2(Layout::contiguous_with_offset({2, 2}, 3), Layout::contiguous_with_offset({2, 2}, 10)) ==
        Pairs{{3, 10}, {4, 11}, {5, 12}, {6, 13}});
  // A (2, 3) destination against the transpose of a (3, 2) source: strides (1, 2).
  CHECK(walk2(Layout::contiguous({2, 3}), Layout::contiguous({3, 2}).transpose(0, 1)) ==
        Pairs{{0, 0}, {1, 2}, {2, 4}, {3, 1}, {4, 3}, {5, 5}});
  // A broadcast row (stride 0 on dim 0) against a narrowed (2, 2) window of a (2, 4) tensor.
  CHECK(walk2(Layout::contiguous_with_offset({1, 2}, 7).broadcast_as({2, 2}), Layout::contiguous({2, 4}).narrow(1, 1, 2)) ==
        Pairs{{7, 1}, {8, 2}, {7, 5}, {8, 6}});
  // Rank 0: one element at the start offset. An empty shape: no call at all.
  CHECK(walk2(Layout::contiguous_with_offset({}, 5), Layout::contiguous_with_offset({}, 9)) == Pairs{{5, 9}});
  CHECK(walk2(Layout::contiguous({2, 0, 3}), Layout::contiguous({2, 0, 3}).transpose(0, 2).transpose(0, 2)).empty());
}

TEST_CASE("layout: for_each_offset visits the same offsets as StridedIndex") {
  const Layout base = Layout::contiguous({2, 3, 4, 5});
  const std::vector<Layout> layouts = {
      base,
      base.narrow(1, 1, 2).narrow(3, 2, 3),
      base.permute({3, 1, 0, 2}),
      base.narrow(0, 1, 1).broadcast_as({3, 1, 3, 4, 5}),
      Layout::contiguous({3}).broadcast_as({2, 3}).transpose(0, 1),
  };
  for (const Layout& l : layouts) {
    std::vector<size_t> want, got;
    for (StridedIndex it(l); !it.done(); it.next()) want.push_back(it.offset());
    for_each_offset(l, [&](size_t i, size_t off) {
      CHECK(i == got.size());
      got.push_back(off);
    });
    CHECK(got == want);
    CHECK(got == l.offsets());
  }
}
