// tiny_lm: a character-level causal transformer built from wick's public API, shared by the
// example program (examples/tiny_lm/main.cpp) and the test suite (tests/test_tiny_lm.cpp).
//
// The model (Llama-shaped, small):
//   ids (total) -> Embedding -> [RMSNorm -> GQA attention (RoPE) -> + ; RMSNorm -> SiLU-gated
//   MLP -> +] x layers -> RMSNorm -> Linear -> logits (total, vocab)
// Training sees several documents packed into one row of tokens with cumulative lengths
// (cu_seqlens); attention is flash_attn_varlen, causal inside each document, and RoPE
// positions restart at each document (varlen_positions). Generation prefills prompts of
// different lengths into one PagedKvCache per layer and decodes one token per sequence per
// step through the paged op (FlashAttnVarLen with a block_table).
// Parameters are f32; q, k and v are cast to f16 for attention (the flash op's input type),
// and the K/V cache holds f16.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "wick.h"

namespace wick::tiny_lm {

struct Config {
  size_t vocab = 0;
  size_t dim = 128;
  size_t layers = 2;
  size_t heads = 4;
  size_t kv_heads = 2;  // grouped-query attention: heads / kv_heads query heads share a K/V head
  size_t hidden = 384;  // MLP width
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  size_t head_dim() const { return dim / heads; }
  // As strings, for a checkpoint's metadata, and back.
  std::map<std::string, std::string> to_metadata() const;
  static Config from_metadata(const std::map<std::string, std::string>& m);
};

// The characters of a text, sorted: token i is vocab[i].
struct Vocab {
  std::string chars;
  explicit Vocab(const std::string& text);
  Vocab() = default;
  std::vector<int64_t> encode(const std::string& s) const;  // characters not in it are skipped
  std::string decode(const std::vector<int64_t>& ids) const;
};

struct Attention : nn::Module {
  nn::Linear wq, wk, wv, wo;
  void visit(nn::Params& p) override;
};

struct Mlp : nn::Module {
  nn::Linear gate, up, down;  // down(silu(gate x) * up x)
  void visit(nn::Params& p) override;
};

struct Block : nn::Module {
  nn::RMSNorm attn_norm, mlp_norm;
  Attention attn;
  Mlp mlp;
  void visit(nn::Params& p) override;
};

// attend(layer, q, k, v) -> (total, heads, head_dim): q (total, heads, head_dim), k and v
// (total, kv_heads, head_dim), all f16 with RoPE applied to q and k.
using Attend = std::function<Tensor(size_t layer, const Tensor& q, const Tensor& k, const Tensor& v)>;

struct Model : nn::Module {
  Config cfg;
  nn::Embedding embed;
  std::vector<Block> blocks;
  nn::RMSNorm norm;
  nn::Linear head;

  Model(const Config& cfg, Device device, uint64_t seed);
  void visit(nn::Params& p) override;
  // ids (total) I64 with positions (total) -> logits (total, vocab); attention through `attend`.
  Tensor forward(const Tensor& ids, const Tensor& positions, const Attend& attend) const;
  // Packed sequences, causal within each: cu_seqlens (batch + 1) U32, max_len the longest.
  Tensor forward_packed(const Tensor& ids, const Tensor& cu_seqlens, size_t max_len) const;
  Device device() const { return embed.weight.device(); }
};

// One PagedKvCache per layer, all allocating the same blocks for the same sequences.
struct KvCaches {
  std::vector<PagedKvCache> layers;
  KvCaches(const Config& cfg, size_t num_blocks, size_t page_block_size, Device device);
};

// Runs the prompts (one per sequence id, each non-empty) through the model, appending their
// keys and values to the caches; returns each sequence's last-token logits (batch, vocab).
Tensor prefill(const Model& m, KvCaches& caches, const std::vector<uint64_t>& seq_ids,
               const std::vector<std::vector<int64_t>>& prompts);
// Appends one token per sequence and returns the next logits (batch, vocab), attending over
// each sequence's whole cache through the paged op.
Tensor decode_step(const Model& m, KvCaches& caches, const std::vector<uint64_t>& seq_ids,
                   const std::vector<int64_t>& tokens);

// The argmax of each row of logits (batch, vocab).
std::vector<int64_t> greedy(const Tensor& logits);
// n_new greedy tokens after each prompt: prefill once, then cached decoding.
std::vector<std::vector<int64_t>> generate_cached(const Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                  size_t n_new);
// The same tokens the slow way: every step runs the whole prefix of every sequence again.
std::vector<std::vector<int64_t>> generate_recompute(const Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                     size_t n_new);

// The text split into documents (dictionary entries: a blank line, then an upper-case
// headword followed by a comma). Each has at least 2 characters.
std::vector<std::string> split_documents(const std::string& text);

// A training batch: windows of random documents packed to exactly `tokens` input tokens (the
// last window cut to fit), the same for the same (seed, step).
struct Batch {
  Tensor inputs, targets;  // (total) I64
  Tensor cu_seqlens;       // (docs + 1) U32
  Tensor positions;        // (total) I64, restarting per document
  size_t max_len = 0;
  size_t total = 0;
};
Batch make_batch(const std::vector<std::vector<int64_t>>& docs, size_t tokens, size_t max_len, uint64_t step,
                 uint64_t seed, Device device);

struct TrainConfig {
  size_t steps = 300;
  size_t batch_tokens = 512;
  size_t max_len = 128;  // longest document window
  double lr = 3e-3;
  size_t warmup = 20;
  double clip = 1.0;
  uint64_t seed = 1;
  size_t log_every = 25;
};

struct TrainResult {
  double first_loss = 0, final_loss = 0;  // final: the mean over the last 10 steps
  double seconds = 0, tokens_per_second = 0;
};

// AdamW with a cosine schedule and gradient clipping; on_log(step, loss, lr, tokens/s).
TrainResult train(Model& m, const std::vector<std::vector<int64_t>>& docs, const TrainConfig& tc,
                  const std::function<void(size_t, double, double, double)>& on_log = {});

}  // namespace wick::tiny_lm
