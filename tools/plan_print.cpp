// The plan of a valid configuration as the operator makes it: plan_varlen / plan_batched
// (ops/attention/plan.cpp) after every check, then the rules of kernels/flash/contract.h
// applied to its FlashFwdParams, the one struct every device runs on.
#include "tools/plan_print.h"

#include <cmath>
#include <iomanip>
#include <string>

#include "kernels/flash/contract.h"
#include "ops/attention/plan.h"

namespace wick::cli {

namespace {

namespace attn = kernels::attn;
using kernels::FlashFwdParams;

std::string side(int w) { return w < 0 ? "open" : std::to_string(w); }

void stride_row(std::ostream& out, const char* name, int64_t batch, int64_t row, int64_t head) {
  out << "    " << std::left << std::setw(6) << name << std::right << std::setw(12) << batch << std::setw(10) << row
      << std::setw(8) << head << "\n";
}

void print_params(std::ostream& out, const attention::AttnPlan& plan, const FlashFwdParams& p) {
  out << "\nplan (ops/attention/plan.cpp: every check passed; the FlashFwdParams the CPU path and the\n"
         "CUDA kernels run on, read through kernels/flash/contract.h):\n";
  out << "  " << (plan.varlen ? (plan.paged ? "varlen, paged" : "varlen") : "batched") << ": batch " << p.batch
      << ", total_q " << p.total_q << ", max_seqlen_q " << p.max_seqlen_q << ", max_seqlen_k " << p.max_seqlen_k
      << "\n";
  out << "  heads " << p.num_heads << ", kv heads " << p.num_heads_k << " (group " << attn::group_size(p)
      << "), head_size " << p.head_size << ", " << dtype_name(plan.dtype) << ", softmax_scale " << p.softmax_scale;
  if (std::abs(p.softmax_scale * std::sqrt(static_cast<float>(p.head_size)) - 1.0f) < 1e-6f)
    out << " (1/sqrt(head_size))";
  out << ", softcap " << (p.softcap > 0 ? std::to_string(p.softcap) : std::string("off")) << ", ALiBi "
      << (p.alibi_slopes ? "on" : "off") << "\n";
  out << "  window after conversion: left " << side(p.window_left) << ", right " << side(p.window_right)
      << "  (key t visible to the query at position pos when ";
  if (p.window_left < 0 && p.window_right < 0) out << "always";
  else out << "pos - " << side(p.window_left) << " <= t <= pos + " << side(p.window_right);
  out << (p.mm_prefix_ranges ? ", or both lie in one mm-prefix range)\n" : ")\n");
  out << "  strides (elements):\n    " << std::setw(6) << "" << std::setw(12) << (plan.paged ? "block" : "batch")
      << std::setw(10) << "row" << std::setw(8) << "head" << "\n";
  stride_row(out, "q", p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  stride_row(out, "k", p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  stride_row(out, "v", p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  if (plan.paged)
    out << "  paged: page_block_size " << p.page_block_size << ", " << p.num_blocks
        << " blocks, block_table row stride " << p.block_table_batch_stride << "\n";
  out << "  split-KV: num_splits " << p.num_splits
      << (p.num_splits == 0 ? " (the CUDA launcher chooses from the work size; the CPU path does not split)" : "")
      << "\n";
}

// Per sequence, the contract's view: rows, positions, and the keys any of its rows can see
// (a tiled kernel never touches keys outside that range).
void print_sequences(std::ostream& out, const FlashFwdParams& p) {
  out << "  per sequence (contract.h: seq_bounds, key_position, visible_keys_of_rows):\n";
  for (int b = 0; b < p.batch; ++b) {
    const attn::SeqBounds s = attn::seq_bounds(p, b);
    out << "    seq " << b << ": " << s.sq << (s.sq == 1 ? " query row" : " query rows") << " from row " << s.q_start
        << ", " << s.sk << (s.sk == 1 ? " key" : " keys");
    if (s.sq == 0) {
      out << "\n";
      continue;
    }
    const int64_t first = attn::key_position(s, 0), last = attn::key_position(s, s.sq - 1);
    const attn::KeyRange r = attn::visible_keys_of_rows<int64_t>(p, b, first, last, s.sk);
    out << "; query positions " << first << ".." << last << "; keys any row may see: ";
    if (r.empty()) out << "none\n";
    else out << "[" << r.begin << ", " << r.end << ")" << (r.end - r.begin < s.sk ? " (the rest are skipped)" : "") << "\n";
    if (b >= 15 && p.batch > 16) {
      out << "    ... " << p.batch - 16 << " more sequences\n";
      break;
    }
  }
}

}  // namespace

void print_plan(std::ostream& out, const Built& b) {
  attention::AttnPlan plan = b.batched ? attention::plan_batched(b.batched_op, b.q, b.k, b.v)
                                       : attention::plan_varlen(b.op, b.q, b.k, b.v);
  const attention::HostTables tables(plan);
  print_params(out, plan, tables.params());
  print_sequences(out, tables.params());
}

}  // namespace wick::cli
