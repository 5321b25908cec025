// The layout part of the fuzz target: a tensor over a storage with any shape, strides and
// offset the input picks (or a plain one), then a chain of view and copy ops. Beside the
// tensor runs a model: the storage's values, and for every logical element the storage
// element it reads, updated by plain loops. Whenever an op runs, the tensor's values must be
// the model's; where the model knows an op is valid (a narrow inside the dims, ...) it must run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "fuzz_wick.h"
#include "ops/ops.h"

namespace wick::fuzz {

namespace {

constexpr size_t kMaxModelled = 4096;  // elements; larger (broadcast) tensors are not modelled

struct Model {
  std::vector<size_t> dims;
  std::vector<size_t> offsets;  // storage element of each logical element (row-major)
  std::vector<double> storage;  // the storage's values
  bool known = true;            // false: too large, or after an unspecified write
  size_t count() const {  // saturates at SIZE_MAX (a zero dim still gives 0)
    size_t n = 1;
    bool over = false;
    for (size_t d : dims) {
      if (d == 0) return 0;
      over = over || __builtin_mul_overflow(n, d, &n);
    }
    return over ? SIZE_MAX : n;
  }
};

// A view of the same storage: element idx of the result reads element source(idx) of m.
template <class F>
Model view(const Model& m, std::vector<size_t> dims, F&& source) {
  Model out{std::move(dims), {}, m.storage, m.known};
  if (!out.known) return out;
  const bool empty = std::find(out.dims.begin(), out.dims.end(), size_t{0}) != out.dims.end();
  size_t n = empty ? 0 : 1;
  for (size_t d : out.dims) {
    if (empty) break;
    if (d > kMaxModelled || n * d > kMaxModelled) {
      out.known = false;
      return out;
    }
    n *= d;
  }
  out.offsets.resize(n);
  for (size_t i = 0; i < n; ++i) out.offsets[i] = m.offsets[ravel(source(unravel(i, out.dims)), m.dims)];
  return out;
}

// A fresh contiguous tensor holding m's values.
Model fresh(const Model& m) {
  Model out{m.dims, {}, {}, m.known};
  if (!m.known) return out;
  out.offsets.resize(m.offsets.size());
  std::iota(out.offsets.begin(), out.offsets.end(), size_t{0});
  for (size_t o : m.offsets) out.storage.push_back(m.storage[o]);
  return out;
}

void compare(const Tensor& t, const Model& m, const char* after) {
  if (!(t.shape() == Shape(m.dims))) fail(std::string("after ") + after + ": the shape differs from the model's");
  if (!m.known) return;
  const std::vector<double> got = t.to_f64_vec();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != m.storage[m.offsets[i]])
      fail(std::string("after ") + after + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
           ", the model says " + std::to_string(m.storage[m.offsets[i]]));
}

// Ops that write a copy of the tensor run on small tensors, or on ones so large that the
// allocation is refused up front (S03): a broadcast chain can reach sizes in between that
// would only spend the fuzzer's memory.
bool copyable(const Model& m) {
  const size_t n = m.count();
  return n <= (size_t{1} << 16) || n >= (size_t{1} << 44);
}

// Small integers, exact in every dtype used here (bf16 holds integers up to 256 exactly).
double small(size_t j) { return static_cast<double>(j % 200); }

int64_t pick_stride(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return -in.ConsumeIntegralInRange<int64_t>(1, 3);
    case 1: return int64_t{1} << in.ConsumeIntegralInRange<int>(20, 62);
    case 2: return std::numeric_limits<int64_t>::max();
    default: return in.ConsumeIntegralInRange<int64_t>(0, 6);
  }
}

// The starting tensor: arange-like values in a plain shape, or a tensor over a small storage
// with the input's own shape, strides and offset, which the Tensor constructor must refuse
// exactly when they reach past the storage.
bool make_start(FuzzedDataProvider& in, Tensor& t, Model& m) {
  const size_t rank = in.ConsumeIntegralInRange<size_t>(0, 4);
  std::vector<size_t> dims(rank);
  for (auto& d : dims) d = in.ConsumeIntegralInRange<size_t>(0, 5);
  const DType dtype = in.PickValueInArray({DType::F32, DType::I64, DType::U8, DType::BF16, DType::I16, DType::F64});
  const bool plain = in.ConsumeBool();
  std::vector<int64_t> stride(rank);
  size_t storage_elems = 0, offset = 0;
  if (plain) {
    storage_elems = Shape(dims).elem_count();
  } else {
    storage_elems = in.ConsumeIntegralInRange<size_t>(0, 200);
    for (auto& s : stride) s = pick_stride(in);
    offset = in.ConsumeIntegralInRange<size_t>(0, 210);
  }
  std::vector<double> content(storage_elems);
  for (size_t j = 0; j < storage_elems; ++j) content[j] = small(j);
  Tensor filled = cast(Tensor::from_vec(content, Shape{storage_elems}, kCpu), dtype);
  if (plain) {
    t = filled.reshape(Shape(dims));
    m = Model{dims, {}, content, true};
    m.offsets.resize(storage_elems);
    std::iota(m.offsets.begin(), m.offsets.end(), size_t{0});
    return true;
  }
  const bool ok = runs([&] { t = Tensor(filled.storage(), Layout(Shape(dims), stride, offset), dtype); });
  // The model's answer: every stride non-negative, and the last element it can reach inside.
  bool fits = true, empty = false;
  unsigned __int128 last = offset;
  for (size_t k = 0; k < rank; ++k) {
    fits &= stride[k] >= 0;
    empty |= dims[k] == 0;
  }
  for (size_t k = 0; k < rank && fits && !empty; ++k) last += static_cast<unsigned __int128>(dims[k] - 1) * stride[k];
  fits = fits && (empty ? offset <= storage_elems : last < storage_elems);
  if (ok != fits)
    fail(ok ? "a layout reaching past its storage was accepted" : "a layout inside its storage was refused");
  if (!ok) return false;
  m = Model{dims, {}, content, true};
  const size_t n = Shape(dims).elem_count();
  m.offsets.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<size_t> idx = unravel(i, dims);
    size_t off = offset;
    for (size_t k = 0; k < rank; ++k) off += idx[k] * static_cast<size_t>(stride[k]);
    m.offsets[i] = off;
  }
  return true;
}

// One op on (t, m). Returns false when the chain should stop.
bool step(FuzzedDataProvider& in, Tensor& t, Model& m) {
  const size_t rank = m.dims.size();
  auto pick_dim = [&](size_t limit) { return in.ConsumeIntegralInRange<size_t>(0, limit + 1); };  // may be invalid
  switch (in.ConsumeIntegralInRange<int>(0, 12)) {
    case 0: {  // narrow
      const size_t dim = pick_dim(rank), start = in.ConsumeIntegralInRange<size_t>(0, 6),
                   len = in.ConsumeIntegralInRange<size_t>(0, 6);
      const bool valid = dim < rank && start + len <= m.dims[dim];
      Tensor r;
      const bool ok = runs([&] { r = t.narrow(dim, start, len); });
      if (ok != valid) fail("narrow: accepted or refused against the model");
      if (!ok) return true;
      std::vector<size_t> d = m.dims;
      d[dim] = len;
      m = view(m, d, [&](std::vector<size_t> idx) { idx[dim] += start; return idx; });
      t = r;
      compare(t, m, "narrow");
      return true;
    }
    case 1: {  // transpose
      const size_t a = pick_dim(rank), b = pick_dim(rank);
      Tensor r;
      const bool ok = runs([&] { r = t.transpose(a, b); });
      if (ok != (a < rank && b < rank)) fail("transpose: accepted or refused against the model");
      if (!ok) return true;
      std::vector<size_t> d = m.dims;
      std::swap(d[a], d[b]);
      m = view(m, d, [&](std::vector<size_t> idx) { std::swap(idx[a], idx[b]); return idx; });
      t = r;
      compare(t, m, "transpose");
      return true;
    }
    case 2: {  // permute (sometimes not a permutation)
      std::vector<size_t> perm(rank);
      std::iota(perm.begin(), perm.end(), size_t{0});
      for (size_t i = rank; i-- > 1;) std::swap(perm[i], perm[in.ConsumeIntegralInRange<size_t>(0, i)]);
      if (rank > 0 && in.ConsumeIntegralInRange<int>(0, 7) == 0) perm[0] = in.ConsumeIntegralInRange<size_t>(0, rank);
      std::vector<size_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool valid = true;
      for (size_t i = 0; i < rank; ++i) valid &= sorted[i] == i;
      Tensor r;
      const bool ok = runs([&] { r = t.permute(perm); });
      if (ok != valid) fail("permute: accepted or refused against the model");
      if (!ok) return true;
      std::vector<size_t> d(rank);
      for (size_t i = 0; i < rank; ++i) d[i] = m.dims[perm[i]];
      m = view(m, d, [&](const std::vector<size_t>& idx) {
        std::vector<size_t> src(rank);
        for (size_t i = 0; i < rank; ++i) src[perm[i]] = idx[i];
        return src;
      });
      t = r;
      compare(t, m, "permute");
      return true;
    }
    case 3: {  // reshape: a factorisation of the count, or any dims
      std::vector<size_t> d;
      const size_t n = m.count();
      if (in.ConsumeBool() && n > 0 && n <= kMaxModelled) {
        size_t left = n;
        while (left > 1 && d.size() < 4) {
          size_t f = in.ConsumeIntegralInRange<size_t>(1, left);
          while (left % f) --f;
          d.push_back(f), left /= f;
        }
        if (left > 1) d.push_back(left);
        if (in.ConsumeBool()) d.insert(d.begin(), 1);
      } else {
        d.resize(in.ConsumeIntegralInRange<size_t>(0, 3));
        for (auto& x : d) x = in.ConsumeIntegralInRange<size_t>(0, 6);
      }
      Tensor r;
      const bool contiguous = runs([&] { (void)t.is_contiguous(); }) && t.is_contiguous();
      const bool ok = runs([&] { r = t.reshape(Shape(d)); });
      size_t count = 1;
      for (size_t x : d) count *= x;
      if (ok && count != n) fail("reshape: a new element count was accepted");
      if (!ok && count == n && contiguous) fail("reshape of a contiguous tensor was refused");
      if (!ok) return true;
      const std::vector<size_t> old = m.dims;
      m = view(m, d, [&](const std::vector<size_t>& idx) { return unravel(ravel(idx, d), old); });
      t = r;
      compare(t, m, "reshape");
      return true;
    }
    case 4: {  // squeeze / unsqueeze
      const bool un = in.ConsumeBool();
      const size_t dim = pick_dim(un ? rank + 1 : rank);
      Tensor r;
      const bool ok = runs([&] { r = un ? t.unsqueeze(dim) : t.squeeze(dim); });
      const bool valid = un ? dim <= rank : (dim < rank && m.dims[dim] == 1);
      if (ok != valid) fail("squeeze/unsqueeze: accepted or refused against the model");
      if (!ok) return true;
      std::vector<size_t> d = m.dims;
      if (un) d.insert(d.begin() + static_cast<std::ptrdiff_t>(dim), 1);
      else d.erase(d.begin() + static_cast<std::ptrdiff_t>(dim));
      m = view(m, d, [&](std::vector<size_t> idx) {
        if (un) idx.erase(idx.begin() + static_cast<std::ptrdiff_t>(dim));
        else idx.insert(idx.begin() + static_cast<std::ptrdiff_t>(dim), 0);
        return idx;
      });
      t = r;
      compare(t, m, un ? "unsqueeze" : "squeeze");
      return true;
    }
    case 5: {  // broadcast_as: leading dims and size-1 dims widened, now and then to huge sizes
      std::vector<size_t> d(in.ConsumeIntegralInRange<size_t>(0, 2), 1);
      for (auto& x : d) x = in.ConsumeIntegralInRange<size_t>(0, 3);
      const size_t lead = d.size();
      for (size_t x : m.dims) d.push_back(x == 1 ? in.ConsumeIntegralInRange<size_t>(0, 3) : x);
      if (!d.empty() && in.ConsumeIntegralInRange<int>(0, 15) == 0)
        d[0] = size_t{1} << in.ConsumeIntegralInRange<int>(45, 63);
      Tensor r;
      const bool ok = runs([&] { r = t.broadcast_as(Shape(d)); });
      if (!ok) return true;
      m = view(m, d, [&](const std::vector<size_t>& idx) {
        std::vector<size_t> src(idx.begin() + static_cast<std::ptrdiff_t>(lead), idx.end());
        for (size_t i = 0; i < src.size(); ++i)
          if (m.dims[i] == 1) src[i] = 0;
        return src;
      });
      t = r;
      compare(t, m, "broadcast_as");
      return true;
    }
    case 6: {  // contiguous / copy: the same values, a fresh storage unless already compact
      if (!copyable(m)) return true;
      const bool deep = in.ConsumeBool();
      Tensor r;
      if (!runs([&] { r = deep ? t.copy() : t.contiguous(); })) return true;
      if (!r.same_storage(t)) m = fresh(m);
      t = r;
      compare(t, m, deep ? "copy" : "contiguous");
      return true;
    }
    case 7: {  // copy_into between two windows of t along dim 0: overlapping source and destination
      if (rank == 0 || !m.known) return true;
      const size_t n0 = m.dims[0];
      const size_t len = in.ConsumeIntegralInRange<size_t>(0, n0), a = in.ConsumeIntegralInRange<size_t>(0, n0 - len),
                   b = in.ConsumeIntegralInRange<size_t>(0, n0 - len);
      Tensor src = t.narrow(0, a, len), dst = t.narrow(0, b, len);
      auto shifted = [&](size_t from) {
        std::vector<size_t> d = m.dims;
        d[0] = len;
        return view(m, d, [&](std::vector<size_t> idx) { idx[0] += from; return idx; });
      };
      const Model ms = shifted(a), md = shifted(b);
      if (!runs([&] { copy_into(dst, src); })) return true;
      // A destination whose elements share storage (a self-overlapping layout) has an
      // unspecified result; otherwise every destination element gets its source's old value.
      const std::set<size_t> distinct(md.offsets.begin(), md.offsets.end());
      if (distinct.size() != md.offsets.size()) {
        m.known = false;
        return true;
      }
      std::vector<double> values;
      for (size_t o : ms.offsets) values.push_back(m.storage[o]);
      for (size_t i = 0; i < md.offsets.size(); ++i) m.storage[md.offsets[i]] = values[i];
      compare(t, m, "copy_into");
      return true;
    }
    case 8: {  // casts that hold these values exactly
      if (!copyable(m)) return true;
      const DType to = in.PickValueInArray({DType::F64, DType::I64, DType::F32});
      Tensor r;
      if (!runs([&] { r = cast(t, to); })) return true;
      if (!r.same_storage(t)) m = fresh(m);
      t = r;
      compare(t, m, "cast");
      return true;
    }
    case 9: {  // index_select along a dim, indices sometimes out of range
      if (!copyable(m)) return true;
      const size_t dim = pick_dim(rank);
      std::vector<int64_t> ids(in.ConsumeIntegralInRange<size_t>(0, 4));
      const int64_t size = dim < rank ? static_cast<int64_t>(m.dims[dim]) : 1;
      for (auto& i : ids) i = in.ConsumeIntegralInRange<int64_t>(-1, size);
      bool valid = dim < rank;
      for (int64_t i : ids) valid &= i >= 0 && i < size;
      Tensor r;
      const bool ok = runs([&] { r = index_select(t, Tensor::from_vec(ids, Shape{ids.size()}, kCpu), dim); });
      if (ok && !valid) fail("index_select: an invalid call ran");
      if (!ok) return true;
      std::vector<size_t> d = m.dims;
      d[dim] = ids.size();
      m = fresh(view(m, d, [&](std::vector<size_t> idx) {
        idx[dim] = static_cast<size_t>(ids[idx[dim]]);
        return idx;
      }));
      t = r;
      compare(t, m, "index_select");
      return true;
    }
    case 10: {  // sum over a dim (F64: exact for these values)
      if (!copyable(m)) return true;
      if (t.dtype() != DType::F64 || rank == 0) return true;
      const size_t dim = in.ConsumeIntegralInRange<size_t>(0, rank - 1);
      Model out{m.dims, {}, {}, m.known};
      out.dims.erase(out.dims.begin() + static_cast<std::ptrdiff_t>(dim));
      // Summing away an empty dim can leave a large result ([0, 2^27] -> 2^27 zeros): a valid
      // call whose memory (wick's result and the model's) would only measure the machine.
      if (out.count() > kMaxModelled) return true;
      Tensor r;
      if (!runs([&] { r = sum(t, {dim}); })) return true;
      if (m.known) {
        const size_t n = out.count();
        out.storage.assign(n, 0.0);
        for (size_t i = 0; i < m.offsets.size(); ++i) {
          std::vector<size_t> idx = unravel(i, m.dims);
          idx.erase(idx.begin() + static_cast<std::ptrdiff_t>(dim));
          out.storage[ravel(idx, out.dims)] += m.storage[m.offsets[i]];
        }
        out.offsets.resize(n);
        std::iota(out.offsets.begin(), out.offsets.end(), size_t{0});
      }
      m = out;
      t = r;
      compare(t, m, "sum");
      return true;
    }
    case 11: {  // printing and reading out: never more than what they show / hold
      if (!copyable(m)) return true;
      runs([&] { (void)to_string(t); });
      runs([&] { (void)t.to_f64_vec(); });
      return true;
    }
    default: {  // an elementwise op with a broadcast partner of the same dtype
      if (!copyable(m)) return true;
      Tensor one;
      if (!runs([&] { one = Tensor::ones(Shape{}, t.dtype(), kCpu); })) return true;  // rank 0: broadcasts to any shape
      Tensor r;
      if (!runs([&] { r = add(t, one); })) return true;
      Model out = fresh(m);
      for (auto& x : out.storage) x += 1;  // values stay small: exact in every dtype used
      m = out;
      t = r;
      if (t.dtype() == DType::U8 || t.dtype() == DType::BF16) m.known = false;  // may wrap / round past 256
      compare(t, m, "add");
      return true;
    }
  }
}

}  // namespace

void fuzz_layout(FuzzedDataProvider& in) {
  Tensor t;
  Model m;
  if (!make_start(in, t, m)) return;
  compare(t, m, "construction");
  const int steps = in.ConsumeIntegralInRange<int>(1, 8);
  for (int s = 0; s < steps && in.remaining_bytes() > 0; ++s)
    if (!step(in, t, m)) return;
}

}  // namespace wick::fuzz
