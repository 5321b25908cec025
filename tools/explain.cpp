// `wick explain`: a configuration's tensors and layouts, its sequences, the token -> page
// map, the heads' grouping, each sequence's mask (ASCII, and SVG with --svg), the plan, and
// a check of the result against the reference; or the exact error with its fix.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "ops/attention/reference.h"
#include "ops/ops.h"
#include "tools/catalog.h"
#include "tools/commands.h"
#include "tools/plan_print.h"
#include "tools/probe.h"
#include "tools/svg.h"

namespace wick::cli {

namespace {

// Integer values, nested by rows for rank 2: "[0, 2, 6]", "[[0, 1], [2, 0]]".
std::string values_of(const Tensor& t, size_t limit = 24) {
  std::vector<double> v = t.to_f64_vec();
  const size_t row = t.rank() == 2 ? t.dim(1) : 0;
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < std::min(v.size(), limit); ++i) {
    if (row && i % row == 0) s << (i ? "], [" : "[");
    else if (i) s << ", ";
    s << static_cast<long long>(v[i]);
  }
  if (v.size() > limit) s << ", ...";
  if (row && !v.empty()) s << "]";
  return s.str() + "]";
}

std::string count(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void tensor_line(std::ostream& out, const std::string& name, const Tensor& t, const std::string& note,
                 bool show_values = false) {
  out << "  " << std::left << std::setw(17) << name;
  if (!t.defined()) {
    out << "(not set)\n";
    return;
  }
  out << std::setw(16) << to_string(t.shape()) << " stride " << std::setw(16) << to_string(t.stride())
      << " offset " << std::setw(3) << t.layout().start_offset() << " " << std::setw(4) << dtype_name(t.dtype())
      << " " << to_string(t.device());
  if (show_values && t.rank() <= 2) out << " = " << values_of(t);
  if (!note.empty()) out << "  " << note;
  out << "\n";
}

void print_tensors(std::ostream& out, const Built& b) {
  out << "tensors (" << b.layout_note << "):\n";
  if (b.batched) {
    const FlashAttn& op = b.batched_op;
    tensor_line(out, "q", b.q, "(batch, seqlen_q, num_heads, head_size)");
    tensor_line(out, "k", b.k, "(batch, seqlen_k, num_heads_k, head_size)");
    tensor_line(out, "v", b.v, "");
    if (op.alibi_slopes) tensor_line(out, "alibi_slopes", *op.alibi_slopes, "(num_heads) f32");
    return;
  }
  const FlashAttnVarLen& op = b.op;
  tensor_line(out, "q", b.q, "(total_q, num_heads, head_size)");
  tensor_line(out, "k", b.k, b.paged ? "(num_blocks, page_block_size, num_heads_k, head_size)" : "(total_k, num_heads_k, head_size)");
  tensor_line(out, "v", b.v, "");
  tensor_line(out, "seqlens_q", op.seqlens_q, "", true);
  tensor_line(out, "seqlens_k", op.seqlens_k, "", true);
  if (op.block_table) tensor_line(out, "block_table", *op.block_table, "", true);
  if (op.mm_prefix_ranges) tensor_line(out, "mm_prefix_ranges", *op.mm_prefix_ranges, "(batch, max_ranges, 2)");
  if (op.alibi_slopes) tensor_line(out, "alibi_slopes", *op.alibi_slopes, "(num_heads) f32");
  out << "  max_seqlen_q " << op.max_seqlen_q << ", max_seqlen_k " << op.max_seqlen_k << ", softmax_scale "
      << (op.softmax_scale ? std::to_string(*op.softmax_scale) : std::string("(default 1/sqrt(head_size))"));
  if (op.causal) out << ", causal";
  if (b.paged) out << ", page_block_size " << (op.page_block_size ? std::to_string(*op.page_block_size) : "(not set)");
  auto opt = [](const std::optional<size_t>& w) { return w ? std::to_string(*w) : std::string("None"); };
  out << ", window (" << opt(op.window_size_left) << ", " << opt(op.window_size_right) << ")";
  if (op.softcap) out << ", softcap " << *op.softcap;
  out << "\n";
}

void print_sequences(std::ostream& out, const Built& b) {
  const std::vector<double> cu_q = b.op.seqlens_q.to_f64_vec(), cu_k = b.op.seqlens_k.to_f64_vec();
  out << "\nsequences (query i of a sequence sits at key position i + seqlen_k - seqlen_q):\n";
  for (size_t s = 0; s + 1 < cu_q.size(); ++s) {
    const long sq = static_cast<long>(cu_q[s + 1] - cu_q[s]), sk = static_cast<long>(cu_k[s + 1] - cu_k[s]);
    out << "  seq " << s << ": q rows [" << cu_q[s] << ", " << cu_q[s + 1] << ") = " << count(sq, "query", "queries") << "; ";
    if (b.paged) {
      out << count(sk, "key", "keys") << " in blocks [";
      for (size_t c = 0; c < std::min(b.table_used[s], b.table[s].size()); ++c) out << (c ? ", " : "") << b.table[s][c];
      out << "]";
    } else {
      out << "k rows [" << cu_k[s] << ", " << cu_k[s + 1] << ") = " << count(sk, "key", "keys");
    }
    out << "; first query at position " << (sk - sq) << "\n";
  }
}

void print_pages(std::ostream& out, const Built& b) {
  out << "\ntoken -> page map (token t of sequence b: block block_table[b][t / " << b.page << "], row t % "
      << b.page << "):\n";
  for (size_t s = 0; s < b.table.size(); ++s) {
    out << "  seq " << s << " (" << b.len_k[s] << " tokens): ";
    for (size_t c = 0; c < b.table[s].size(); ++c) {
      if (c >= b.table_used[s]) {
        out << "[" << b.table[s][c] << ": padding] ";
        continue;
      }
      const size_t first = c * b.page, last = std::min(b.len_k[s], first + b.page) - 1;
      out << "t" << first << "-" << last << " -> block " << b.table[s][c] << "  ";
    }
    out << "\n";
  }
  out << "  block pool (" << b.num_blocks << " blocks; one character per " << std::max<size_t>(1, b.page / 32)
      << " rows, digit = sequence, '-' = unwritten rows):\n";
  const size_t per = std::max<size_t>(1, b.page / 32);
  for (size_t blk = 0; blk < std::min<size_t>(b.num_blocks, 64); ++blk) {
    std::string row(b.page / per, ' ');
    std::string who = "free";
    for (size_t s = 0; s < b.table.size(); ++s)
      for (size_t c = 0; c < std::min(b.table_used[s], b.table[s].size()); ++c) {
        if (b.table[s][c] != static_cast<int32_t>(blk)) continue;
        for (size_t r = 0; r < b.page; r += per)
          row[r / per] = c * b.page + r < b.len_k[s] ? static_cast<char>('0' + s % 10) : '-';
        who = "seq " + std::to_string(s);
      }
    out << "    block " << std::setw(3) << blk << " |" << row << "| " << who << "\n";
  }
  if (b.num_blocks > 64) out << "    ... " << b.num_blocks - 64 << " more blocks\n";
}

void print_heads(std::ostream& out, size_t h, size_t hk) {
  if (hk == 0) return;
  const size_t group = h / hk;
  out << "\nheads: " << h << " query heads, " << hk << " kv heads"
      << (hk == h ? " (multi-head)" : hk == 1 ? " (multi-query)" : " (grouped-query)")
      << ": query head h reads kv head h / " << group << "\n  ";
  for (size_t i = 0; i < std::min<size_t>(h, 16); ++i) out << "q" << i << "->kv" << i / group << " ";
  out << (h > 16 ? "...\n" : "\n");
}

// '#' visible, '.' masked; wide masks compressed ('+': some of the keys in the cell).
void print_mask(std::ostream& out, const Probs& p, size_t max_cols, bool probs) {
  const size_t per = std::max<size_t>(1, (p.cols + max_cols - 1) / max_cols);
  const size_t cells = (p.cols + per - 1) / per;
  const bool numbers = probs && p.cols <= 12;
  auto row_text = [&](size_t i) {
    std::ostringstream s;
    for (size_t c = 0; c < cells; ++c) {
      if (numbers) {
        float x = p.at(i, c);
        s << (x > 0 ? (std::ostringstream() << std::fixed << std::setprecision(3) << x).str() : "  .  ") << " ";
        continue;
      }
      size_t seen = 0, n = 0;
      float best = 0;
      for (size_t j = c * per; j < std::min(p.cols, (c + 1) * per); ++j, ++n)
        seen += p.at(i, j) > 0, best = std::max(best, p.at(i, j));
      if (probs) {
        static const char levels[] = " .:-=+*#%@";
        float row_max = 0;
        for (size_t j = 0; j < p.cols; ++j) row_max = std::max(row_max, p.at(i, j));
        s << (seen == 0 ? ' ' : levels[std::min(9, 1 + static_cast<int>(8.999f * best / row_max))]);
      } else {
        s << (seen == 0 ? '.' : seen == n ? '#' : '+');
      }
    }
    return s.str();
  };
  const size_t first = p.cols >= p.rows ? p.cols - p.rows : 0;
  for (size_t i = 0; i < p.rows; ++i) {
    if (p.rows > 32 && i == 16) {
      out << "      ... " << p.rows - 32 << " rows ...\n";
      i = p.rows - 16;
    }
    out << "    q" << std::left << std::setw(4) << i << "@" << std::setw(5) << first + i << std::right << row_text(i) << "\n";
  }
  if (per > 1) out << "    (one character per " << per << " keys; '+' = some of them visible)\n";
}

bool write_file(std::ostream& out, const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  if (!f) {
    out << "could not write " << path << "\n";
    return false;
  }
  out << "  wrote " << path << "\n";
  return true;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vec(), y = b.to_f64_vec();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

int explain_varlen(const Config& cfg, const ExplainOptions& opt, const Built& b, std::ostream& out) {
  Tensor o, lse;
  std::tie(o, lse) = b.op.forward_with_lse(b.q, b.k, b.v);  // raises the configuration's error, if any
  const size_t h = b.q.dim(1), hk = b.k.dim(b.k.rank() - 2);
  print_sequences(out, b);
  if (b.paged) print_pages(out, b);
  print_heads(out, h, hk);

  std::vector<Probs> shown = opt.probs ? probabilities(b.op, b.q, b.k, std::min(opt.head, h - 1)) : mask(b.op);
  out << "\n" << (opt.probs ? "probabilities of query head " + std::to_string(std::min(opt.head, h - 1)) +
                                  " (from the operator, v = one-hot):"
                            : "masks (from the operator: q = k = 0, v = one-hot, so out = P; '#' = the query sees the key):")
      << "\n";
  for (size_t s = 0; s < shown.size(); ++s) {
    out << "  seq " << s << ": " << count(shown[s].rows, "query", "queries") << " x " << count(shown[s].cols, "key", "keys") << "\n";
    print_mask(out, shown[s], opt.max_cols, opt.probs);
  }

  print_plan(out, b);

  Tensor ref = attention_reference(b.op, b.q, b.k, b.v);
  out << "\nresult: out " << to_string(o.shape()) << " " << dtype_name(o.dtype()) << ", lse " << to_string(lse.shape())
      << " F32 on " << to_string(o.device()) << "; max |out - attention_reference| = " << std::scientific
      << std::setprecision(2) << max_abs_diff(o, ref) << std::defaultfloat << "\n";

  if (!opt.svg_prefix.empty()) {
    out << "\nSVG:\n";
    bool ok = write_file(out, opt.svg_prefix + "-packing.svg", svg::packing(b.len_k, "key"));
    if (b.paged) ok &= write_file(out, opt.svg_prefix + "-pages.svg", svg::pages(b.len_k, b.table, b.table_used, b.page, b.num_blocks));
    ok &= write_file(out, opt.svg_prefix + "-heads.svg", svg::heads(h, hk));
    for (size_t s = 0; s < shown.size(); ++s) {
      const size_t first = shown[s].cols >= shown[s].rows ? shown[s].cols - shown[s].rows : 0;
      std::string title = "sequence " + std::to_string(s) + ": " + std::to_string(shown[s].rows) + " queries x " +
                          std::to_string(shown[s].cols) + " keys";
      ok &= write_file(out, opt.svg_prefix + "-mask-seq" + std::to_string(s) + ".svg",
                       svg::mask(shown[s], title, opt.probs, first));
    }
    if (!ok) return 2;
  }
  (void)cfg;
  return 0;
}

int explain_batched(const Built& b, std::ostream& out) {
  auto [o, lse] = b.batched_op.forward_with_lse(b.q, b.k, b.v);
  const size_t batch = b.q.dim(0), sq = b.q.dim(1), sk = b.k.dim(1);
  out << "\nbatched: " << batch << " sequences of " << sq << " queries and " << sk
      << " keys each; query i sits at key position i + " << sk << " - " << sq << "\n";
  print_heads(out, b.q.dim(2), b.k.dim(2));
  // The same mask as the varlen op with equal lengths (both align bottom-right).
  FlashAttnVarLen v;
  v.seqlens_q = Tensor::from_vec<uint32_t>({0, static_cast<uint32_t>(sq)}, {2}, Device::cpu());
  v.seqlens_k = Tensor::from_vec<uint32_t>({0, static_cast<uint32_t>(sk)}, {2}, Device::cpu());
  v.max_seqlen_q = sq, v.max_seqlen_k = sk;
  v.window_size_left = b.batched_op.window_size_left, v.window_size_right = b.batched_op.window_size_right;
  v.causal = b.batched_op.causal;
  out << "\nmask (every sequence of the batch):\n";
  print_mask(out, mask(v).at(0), 64, false);
  print_plan(out, b);
  Tensor ref = attention_reference(b.batched_op, b.q, b.k, b.v);
  out << "\nresult: out " << to_string(o.shape()) << ", lse " << to_string(lse.shape())
      << "; max |out - attention_reference| = " << std::scientific << std::setprecision(2) << max_abs_diff(o, ref)
      << std::defaultfloat << "\n";
  return 0;
}

}  // namespace

int explain(const Config& cfg, const ExplainOptions& opt, std::ostream& out) {
  std::optional<Built> b;
  try {
    b = build(cfg);
    out << (b->batched ? "flash-attn (batched)" : b->paged ? "flash-attn-varlen, paged" : "flash-attn-varlen") << "\n";
    print_tensors(out, *b);
    return b->batched ? explain_batched(*b, out) : explain_varlen(cfg, opt, *b, out);
  } catch (const Error& e) {
    out << "\n" << errors_doc::explain(e);
    return 1;
  }
}

}  // namespace wick::cli
