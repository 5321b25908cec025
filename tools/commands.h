// The `wick` CLI's commands, apart from their flags (tools/cli.cpp): each prints to out and
// returns the process exit status (0: done; 1: wick raised an error, printed with its
// catalogue code and fix).
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/config.h"

namespace wick::cli {

struct ExplainOptions {
  bool probs = false;      // probabilities (with random q, k) instead of the mask
  size_t head = 0;         // the query head whose probabilities are drawn
  std::string svg_prefix;  // write PREFIX-*.svg when set
  size_t max_cols = 64;    // ASCII masks wider than this are shown compressed
};
int explain(const Config& cfg, const ExplainOptions& opt, std::ostream& out);

struct AttnOptions {
  std::string q, k, v;                  // .npy inputs
  std::vector<size_t> seqlens_q, seqlens_k;  // per-sequence lengths (varlen); empty: batched
  std::string block_table;              // .npy (paged), optional
  std::optional<size_t> page_block_size;
  std::optional<float> scale, softcap;
  bool causal = false;
  std::optional<size_t> window_left, window_right;
  std::string out = "out.npy", lse = "lse.npy";
  bool check = false;  // compare with attention_reference
  std::string device = "cpu";
};
int attn(const AttnOptions& opt, std::ostream& out);

struct BenchOptions {
  int reps = 3;
  std::vector<size_t> head_dims = {64, 128};
  std::vector<size_t> seqlens;  // default: 8 sequences of 512..2048
  size_t heads = 8;
  bool cpu = true, cuda = true;
  bool progress = true;
};
int bench(const BenchOptions& opt, std::ostream& out);

}  // namespace wick::cli
