// Every message the attention operator (and PagedKvCache) can raise, triggered and compared
// byte for byte, on every device; ordering cases (two faults: the earlier check wins); and a
// test that parses docs/errors.md so the catalogue and this table cannot drift apart.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "devices.h"
#include "errors_catalog.h"
#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "ops/attention/step.h"
#include "tensor/device_fault.h"
#include "test_attention_common.h"

using namespace wick;
using namespace wick::attn_test;
using wick::catalog::matches_template;
using wick::catalog::Raised;
using wick::catalog::raised_by;

namespace {

// The mode every Varlen trigger runs in: strict (value checks on the host, raised at the
// call) or not (on CUDA, value checks on the device, raised at the next wait: the trigger
// waits with check_device_faults). CPU tensors are checked at the call either way.
bool g_strict = false;

// A valid varlen call (2 sequences: q lengths 2, 4; k lengths 4, 5; 4 query heads, 2 kv
// heads, head size 16). Each trigger breaks one or two things and runs it.
struct Varlen {
  Device dev;
  Tensor q, k, v;
  FlashAttnVarLen op;

  explicit Varlen(Device d, size_t head = 16, size_t heads = 4, size_t heads_k = 2) : dev(d) {
    q = randn({6, heads, head}, DType::BF16, dev, 1);
    k = randn({9, heads_k, head}, DType::BF16, dev, 2);
    v = randn({9, heads_k, head}, DType::BF16, dev, 3);
    op.softmax_scale = 0.25f;
    op.max_seqlen_q = 4, op.max_seqlen_k = 5;
    op.seqlens_q = u32_tensor({0, 2, 6}, dev);
    op.seqlens_k = u32_tensor({0, 4, 9}, dev);
    op.strict_checks = g_strict;
  }
  // Paged K/V: 5 blocks of 32 rows; the table [[0, 1], [2, 3]].
  Varlen& paged(size_t page = 32) {
    const size_t heads_k = k.dim(1), head = k.dim(2);
    k = randn({5, page, heads_k, head}, DType::BF16, dev, 4);
    v = randn({5, page, heads_k, head}, DType::BF16, dev, 5);
    op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 3}, Shape{2, 2}, dev);
    op.page_block_size = page;
    return *this;
  }
  Raised raised() const {
    return raised_by([&] {
      op.forward(q, k, v);
      check_device_faults(dev);
    });
  }
  std::string run() const { return raised().what; }
};

struct Batched {
  Device dev;
  Tensor q, k, v;
  FlashAttn op;
  explicit Batched(Device d) : dev(d) {
    q = randn({2, 3, 4, 16}, DType::F16, dev, 6);
    k = randn({2, 5, 2, 16}, DType::F16, dev, 7);
    v = randn({2, 5, 2, 16}, DType::F16, dev, 8);
    op.softmax_scale = 0.25f;
  }
  Raised raised() const {
    return raised_by([&] { op.forward(q, k, v); });
  }
  std::string run() const { return raised().what; }
};

// A rank-1 U32 view with stride 2: not contiguous.
Tensor strided_u32(std::vector<uint32_t> v, Device dev) {
  std::vector<uint32_t> wide;
  for (uint32_t x : v) wide.push_back(x), wide.push_back(777);
  return Tensor::from_vec(wide, Shape{v.size(), 2}, dev).narrow(1, 0, 1).squeeze(1);
}

Device other_device(Device dev) { return dev.is_cpu() ? Device::cuda(0) : Device::cpu(); }

struct Entry {
  std::string id;
  std::string templ;     // as docs/errors.md writes it: {placeholders} in candle's format style
  bool needs_cuda;       // mixes devices: runs only where a GPU exists, with q on it
  std::function<Raised(Device)> trigger;
  std::string expected;  // the exact text for the trigger (its code is the id)
};

std::vector<Entry> catalogue() {
  using D = Device;
  std::vector<Entry> e;
  // ---- candle's messages -----------------------------------------------------------------
  e.push_back({"A01", "device mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}", true,
               [](D d) { Varlen c(d); c.k = randn({9, 2, 16}, DType::BF16, D::cpu(), 2); return c.raised(); },
               "device mismatch in flash-attn-varlen, lhs: Cuda { gpu_id: 0 }, rhs: Cpu"});
  e.push_back({"A02", "flash-attn is only supported for f16/bf16 ({dt:?})", false,
               [](D d) { Varlen c(d); c.q = randn({6, 4, 16}, DType::F32, d, 1); return c.raised(); },
               "flash-attn is only supported for f16/bf16 (F32)"});
  e.push_back({"A03", "seqlens_q must be a cuda tensor", true,
               [](D d) { Varlen c(d); c.op.seqlens_q = u32_tensor({0, 2, 6}, D::cpu()); return c.raised(); },
               "seqlens_q must be a cuda tensor"});
  e.push_back({"A04", "unexpected dtype, expected: {expected:?}, got: {got:?}", false,
               [](D d) {
                 Varlen c(d);
                 c.op.seqlens_q = Tensor::from_vec(std::vector<int32_t>{0, 2, 6}, Shape{3}, d);
                 return c.raised();
               },
               "unexpected dtype, expected: U32, got: I32"});
  e.push_back({"A05", "seqlens_q has to be contiguous", false,
               [](D d) { Varlen c(d); c.op.seqlens_q = strided_u32({0, 2, 6}, d); return c.raised(); },
               "seqlens_q has to be contiguous"});
  e.push_back({"A06", "seqlens_k must be a cuda tensor", true,
               [](D d) { Varlen c(d); c.op.seqlens_k = u32_tensor({0, 4, 9}, D::cpu()); return c.raised(); },
               "seqlens_k must be a cuda tensor"});
  e.push_back({"A07", "seqlens_k has to be contiguous", false,
               [](D d) { Varlen c(d); c.op.seqlens_k = strided_u32({0, 4, 9}, d); return c.raised(); },
               "seqlens_k has to be contiguous"});
  e.push_back({"A08", "block_table must be a cuda tensor", true,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 3}, Shape{2, 2}, D::cpu());
                 return c.raised();
               },
               "block_table must be a cuda tensor"});
  e.push_back({"A09", "unexpected rank, expected: {expected}, got: {got} ({shape:?})", false,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 3}, Shape{4}, d);
                 return c.raised();
               },
               "unexpected rank, expected: 2, got: 1 ([4])"});
  e.push_back({"A10", "block_table last dimension must be contiguous", false,
               [](D d) {
                 Varlen c(d);
                 c.paged();
                 c.op.block_table = c.op.block_table->transpose(0, 1);
                 return c.raised();
               },
               "block_table last dimension must be contiguous"});
  e.push_back({"A11", "flash-attn-varlen expects input tensors of rank 3 (q: {q_rank}, k: {k_rank}, v: {v_rank}", false,
               [](D d) { Varlen c(d); c.q = c.q.unsqueeze(0); return c.raised(); },
               "flash-attn-varlen expects input tensors of rank 3 (q: 4, k: 3, v: 3"});
  e.push_back({"A12", "flash-attn-varlen paged expects k/v tensors of rank 4 (k: {k_rank}, v: {v_rank})", false,
               [](D d) { Varlen c(d); Tensor k3 = c.k; c.paged().k = k3; return c.raised(); },
               "flash-attn-varlen paged expects k/v tensors of rank 4 (k: 3, v: 4)"});
  e.push_back({"A13", "flash-attn expects input tensors of rank 4 (q: {q_rank}, k: {k_rank}, v: {v_rank}", false,
               [](D d) { Batched c(d); c.q = randn({3, 4, 16}, DType::F16, d, 1); return c.raised(); },
               "flash-attn expects input tensors of rank 4 (q: 3, k: 4, v: 4"});
  e.push_back({"A14", "the last dim of q must be contiguous {q_stride:?}", false,
               [](D d) { Varlen c(d); c.q = randn({6, 16, 4}, DType::BF16, d, 1).transpose(1, 2); return c.raised(); },
               "the last dim of q must be contiguous [64, 1, 4]"});
  e.push_back({"A15", "the last dim of k must be contiguous {k_stride:?}", false,
               [](D d) { Varlen c(d); c.k = randn({9, 16, 2}, DType::BF16, d, 1).transpose(1, 2); return c.raised(); },
               "the last dim of k must be contiguous [32, 1, 2]"});
  e.push_back({"A16", "the last dim of v must be contiguous {v_stride:?}", false,
               [](D d) { Varlen c(d); c.v = randn({16, 9, 2}, DType::BF16, d, 1).permute({1, 2, 0}); return c.raised(); },
               "the last dim of v must be contiguous [2, 1, 18]"});
  e.push_back({"A17", "shape mismatch k {k_shape:?} and v {v_shape:?}", false,
               [](D d) { Varlen c(d); c.paged(); c.v = c.v.narrow(0, 0, 4); return c.raised(); },
               "shape mismatch k [5, 32, 2, 16] and v [4, 32, 2, 16]"});
  e.push_back({"A18", "shape mismatch q {q_shape:?} and k {k_shape:?}", false,
               [](D d) { Varlen c(d); c.k = randn({9, 2, 8}, DType::BF16, d, 2); return c.raised(); },
               "shape mismatch q [6, 4, 16] and k [9, 2, 8]"});
  e.push_back({"A19", "shape mismatch q {q_shape:?} and v {v_shape:?}", false,
               [](D d) { Varlen c(d); c.v = c.v.narrow(0, 0, 8); return c.raised(); },
               "shape mismatch q [6, 4, 16] and v [8, 2, 16]"});
  e.push_back({"A20", "paged flash-attn requires page_block_size", false,
               [](D d) { Varlen c(d); c.paged().op.page_block_size.reset(); return c.raised(); },
               "paged flash-attn requires page_block_size"});
  e.push_back({"A21", "page_block_size {given} does not match k shape {k_shape:?}", false,
               [](D d) { Varlen c(d); c.paged().op.page_block_size = 64; return c.raised(); },
               "page_block_size 64 does not match k shape [5, 32, 2, 16]"});
  e.push_back({"A22", "paged flash-attn requires page_block_size to be a multiple of 32 (got {page_block_size})", false,
               [](D d) { Varlen c(d); c.paged(48); return c.raised(); },
               "paged flash-attn requires page_block_size to be a multiple of 32 (got 48)"});
  e.push_back({"A23", "paged flash-attn supports head sizes up to 512 (got {head_size})", false,
               [](D d) { Varlen c(d, 520); c.paged(); return c.raised(); },
               "paged flash-attn supports head sizes up to 512 (got 520)"});
  e.push_back({"A24", "only supports head dimension at most 512 (got {head_size})", false,
               [](D d) { Varlen c(d, 520); return c.raised(); },
               "only supports head dimension at most 512 (got 520)"});
  e.push_back({"A25", "only supports head sizes that are a multiple of 8 (got {head_size})", false,
               [](D d) { Varlen c(d, 12); return c.raised(); },
               "only supports head sizes that are a multiple of 8 (got 12)"});
  e.push_back({"A26", "number of k/v heads {num_heads_k} must divide number of heads in query {num_heads}", false,
               [](D d) { Varlen c(d, 16, 3, 2); return c.raised(); },
               "number of k/v heads 2 must divide number of heads in query 3"});
  e.push_back({"A27", "seqlens_q should have a len >= 2 {n}", false,
               [](D d) { Varlen c(d); c.op.seqlens_q = u32_tensor({6}, d); return c.raised(); },
               "seqlens_q should have a len >= 2 1"});
  e.push_back({"A28", "seqlens_q and seqlens_k should have the same number of elements {nq} <> {nk}", false,
               [](D d) { Varlen c(d); c.op.seqlens_k = u32_tensor({0, 9}, d); return c.raised(); },
               "seqlens_q and seqlens_k should have the same number of elements 3 <> 2"});
  e.push_back({"A29", "mm_prefix_ranges must be i32, got {dt:?}", false,
               [](D d) {
                 Varlen c(d);
                 c.op.mm_prefix_ranges = Tensor::from_vec(std::vector<uint32_t>{0, 1, 0, 1}, Shape{2, 1, 2}, d);
                 return c.raised();
               },
               "mm_prefix_ranges must be i32, got U32"});
  e.push_back({"A30", "mm_prefix_ranges must be a cuda tensor", true,
               [](D d) {
                 Varlen c(d);
                 c.op.mm_prefix_ranges = Tensor::from_vec(std::vector<int32_t>{0, 1, 0, 1}, Shape{2, 1, 2}, D::cpu());
                 return c.raised();
               },
               "mm_prefix_ranges must be a cuda tensor"});
  e.push_back({"A31", "mm_prefix_ranges shape must be ({batch_size}, max_ranges, 2), got {shape:?}", false,
               [](D d) {
                 Varlen c(d);
                 c.op.mm_prefix_ranges = Tensor::from_vec(std::vector<int32_t>{0, 1, 0, 1, 0, 1}, Shape{3, 1, 2}, d);
                 return c.raised();
               },
               "mm_prefix_ranges shape must be (2, max_ranges, 2), got [3, 1, 2]"});
  e.push_back({"A32", "mm_prefix_ranges last dimension must be contiguous", false,
               [](D d) {
                 Varlen c(d);
                 c.op.mm_prefix_ranges =
                     Tensor::from_vec(std::vector<int32_t>(8, 0), Shape{2, 2, 2}, d).transpose(1, 2);
                 return c.raised();
               },
               "mm_prefix_ranges last dimension must be contiguous"});
  e.push_back({"A33", "DType mismatch alibi_slopes {dt:?}, expected F32", false,
               [](D d) { Varlen c(d); c.op.alibi_slopes = randn({4}, DType::BF16, d, 9); return c.raised(); },
               "DType mismatch alibi_slopes BF16, expected F32"});
  e.push_back({"A34", "shape mismatch alibi_slopes {shape:?}, expected {num_heads}", false,
               [](D d) { Varlen c(d); c.op.alibi_slopes = randn({3}, DType::F32, d, 9); return c.raised(); },
               "shape mismatch alibi_slopes [3], expected 4"});
  e.push_back({"A35", "alibi_slopes must be a cuda tensor", true,
               [](D d) { Varlen c(d); c.op.alibi_slopes = randn({4}, DType::F32, D::cpu(), 9); return c.raised(); },
               "alibi_slopes must be a cuda tensor"});
  e.push_back({"A36", "block_table must be u32 or i32, got {dt:?}", false,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.block_table = Tensor::from_vec(std::vector<int64_t>{0, 1, 2, 3}, Shape{2, 2}, d);
                 return c.raised();
               },
               "block_table must be u32 or i32, got I64"});
  // ---- wick's stricter checks ------------------------------------------------------------
  e.push_back({"W01", "{op}: k has no heads (k shape {k_shape:?}); num_heads_k must be at least 1", false,
               [](D d) { Varlen c(d, 16, 4, 0); return c.raised(); },
               "flash-attn-varlen: k has no heads (k shape [9, 0, 16]); num_heads_k must be at least 1"});
  e.push_back({"W02", "{op}: head_size is 0 (q shape {q_shape:?}); it must be a positive multiple of 8", false,
               [](D d) { Batched c(d); c.q = c.q.narrow(3, 0, 0), c.k = c.k.narrow(3, 0, 0), c.v = c.v.narrow(3, 0, 0); return c.raised(); },
               "flash-attn: head_size is 0 (q shape [2, 3, 4, 0]); it must be a positive multiple of 8"});
  e.push_back({"W03", "{op}: {what} {value} does not fit in 32 bits (the kernels index sequences and heads with int)", false,
               [](D d) { Varlen c(d); c.op.max_seqlen_k = size_t{1} << 31; return c.raised(); },
               "flash-attn-varlen: max_seqlen_k 2147483648 does not fit in 32 bits (the kernels index sequences and heads with int)"});
  e.push_back({"W04", "flash-attn-varlen: seqlens_q must start at 0 (got seqlens_q[0] = {first}); every row of q belongs to a sequence", false,
               [](D d) { Varlen c(d); c.op.seqlens_q = u32_tensor({1, 2, 6}, d); return c.raised(); },
               "flash-attn-varlen: seqlens_q must start at 0 (got seqlens_q[0] = 1); every row of q belongs to a sequence"});
  e.push_back({"W05", "flash-attn-varlen: {name} must be non-decreasing (cumulative lengths), but {name}[{b}] = {x} < {name}[{b - 1}] = {y}", false,
               [](D d) { Varlen c(d); c.op.seqlens_k = u32_tensor({0, 5, 4}, d); return c.raised(); },
               "flash-attn-varlen: seqlens_k must be non-decreasing (cumulative lengths), but seqlens_k[2] = 4 < seqlens_k[1] = 5"});
  e.push_back({"W06", "flash-attn-varlen: seqlens_q ends at {last} but q has {total_q} rows (total_q); the last cumulative length must equal total_q", false,
               [](D d) { Varlen c(d); c.op.seqlens_q = u32_tensor({0, 2, 5}, d); return c.raised(); },
               "flash-attn-varlen: seqlens_q ends at 5 but q has 6 rows (total_q); the last cumulative length must equal total_q"});
  e.push_back({"W07", "flash-attn-varlen: seqlens_k ends at {last} but k has only {total_k} rows (total_k)", false,
               [](D d) { Varlen c(d); c.op.seqlens_k = u32_tensor({0, 4, 10}, d); c.op.max_seqlen_k = 6; return c.raised(); },
               "flash-attn-varlen: seqlens_k ends at 10 but k has only 9 rows (total_k)"});
  e.push_back({"W08", "flash-attn-varlen: sequence {b} has {len} {query|key} tokens ({name}[{b + 1}] - {name}[{b}]) but {max_name} is {max}", false,
               [](D d) { Varlen c(d); c.op.max_seqlen_q = 3; return c.raised(); },
               "flash-attn-varlen: sequence 1 has 4 query tokens (seqlens_q[2] - seqlens_q[1]) but max_seqlen_q is 3"});
  e.push_back({"W09", "flash-attn-varlen: block_table has {rows} rows but there are {batch} sequences (block_table shape {shape:?})", false,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1}, Shape{1, 2}, d);
                 return c.raised();
               },
               "flash-attn-varlen: block_table has 1 rows but there are 2 sequences (block_table shape [1, 2])"});
  e.push_back({"W10", "flash-attn-varlen: sequence {b} has {len} key tokens, which need {pages} blocks of {page}, but block_table has only {cols} columns", false,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.seqlens_k = u32_tensor({0, 4, 70}, d);
                 c.op.max_seqlen_k = 70;
                 return c.raised();
               },
               "flash-attn-varlen: sequence 1 has 66 key tokens, which need 3 blocks of 32, but block_table has only 2 columns"});
  e.push_back({"W11", "flash-attn-varlen: block_table[{b}][{c}] = {entry} is outside [0, {num_blocks}) (k has {num_blocks} blocks)", false,
               [](D d) {
                 Varlen c(d);
                 c.paged().op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 7}, Shape{2, 2}, d);
                 c.op.seqlens_k = u32_tensor({0, 4, 40}, d);
                 c.op.max_seqlen_k = 36;
                 return c.raised();
               },
               "flash-attn-varlen: block_table[1][1] = 7 is outside [0, 5) (k has 5 blocks)"});
  e.push_back({"W12", "flash-attn-varlen: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Varlen c(d); c.op.seqlens_k = Tensor(); return c.raised(); },
               "flash-attn-varlen: seqlens_k is an empty (default-constructed) tensor"});
  e.push_back({"W13", "{op}: causal is set together with window_size_right = {right}; causal means window_size_right = 0, so set one or the other", false,
               [](D d) { Varlen c(d); c.op.causal = true; c.op.window_size_right = 3; return c.raised(); },
               "flash-attn-varlen: causal is set together with window_size_right = 3; causal means window_size_right = 0, so set one or the other"});
  e.push_back({"W18", "{op}: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Varlen c(d); c.q = Tensor(); return c.raised(); },
               "flash-attn-varlen: q is an empty (default-constructed) tensor"});
  e.push_back({"W18", "{op}: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Varlen c(d); c.paged().op.block_table = Tensor(); return c.raised(); },
               "flash-attn-varlen: block_table is an empty (default-constructed) tensor"});
  e.push_back({"W18", "{op}: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Varlen c(d); c.op.mm_prefix_ranges = Tensor(); return c.raised(); },
               "flash-attn-varlen: mm_prefix_ranges is an empty (default-constructed) tensor"});
  e.push_back({"W18", "{op}: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Batched c(d); c.op.alibi_slopes = Tensor(); return c.raised(); },
               "flash-attn: alibi_slopes is an empty (default-constructed) tensor"});
  e.push_back({"W18", "{op}: {name} is an empty (default-constructed) tensor", false,
               [](D d) { Batched c(d); c.v = Tensor(); return c.raised(); },
               "flash-attn: v is an empty (default-constructed) tensor"});
  e.push_back({"W19", "flash-attn-varlen: page_block_size is 0; paged k/v need blocks of a positive multiple of 32 rows", false,
               [](D d) {
                 Varlen c(d);
                 c.paged(0);  // k, v (5, 0, 2, 16): 0 is a multiple of 32 to candle
                 return c.raised();
               },
               "flash-attn-varlen: page_block_size is 0; paged k/v need blocks of a positive multiple of 32 rows"});
  e.push_back({"W03", "{op}: {what} {value} does not fit in 32 bits (the kernels index sequences and heads with int)", false,
               [](D d) {
                 // pages of 2^32 rows as a stride-0 view of one row per block: no memory, but
                 // an int page size would be 0
                 Varlen c(d);
                 c.paged();
                 const Shape big{5, size_t{1} << 32, 2, 16};
                 c.k = c.k.narrow(1, 0, 1).broadcast_as(big), c.v = c.v.narrow(1, 0, 1).broadcast_as(big);
                 c.op.page_block_size = size_t{1} << 32;
                 return c.raised();
               },
               "flash-attn-varlen: page_block_size 4294967296 does not fit in 32 bits (the kernels index sequences and heads "
               "with int)"});
  // ---- PagedKvCache ----------------------------------------------------------------------
  e.push_back({"P01", "PagedKvCache: page_block_size must be a positive multiple of 32 (got {page_block_size})", false,
               [](D d) { return raised_by([&] { PagedKvCache c(4, 16, 2, 8, DType::BF16, d); }); },
               "PagedKvCache: page_block_size must be a positive multiple of 32 (got 16)"});
  e.push_back({"P02", "PagedKvCache: num_blocks must be in [1, 2^31) (got {num_blocks})", false,
               [](D d) { return raised_by([&] { PagedKvCache c(0, 32, 2, 8, DType::BF16, d); }); },
               "PagedKvCache: num_blocks must be in [1, 2^31) (got 0)"});
  e.push_back({"P03", "PagedKvCache: num_heads_k and head_size must be positive (got {num_heads_k} and {head_size})", false,
               [](D d) { return raised_by([&] { PagedKvCache c(2, 32, 2, 0, DType::BF16, d); }); },
               "PagedKvCache: num_heads_k and head_size must be positive (got 2 and 0)"});
  e.push_back({"P04", "PagedKvCache::{fn}: sequence {id} needs {n} more blocks of {page} rows for {tokens} new tokens but only {free} of {num_blocks} blocks are free; free finished sequences or make the cache larger", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 Tensor k = randn({33, 1, 8}, DType::BF16, d, 1);
                 return raised_by([&] { c.append(4, k, k); });
               },
               "PagedKvCache::append: sequence 4 needs 2 more blocks of 32 rows for 33 new tokens but only 1 of 1 blocks are free; free finished sequences or make the cache larger"});
  e.push_back({"P05", "PagedKvCache::append: {k_new|v_new} has shape {shape:?}, expected {expected:?} (n_new, num_heads_k, head_size)", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 Tensor k = randn({3, 1, 16}, DType::BF16, d, 1);
                 return raised_by([&] { c.append(4, k, k); });
               },
               "PagedKvCache::append: k_new has shape [3, 1, 16], expected [3, 1, 8] (n_new, num_heads_k, head_size)"});
  e.push_back({"P06", "PagedKvCache::append: {k_new|v_new} is {dt:?} but the cache holds {cache_dt:?}", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 Tensor k = randn({3, 1, 8}, DType::F16, d, 1);
                 return raised_by([&] { c.append(4, k, k); });
               },
               "PagedKvCache::append: k_new is F16 but the cache holds BF16"});
  e.push_back({"P07", "PagedKvCache::append: {k_new|v_new} is on {device:?} but the cache is on {cache_device:?}", true,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 Tensor k = randn({3, 1, 8}, DType::BF16, D::cpu(), 1);
                 return raised_by([&] { c.append(4, k, k); });
               },
               "PagedKvCache::append: k_new is on Cpu but the cache is on Cuda { gpu_id: 0 }"});
  e.push_back({"P08", "PagedKvCache::allocate_block: all {num_blocks} blocks are in use", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 c.allocate_block();
                 return raised_by([&] { c.allocate_block(); });
               },
               "PagedKvCache::allocate_block: all 1 blocks are in use"});
  e.push_back({"P09", "PagedKvCache::release_block: block {block} is outside [0, {num_blocks})", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 return raised_by([&] { c.release_block(-1); });
               },
               "PagedKvCache::release_block: block -1 is outside [0, 1)"});
  e.push_back({"P10", "PagedKvCache::release_block: block {block} is already free", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 return raised_by([&] { c.release_block(0); });
               },
               "PagedKvCache::release_block: block 0 is already free"});
  e.push_back({"P11", "PagedKvCache::{function}: unknown sequence {id}", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 return raised_by([&] { c.seqlens_k({3}); });
               },
               "PagedKvCache::seqlens_k: unknown sequence 3"});
  e.push_back({"P12", "PagedKvCache::block_table: dtype must be I32 or U32, got {dt:?}", false,
               [](D d) {
                 PagedKvCache c(1, 32, 1, 8, DType::BF16, d);
                 return raised_by([&] { c.block_table({}, DType::U8); });
               },
               "PagedKvCache::block_table: dtype must be I32 or U32, got U8"});
  e.push_back({"P13", "write_kv_slots: slots[{i}] = {slot} is outside the cache's {rows} rows ({num_blocks} blocks of {page})", false,
               [](D d) {
                 const Tensor kc = randn({5, 64, 2, 8}, DType::BF16, d, 1), vc = randn({5, 64, 2, 8}, DType::BF16, d, 2);
                 const Tensor k1 = randn({2, 2, 8}, DType::BF16, d, 3), v1 = randn({2, 2, 8}, DType::BF16, d, 4);
                 const Tensor slots = Tensor::from_vec(std::vector<int64_t>{3, 320}, Shape{2}, d);
                 return raised_by([&] { write_kv_slots(kc, vc, k1, v1, slots); check_device_faults(d); });
               },
               "write_kv_slots: slots[1] = 320 is outside the cache's 320 rows (5 blocks of 64)"});
  e.push_back({"P14", "write_kv_slots: {name} is {got}, expected {expected}", false,
               [](D) {
                 const D d = D::cpu();  // the text names the device
                 const Tensor kc = randn({5, 64, 2, 8}, DType::BF16, d, 1), vc = randn({5, 64, 2, 8}, DType::BF16, d, 2);
                 const Tensor k1 = randn({1, 2, 8}, DType::BF16, d, 3), v1 = randn({1, 2, 8}, DType::BF16, d, 4);
                 const Tensor slots = Tensor::from_vec(std::vector<int32_t>{3}, Shape{1}, d);
                 return raised_by([&] { write_kv_slots(kc, vc, k1, v1, slots); });
               },
               "write_kv_slots: slots is [1] I32 on Cpu, expected [1] I64 on Cpu, contiguous"});
  e.push_back({"P15", "PagedKvCache::step_layout: {n} query lengths for {batch} sequences", false,
               [](D d) {
                 PagedKvCache c(2, 32, 1, 8, DType::BF16, d);
                 c.reserve(3, 1), c.reserve(4, 1);
                 return raised_by([&] { c.step_layout({3, 4}, {1}); });
               },
               "PagedKvCache::step_layout: 1 query lengths for 2 sequences"});
  e.push_back({"W14", "plan_step: block_table has {n} entries but {batch} sequences x block_table_cols {cols} = {expected}", false,
               [](D d) {
                 StepLayout l;
                 l.seqlens_q = {0, 1, 2}, l.seqlens_k = {0, 4, 9}, l.max_seqlen_q = 1, l.max_seqlen_k = 5;
                 l.block_table = {0, 1, 2}, l.block_table_cols = 2, l.page_block_size = 32;
                 return raised_by([&] { plan_step(l, d); });
               },
               "plan_step: block_table has 3 entries but 2 sequences x block_table_cols 2 = 4"});
  e.push_back({"W15", "update_step: the op was not made by plan_step (it has no planned step to update)", false,
               [](D d) {
                 StepLayout l;
                 l.seqlens_q = {0, 1}, l.seqlens_k = {0, 4}, l.max_seqlen_q = 1, l.max_seqlen_k = 4;
                 return raised_by([&] { FlashAttnVarLen op; update_step(op, l); });
               },
               "update_step: the op was not made by plan_step (it has no planned step to update)"});
  e.push_back({"W16", "update_step: the new step ({n} cumulative lengths, {cols} block-table columns, page {page}, max lengths {mq}/{mk}) does not fit the planned op ({n0} cumulative lengths, {cols0} block-table columns, page {page0}, max lengths {mq0}/{mk0}); plan_step a new op, or plan the first step with room to spare", false,
               [](D d) {
                 StepLayout l;
                 l.seqlens_q = {0, 1}, l.seqlens_k = {0, 64}, l.max_seqlen_q = 1, l.max_seqlen_k = 64;
                 return raised_by([&] {
                   FlashAttnVarLen op = plan_step(l, d);
                   l.seqlens_k = {0, 65}, l.max_seqlen_k = 65;
                   update_step(op, l);
                 });
               },
               "update_step: the new step (2 cumulative lengths, 0 block-table columns, page 0, max lengths 1/65) "
               "does not fit the planned op (2 cumulative lengths, 0 block-table columns, page 0, max lengths 1/64); "
               "plan_step a new op, or plan the first step with room to spare"});
  e.push_back({"W17", "forward_into: {name} must be a contiguous {dtype:?} tensor of shape {shape:?} on {device:?}, got {got}", false,
               [](D) {
                 const D d = D::cpu();  // the text names the device
                 Varlen c(d);
                 const Tensor out = Tensor::empty({6, 4, 16}, DType::F32, d);
                 return raised_by([&] { c.op.forward_into(c.q, c.k, c.v, out, Tensor()); });
               },
               "forward_into: out must be a contiguous BF16 tensor of shape [6, 4, 16] on Cpu, got [6, 4, 16] F32 on Cpu"});
  e.push_back({"P16", "PagedKvCache::release_block: block {block} belongs to sequence {id}, which still reads it; free({id}) "
               "returns a sequence's blocks", false,
               [](D d) {
                 PagedKvCache c(4, 32, 1, 8, DType::BF16, d);
                 Tensor k = randn({40, 1, 8}, DType::BF16, d, 1);
                 c.append(7, k, k);
                 return raised_by([&] { c.release_block(c.blocks(7)[1]); });
               },
               "PagedKvCache::release_block: block 1 belongs to sequence 7, which still reads it; free(7) returns a "
               "sequence's blocks"});
  e.push_back({"P17", "PagedKvCache::{function}: the first {n} sequences hold {tokens} tokens, more than U32 cumulative "
               "lengths count (2^32 - 1); bind fewer sequences per call", false,
               [](D d) {
                 // one sequence of 2^16 tokens listed 2^16 + 1 times: the 2^16th reaches 2^32; a small cache
                 PagedKvCache c(2048, 32, 1, 8, DType::BF16, d);
                 Tensor k = Tensor::zeros({size_t{1} << 16, 1, 8}, DType::BF16, d);
                 c.append(3, k, k);
                 return raised_by([&] { c.seqlens_k(std::vector<uint64_t>((size_t{1} << 16) + 1, 3)); });
               },
               "PagedKvCache::seqlens_k: the first 65536 sequences hold 4294967296 tokens, more than U32 cumulative "
               "lengths count (2^32 - 1); bind fewer sequences per call"});
  return e;
}

}  // namespace

TEST_CASE("attention errors: every catalogue entry is raised with its exact text") {
  for (bool strict : {false, true}) {
    g_strict = strict;
    INFO("strict checks: ", strict);
    for (const Entry& e : catalogue()) {
      INFO(e.id, ": ", e.templ);
      CHECK(matches_template(e.expected, e.templ));
      if (e.needs_cuda) {
        if (!Device::cuda_available()) {
          MESSAGE("SKIPPED (no CUDA device): ", e.id);
          continue;
        }
        catalog::check_raised(e.trigger(Device::cuda(0)), e.id, e.expected);
        continue;
      }
      for (Device dev : test::test_devices()) {
        DEVICE_CONTEXT(dev);
        catalog::check_raised(e.trigger(dev), e.id, e.expected);
      }
    }
  }
  g_strict = false;
}

TEST_CASE("attention errors: docs/errors.md documents exactly the catalogue") {
  const std::string md = catalog::read_errors_md();
  REQUIRE_MESSAGE(!md.empty(), "docs/errors.md not found (run from the repository root)");
  std::map<std::string, std::string> tested;
  for (const Entry& e : catalogue()) tested[e.id] = e.templ;
  // X01 is the one message no test can trigger: a CUDA tensor in a build without CUDA.
  catalog::check_sections_in_sync(catalog::documented_messages(md), "AWXP", tested, {"X01"});
}

TEST_CASE("attention errors: a CPU q names the cpu where candle says cuda") {
  SKIP_WITHOUT_CUDA();
  Varlen c(Device::cpu());
  c.op.seqlens_q = u32_tensor({0, 2, 6}, Device::cuda(0));
  CHECK(c.run() == "seqlens_q must be a cpu tensor");
  Varlen b(Device::cpu());
  b.op.alibi_slopes = randn({4}, DType::F32, Device::cuda(0), 1);
  CHECK(b.run() == "alibi_slopes must be a cpu tensor");
  Batched d(Device::cpu());
  d.v = randn({2, 5, 2, 16}, DType::F16, Device::cuda(0), 1);
  CHECK(d.run() == "device mismatch in flash-attn, lhs: Cpu, rhs: Cuda { gpu_id: 0 }");
}

TEST_CASE("attention errors: two faults, the earlier check wins") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    {  // q dtype (step 0) before the seqlens (step 1)
      Varlen c(dev);
      c.q = randn({6, 4, 16}, DType::F32, dev, 1);
      c.op.seqlens_q = strided_u32({0, 2, 6}, dev);
      CHECK(c.run() == "flash-attn is only supported for f16/bf16 (F32)");
    }
    {  // seqlens_q dtype before its layout, and before seqlens_k
      Varlen c(dev);
      c.op.seqlens_q = Tensor::from_vec(std::vector<int32_t>{0, 2, 4, 6}, Shape{2, 2}, dev).narrow(1, 0, 1).squeeze(1);
      c.op.seqlens_k = strided_u32({0, 4, 9}, dev);
      CHECK(c.run() == "unexpected dtype, expected: U32, got: I32");
    }
    {  // block_table layout (step 3) before k's dtype (step 4)
      Varlen c(dev);
      c.paged();
      c.op.block_table = c.op.block_table->transpose(0, 1);
      c.k = randn({5, 32, 2, 16}, DType::F16, dev, 2);
      CHECK(c.run() == "block_table last dimension must be contiguous");
    }
    {  // k dtype before ranks
      Varlen c(dev);
      c.k = randn({9, 2, 16}, DType::F16, dev, 2);
      c.q = c.q.unsqueeze(0);
      CHECK(c.run() == "unexpected dtype, expected: BF16, got: F16");
    }
    {  // ranks before last-dim strides
      Varlen c(dev);
      c.q = randn({6, 16, 4}, DType::BF16, dev, 1).transpose(1, 2).unsqueeze(0);
      CHECK(c.run() == "flash-attn-varlen expects input tensors of rank 3 (q: 4, k: 3, v: 3");
    }
    {  // q's last-dim stride before k's shape
      Varlen c(dev);
      c.q = randn({6, 16, 4}, DType::BF16, dev, 1).transpose(1, 2);
      c.k = randn({9, 2, 8}, DType::BF16, dev, 2);
      CHECK(c.run() == "the last dim of q must be contiguous [64, 1, 4]");
    }
    {  // paged: a missing page_block_size before the page's multiple of 32
      Varlen c(dev);
      c.paged(48).op.page_block_size.reset();
      CHECK(c.run() == "paged flash-attn requires page_block_size");
    }
    {  // head size bound before the multiple of 8, before the head-count checks
      Varlen c(dev, 524, 3, 2);
      CHECK(c.run() == "only supports head dimension at most 512 (got 524)");
      Varlen z(dev, 12, 4, 0);
      CHECK(z.run() == "only supports head sizes that are a multiple of 8 (got 12)");
    }
    {  // mm_prefix_ranges (step 10) before alibi_slopes (step 11) before block_table dtype (12)
      Varlen c(dev);
      c.paged().op.block_table = Tensor::from_vec(std::vector<int64_t>{0, 1, 2, 3}, Shape{2, 2}, dev);
      c.op.alibi_slopes = randn({3}, DType::F32, dev, 9);
      CHECK(c.run() == "shape mismatch alibi_slopes [3], expected 4");
      c.op.mm_prefix_ranges = Tensor::from_vec(std::vector<int32_t>{0, 1}, Shape{1, 1, 2}, dev);
      CHECK(c.run() == "mm_prefix_ranges shape must be (2, max_ranges, 2), got [1, 1, 2]");
    }
    {  // every candle check before wick's value checks
      Varlen c(dev);
      c.paged().op.block_table = Tensor::from_vec(std::vector<int64_t>{0, 1, 2, 99}, Shape{2, 2}, dev);
      c.op.seqlens_q = u32_tensor({3, 2, 6}, dev);
      CHECK(c.run() == "block_table must be u32 or i32, got I64");
      c.op.block_table = Tensor::from_vec(std::vector<int32_t>{0, 1, 2, 99}, Shape{2, 2}, dev);
      CHECK(c.run() == "flash-attn-varlen: seqlens_q must start at 0 (got seqlens_q[0] = 3); every row of q belongs to a sequence");
    }
    {  // batched: k dtype before ranks, shapes before head checks
      Batched c(dev);
      c.k = randn({2, 5, 16}, DType::BF16, dev, 1);
      CHECK(c.run() == "unexpected dtype, expected: F16, got: BF16");
      Batched s(dev);
      s.k = randn({2, 5, 2, 12}, DType::F16, dev, 1);
      s.v = s.k;
      CHECK(s.run() == "shape mismatch q [2, 3, 4, 16] and k [2, 5, 2, 12]");
      Batched a(dev);
      a.v = randn({1, 5, 2, 16}, DType::F16, dev, 1);
      a.op.alibi_slopes = randn({4}, DType::F16, dev, 1);
      CHECK(a.run() == "shape mismatch q [2, 3, 4, 16] and v [1, 5, 2, 16]");
    }
  }
}

TEST_CASE("attention errors: a key position plus a window must fit the kernels' 32-bit arithmetic") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Varlen c(dev);
    c.op.max_seqlen_k = (size_t{1} << 30) - 1;  // fits alone, 2 * it + max_seqlen_q does not
    c.op.max_seqlen_q = 4;
    CHECK(c.run() ==
          "flash-attn-varlen: max_seqlen_q + 2 * max_seqlen_k 2147483650 does not fit in 32 bits (the kernels index "
          "sequences and heads with int)");
  }
}
