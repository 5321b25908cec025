// Every check of the flash-attention ops, in candle's order and with candle's text (the
// numbered steps are those of docs/parity.md, sections 2 and 3), then wick's stricter checks
// (section 5), then the FlashFwdParams both devices consume.
#include "ops/attention/plan.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/flash/validate.h"
#include "tensor/device_fault.h"

namespace wick::attention {

namespace {

constexpr const char* kVarlenOp = "flash-attn-varlen";
constexpr const char* kBatchedOp = "flash-attn";

// code: the message's docs/errors.md id.
[[noreturn]] void fail(const char* code, const std::string& msg) { throw Error(code, msg); }

// candle says "must be a cuda tensor"; on a CPU q the tensor that is not where q is must be
// moved to the CPU, so the word names q's device.
std::string must_be_on(const char* name, const Device& q_dev) {
  return std::string(name) + " must be a " + (q_dev.is_cuda() ? "cuda" : "cpu") + " tensor";
}

std::string dims_str(const Tensor& t) { return to_string(t.shape()); }

// Wick, before step 0: every tensor argument holds a tensor (candle's cannot be missing).
void check_defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) throw Error("W18", std::string(op) + ": " + name + " is an empty (default-constructed) tensor");
}
void check_defined(const char* op, const char* name, const std::optional<Tensor>& t) {
  if (t) check_defined(op, name, *t);
}

// Step 0 of both ops: k and v on q's device; q f16 or bf16.
void check_devices_and_dtype(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  if (!(k.device() == q.device())) throw_device_mismatch(op, q.device(), k.device());
  if (!(v.device() == q.device())) throw_device_mismatch(op, q.device(), v.device());
  if (q.dtype() != DType::F16 && q.dtype() != DType::BF16)
    fail("A02", std::string("flash-attn is only supported for f16/bf16 (") + dtype_name(q.dtype()) + ")");
}

// Varlen steps 1 and 2: on q's device (device_code), U32, C-contiguous (layout_code).
void check_seqlens(const char* name, const char* device_code, const char* layout_code, const Tensor& s,
                   const Device& q_dev) {
  if (!s.defined()) fail("W12", std::string(kVarlenOp) + ": " + name + " is an empty (default-constructed) tensor");
  if (!(s.device() == q_dev)) fail(device_code, must_be_on(name, q_dev));
  if (s.dtype() != DType::U32) throw_dtype_error(DType::U32, s.dtype());
  if (!s.is_contiguous()) fail(layout_code, std::string(name) + " has to be contiguous");
}

void check_kv_dtypes(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (k.dtype() != q.dtype()) throw_dtype_error(q.dtype(), k.dtype());
  if (v.dtype() != q.dtype()) throw_dtype_error(q.dtype(), v.dtype());
}

void check_last_dim_strides(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.stride().back() != 1) fail("A14", "the last dim of q must be contiguous " + to_string(q.stride()));
  if (k.stride().back() != 1) fail("A15", "the last dim of k must be contiguous " + to_string(k.stride()));
  if (v.stride().back() != 1) fail("A16", "the last dim of v must be contiguous " + to_string(v.stride()));
}

// Varlen step 8 / batched step 5. num_heads_k == 0 is wick's own check: candle divides by it.
void check_heads(const char* op, size_t head_size, size_t num_heads, size_t num_heads_k,
                 const Tensor& k) {
  if (head_size > 512)
    fail("A24", "only supports head dimension at most 512 (got " + std::to_string(head_size) + ")");
  if (head_size % 8 != 0)
    fail("A25", "only supports head sizes that are a multiple of 8 (got " + std::to_string(head_size) + ")");
  if (num_heads_k == 0)
    fail("W01", std::string(op) + ": k has no heads (k shape " + dims_str(k) +
         "); num_heads_k must be at least 1");
  if (num_heads % num_heads_k != 0)
    fail("A26", "number of k/v heads " + std::to_string(num_heads_k) +
         " must divide number of heads in query " + std::to_string(num_heads));
}

// Varlen step 11 / batched step 6.
void check_alibi(const std::optional<Tensor>& a, size_t num_heads, const Device& q_dev) {
  if (!a) return;
  if (a->dtype() != DType::F32)
    fail("A33", std::string("DType mismatch alibi_slopes ") + dtype_name(a->dtype()) + ", expected F32");
  if (a->shape().dims1() != num_heads)
    fail("A34", "shape mismatch alibi_slopes " + dims_str(*a) + ", expected " + std::to_string(num_heads));
  if (!(a->device() == q_dev)) fail("A35", must_be_on("alibi_slopes", q_dev));
}

// Wick: every count the kernels take as int must fit one.
int to_i32(const char* op, const char* what, size_t value) {
  if (value > static_cast<size_t>(INT_MAX))
    fail("W03", std::string(op) + ": " + what + " " + std::to_string(value) +
         " does not fit in 32 bits (the kernels index sequences and heads with int)");
  return static_cast<int>(value);
}

// Wick: a page size of 0 passes candle's checks (0 is a multiple of 32) but has no rows to
// hold a token, and the kernels index pages with int.
void check_page_size(size_t page_block_size) {
  if (page_block_size == 0)
    throw Error("W19", std::string(kVarlenOp) +
                           ": page_block_size is 0; paged k/v need blocks of a positive multiple of 32 rows");
  to_i32(kVarlenOp, "page_block_size", page_block_size);
}

// Wick: head_size 0 passes candle's checks but has nothing to attend with.
void check_head_size_nonzero(const char* op, size_t head_size, const Tensor& q) {
  if (head_size == 0)
    fail("W02", std::string(op) + ": head_size is 0 (q shape " + dims_str(q) + "); it must be a positive multiple of 8");
}

// Wick's `causal` field is candle's window_size_right = Some(0); set together with another
// right window it is a contradiction, not a preference.
std::optional<size_t> right_window(const char* op, bool causal, std::optional<size_t> window_size_right) {
  if (!causal) return window_size_right;
  if (window_size_right && *window_size_right != 0)
    throw Error("W13", std::string(op) + ": causal is set together with window_size_right = " +
                           std::to_string(*window_size_right) +
                           "; causal means window_size_right = 0, so set one or the other");
  return size_t{0};
}

// candle's window conversion: a size above max_seqlen_k counts as None (-1); then
// causal <=> left < 0 && right == 0; a missing side of a window becomes max_seqlen_k.
// With mm_prefix_ranges a causal mask becomes a window of left = max_seqlen_k first.
void convert_windows(kernels::FlashFwdParams& p, std::optional<size_t> left,
                     std::optional<size_t> right, size_t max_seqlen_k, bool has_mm_prefix) {
  const int max_k = static_cast<int>(max_seqlen_k);
  int l = (left && *left <= max_seqlen_k) ? static_cast<int>(*left) : -1;
  int r = (right && *right <= max_seqlen_k) ? static_cast<int>(*right) : -1;
  if (has_mm_prefix && l < 0 && r == 0) l = max_k;
  if (l < 0 && r >= 0) l = max_k;
  if (l >= 0 && r < 0) r = max_k;
  p.window_left = l;
  p.window_right = r;
}

// An unset softmax_scale is 1 / sqrt(head_size), the usual attention scaling.
float scale_of(const std::optional<float>& softmax_scale, size_t head_size) {
  return softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_size));
}

// alibi_slopes may be any strided (num_heads) view; the kernels read it compact.
void bind_alibi(AttnPlan& plan, const std::optional<Tensor>& a) {
  if (!a) return;
  plan.alibi_slopes = a->is_contiguous() ? *a : Tensor::from_vec(a->to_vec<float>(), a->shape(), a->device());
  plan.params.alibi_slopes = static_cast<const float*>(plan.alibi_slopes.data_ptr());
}

// The output and LSE shapes, the dtype and the input base pointers: the part of the plan
// that is the same for both ops. out takes q's shape; lse_shape differs by op.
void bind_inputs(AttnPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v, Shape lse_shape) {
  kernels::FlashFwdParams& p = plan.params;
  plan.device = q.device();
  plan.dtype = q.dtype();
  plan.out_shape = q.shape();
  plan.lse_shape = std::move(lse_shape);
  p.dtype = q.dtype() == DType::F16 ? kernels::FlashDType::F16 : kernels::FlashDType::BF16;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
}

// ---- wick's stricter varlen checks (docs/parity.md, section 5) -------------------------
// They read values, so they run where the values are: on the host for CPU tensors (and in
// strict mode), on the device for CUDA tensors (kernels/flash/validate.h), which records
// the same facts; both give the messages below.

std::string w04_message(int64_t first) {
  return std::string(kVarlenOp) + ": seqlens_q must start at 0 (got seqlens_q[0] = " + std::to_string(first) +
         "); every row of q belongs to a sequence";
}
std::string w05_message(const char* name, int64_t b, int64_t x, int64_t y) {
  return std::string(kVarlenOp) + ": " + name + " must be non-decreasing (cumulative lengths), but " + name + "[" +
         std::to_string(b) + "] = " + std::to_string(x) + " < " + name + "[" + std::to_string(b - 1) +
         "] = " + std::to_string(y);
}
std::string w06_message(int64_t last, int64_t total_q) {
  return std::string(kVarlenOp) + ": seqlens_q ends at " + std::to_string(last) + " but q has " +
         std::to_string(total_q) + " rows (total_q); the last cumulative length must equal total_q";
}
std::string w07_message(int64_t last, int64_t total_k) {
  return std::string(kVarlenOp) + ": seqlens_k ends at " + std::to_string(last) + " but k has only " +
         std::to_string(total_k) + " rows (total_k)";
}
// is_q: the query lengths (seqlens_q, max_seqlen_q), else the key lengths.
std::string w08_message(bool is_q, int64_t b, int64_t len, int64_t max_len) {
  const std::string name = is_q ? "seqlens_q" : "seqlens_k";
  return std::string(kVarlenOp) + ": sequence " + std::to_string(b) + " has " + std::to_string(len) + " " +
         (is_q ? "query" : "key") + " tokens (" + name + "[" + std::to_string(b + 1) + "] - " + name + "[" +
         std::to_string(b) + "]) but " + (is_q ? "max_seqlen_q" : "max_seqlen_k") + " is " + std::to_string(max_len);
}
std::string w10_message(int64_t b, int64_t len, int64_t pages, int64_t page, int64_t cols) {
  return std::string(kVarlenOp) + ": sequence " + std::to_string(b) + " has " + std::to_string(len) +
         " key tokens, which need " + std::to_string(pages) + " blocks of " + std::to_string(page) +
         ", but block_table has only " + std::to_string(cols) + " columns";
}
std::string w11_message(int64_t b, int64_t c, int64_t entry, int64_t num_blocks) {
  return std::string(kVarlenOp) + ": block_table[" + std::to_string(b) + "][" + std::to_string(c) + "] = " +
         std::to_string(entry) + " is outside [0, " + std::to_string(num_blocks) + ") (k has " +
         std::to_string(num_blocks) + " blocks)";
}

// The value checks on host copies, in the order the device checks rank them.
void check_seqlens_values(const std::vector<uint32_t>& sq, const std::vector<uint32_t>& sk,
                          const FlashAttnVarLen& op, bool paged, size_t total_q, size_t total_k) {
  if (sq[0] != 0) throw Error("W04", w04_message(sq[0]));
  for (const auto* s : {&sq, &sk})
    for (size_t b = 1; b < s->size(); ++b)
      if ((*s)[b] < (*s)[b - 1])
        throw Error("W05", w05_message(s == &sq ? "seqlens_q" : "seqlens_k", b, (*s)[b], (*s)[b - 1]));
  if (sq.back() != total_q) throw Error("W06", w06_message(sq.back(), total_q));
  if (!paged && sk.back() > total_k) throw Error("W07", w07_message(sk.back(), total_k));
  for (const auto* s : {&sq, &sk}) {
    const bool is_q = s == &sq;
    const size_t max_len = is_q ? op.max_seqlen_q : op.max_seqlen_k;
    for (size_t b = 0; b + 1 < s->size(); ++b)
      if (size_t len = (*s)[b + 1] - (*s)[b]; len > max_len) throw Error("W08", w08_message(is_q, b, len, max_len));
  }
}

// W09: the block table has a row per sequence (a shape check: it runs on the host always).
void check_block_table_rows(const Tensor& bt, size_t batch) {
  const size_t rows = bt.shape().dims2()[0];
  if (rows < batch)
    fail("W09", std::string(kVarlenOp) + ": block_table has " + std::to_string(rows) + " rows but there are " +
         std::to_string(batch) + " sequences (block_table shape " + dims_str(bt) + ")");
}

// W10, W11: every block a sequence uses is named, and exists. seqlens_k and entries (the
// table, row-major, `cols` a row): host copies.
void check_block_table_values(const std::vector<uint32_t>& seqlens_k, const std::vector<int64_t>& entries,
                              size_t cols, size_t page, size_t num_blocks) {
  for (size_t b = 0; b + 1 < seqlens_k.size(); ++b) {
    const size_t len = seqlens_k[b + 1] - seqlens_k[b];
    const size_t pages = (len + page - 1) / page;
    if (pages > cols) throw Error("W10", w10_message(b, len, pages, page, cols));
    for (size_t c = 0; c < pages; ++c) {
      const int64_t e = entries[b * cols + c];
      if (e < 0 || e >= static_cast<int64_t>(num_blocks)) throw Error("W11", w11_message(b, c, e, num_blocks));
    }
  }
}

// The message of a fault flash_validate recorded (kernels/flash/validate.h lists the values).
void format_attention_fault(const DeviceFault& f, std::string& code, std::string& message) {
  const int64_t* v = f.values;
  using C = kernels::SeqlensCheck;
  switch (static_cast<C>(v[0])) {
    case C::QStart: code = "W04", message = w04_message(v[1]); return;
    case C::QOrder: code = "W05", message = w05_message("seqlens_q", v[1], v[2], v[3]); return;
    case C::KOrder: code = "W05", message = w05_message("seqlens_k", v[1], v[2], v[3]); return;
    case C::QEnd: code = "W06", message = w06_message(v[1], v[2]); return;
    case C::KEnd: code = "W07", message = w07_message(v[1], v[2]); return;
    case C::QLength: code = "W08", message = w08_message(true, v[1], v[2], v[3]); return;
    case C::KLength: code = "W08", message = w08_message(false, v[1], v[2], v[3]); return;
    case C::Table:
      if (v[6] == 0) code = "W10", message = w10_message(v[1], v[2], v[3], v[4], v[5]);
      else code = "W11", message = w11_message(v[1], v[2], v[3], v[4]);
      return;
  }
}

// True when op came from plan_step and still holds the tensors plan_step made (its values
// were checked on the host then).
bool planned_here(const FlashAttnVarLen& op) {
  if (!op.planned) return false;
  const StepTables& t = *op.planned;
  return op.seqlens_q.defined() && op.seqlens_q.data_ptr() == t.seqlens_q && op.seqlens_k.defined() &&
         op.seqlens_k.data_ptr() == t.seqlens_k &&
         (op.block_table ? op.block_table->data_ptr() == t.block_table : t.block_table == nullptr);
}

// An on/off environment variable: on when set to anything but "" or "0".
bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string(e) != "0" && std::string(e) != "";
}

// Strict mode: the value checks of CUDA tensors on the host too (a copy and a wait per
// call), so they raise at the call. The op's field, or WICK_STRICT_CHECKS=1.
bool strict_checks(const FlashAttnVarLen& op) {
  static const bool env = env_flag("WICK_STRICT_CHECKS");
  return op.strict_checks || env;
}

// The op's deterministic field, or WICK_DETERMINISTIC=1.
bool deterministic(bool op_field) {
  static const bool env = env_flag("WICK_DETERMINISTIC");
  return op_field || env;
}

// Varlen step 10.
void check_mm_prefix(const Tensor& m, size_t batch_size, const Device& q_dev) {
  if (m.dtype() != DType::I32) fail("A29", std::string("mm_prefix_ranges must be i32, got ") + dtype_name(m.dtype()));
  if (!(m.device() == q_dev)) fail("A30", must_be_on("mm_prefix_ranges", q_dev));
  auto d = m.shape().dims3();
  if (d[0] != batch_size || d[2] != 2)
    fail("A31", "mm_prefix_ranges shape must be (" + std::to_string(batch_size) + ", max_ranges, 2), got " +
         dims_str(m));
  if (m.stride().back() != 1) fail("A32", "mm_prefix_ranges last dimension must be contiguous");
}

}  // namespace

AttnPlan plan_varlen(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, const Tensor& v) {
  AttnPlan plan;
  plan.deterministic = deterministic(op.deterministic);
  auto& p = plan.params;
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}}) check_defined(kVarlenOp, name, *t);
  check_defined(kVarlenOp, "block_table", op.block_table);
  check_defined(kVarlenOp, "mm_prefix_ranges", op.mm_prefix_ranges);
  check_defined(kVarlenOp, "alibi_slopes", op.alibi_slopes);
  // 0. devices, q's dtype
  check_devices_and_dtype(kVarlenOp, q, k, v);
  const Device dev = q.device();
  // 1-2. the cumulative lengths
  check_seqlens("seqlens_q", "A03", "A05", op.seqlens_q, dev);
  check_seqlens("seqlens_k", "A06", "A07", op.seqlens_k, dev);
  // 3. block_table placement and layout (its dtype is checked last, as candle does)
  const bool paged = op.block_table.has_value();
  if (paged) {
    const Tensor& bt = *op.block_table;
    if (!(bt.device() == dev)) fail("A08", must_be_on("block_table", dev));
    bt.shape().dims2();
    if (bt.stride().back() != 1) fail("A10", "block_table last dimension must be contiguous");
  }
  // 4. k, v dtypes
  check_kv_dtypes(q, k, v);
  // 5. ranks
  const size_t q_rank = q.rank(), k_rank = k.rank(), v_rank = v.rank();
  if (q_rank != 3 || (!paged && k_rank != 3) || (!paged && v_rank != 3))
    fail("A11", "flash-attn-varlen expects input tensors of rank 3 (q: " + std::to_string(q_rank) +
         ", k: " + std::to_string(k_rank) + ", v: " + std::to_string(v_rank));
  if (paged && (k_rank != 4 || v_rank != 4))
    fail("A12", "flash-attn-varlen paged expects k/v tensors of rank 4 (k: " + std::to_string(k_rank) +
         ", v: " + std::to_string(v_rank) + ")");
  // 6. last-dim strides
  check_last_dim_strides(q, k, v);
  // 7. shapes
  const auto [total_q, num_heads, head_size] = q.shape().dims3();
  size_t num_heads_k = 0, page_block_size = 0, total_k = 0, num_blocks = 0;
  if (paged) {
    const auto kd = k.shape().dims4();
    if (kd != v.shape().dims4()) fail("A17", "shape mismatch k " + dims_str(k) + " and v " + dims_str(v));
    if (kd[3] != head_size) fail("A18", "shape mismatch q " + dims_str(q) + " and k " + dims_str(k));
    if (!op.page_block_size) fail("A20", "paged flash-attn requires page_block_size");
    if (*op.page_block_size != kd[1])
      fail("A21", "page_block_size " + std::to_string(*op.page_block_size) + " does not match k shape " + dims_str(k));
    if (kd[1] % 32 != 0)
      fail("A22", "paged flash-attn requires page_block_size to be a multiple of 32 (got " + std::to_string(kd[1]) + ")");
    if (head_size > 512)
      fail("A23", "paged flash-attn supports head sizes up to 512 (got " + std::to_string(head_size) + ")");
    num_blocks = kd[0];
    page_block_size = kd[1];
    num_heads_k = kd[2];
  } else {
    const auto kd = k.shape().dims3();
    total_k = kd[0];
    num_heads_k = kd[1];
    if (kd[2] != head_size) fail("A18", "shape mismatch q " + dims_str(q) + " and k " + dims_str(k));
    if (v.shape().dims3() != std::array<size_t, 3>{total_k, num_heads_k, head_size})
      fail("A19", "shape mismatch q " + dims_str(q) + " and v " + dims_str(v));
  }
  // 8. head size and head counts
  check_heads(kVarlenOp, head_size, num_heads, num_heads_k, k);
  // 9. seqlens ranks and counts
  const size_t nq = op.seqlens_q.shape().dims1();
  if (nq < 2) fail("A27", "seqlens_q should have a len >= 2 " + std::to_string(nq));
  const size_t nk = op.seqlens_k.shape().dims1();
  if (nk != nq)
    fail("A28", "seqlens_q and seqlens_k should have the same number of elements " + std::to_string(nq) +
         " <> " + std::to_string(nk));
  const size_t batch_size = nq - 1;
  // 10. mm_prefix_ranges
  if (op.mm_prefix_ranges) check_mm_prefix(*op.mm_prefix_ranges, batch_size, dev);
  // 11. alibi_slopes
  check_alibi(op.alibi_slopes, num_heads, dev);
  // 12. block_table dtype
  if (paged && op.block_table->dtype() != DType::U32 && op.block_table->dtype() != DType::I32)
    fail("A36", std::string("block_table must be u32 or i32, got ") + dtype_name(op.block_table->dtype()));

  // ---- wick's stricter checks: they read values, so the small index tensors come to the host
  check_head_size_nonzero(kVarlenOp, head_size, q);
  if (paged) check_page_size(page_block_size);
  p.max_seqlen_q = to_i32(kVarlenOp, "max_seqlen_q", op.max_seqlen_q);
  p.max_seqlen_k = to_i32(kVarlenOp, "max_seqlen_k", op.max_seqlen_k);
  p.num_heads = to_i32(kVarlenOp, "num_heads", num_heads);
  p.num_heads_k = to_i32(kVarlenOp, "num_heads_k", num_heads_k);
  p.batch = to_i32(kVarlenOp, "batch size", batch_size);
  to_i32(kVarlenOp, "max_seqlen_q + 2 * max_seqlen_k", op.max_seqlen_q + 2 * op.max_seqlen_k);
  if (op.mm_prefix_ranges) p.mm_max_ranges = to_i32(kVarlenOp, "max_ranges", op.mm_prefix_ranges->dim(1));
  const std::optional<size_t> window_right = right_window(kVarlenOp, op.causal, op.window_size_right);
  plan.paged = paged;
  plan.varlen = true;
  if (paged) check_block_table_rows(*op.block_table, batch_size);
  if (planned_here(op)) {
    // plan_step checked every value on the host; only the comparisons with k remain.
    const StepTables& t = *op.planned;
    p.tables_settled = true;
    if (t.last_q != static_cast<int64_t>(total_q)) throw Error("W06", w06_message(t.last_q, total_q));
    if (!paged && t.host_seqlens_k.back() > total_k) throw Error("W07", w07_message(t.host_seqlens_k.back(), total_k));
    if (paged && (t.min_entry < 0 || t.max_entry >= static_cast<int64_t>(num_blocks)))
      check_block_table_values(t.host_seqlens_k, std::vector<int64_t>(t.host_table.begin(), t.host_table.end()),
                               t.cols, page_block_size, num_blocks);
  } else if (dev.is_cpu() || strict_checks(op)) {
    const std::vector<uint32_t> sq = op.seqlens_q.to_vec<uint32_t>(), sk = op.seqlens_k.to_vec<uint32_t>();
    check_seqlens_values(sq, sk, op, paged, total_q, total_k);
    if (paged) {
      std::vector<int64_t> entries;  // u32 or i32, exact in double
      for (double e : op.block_table->to_f64_vec()) entries.push_back(static_cast<int64_t>(e));
      check_block_table_values(sk, entries, op.block_table->dim(1), page_block_size, num_blocks);
    }
  } else {
    // CUDA: the same checks on the device, before the kernels, on the call's stream
    // (dispatch.cpp launches them); the kernels read the verdict.
    register_fault_formatter(FaultKind::Attention, format_attention_fault);
    plan.device_checks.emplace();
    plan.device_checks->total_k = static_cast<int64_t>(total_k);
    plan.device_checks->table_cols = paged ? static_cast<int64_t>(op.block_table->dim(1)) : 0;
    plan.device_checks->table_unsigned = paged && op.block_table->dtype() == DType::U32;
    plan.verdict = Tensor::empty(Shape{1}, DType::U32, dev);
    plan.device_checks->verdict = static_cast<uint32_t*>(plan.verdict.data_ptr());
    p.verdict = plan.device_checks->verdict;
  }

  // ---- the params (index maps: kernels/flash/flash_params.h)
  bind_inputs(plan, q, k, v, Shape{num_heads, total_q});
  const auto& qs = q.stride();
  const auto& ks = k.stride();
  const auto& vs = v.stride();
  p.q_batch_stride = 0;
  p.q_row_stride = qs[0];
  p.q_head_stride = qs[1];
  if (paged) {
    p.k_batch_stride = ks[0], p.k_row_stride = ks[1], p.k_head_stride = ks[2];
    p.v_batch_stride = vs[0], p.v_row_stride = vs[1], p.v_head_stride = vs[2];
    plan.block_table = *op.block_table;
    p.block_table = static_cast<const int32_t*>(plan.block_table.data_ptr());  // u32 read as i32
    p.block_table_batch_stride = op.block_table->stride()[0];
    p.block_table_cols = static_cast<int64_t>(op.block_table->dim(1));
    p.page_block_size = static_cast<int>(page_block_size);
    p.num_blocks = static_cast<int64_t>(num_blocks);
  } else {
    p.k_batch_stride = 0, p.k_row_stride = ks[0], p.k_head_stride = ks[1];
    p.v_batch_stride = 0, p.v_row_stride = vs[0], p.v_head_stride = vs[1];
    p.kv_rows = static_cast<int64_t>(total_k);
  }
  plan.seqlens_q = op.seqlens_q;
  plan.seqlens_k = op.seqlens_k;
  p.cu_seqlens_q = static_cast<const uint32_t*>(plan.seqlens_q.data_ptr());
  p.cu_seqlens_k = static_cast<const uint32_t*>(plan.seqlens_k.data_ptr());
  p.seqlen_q = p.max_seqlen_q;
  p.seqlen_k = p.max_seqlen_k;
  p.total_q = static_cast<int64_t>(total_q);
  p.head_size = static_cast<int>(head_size);
  p.softmax_scale = scale_of(op.softmax_scale, head_size);
  p.softcap = op.softcap.value_or(0.0f);
  bind_alibi(plan, op.alibi_slopes);
  if (op.mm_prefix_ranges) {
    plan.mm_prefix_ranges = *op.mm_prefix_ranges;
    p.mm_prefix_ranges = static_cast<const int32_t*>(plan.mm_prefix_ranges.data_ptr());
    p.mm_batch_stride = plan.mm_prefix_ranges.stride()[0];
    p.mm_range_stride = plan.mm_prefix_ranges.stride()[1];
  }
  convert_windows(p, op.window_size_left, window_right, op.max_seqlen_k, op.mm_prefix_ranges.has_value());
  return plan;
}

AttnPlan plan_batched(const FlashAttn& op, const Tensor& q, const Tensor& k, const Tensor& v) {
  AttnPlan plan;
  plan.deterministic = deterministic(op.deterministic);
  auto& p = plan.params;
  for (auto [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}}) check_defined(kBatchedOp, name, *t);
  check_defined(kBatchedOp, "alibi_slopes", op.alibi_slopes);
  // 0. devices, q's dtype
  check_devices_and_dtype(kBatchedOp, q, k, v);
  const Device dev = q.device();
  // 1. k, v dtypes
  check_kv_dtypes(q, k, v);
  // 2. ranks
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    fail("A13", "flash-attn expects input tensors of rank 4 (q: " + std::to_string(q.rank()) + ", k: " +
         std::to_string(k.rank()) + ", v: " + std::to_string(v.rank()));
  // 3. last-dim strides
  check_last_dim_strides(q, k, v);
  // 4. shapes
  const auto [batch, seqlen_q, num_heads, head_size] = q.shape().dims4();
  const auto kd = k.shape().dims4();
  const std::array<size_t, 4> expected_kv{batch, kd[1], kd[2], head_size};
  if (kd != expected_kv) fail("A18", "shape mismatch q " + dims_str(q) + " and k " + dims_str(k));
  if (v.shape().dims4() != expected_kv) fail("A19", "shape mismatch q " + dims_str(q) + " and v " + dims_str(v));
  const size_t seqlen_k = kd[1], num_heads_k = kd[2];
  // 5. head size and head counts
  check_heads(kBatchedOp, head_size, num_heads, num_heads_k, k);
  // 6. alibi_slopes
  check_alibi(op.alibi_slopes, num_heads, dev);

  // ---- wick's stricter checks
  check_head_size_nonzero(kBatchedOp, head_size, q);
  p.batch = to_i32(kBatchedOp, "batch size", batch);
  p.seqlen_q = to_i32(kBatchedOp, "seqlen_q", seqlen_q);
  p.seqlen_k = to_i32(kBatchedOp, "seqlen_k", seqlen_k);
  to_i32(kBatchedOp, "seqlen_q + 2 * seqlen_k", seqlen_q + 2 * seqlen_k);
  p.num_heads = to_i32(kBatchedOp, "num_heads", num_heads);
  p.num_heads_k = to_i32(kBatchedOp, "num_heads_k", num_heads_k);
  const std::optional<size_t> window_right = right_window(kBatchedOp, op.causal, op.window_size_right);

  bind_inputs(plan, q, k, v, Shape{batch, num_heads, seqlen_q});
  const auto& qs = q.stride();
  const auto& ks = k.stride();
  const auto& vs = v.stride();
  p.q_batch_stride = qs[0], p.q_row_stride = qs[1], p.q_head_stride = qs[2];
  p.k_batch_stride = ks[0], p.k_row_stride = ks[1], p.k_head_stride = ks[2];
  p.v_batch_stride = vs[0], p.v_row_stride = vs[1], p.v_head_stride = vs[2];
  p.max_seqlen_q = p.seqlen_q;
  p.max_seqlen_k = p.seqlen_k;
  p.total_q = static_cast<int64_t>(batch * seqlen_q);
  p.head_size = static_cast<int>(head_size);
  p.softmax_scale = scale_of(op.softmax_scale, head_size);
  p.softcap = op.softcap.value_or(0.0f);
  bind_alibi(plan, op.alibi_slopes);
  convert_windows(p, op.window_size_left, window_right, seqlen_k, false);
  return plan;
}

void bind_outputs(AttnPlan& plan, const Tensor& out, const Tensor& lse) {
  auto& p = plan.params;
  p.out = out.data_ptr();
  p.lse = lse.defined() ? static_cast<float*>(lse.data_ptr()) : nullptr;
  const auto& os = out.stride();
  if (plan.varlen) {
    p.o_batch_stride = 0, p.o_row_stride = os[0], p.o_head_stride = os[1];
    p.lse_batch_stride = 0;
    p.lse_head_stride = p.total_q;
  } else {
    p.o_batch_stride = os[0], p.o_row_stride = os[1], p.o_head_stride = os[2];
    p.lse_batch_stride = static_cast<int64_t>(p.num_heads) * p.seqlen_q;
    p.lse_head_stride = p.seqlen_q;
  }
}

}  // namespace wick::attention

namespace wick::attention {

std::shared_ptr<StepTables> check_step(const StepLayout& l) {
  auto t = std::make_shared<StepTables>();
  const auto& sq = l.seqlens_q;
  const auto& sk = l.seqlens_k;
  t->host_seqlens_k = sk;
  // Too few entries, or counts that differ, are the call's A27 / A28 (the tensors keep them).
  if (sq.size() < 2 || sk.size() != sq.size()) return t;
  const size_t batch = sq.size() - 1;
  if (sq[0] != 0) throw Error("W04", w04_message(sq[0]));
  for (const auto* s : {&sq, &sk})
    for (size_t b = 1; b < s->size(); ++b)
      if ((*s)[b] < (*s)[b - 1])
        throw Error("W05", w05_message(s == &sq ? "seqlens_q" : "seqlens_k", b, (*s)[b], (*s)[b - 1]));
  for (const auto* s : {&sq, &sk}) {
    const bool is_q = s == &sq;
    const size_t max_len = is_q ? l.max_seqlen_q : l.max_seqlen_k;
    for (size_t b = 0; b < batch; ++b)
      if (size_t len = (*s)[b + 1] - (*s)[b]; len > max_len) throw Error("W08", w08_message(is_q, b, len, max_len));
  }
  t->last_q = sq.back();
  if (l.block_table.empty()) return t;
  const size_t cols = l.block_table_cols;
  if (l.block_table.size() != batch * cols)
    throw Error("W14", "plan_step: block_table has " + std::to_string(l.block_table.size()) + " entries but " +
                           std::to_string(batch) + " sequences x block_table_cols " + std::to_string(cols) +
                           " = " + std::to_string(batch * cols));
  t->host_table = l.block_table;
  t->cols = static_cast<int64_t>(cols);
  const size_t page = l.page_block_size.value_or(0);
  t->page = static_cast<int64_t>(page);
  if (page == 0) return t;  // the call raises A20 (no page size) or its own page checks
  for (size_t b = 0; b < batch; ++b) {
    const size_t len = sk[b + 1] - sk[b], pages = (len + page - 1) / page;
    if (pages > cols) throw Error("W10", w10_message(b, len, pages, page, cols));
    for (size_t c = 0; c < pages; ++c) {
      const int64_t e = l.block_table[b * cols + c];
      t->min_entry = std::min(t->min_entry, e);
      t->max_entry = std::max(t->max_entry, e);
    }
  }
  return t;
}

HostTables::HostTables(const AttnPlan& plan) : params_(plan.params) {
  if (plan.device.is_cpu()) return;  // every pointer is a host pointer already
  auto& p = params_;
  if (plan.seqlens_q.defined()) {
    cu_q_ = plan.seqlens_q.to_vec<uint32_t>();
    cu_k_ = plan.seqlens_k.to_vec<uint32_t>();
    p.cu_seqlens_q = cu_q_.data();
    p.cu_seqlens_k = cu_k_.data();
  }
  if (plan.block_table.defined()) {  // u32 or i32 entries, row-major (batch, cols)
    for (double e : plan.block_table.to_f64_vec()) block_table_.push_back(static_cast<int32_t>(e));
    p.block_table = block_table_.data();
    p.block_table_batch_stride = static_cast<int64_t>(plan.block_table.dim(1));
    p.block_table_cols = p.block_table_batch_stride;
  }
  if (plan.mm_prefix_ranges.defined()) {  // (batch, max_ranges, 2), row-major
    mm_ = plan.mm_prefix_ranges.to_vec<int32_t>();
    p.mm_prefix_ranges = mm_.data();
    p.mm_batch_stride = static_cast<int64_t>(plan.mm_prefix_ranges.dim(1)) * 2;
    p.mm_range_stride = 2;
  }
  if (plan.alibi_slopes.defined()) {
    slopes_ = plan.alibi_slopes.to_vec<float>();
    p.alibi_slopes = slopes_.data();
  }
}

}  // namespace wick::attention
