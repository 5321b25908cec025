// The `wick explain` program (tools/) run on flags: for every attention entry of
// docs/errors.md that a configuration can reach, it prints that entry's code, its exact
// text and its fix; for valid configurations, the masks the operator draws.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "errors_catalog.h"
#include "io/npy.h"
#include "ops/attention/flash_attn.h"
#include "seed.h"
#include "tensor/device.h"

#ifdef WICK_CLI_PATH

namespace {

struct Run {
  int status = -1;
  std::string output;  // stdout and stderr
};

Run run_wick(const std::string& args) {
  Run r;
  const std::string cmd = std::string("'") + WICK_CLI_PATH + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The default valid configuration (2 sequences: q lengths 2, 4; k lengths 4, 5; 4 query
// heads, 2 kv heads, head size 16); an entry's flags replace the defaults they name.
std::string explain_args(const std::string& flags) {
  const std::map<std::string, std::string> defaults = {
      {"--seqlens-q", "2,4"}, {"--seqlens-k", "4,5"}, {"--heads", "4"}, {"--heads-k", "2"}, {"--head-dim", "16"}};
  std::string args = "explain";
  for (const auto& [flag, value] : defaults)
    if (flags.find(flag + " ") == std::string::npos) args += " " + flag + " " + value;
  return args + " " + flags;
}

struct Case {
  std::string id, flags, expected;  // expected: the exact message
  bool gpu = false;                 // needs --device cuda (a tensor kept on the CPU)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"A01", "--device cuda --on-cpu k", "device mismatch in flash-attn-varlen, lhs: Cuda { gpu_id: 0 }, rhs: Cpu", true},
      {"A02", "--dtype f32", "flash-attn is only supported for f16/bf16 (F32)"},
      {"A03", "--device cuda --on-cpu seqlens_q", "seqlens_q must be a cuda tensor", true},
      {"A04", "--tensor-dtype seqlens_q=i32", "unexpected dtype, expected: U32, got: I32"},
      {"A05", "--strided seqlens_q", "seqlens_q has to be contiguous"},
      {"A06", "--device cuda --on-cpu seqlens_k", "seqlens_k must be a cuda tensor", true},
      {"A07", "--strided seqlens_k", "seqlens_k has to be contiguous"},
      {"A08", "--device cuda --page 32 --on-cpu block_table", "block_table must be a cuda tensor", true},
      {"A09", "--page 32 --tensor-shape block_table=2", "unexpected rank, expected: 2, got: 1 ([2])"},
      {"A10", "--page 32 --strided block_table", "block_table last dimension must be contiguous"},
      {"A11", "--tensor-shape q=1,6,4,16", "flash-attn-varlen expects input tensors of rank 3 (q: 4, k: 3, v: 3"},
      {"A12", "--page 32 --tensor-shape k=9,2,16", "flash-attn-varlen paged expects k/v tensors of rank 4 (k: 3, v: 4)"},
      {"A13", "--batched --seqlens-q 3,3 --seqlens-k 5,5 --tensor-shape q=6,4,16",
       "flash-attn expects input tensors of rank 4 (q: 3, k: 4, v: 4"},
      {"A14", "--strided q", "the last dim of q must be contiguous [128, 32, 2]"},
      {"A15", "--strided k", "the last dim of k must be contiguous [64, 32, 2]"},
      {"A16", "--strided v", "the last dim of v must be contiguous [64, 32, 2]"},
      {"A17", "--page 32 --tensor-shape v=1,32,2,16", "shape mismatch k [2, 32, 2, 16] and v [1, 32, 2, 16]"},
      {"A18", "--tensor-shape k=9,2,8", "shape mismatch q [6, 4, 16] and k [9, 2, 8]"},
      {"A19", "--tensor-shape v=8,2,16", "shape mismatch q [6, 4, 16] and v [8, 2, 16]"},
      {"A20", "--page 32 --unset page_block_size", "paged flash-attn requires page_block_size"},
      {"A21", "--page 32 --page-block-size 64", "page_block_size 64 does not match k shape [2, 32, 2, 16]"},
      {"A22", "--page 48", "paged flash-attn requires page_block_size to be a multiple of 32 (got 48)"},
      {"A23", "--page 32 --head-dim 520", "paged flash-attn supports head sizes up to 512 (got 520)"},
      {"A24", "--head-dim 520", "only supports head dimension at most 512 (got 520)"},
      {"A25", "--head-dim 12", "only supports head sizes that are a multiple of 8 (got 12)"},
      {"A26", "--heads 3", "number of k/v heads 2 must divide number of heads in query 3"},
      {"A27", "--cu-seqlens-q 6", "seqlens_q should have a len >= 2 1"},
      {"A28", "--cu-seqlens-k 0,9", "seqlens_q and seqlens_k should have the same number of elements 3 <> 2"},
      {"A29", "--mm-prefix '0-4;0-2' --tensor-dtype mm_prefix_ranges=u32", "mm_prefix_ranges must be i32, got U32"},
      {"A30", "--device cuda --mm-prefix '0-4;0-2' --on-cpu mm_prefix_ranges", "mm_prefix_ranges must be a cuda tensor", true},
      {"A31", "--mm-prefix '0-4;0-2;1-3'", "mm_prefix_ranges shape must be (2, max_ranges, 2), got [3, 1, 2]"},
      {"A32", "--mm-prefix '0-4;0-2' --strided mm_prefix_ranges", "mm_prefix_ranges last dimension must be contiguous"},
      {"A33", "--alibi --tensor-dtype alibi_slopes=bf16", "DType mismatch alibi_slopes BF16, expected F32"},
      {"A34", "--alibi-slopes 0.5,0.25,0.125", "shape mismatch alibi_slopes [3], expected 4"},
      {"A35", "--device cuda --alibi --on-cpu alibi_slopes", "alibi_slopes must be a cuda tensor", true},
      {"A36", "--page 32 --tensor-dtype block_table=i64", "block_table must be u32 or i32, got I64"},
      {"W01", "--heads-k 0", "flash-attn-varlen: k has no heads (k shape [9, 0, 16]); num_heads_k must be at least 1"},
      {"W02", "--head-dim 0", "flash-attn-varlen: head_size is 0 (q shape [6, 4, 0]); it must be a positive multiple of 8"},
      {"W03", "--max-seqlen-k 2147483648",
       "flash-attn-varlen: max_seqlen_k 2147483648 does not fit in 32 bits (the kernels index sequences and heads with int)"},
      {"W04", "--cu-seqlens-q 1,2,6",
       "flash-attn-varlen: seqlens_q must start at 0 (got seqlens_q[0] = 1); every row of q belongs to a sequence"},
      {"W05", "--cu-seqlens-k 0,5,4",
       "flash-attn-varlen: seqlens_k must be non-decreasing (cumulative lengths), but seqlens_k[2] = 4 < seqlens_k[1] = 5"},
      {"W06", "--cu-seqlens-q 0,2,5 --total-q 6",
       "flash-attn-varlen: seqlens_q ends at 5 but q has 6 rows (total_q); the last cumulative length must equal total_q"},
      {"W07", "--cu-seqlens-k 0,4,10 --total-k 9", "flash-attn-varlen: seqlens_k ends at 10 but k has only 9 rows (total_k)"},
      {"W08", "--max-seqlen-q 3",
       "flash-attn-varlen: sequence 1 has 4 query tokens (seqlens_q[2] - seqlens_q[1]) but max_seqlen_q is 3"},
      {"W09", "--page 32 --block-table 0",
       "flash-attn-varlen: block_table has 1 rows but there are 2 sequences (block_table shape [1, 1])"},
      {"W10", "--seqlens-k 4,66 --page 32 --block-table '0;1,2'",
       "flash-attn-varlen: sequence 1 has 66 key tokens, which need 3 blocks of 32, but block_table has only 2 columns"},
      {"W11", "--page 32 --num-blocks 5 --block-table '0;7'",
       "flash-attn-varlen: block_table[1][0] = 7 is outside [0, 5) (k has 5 blocks)"},
      {"W12", "--unset seqlens_q", "flash-attn-varlen: seqlens_q is an empty (default-constructed) tensor"},
      {"W13", "--causal --window-right 3",
       "flash-attn-varlen: causal is set together with window_size_right = 3; causal means window_size_right = 0, so "
       "set one or the other"},
      {"W19", "--page 32 --tensor-shape k=2,0,2,16 v=2,0,2,16 --page-block-size 0",
       "flash-attn-varlen: page_block_size is 0; paged k/v need blocks of a positive multiple of 32 rows"},
      {"P01", "--cache --page 16", "PagedKvCache: page_block_size must be a positive multiple of 32 (got 16)"},
      {"P02", "--cache --page 32 --num-blocks 0", "PagedKvCache: num_blocks must be in [1, 2^31) (got 0)"},
      {"P03", "--cache --page 32 --head-dim 0", "PagedKvCache: num_heads_k and head_size must be positive (got 2 and 0)"},
      {"P04", "--cache --page 32 --num-blocks 1 --seqlens-k 40,40",
       "PagedKvCache::append: sequence 0 needs 2 more blocks of 32 rows for 40 new tokens but only 1 of 1 blocks are "
       "free; free finished sequences or make the cache larger"},
      {"P05", "--cache --page 32 --tensor-shape k_new=4,2,8",
       "PagedKvCache::append: k_new has shape [4, 2, 8], expected [4, 2, 16] (n_new, num_heads_k, head_size)"},
      {"P06", "--cache --page 32 --tensor-dtype k_new=f16", "PagedKvCache::append: k_new is F16 but the cache holds BF16"},
      {"P07", "--device cuda --cache --page 32 --on-cpu k_new",
       "PagedKvCache::append: k_new is on Cpu but the cache is on Cuda { gpu_id: 0 }", true},
      {"P12", "--cache --page 32 --tensor-dtype block_table=u8", "PagedKvCache::block_table: dtype must be I32 or U32, got U8"},
  };
  return all;
}

// Entries no configuration of flags can reach, and why.
const std::set<std::string> kUnreachable = {
    "X01",                       // CUDA tensors in a build without CUDA: such a build cannot make one
    "P08", "P09", "P10", "P11",  // allocator and bookkeeping calls in the wrong order: a program's
                                 // sequence of calls, not a configuration
    "W14", "W15", "W16", "W17",  // the plan-once API (plan_step, update_step, forward_into),
    "P13", "P14", "P15",         // write_kv_slots and step_layout: calls a program makes between
                                 // decode steps; `wick explain` runs one forward() of one configuration
    "W18",                       // an empty (default-constructed) q, k, v or optional tensor:
                                 // flags always build the tensors they name
    "P16", "P17",                // releasing a block a sequence holds, more than 2^32 - 1 cached
                                 // tokens in one call: calls and sizes of a program, not a configuration
};

// The first line of the entry's fix in docs/errors.md ("- Fix: ..." or, for an entry that
// refers to another, "- Means, trigger, fix: as A14, ...").
std::string documented_fix(const std::string& md, const std::string& id) {
  size_t at = md.find("\n### " + id + " ");
  REQUIRE(at != std::string::npos);
  const std::string entry = md.substr(at, md.find("\n### ", at + 1) - at);
  for (const std::string key : {"\n- Fix: ", "\n- Means, trigger, fix: "})
    if (size_t fix = entry.find(key); fix != std::string::npos) {
      fix += key.size();
      return entry.substr(fix, entry.find('\n', fix) - fix);
    }
  FAIL("no fix in docs/errors.md for " << id);
  return "";
}

}  // namespace

TEST_CASE("wick explain: every reachable attention entry prints its code, exact text and fix") {
  const std::string md = wick::catalog::read_errors_md();
  REQUIRE(!md.empty());
  const auto docs = wick::catalog::documented_messages(md);
  const bool gpu = wick::Device::cuda_available();
  std::map<std::string, std::string> tested;
  for (const Case& c : cases()) {
    INFO(c.id, ": wick ", explain_args(c.flags));
    REQUIRE(docs.count(c.id));
    CHECK(wick::catalog::matches_template(c.expected, docs.at(c.id)));
    tested[c.id] = docs.at(c.id);
    if (c.gpu && !gpu) {
      MESSAGE("SKIPPED (no CUDA device): ", c.id, " ", c.expected);
      continue;
    }
    const Run r = run_wick(explain_args(c.flags));
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("\nerror " + c.id + ": " + c.expected + "\n") != std::string::npos);
    CHECK(r.output.find("\n  fix: " + documented_fix(md, c.id)) != std::string::npos);
  }
  wick::catalog::check_sections_in_sync(docs, "AWXP", tested, kUnreachable);
}

TEST_CASE("wick explain: the masks come from the operator, aligned bottom-right") {
  // 3 queries over 8 keys, causal: query i sits at key position i + 5.
  Run r = run_wick("explain --seqlens-q 3 --seqlens-k 8 --heads 1 --head-dim 8 --causal");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("q0   @5    ######..\n") != std::string::npos);
  CHECK(r.output.find("q1   @6    #######.\n") != std::string::npos);
  CHECK(r.output.find("q2   @7    ########\n") != std::string::npos);
  // A window of 2 keys to the left, paged: token 40 of a 41-token sequence in its second page.
  r = run_wick("explain --seqlens-q 2 --seqlens-k 41 --page 32 --heads 1 --head-dim 8 --causal --window-left 2");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("q0   @39   " + std::string(37, '.') + "###.\n") != std::string::npos);
  CHECK(r.output.find("q1   @40   " + std::string(38, '.') + "###\n") != std::string::npos);
  CHECK(r.output.find("t32-40 -> block 1") != std::string::npos);
  CHECK(r.output.find("max |out - attention_reference| = ") != std::string::npos);
}

TEST_CASE("wick explain --svg writes the drawings") {
  const std::string prefix = (std::filesystem::temp_directory_path() / "wick_test_explain").string();
  Run r = run_wick("explain --seqlens-q 2,3 --seqlens-k 5,40 --page 32 --heads 4 --heads-k 2 --head-dim 8 --causal --svg " + prefix);
  INFO(r.output);
  CHECK(r.status == 0);
  for (const char* part : {"-packing.svg", "-pages.svg", "-heads.svg", "-mask-seq0.svg", "-mask-seq1.svg"}) {
    INFO(part);
    std::ifstream f(prefix + part);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    CHECK(text.rfind("<svg ", 0) == 0);
    CHECK(text.find("</svg>") != std::string::npos);
    std::filesystem::remove(prefix + part);
  }
}

TEST_CASE("wick attn: .npy in, .npy out, the operator's result") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "wick_test_attn";
  fs::create_directories(dir);
  const uint64_t seed = wick::test::seed(41);
  wick::Tensor q = wick::Tensor::randn({7, 4, 16}, wick::DType::BF16, wick::Device::cpu(), seed);
  wick::Tensor k = wick::Tensor::randn({12, 2, 16}, wick::DType::BF16, wick::Device::cpu(), seed + 1);
  wick::Tensor v = wick::Tensor::randn({12, 2, 16}, wick::DType::BF16, wick::Device::cpu(), seed + 2);
  for (auto [name, t] : {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}})
    wick::save_npy((dir / (std::string(name) + ".npy")).string(), t);
  const Run r = run_wick("attn -q " + (dir / "q.npy").string() + " -k " + (dir / "k.npy").string() + " -v " +
                         (dir / "v.npy").string() + " --seqlens-q 3,4 --seqlens-k 5,7 --causal --check -o " +
                         (dir / "out.npy").string() + " --lse " + (dir / "lse.npy").string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find(": ok\n") != std::string::npos);
  wick::FlashAttnVarLen op;
  op.seqlens_q = wick::Tensor::from_vec<uint32_t>({0, 3, 7}, {3}, wick::Device::cpu());
  op.seqlens_k = wick::Tensor::from_vec<uint32_t>({0, 5, 12}, {3}, wick::Device::cpu());
  op.max_seqlen_q = 4, op.max_seqlen_k = 7, op.causal = true;
  auto [out, lse] = op.forward_with_lse(q, k, v);
  CHECK(wick::load_npy((dir / "out.npy").string()).to_f64_vec() == out.to_f64_vec());
  CHECK(wick::load_npy((dir / "lse.npy").string()).to_f64_vec() == lse.to_f64_vec());
  fs::remove_all(dir);
}

TEST_CASE("wick: every command has --help") {
  for (const char* cmd : {"", "explain ", "attn ", "bench "}) {
    Run r = run_wick(std::string(cmd) + "--help");
    INFO(cmd, r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("Usage:") != std::string::npos);
  }
}

#else
TEST_CASE("wick explain: the CLI is not part of this build") { MESSAGE("SKIPPED: tools/ not built"); }
#endif
