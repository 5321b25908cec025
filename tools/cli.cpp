// wick: the command-line tool. Flags only here (CLI11); the commands live in their own files.
//   wick explain [flags]   a configuration's layouts, pages, masks and plan, or its error
//   wick attn [flags]      the operator on .npy inputs, out/lse written as .npy
//   wick bench [flags]     the attention benchmark with a progress display
#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>

#include "tools/commands.h"

using namespace wick::cli;

namespace {

void add_explain(CLI::App& app, Config& c, ExplainOptions& o) {
  auto* e = app.add_subcommand("explain", "Show a configuration: tensors and layouts, the token -> page map, "
                                          "each sequence's mask, the plan; or the exact error, its code and its fix");
  e->footer("Example: wick explain --seqlens-q 2,4 --seqlens-k 6,9 --page 32 --heads 8 --heads-k 2 --causal\n"
            "Tensor names for the override flags: q k v seqlens_q seqlens_k block_table mm_prefix_ranges "
            "alibi_slopes k_new v_new");
  auto* g = "Sequences";
  e->add_option("--seqlens-q", c.seqlens_q, "query lengths per sequence, e.g. 2,4 (default: as --seqlens-k)")->delimiter(',')->group(g);
  e->add_option("--seqlens-k", c.seqlens_k, "key lengths per sequence (default 5,9,3)")->delimiter(',')->group(g);
  e->add_option("--cu-seqlens-q", c.cu_seqlens_q, "seqlens_q as given, cumulative, e.g. 0,2,6 (used as is, even if wrong)")->delimiter(',')->group(g);
  e->add_option("--cu-seqlens-k", c.cu_seqlens_k, "seqlens_k as given, cumulative")->delimiter(',')->group(g);
  e->add_option("--total-q", c.total_q, "rows of q (default: the last cumulative length)")->group(g);
  e->add_option("--total-k", c.total_k, "rows of packed k and v (default: the last cumulative length)")->group(g);
  e->add_option("--max-seqlen-q", c.max_seqlen_q, "the op's max_seqlen_q (default: the longest)")->group(g);
  e->add_option("--max-seqlen-k", c.max_seqlen_k, "the op's max_seqlen_k (default: the longest)")->group(g);
  e->add_flag("--batched", c.batched, "the batched op FlashAttn: q (batch, seqlen, heads, dim); equal lengths")->group(g);
  g = "Heads and dtype";
  e->add_option("--heads", c.heads, "query heads (default 4)")->group(g);
  e->add_option("--heads-k", c.heads_k, "kv heads; divides --heads (default: --heads)")->group(g);
  e->add_option("--head-dim", c.head_dim, "head size (default 64)")->group(g);
  e->add_option("--dtype", c.dtype, "q, k and v dtype: bf16 (default), f16, f32, ...")->group(g);
  e->add_option("--scale", c.scale, "softmax_scale (default 1/sqrt(head-dim))")->group(g);
  g = "Mask and logits";
  e->add_flag("--causal", c.causal, "causal mask, aligned bottom-right (window right 0)")->group(g);
  e->add_option("--window-left", c.window_left, "keys at most this far left of the query's position")->group(g);
  e->add_option("--window-right", c.window_right, "keys at most this far right (0: causal)")->group(g);
  e->add_option("--softcap", c.softcap, "softcap * tanh(logit / softcap)")->group(g);
  e->add_flag("--alibi", c.alibi, "ALiBi with slopes 2^(-8 (h + 1) / heads)")->group(g);
  e->add_option("--alibi-slopes", c.alibi_slopes, "explicit ALiBi slopes, one per query head")->delimiter(',')->group(g);
  e->add_option("--mm-prefix", c.mm_prefix, "bidirectional key ranges per sequence, e.g. '0-4,6-8;2-3'")->group(g);
  g = "Pages";
  e->add_option("--page", c.page, "paged K/V with blocks of this many rows (a multiple of 32)")->group(g);
  e->add_option("--page-block-size", c.page_block_size, "the op's page_block_size, when it should differ from --page")->group(g);
  e->add_option("--num-blocks", c.num_blocks, "blocks in the pool (default: just enough)")->group(g);
  e->add_option("--block-table", c.block_table, "block ids per sequence, e.g. '0,1;2,3' (default: in order)")->group(g);
  e->add_flag("--shuffle", c.shuffle, "scatter the blocks (seeded): as a busy cache would")->group(g);
  e->add_flag("--cache", c.cache, "build K/V with a PagedKvCache (append, bind), as a program would")->group(g);
  g = "Layouts and overrides";
  e->add_option("--layout", c.layout, "separate (default) | packed-qkv | interleaved-kv")->group(g);
  e->add_option("--device", c.device, "cpu (default) or cuda")->group(g);
  e->add_option("--tensor-shape", c.tensor_shape, "NAME=d0,d1,...: give a tensor this shape")->group(g);
  e->add_option("--tensor-dtype", c.tensor_dtype, "NAME=dtype: give a tensor this dtype")->group(g);
  e->add_option("--strided", c.strided, "NAME: make the tensor a view whose last dim has stride 2")->group(g);
  e->add_option("--on-cpu", c.on_cpu, "NAME: keep the tensor on the CPU (with --device cuda)")->group(g);
  e->add_option("--unset", c.unset, "seqlens_q | seqlens_k | page_block_size: leave the op's field unset")->group(g);
  e->add_option("--seed", c.seed, "seed of the random q, k, v (default 1)")->group(g);
  e->add_flag("--zero-qk", c.zero_qk, "q = k = 0: with --probs, only the mask and ALiBi shape the probabilities")->group(g);
  g = "Output";
  e->add_flag("--probs", o.probs, "draw probabilities (random q and k) instead of the mask")->group(g);
  e->add_option("--head", o.head, "query head for --probs (default 0)")->group(g);
  e->add_option("--svg", o.svg_prefix, "also write PREFIX-packing.svg, -pages.svg, -heads.svg, -mask-seqN.svg")->group(g);
  e->add_option("--max-cols", o.max_cols, "widest ASCII mask before it is compressed (default 64)")->group(g);
}

void add_attn(CLI::App& app, AttnOptions& a) {
  auto* c = app.add_subcommand("attn", "Run flash-attention on .npy inputs; write out and lse as .npy");
  c->footer("Varlen when --seqlens-q/--seqlens-k are given (q (total_q, heads, dim)), batched otherwise "
            "(q (batch, seqlen, heads, dim)).\nbf16 arrays are 2-byte voids holding the raw bits (io/npy.h).");
  c->add_option("-q,--q", a.q, "q.npy")->required()->check(CLI::ExistingFile);
  c->add_option("-k,--k", a.k, "k.npy")->required()->check(CLI::ExistingFile);
  c->add_option("-v,--v", a.v, "v.npy")->required()->check(CLI::ExistingFile);
  c->add_option("--seqlens-q", a.seqlens_q, "query lengths per sequence")->delimiter(',');
  c->add_option("--seqlens-k", a.seqlens_k, "key lengths per sequence")->delimiter(',');
  c->add_option("--block-table", a.block_table, "block_table.npy (I32/U32): k and v are paged blocks")->check(CLI::ExistingFile);
  c->add_option("--page-block-size", a.page_block_size, "rows per block (default: k's dim 1)");
  c->add_option("--scale", a.scale, "softmax_scale (default 1/sqrt(head size))");
  c->add_option("--softcap", a.softcap, "softcap");
  c->add_flag("--causal", a.causal, "causal mask (bottom-right)");
  c->add_option("--window-left", a.window_left, "left window");
  c->add_option("--window-right", a.window_right, "right window");
  c->add_option("-o,--out", a.out, "output file (default out.npy)");
  c->add_option("--lse", a.lse, "log-sum-exp file (default lse.npy)");
  c->add_flag("--check", a.check, "compare with attention_reference (exit 3 when above the accuracy bar)");
  c->add_option("--device", a.device, "cpu (default) or cuda");
}

void add_bench(CLI::App& app, BenchOptions& b) {
  auto* c = app.add_subcommand("bench", "Time the varlen attention operator on the CPU and, when present, the GPU");
  c->add_option("--reps", b.reps, "timed runs per case (median; default 3)")->check(CLI::PositiveNumber);
  c->add_option("--head-dims", b.head_dims, "head sizes (default 64,128)")->delimiter(',');
  c->add_option("--seqlens", b.seqlens, "sequence lengths (default 8 sequences of 256..1024)")->delimiter(',');
  c->add_option("--heads", b.heads, "heads (default 8)");
  c->add_flag("!--no-cpu", b.cpu, "skip the CPU");
  c->add_flag("!--no-cuda", b.cuda, "skip the GPU");
  c->add_flag("!--quiet", b.progress, "no progress display");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wick: varlen, paged flash-attention, explained and run from the command line"};
  app.require_subcommand(1);
  Config cfg;
  ExplainOptions explain_opt;
  AttnOptions attn_opt;
  BenchOptions bench_opt;
  add_explain(app, cfg, explain_opt);
  add_attn(app, attn_opt);
  add_bench(app, bench_opt);
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("explain")) return explain(cfg, explain_opt, std::cout);
    if (app.got_subcommand("attn")) return attn(attn_opt, std::cout);
    return bench(bench_opt, std::cout);
  } catch (const std::invalid_argument& e) {
    std::cerr << "wick: " << e.what() << "\n";
    return 2;
  }
}
