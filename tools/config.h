// An attention configuration given as command-line flags (`wick explain`), and the tensors
// and op it describes. Every field maps to one flag (tools/cli.cpp); the defaults make a
// valid call, and the override lists let a user build any layout on purpose, including
// the ones each entry of docs/errors.md describes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/attention/flash_attn.h"
#include "ops/attention/paged_kv_cache.h"
#include "tensor/tensor.h"

namespace wick::cli {

struct Config {
  // Sequences: per-sequence lengths, or the raw cumulative tensors (which may be wrong on purpose).
  std::vector<size_t> seqlens_q, seqlens_k;          // default k: 5,9,3; q: as k
  std::vector<int64_t> cu_seqlens_q, cu_seqlens_k;   // when given, used as they are
  std::optional<size_t> total_q, total_k;            // rows of q / packed k (default: the totals)
  std::optional<size_t> max_seqlen_q, max_seqlen_k;  // default: the longest
  bool batched = false;                              // FlashAttn (batch, seqlen, heads, dim)

  size_t heads = 4;
  std::optional<size_t> heads_k;  // default: heads
  size_t head_dim = 64;
  std::string dtype = "bf16";
  std::optional<float> scale;  // default 1/sqrt(head_dim)

  bool causal = false;
  std::optional<size_t> window_left, window_right;
  std::optional<float> softcap;
  bool alibi = false;               // slopes 2^(-8 (h + 1) / heads)
  std::vector<float> alibi_slopes;  // explicit slopes (any count)
  std::string mm_prefix;            // "0-4,6-8;2-3": [start, end) key ranges per sequence

  std::optional<size_t> page;             // paged K/V with blocks of this many rows
  std::optional<size_t> page_block_size;  // the op's field when it should differ from page
  std::optional<size_t> num_blocks;       // default: just enough
  std::string block_table;                // "0,1;2,3": rows per sequence (default: allocated in order)
  bool shuffle = false;                   // shuffle the block ids (seeded)
  bool cache = false;                     // build K/V through a PagedKvCache
  std::string layout = "separate";        // separate | packed-qkv | interleaved-kv

  std::string device = "cpu";
  std::vector<std::string> tensor_shape;  // NAME=d0,d1,...
  std::vector<std::string> tensor_dtype;  // NAME=dtype
  std::vector<std::string> strided;       // NAME: a view whose last dim has stride 2
  std::vector<std::string> on_cpu;        // NAME: on the CPU while the rest is on --device
  std::vector<std::string> unset;         // seqlens_q | seqlens_k | page_block_size
  bool zero_qk = false;  // q = k = 0: every logit is 0 before ALiBi, softcap and the mask
  uint64_t seed = 1;
};

// The tensor names the override flags take.
const std::vector<std::string>& tensor_names();

// What a configuration builds: the op (varlen or batched), its inputs, and host copies of the
// lengths and the block table for drawing. Building may itself raise wick::Error (a
// PagedKvCache refusing its geometry, P..), exactly as the same calls in a program would.
struct Built {
  bool batched = false, paged = false;
  FlashAttnVarLen op;
  FlashAttn batched_op;
  Tensor q, k, v;
  std::vector<size_t> len_q, len_k;  // per sequence, as configured (before any raw override)
  size_t page = 0, num_blocks = 0;
  std::vector<std::vector<int32_t>> table;  // the block ids of each sequence, padding included
  std::vector<size_t> table_used;           // blocks each sequence needs
  std::string layout_note;                  // how q, k, v were laid out
};

Built build(const Config& cfg);

// "bf16" -> DType::BF16 (also "f16", "f32", "f64", "u8", "u32", "i16", "i32", "i64").
DType parse_dtype(const std::string& name);

// Throws std::invalid_argument with a user-facing text for a configuration the flags cannot
// express (a CLI usage error, not a wick error).
void validate(const Config& cfg);

}  // namespace wick::cli
