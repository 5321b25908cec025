#include "tools/probe.h"

#include <algorithm>

namespace wick::cli {

namespace {

std::vector<int64_t> host_ints(const Tensor& t) {
  std::vector<double> v = t.to_f64_vec();
  return {v.begin(), v.end()};
}

// Row of key j of sequence b in k's first dim(s): packed (total_k rows) or paged (flattened
// num_blocks * page rows).
struct KeyRows {
  std::vector<int64_t> cu_k;
  std::vector<int64_t> table;  // row-major (batch, cols); empty when not paged
  int64_t cols = 0, page = 0;
  int64_t row(size_t b, int64_t j) const {
    if (table.empty()) return cu_k[b] + j;
    return table[b * cols + j / page] * page + j % page;
  }
};

KeyRows key_rows(const FlashAttnVarLen& op) {
  KeyRows r;
  r.cu_k = host_ints(op.seqlens_k);
  if (op.block_table) {
    r.table = host_ints(*op.block_table);
    r.cols = static_cast<int64_t>(op.block_table->dim(1));
    r.page = static_cast<int64_t>(*op.page_block_size);
  }
  return r;
}

}  // namespace

std::vector<Probs> probabilities(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, size_t head) {
  const std::vector<int64_t> cu_q = host_ints(op.seqlens_q);
  const KeyRows rows = key_rows(op);
  const size_t batch = cu_q.size() - 1, d = q.dim(2), hk = k.dim(k.rank() - 2);
  const size_t key_rows_total = op.block_table ? k.dim(0) * k.dim(1) : k.dim(0);
  std::vector<Probs> out(batch);
  size_t max_k = 0;
  for (size_t b = 0; b < batch; ++b) {
    out[b].rows = static_cast<size_t>(cu_q[b + 1] - cu_q[b]);
    out[b].cols = static_cast<size_t>(rows.cu_k[b + 1] - rows.cu_k[b]);
    out[b].p.assign(out[b].rows * out[b].cols, 0.0f);
    max_k = std::max(max_k, out[b].cols);
  }
  for (size_t c0 = 0; c0 < max_k; c0 += d) {
    std::vector<float> v(key_rows_total * hk * d, 0.0f);
    for (size_t b = 0; b < batch; ++b)
      for (size_t j = c0; j < std::min(out[b].cols, c0 + d); ++j)
        for (size_t g = 0; g < hk; ++g) v[(rows.row(b, static_cast<int64_t>(j)) * hk + g) * d + (j - c0)] = 1.0f;
    std::vector<size_t> v_shape = k.dims();
    Tensor vt = Tensor::from_vec(v, Shape(v_shape), Device::cpu()).to_dtype(q.dtype()).to_device(q.device());
    std::vector<double> o = op.forward(q, k, vt).to_f64_vec();  // (total_q, heads, d)
    const size_t heads = q.dim(1);
    for (size_t b = 0; b < batch; ++b)
      for (size_t i = 0; i < out[b].rows; ++i)
        for (size_t j = c0; j < std::min(out[b].cols, c0 + d); ++j)
          out[b].p[i * out[b].cols + j] =
              static_cast<float>(o[((static_cast<size_t>(cu_q[b]) + i) * heads + head) * d + (j - c0)]);
  }
  return out;
}

std::vector<Probs> mask(const FlashAttnVarLen& op) {
  const std::vector<int64_t> cu_q = host_ints(op.seqlens_q), cu_k = host_ints(op.seqlens_k);
  size_t max_k = 8;
  for (size_t b = 0; b + 1 < cu_k.size(); ++b) max_k = std::max<size_t>(max_k, cu_k[b + 1] - cu_k[b]);
  const size_t d = std::min<size_t>(512, (max_k + 7) / 8 * 8);
  FlashAttnVarLen probe;
  probe.softmax_scale = 1.0f;
  probe.max_seqlen_q = op.max_seqlen_q, probe.max_seqlen_k = op.max_seqlen_k;
  probe.seqlens_q = op.seqlens_q.to_device(Device::cpu()).contiguous();
  probe.seqlens_k = op.seqlens_k.to_device(Device::cpu()).contiguous();
  probe.window_size_left = op.window_size_left, probe.window_size_right = op.window_size_right;
  probe.causal = op.causal;
  if (op.mm_prefix_ranges) probe.mm_prefix_ranges = op.mm_prefix_ranges->to_device(Device::cpu()).contiguous();
  const size_t total_q = static_cast<size_t>(cu_q.back());
  Tensor k;
  if (op.block_table) {
    probe.block_table = op.block_table->to_device(Device::cpu()).to_dtype(DType::I32).contiguous();
    probe.page_block_size = op.page_block_size;
    size_t blocks = 1;
    for (int64_t id : host_ints(*op.block_table)) blocks = std::max<size_t>(blocks, static_cast<size_t>(id) + 1);
    k = Tensor::zeros({blocks, *op.page_block_size, 1, d}, DType::BF16, Device::cpu());
  } else {
    k = Tensor::zeros({static_cast<size_t>(cu_k.back()), 1, d}, DType::BF16, Device::cpu());
  }
  return probabilities(probe, Tensor::zeros({total_q, 1, d}, DType::BF16, Device::cpu()), k, 0);
}

}  // namespace wick::cli
