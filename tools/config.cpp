#include "tools/config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "ops/ops.h"

namespace wick::cli {

namespace {

using std::invalid_argument;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

int64_t parse_int(const std::string& s, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) throw invalid_argument(what + ": '" + s + "' is not an integer");
  return v;
}

// "0,1;2,3" -> {{0, 1}, {2, 3}}
std::vector<std::vector<int64_t>> parse_rows(const std::string& s, const std::string& what) {
  std::vector<std::vector<int64_t>> rows;
  for (const std::string& row : split(s, ';')) {
    std::vector<int64_t> r;
    for (const std::string& x : split(row, ',')) r.push_back(parse_int(x, what));
    rows.push_back(r);
  }
  return rows;
}

struct Overrides {
  std::map<std::string, std::vector<size_t>> shape;
  std::map<std::string, DType> dtype;
  std::set<std::string> strided, on_cpu, unset;
};

void check_name(const std::string& name, const std::string& flag) {
  const auto& names = tensor_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw invalid_argument(flag + ": unknown tensor '" + name + "' (one of " + all + ")");
  }
}

std::pair<std::string, std::string> name_value(const std::string& s, const std::string& flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos) throw invalid_argument(flag + ": expected NAME=VALUE, got '" + s + "'");
  std::string name = s.substr(0, eq);
  check_name(name, flag);
  return {name, s.substr(eq + 1)};
}

Overrides parse_overrides(const Config& cfg) {
  Overrides o;
  for (const auto& s : cfg.tensor_shape) {
    auto [name, dims] = name_value(s, "--tensor-shape");
    std::vector<size_t> shape;
    if (!dims.empty())
      for (const auto& d : split(dims, ',')) {
        int64_t v = parse_int(d, "--tensor-shape");
        if (v < 0) throw invalid_argument("--tensor-shape: dims are non-negative, got " + d);
        shape.push_back(static_cast<size_t>(v));
      }
    o.shape[name] = shape;
  }
  for (const auto& s : cfg.tensor_dtype) {
    auto [name, dt] = name_value(s, "--tensor-dtype");
    o.dtype[name] = parse_dtype(dt);
  }
  for (const auto& n : cfg.strided) check_name(n, "--strided"), o.strided.insert(n);
  for (const auto& n : cfg.on_cpu) check_name(n, "--on-cpu"), o.on_cpu.insert(n);
  for (const auto& n : cfg.unset) {
    if (n != "seqlens_q" && n != "seqlens_k" && n != "page_block_size")
      throw invalid_argument("--unset: one of seqlens_q, seqlens_k, page_block_size (got '" + n + "')");
    o.unset.insert(n);
  }
  return o;
}

// A view of t whose last dim has stride 2 (every other element of a wider tensor).
Tensor strided_view(const Tensor& t) {
  const size_t r = t.rank();
  if (r == 0) return t;
  return cat({t.unsqueeze(r), t.unsqueeze(r)}, r).narrow(r, 0, 1).squeeze(r);
}

// One input tensor: its configured shape, dtype and values (empty: random), then the
// user's overrides of shape, dtype, strides and device.
struct Maker {
  const Overrides& o;
  Device dev;
  uint64_t seed;

  // salt: tells apart several tensors of one name (k_new of each sequence).
  Tensor operator()(const std::string& name, std::vector<size_t> shape, DType dt,
                    std::vector<double> values = {}, uint64_t salt = 0) const {
    bool random = values.empty();
    if (auto it = o.shape.find(name); it != o.shape.end()) shape = it->second;
    if (auto it = o.dtype.find(name); it != o.dtype.end()) dt = it->second;
    const Shape s(shape);
    const size_t n = s.elem_count();
    Tensor t;
    if (random) {
      t = Tensor::randn(s, DType::F32, Device::cpu(), seed * 7919 + std::hash<std::string>{}(name) % 1000 + 1000 * salt)
              .to_dtype(dt);
    } else {
      if (values.size() != n) {  // a new shape for a tensor of values: 0, 1, 2, ...
        values.resize(n);
        std::iota(values.begin(), values.end(), 0.0);
      }
      t = Tensor::from_vec(values, s, Device::cpu()).to_dtype(dt);
    }
    t = t.to_device(o.on_cpu.count(name) ? Device::cpu() : dev);
    return o.strided.count(name) ? strided_view(t) : t;
  }
  Tensor random(const std::string& name, std::vector<size_t> shape, DType dt) const {
    return (*this)(name, std::move(shape), dt);
  }
};

// A zero tensor with t's shape, dtype and device (contiguous).
Tensor zeros_like_view(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype(), t.device()); }

std::vector<int64_t> cumulative(const std::vector<size_t>& lens) {
  std::vector<int64_t> cu{0};
  for (size_t n : lens) cu.push_back(cu.back() + static_cast<int64_t>(n));
  return cu;
}

std::vector<size_t> lengths(const std::vector<int64_t>& cu) {
  std::vector<size_t> out;
  for (size_t i = 1; i < cu.size(); ++i) out.push_back(static_cast<size_t>(std::max<int64_t>(0, cu[i] - cu[i - 1])));
  return out;
}

std::vector<double> as_doubles(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// The block ids of each sequence: given, or allocated in order (shuffled when asked).
void plan_blocks(const Config& cfg, Built& b) {
  const size_t page = b.page;
  size_t needed = 0;
  for (size_t len : b.len_k) {
    b.table_used.push_back((len + page - 1) / page);
    needed += b.table_used.back();
  }
  if (!cfg.block_table.empty()) {
    int64_t max_id = -1;
    for (const auto& row : parse_rows(cfg.block_table, "--block-table")) {
      b.table.emplace_back();
      for (int64_t x : row) b.table.back().push_back(static_cast<int32_t>(x)), max_id = std::max(max_id, x);
    }
    b.num_blocks = cfg.num_blocks.value_or(std::max<size_t>({1, needed, static_cast<size_t>(max_id + 1)}));
  } else {
    b.num_blocks = cfg.num_blocks.value_or(std::max<size_t>(1, needed));
    std::vector<int32_t> ids(std::max(b.num_blocks, needed));
    std::iota(ids.begin(), ids.end(), 0);
    if (cfg.shuffle) std::shuffle(ids.begin(), ids.begin() + b.num_blocks, std::mt19937_64(cfg.seed));
    size_t next = 0;
    for (size_t used : b.table_used) {
      b.table.emplace_back();
      for (size_t j = 0; j < used; ++j) b.table.back().push_back(ids[next++]);
    }
  }
  size_t cols = 1;
  for (const auto& row : b.table) cols = std::max(cols, row.size());
  for (auto& row : b.table) row.resize(cols, 0);  // padding entries: block 0, never read
}

// K/V appended to a PagedKvCache (whole sequences in order, or interleaved in rounds of
// half a page when shuffled, as concurrent requests would), then bound to the op.
void build_cache(const Config& cfg, const Overrides& o, const Maker& make, size_t hk, DType dt, Built& b) {
  const Device kv_dev = o.on_cpu.count("k") ? Device::cpu() : make.dev;
  const size_t num_blocks = cfg.num_blocks.value_or([&] {
    size_t n = 0;
    for (size_t len : b.len_k) n += (len + b.page - 1) / b.page;
    return std::max<size_t>(1, n);
  }());
  PagedKvCache cache(num_blocks, b.page, hk, cfg.head_dim, dt, kv_dev,
                     cfg.layout == "interleaved-kv" ? PagedKvCache::Layout::Interleaved : PagedKvCache::Layout::Separate);
  std::vector<uint64_t> ids(b.len_k.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<Tensor> k_new, v_new;
  for (size_t s = 0; s < ids.size(); ++s) {
    k_new.push_back(make("k_new", {b.len_k[s], hk, cfg.head_dim}, dt, {}, s));
    v_new.push_back(make("v_new", {b.len_k[s], hk, cfg.head_dim}, dt, {}, s));
  }
  if (!cfg.shuffle) {
    for (size_t s = 0; s < ids.size(); ++s) cache.append(ids[s], k_new[s], v_new[s]);
  } else {
    const size_t step = std::max<size_t>(1, b.page / 2);
    std::vector<size_t> done(ids.size(), 0);
    for (size_t s = 0; s < ids.size(); ++s)
      if (b.len_k[s] == 0) cache.append(ids[s], k_new[s], v_new[s]);  // an empty sequence exists too
    for (bool more = true; more;) {
      more = false;
      for (size_t s = 0; s < ids.size(); ++s) {
        const size_t n = std::min(step, b.len_k[s] - done[s]);
        if (n == 0) continue;
        cache.append(ids[s], k_new[s].narrow(0, done[s], n), v_new[s].narrow(0, done[s], n));
        done[s] += n, more = true;
      }
    }
  }
  DType table_dt = DType::I32;
  if (auto it = o.dtype.find("block_table"); it != o.dtype.end()) table_dt = it->second;
  cache.bind(b.op, ids, table_dt);
  b.k = cache.k(), b.v = cache.v(), b.num_blocks = num_blocks;
  for (uint64_t id : ids) {
    b.table.push_back(cache.blocks(id));
    b.table_used.push_back(cache.blocks(id).size());
  }
  size_t cols = 1;
  for (const auto& row : b.table) cols = std::max(cols, row.size());
  for (auto& row : b.table) row.resize(cols, 0);
  b.layout_note = std::string("K/V in a PagedKvCache (") +
                  (cfg.layout == "interleaved-kv" ? "interleaved: one (num_blocks, 2, page, hk, d) tensor"
                                                  : "separate k and v block tensors") + ")";
}

}  // namespace

const std::vector<std::string>& tensor_names() {
  static const std::vector<std::string> names = {"q", "k", "v", "seqlens_q", "seqlens_k", "block_table",
                                                 "mm_prefix_ranges", "alibi_slopes", "k_new", "v_new"};
  return names;
}

DType parse_dtype(const std::string& name) {
  static const std::map<std::string, DType> dts = {
      {"u8", DType::U8},   {"u32", DType::U32}, {"i16", DType::I16}, {"i32", DType::I32}, {"i64", DType::I64},
      {"bf16", DType::BF16}, {"f16", DType::F16}, {"f32", DType::F32}, {"f64", DType::F64}};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto it = dts.find(lower);
  if (it == dts.end()) throw invalid_argument("unknown dtype '" + name + "' (u8 u32 i16 i32 i64 bf16 f16 f32 f64)");
  return it->second;
}

void validate(const Config& cfg) {
  parse_overrides(cfg);
  parse_dtype(cfg.dtype);
  if (cfg.layout != "separate" && cfg.layout != "packed-qkv" && cfg.layout != "interleaved-kv")
    throw invalid_argument("--layout: one of separate, packed-qkv, interleaved-kv (got '" + cfg.layout + "')");
  if (cfg.layout == "packed-qkv" && cfg.page)
    throw invalid_argument("--layout packed-qkv: q, k and v share rows, so k and v cannot be paged");
  if (cfg.cache && !cfg.page) throw invalid_argument("--cache needs --page (the cache's block size)");
  if (cfg.batched && (cfg.page || !cfg.cu_seqlens_q.empty() || !cfg.cu_seqlens_k.empty() || !cfg.mm_prefix.empty()))
    throw invalid_argument("--batched: one (batch, seqlen, heads, dim) tensor each; no pages, cumulative lengths or mm prefixes");
  if (cfg.device != "cpu" && cfg.device != "cuda")
    throw invalid_argument("--device: cpu or cuda (got '" + cfg.device + "')");
  if (cfg.page && *cfg.page == 0 && !cfg.cache) throw invalid_argument("--page: a positive number of rows");
}

Built build(const Config& cfg) {
  validate(cfg);
  const Overrides o = parse_overrides(cfg);
  const Device dev = cfg.device == "cuda" ? Device::cuda(0) : Device::cpu();
  const Maker make{o, dev, cfg.seed};
  const DType dt = parse_dtype(cfg.dtype);
  const size_t h = cfg.heads, hk = cfg.heads_k.value_or(cfg.heads), d = cfg.head_dim;

  Built b;
  b.batched = cfg.batched;
  b.len_k = cfg.seqlens_k.empty() ? std::vector<size_t>{5, 9, 3} : cfg.seqlens_k;
  b.len_q = cfg.seqlens_q.empty() ? b.len_k : cfg.seqlens_q;
  std::vector<int64_t> cu_q = cfg.cu_seqlens_q.empty() ? cumulative(b.len_q) : cfg.cu_seqlens_q;
  std::vector<int64_t> cu_k = cfg.cu_seqlens_k.empty() ? cumulative(b.len_k) : cfg.cu_seqlens_k;
  if (!cfg.cu_seqlens_q.empty()) b.len_q = lengths(cu_q);
  if (!cfg.cu_seqlens_k.empty()) b.len_k = lengths(cu_k);
  auto last = [](const std::vector<int64_t>& cu) { return cu.empty() ? size_t{0} : static_cast<size_t>(std::max<int64_t>(0, cu.back())); };
  const size_t total_q = cfg.total_q.value_or(last(cu_q)), total_k = cfg.total_k.value_or(last(cu_k));
  auto longest = [](const std::vector<size_t>& v) { return v.empty() ? size_t{0} : *std::max_element(v.begin(), v.end()); };

  const std::optional<size_t> wl = cfg.window_left, wr = cfg.window_right;
  const std::optional<float> scale = cfg.scale;  // unset: the op's default, 1/sqrt(head_size)
  std::optional<Tensor> slopes;
  if (cfg.alibi || !cfg.alibi_slopes.empty()) {
    std::vector<double> s(cfg.alibi_slopes.begin(), cfg.alibi_slopes.end());
    if (s.empty())
      for (size_t i = 0; i < h; ++i) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(i + 1) / static_cast<double>(h)));
    slopes = make("alibi_slopes", {s.size()}, DType::F32, s);
  }

  if (cfg.batched) {
    const size_t batch = b.len_q.size(), sq = b.len_q.at(0), sk = b.len_k.at(0);
    for (size_t i = 0; i < batch; ++i)
      if (b.len_q[i] != sq || i >= b.len_k.size() || b.len_k[i] != sk)
        throw invalid_argument("--batched: every sequence has the same lengths (use the varlen op otherwise)");
    b.q = make.random("q", {batch, sq, h, d}, dt);
    b.k = make.random("k", {batch, sk, hk, d}, dt);
    b.v = make.random("v", {batch, sk, hk, d}, dt);
    FlashAttn& bop = b.batched_op;
    bop.softmax_scale = scale, bop.alibi_slopes = slopes, bop.window_size_left = wl, bop.window_size_right = wr;
    bop.softcap = cfg.softcap, bop.causal = cfg.causal;
    b.layout_note = "batched: q, k, v (batch, seqlen, heads, head_size), separate tensors";
    if (cfg.zero_qk) b.q = zeros_like_view(b.q), b.k = zeros_like_view(b.k);
    return b;
  }

  FlashAttnVarLen& op = b.op;
  op.softmax_scale = scale, op.alibi_slopes = slopes, op.window_size_left = wl, op.window_size_right = wr;
  op.softcap = cfg.softcap, op.causal = cfg.causal;
  op.seqlens_q = make("seqlens_q", {cu_q.size()}, DType::U32, as_doubles(cu_q));
  op.seqlens_k = make("seqlens_k", {cu_k.size()}, DType::U32, as_doubles(cu_k));
  op.max_seqlen_q = cfg.max_seqlen_q.value_or(longest(b.len_q));
  op.max_seqlen_k = cfg.max_seqlen_k.value_or(longest(b.len_k));
  if (!cfg.mm_prefix.empty()) {
    std::vector<std::vector<int64_t>> ranges;
    size_t max_ranges = 1;
    for (const std::string& seq : split(cfg.mm_prefix, ';')) {
      ranges.emplace_back();
      for (const std::string& r : split(seq, ',')) {
        if (r.empty()) continue;
        auto dash = r.find('-');
        if (dash == std::string::npos) throw invalid_argument("--mm-prefix: ranges are START-END, got '" + r + "'");
        ranges.back().push_back(parse_int(r.substr(0, dash), "--mm-prefix"));
        ranges.back().push_back(parse_int(r.substr(dash + 1), "--mm-prefix"));
      }
      max_ranges = std::max(max_ranges, ranges.back().size() / 2);
    }
    std::vector<double> flat;
    for (auto& r : ranges) {
      r.resize(2 * max_ranges, 0);  // [0, 0): an empty range
      flat.insert(flat.end(), r.begin(), r.end());
    }
    op.mm_prefix_ranges = make("mm_prefix_ranges", {ranges.size(), max_ranges, 2}, DType::I32, flat);
  }

  b.q = make.random("q", {total_q, h, d}, dt);
  if (cfg.page) {
    b.paged = true;
    b.page = *cfg.page;
    op.page_block_size = cfg.page_block_size.value_or(b.page);
    if (cfg.cache) {
      build_cache(cfg, o, make, hk, dt, b);
    } else {
      plan_blocks(cfg, b);
      std::vector<double> flat;
      for (const auto& row : b.table) flat.insert(flat.end(), row.begin(), row.end());
      op.block_table = make("block_table", {b.table.size(), b.table.empty() ? 0 : b.table[0].size()}, DType::I32, flat);
      if (cfg.layout == "interleaved-kv" && !o.shape.count("k") && !o.shape.count("v")) {
        Tensor kv = make.random("k", {b.num_blocks, 2, b.page, hk, d}, dt);
        b.k = kv.narrow(1, 0, 1).squeeze(1), b.v = kv.narrow(1, 1, 1).squeeze(1);
        b.layout_note = "interleaved K/V: one (num_blocks, 2, page, hk, d) tensor narrowed into k and v";
      } else {
        b.k = make.random("k", {b.num_blocks, b.page, hk, d}, dt);
        b.v = make.random("v", {b.num_blocks, b.page, hk, d}, dt);
        b.layout_note = "paged K/V: separate (num_blocks, page, hk, d) block tensors";
      }
    }
  } else if (cfg.layout == "packed-qkv" && !o.shape.count("q") && !o.shape.count("k") && !o.shape.count("v")) {
    if (total_q != total_k || h != hk)
      throw invalid_argument("--layout packed-qkv: q and k need the same rows and heads (self-attention)");
    Tensor qkv = make.random("q", {total_q, 3, h, d}, dt);
    b.q = qkv.narrow(1, 0, 1).squeeze(1), b.k = qkv.narrow(1, 1, 1).squeeze(1), b.v = qkv.narrow(1, 2, 1).squeeze(1);
    b.layout_note = "packed QKV: one (total, 3, heads, d) tensor narrowed into q, k and v (row stride 3 * heads * d)";
  } else if (cfg.layout == "interleaved-kv" && !o.shape.count("k") && !o.shape.count("v")) {
    Tensor kv = make.random("k", {total_k, 2, hk, d}, dt);
    b.k = kv.narrow(1, 0, 1).squeeze(1), b.v = kv.narrow(1, 1, 1).squeeze(1);
    b.layout_note = "interleaved K/V: one (total_k, 2, hk, d) tensor narrowed into k and v";
  } else {
    b.k = make.random("k", {total_k, hk, d}, dt);
    b.v = make.random("v", {total_k, hk, d}, dt);
    b.layout_note = "packed varlen: q (total_q, h, d), k and v (total_k, hk, d), separate tensors";
  }
  if (cfg.zero_qk) b.q = zeros_like_view(b.q), b.k = zeros_like_view(b.k);
  if (o.unset.count("seqlens_q")) op.seqlens_q = Tensor();
  if (o.unset.count("seqlens_k")) op.seqlens_k = Tensor();
  if (o.unset.count("page_block_size")) op.page_block_size.reset();
  return b;
}

}  // namespace wick::cli
