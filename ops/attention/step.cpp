#include "ops/attention/step.h"

#include <string>

#include "ops/attention/plan.h"

namespace wick {

namespace {

Tensor upload(const std::vector<uint32_t>& v, const Device& dev) {
  return Tensor::from_vec(v, Shape{v.size()}, dev);
}

// Writes host values into an existing contiguous tensor of as many elements (no wait).
template <class T>
void write_into(const Tensor& dst, const std::vector<T>& v) {
  dst.storage()->copy_from_host(dst.layout().start_offset() * sizeof(T), v.data(), v.size() * sizeof(T));
}

}  // namespace

FlashAttnVarLen plan_step(const StepLayout& layout, const Device& device) {
  std::shared_ptr<attention::StepTables> tables = attention::check_step(layout);
  FlashAttnVarLen op;
  op.max_seqlen_q = layout.max_seqlen_q;
  op.max_seqlen_k = layout.max_seqlen_k;
  op.seqlens_q = upload(layout.seqlens_q, device);
  op.seqlens_k = upload(layout.seqlens_k, device);
  tables->seqlens_q = op.seqlens_q.data_ptr();
  tables->seqlens_k = op.seqlens_k.data_ptr();
  if (!layout.block_table.empty()) {
    const size_t batch = layout.seqlens_q.size() - 1;
    op.block_table = Tensor::from_vec(layout.block_table, Shape{batch, layout.block_table_cols}, device);
    op.page_block_size = layout.page_block_size;
    tables->block_table = op.block_table->data_ptr();
  }
  op.planned = std::move(tables);
  return op;
}

void update_step(FlashAttnVarLen& op, const StepLayout& layout) {
  if (!op.planned)
    throw Error("W15", "update_step: the op was not made by plan_step (it has no planned step to update)");
  const attention::StepTables& old = *op.planned;
  const bool paged = !layout.block_table.empty();
  auto describe = [](size_t n, size_t cols, size_t page, size_t mq, size_t mk) {
    return std::to_string(n) + " cumulative lengths, " + std::to_string(cols) + " block-table columns, page " +
           std::to_string(page) + ", max lengths " + std::to_string(mq) + "/" + std::to_string(mk);
  };
  const size_t cols = paged ? layout.block_table_cols : 0, old_cols = op.block_table ? op.block_table->dim(1) : 0;
  const size_t page = paged ? layout.page_block_size.value_or(0) : 0, old_page = op.page_block_size.value_or(0);
  if (layout.seqlens_q.size() != op.seqlens_q.elem_count() || layout.seqlens_k.size() != op.seqlens_k.elem_count() ||
      paged != op.block_table.has_value() || cols != old_cols || (paged && page != old_page) ||
      layout.max_seqlen_q > op.max_seqlen_q || layout.max_seqlen_k > op.max_seqlen_k)
    throw Error("W16", "update_step: the new step (" +
                           describe(layout.seqlens_q.size(), cols, page, layout.max_seqlen_q, layout.max_seqlen_k) +
                           ") does not fit the planned op (" +
                           describe(op.seqlens_q.elem_count(), old_cols, old_page, op.max_seqlen_q, op.max_seqlen_k) +
                           "); plan_step a new op, or plan the first step with room to spare");
  StepLayout checked = layout;
  checked.max_seqlen_q = op.max_seqlen_q;  // the op keeps its launch shapes
  checked.max_seqlen_k = op.max_seqlen_k;
  std::shared_ptr<attention::StepTables> tables = attention::check_step(checked);
  write_into(op.seqlens_q, layout.seqlens_q);
  write_into(op.seqlens_k, layout.seqlens_k);
  if (paged) write_into(*op.block_table, layout.block_table);
  tables->seqlens_q = old.seqlens_q;
  tables->seqlens_k = old.seqlens_k;
  tables->block_table = old.block_table;
  op.planned = std::move(tables);
}

}  // namespace wick
