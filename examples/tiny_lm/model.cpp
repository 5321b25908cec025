#include "examples/tiny_lm/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <regex>

namespace wick::tiny_lm {

// ---- config and vocabulary ------------------------------------------------------------------

std::map<std::string, std::string> Config::to_metadata() const {
  return {{"vocab", std::to_string(vocab)},   {"dim", std::to_string(dim)},
          {"layers", std::to_string(layers)}, {"heads", std::to_string(heads)},
          {"kv_heads", std::to_string(kv_heads)}, {"hidden", std::to_string(hidden)},
          {"rope_base", std::to_string(rope_base)}, {"norm_eps", std::to_string(norm_eps)}};
}

Config Config::from_metadata(const std::map<std::string, std::string>& m) {
  Config c;
  c.vocab = std::stoul(m.at("vocab"));
  c.dim = std::stoul(m.at("dim"));
  c.layers = std::stoul(m.at("layers"));
  c.heads = std::stoul(m.at("heads"));
  c.kv_heads = std::stoul(m.at("kv_heads"));
  c.hidden = std::stoul(m.at("hidden"));
  c.rope_base = std::stod(m.at("rope_base"));
  c.norm_eps = std::stod(m.at("norm_eps"));
  return c;
}

Vocab::Vocab(const std::string& text) {
  std::vector<bool> seen(256, false);
  for (unsigned char ch : text) seen[ch] = true;
  for (int ch = 0; ch < 256; ++ch)
    if (seen[ch]) chars.push_back(static_cast<char>(ch));
}

std::vector<int64_t> Vocab::encode(const std::string& s) const {
  std::vector<int64_t> ids;
  for (char ch : s) {
    size_t at = chars.find(ch);
    if (at != std::string::npos) ids.push_back(static_cast<int64_t>(at));
  }
  return ids;
}

std::string Vocab::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) s += chars.at(static_cast<size_t>(id));
  return s;
}

// ---- the model ------------------------------------------------------------------------------

void Attention::visit(nn::Params& p) {
  p("wq", wq);
  p("wk", wk);
  p("wv", wv);
  p("wo", wo);
}

void Mlp::visit(nn::Params& p) {
  p("gate", gate);
  p("up", up);
  p("down", down);
}

void Block::visit(nn::Params& p) {
  p("attn_norm", attn_norm);
  p("attn", attn);
  p("mlp_norm", mlp_norm);
  p("mlp", mlp);
}

Model::Model(const Config& c, Device device, uint64_t seed)
    : cfg(c),
      embed(c.vocab, c.dim, DType::F32, device, seed),
      norm(c.dim, c.norm_eps, DType::F32, device),
      head(c.dim, c.vocab, false, DType::F32, device, seed + 1) {
  const DType f32 = DType::F32;
  const size_t hd = c.head_dim();
  uint64_t s = seed + 2;
  for (size_t l = 0; l < c.layers; ++l) {
    Block b;
    b.attn_norm = nn::RMSNorm(c.dim, c.norm_eps, f32, device);
    b.mlp_norm = nn::RMSNorm(c.dim, c.norm_eps, f32, device);
    b.attn.wq = nn::Linear(c.dim, c.heads * hd, false, f32, device, s++);
    b.attn.wk = nn::Linear(c.dim, c.kv_heads * hd, false, f32, device, s++);
    b.attn.wv = nn::Linear(c.dim, c.kv_heads * hd, false, f32, device, s++);
    b.attn.wo = nn::Linear(c.heads * hd, c.dim, false, f32, device, s++);
    b.mlp.gate = nn::Linear(c.dim, c.hidden, false, f32, device, s++);
    b.mlp.up = nn::Linear(c.dim, c.hidden, false, f32, device, s++);
    b.mlp.down = nn::Linear(c.hidden, c.dim, false, f32, device, s++);
    blocks.push_back(b);
  }
}

void Model::visit(nn::Params& p) {
  p("embed", embed);
  for (size_t l = 0; l < blocks.size(); ++l) p("blocks." + std::to_string(l), blocks[l]);
  p("norm", norm);
  p("head", head);
}

Tensor Model::forward(const Tensor& ids, const Tensor& positions, const Attend& attend) const {
  const size_t total = ids.dim(0), hd = cfg.head_dim();
  Tensor x = embed.forward(ids);  // (total, dim)
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = blocks[l];
    Tensor h = b.attn_norm.forward(x);
    Tensor q = rope(b.attn.wq.forward(h).reshape({total, cfg.heads, hd}), positions, cfg.rope_base);
    Tensor k = rope(b.attn.wk.forward(h).reshape({total, cfg.kv_heads, hd}), positions, cfg.rope_base);
    Tensor v = b.attn.wv.forward(h).reshape({total, cfg.kv_heads, hd});
    Tensor o = attend(l, q.to_dtype(DType::F16), k.to_dtype(DType::F16), v.to_dtype(DType::F16));
    x = x + b.attn.wo.forward(o.to_dtype(DType::F32).reshape({total, cfg.heads * hd}));
    h = b.mlp_norm.forward(x);
    x = x + b.mlp.down.forward(silu(b.mlp.gate.forward(h)) * b.mlp.up.forward(h));
  }
  return head.forward(norm.forward(x));
}

Tensor Model::forward_packed(const Tensor& ids, const Tensor& cu_seqlens, size_t max_len) const {
  const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim()));
  Attend attend = [&](size_t, const Tensor& q, const Tensor& k, const Tensor& v) {
    return flash_attn_varlen(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, scale, /*causal=*/true);
  };
  return forward(ids, varlen_positions(cu_seqlens), attend);
}

// ---- cached generation ----------------------------------------------------------------------

KvCaches::KvCaches(const Config& cfg, size_t num_blocks, size_t page, Device device) {
  for (size_t l = 0; l < cfg.layers; ++l)
    layers.emplace_back(num_blocks, page, cfg.kv_heads, cfg.head_dim(), DType::F16, device);
}

Tensor prefill(const Model& m, KvCaches& caches, const std::vector<uint64_t>& seq_ids,
               const std::vector<std::vector<int64_t>>& prompts) {
  // Cumulative query lengths (the new tokens) and key lengths (cached + new) per sequence.
  std::vector<uint32_t> cu_q{0}, cu_k{0};
  std::vector<int64_t> flat, last;
  size_t max_q = 0;
  for (size_t b = 0; b < seq_ids.size(); ++b) {
    const PagedKvCache& c0 = caches.layers[0];
    const size_t cached = c0.contains(seq_ids[b]) ? c0.seq_len(seq_ids[b]) : 0;
    flat.insert(flat.end(), prompts[b].begin(), prompts[b].end());
    cu_q.push_back(cu_q.back() + static_cast<uint32_t>(prompts[b].size()));
    cu_k.push_back(cu_k.back() + static_cast<uint32_t>(cached + prompts[b].size()));
    last.push_back(static_cast<int64_t>(cu_q.back()) - 1);
    max_q = std::max(max_q, prompts[b].size());
  }
  const Device dev = m.device();
  Tensor ids = Tensor::from_vec(flat, {flat.size()}, dev);
  Tensor seqlens_q = Tensor::from_vec(cu_q, {cu_q.size()}, dev);
  // Query i of a sequence sits after its cached tokens: positions continue from the cache.
  Tensor positions = varlen_positions(seqlens_q, Tensor::from_vec(cu_k, {cu_k.size()}, dev));
  Attend attend = [&](size_t layer, const Tensor& q, const Tensor& k, const Tensor& v) {
    PagedKvCache& cache = caches.layers[layer];
    for (size_t b = 0; b < seq_ids.size(); ++b)
      cache.append(seq_ids[b], k.narrow(0, cu_q[b], cu_q[b + 1] - cu_q[b]), v.narrow(0, cu_q[b], cu_q[b + 1] - cu_q[b]));
    FlashAttnVarLen op;
    cache.bind(op, seq_ids);  // block_table, seqlens_k, page_block_size, max_seqlen_k
    op.seqlens_q = seqlens_q;
    op.max_seqlen_q = max_q;
    op.causal = true;  // aligned bottom-right: the new tokens follow the cache; scale 1/sqrt(d)
    return op.forward(q, cache.k(), cache.v());
  };
  autograd::NoGradGuard no_grad;
  Tensor logits = m.forward(ids, positions, attend);
  return index_select(logits, Tensor::from_vec(last, {last.size()}, dev), 0);
}

Tensor decode_step(const Model& m, KvCaches& caches, const std::vector<uint64_t>& seq_ids,
                   const std::vector<int64_t>& tokens) {
  std::vector<std::vector<int64_t>> one(tokens.size());
  for (size_t b = 0; b < tokens.size(); ++b) one[b] = {tokens[b]};
  return prefill(m, caches, seq_ids, one);
}

std::vector<int64_t> greedy(const Tensor& logits) { return argmax(logits, -1).to_vec<int64_t>(); }

std::vector<std::vector<int64_t>> generate_cached(const Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                  size_t n_new) {
  constexpr size_t kPage = 32;
  size_t blocks = 1;
  for (const auto& p : prompts) blocks += (p.size() + n_new + kPage - 1) / kPage;
  KvCaches caches(m.cfg, blocks, kPage, m.device());
  std::vector<uint64_t> ids(prompts.size());
  for (size_t b = 0; b < ids.size(); ++b) ids[b] = b;
  std::vector<std::vector<int64_t>> out(prompts.size());
  if (n_new == 0) return out;
  std::vector<int64_t> next = greedy(prefill(m, caches, ids, prompts));
  for (size_t step = 0;; ++step) {
    for (size_t b = 0; b < ids.size(); ++b) out[b].push_back(next[b]);
    if (step + 1 == n_new) break;
    next = greedy(decode_step(m, caches, ids, next));
  }
  return out;
}

std::vector<std::vector<int64_t>> generate_recompute(const Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                     size_t n_new) {
  std::vector<std::vector<int64_t>> seqs = prompts, out(prompts.size());
  autograd::NoGradGuard no_grad;
  for (size_t step = 0; step < n_new; ++step) {
    std::vector<int64_t> flat, last;
    std::vector<uint32_t> cu{0};
    size_t max_len = 0;
    for (const auto& s : seqs) {
      flat.insert(flat.end(), s.begin(), s.end());
      cu.push_back(cu.back() + static_cast<uint32_t>(s.size()));
      last.push_back(static_cast<int64_t>(cu.back()) - 1);
      max_len = std::max(max_len, s.size());
    }
    const Device dev = m.device();
    Tensor logits = m.forward_packed(Tensor::from_vec(flat, {flat.size()}, dev), Tensor::from_vec(cu, {cu.size()}, dev),
                                     max_len);
    std::vector<int64_t> next = greedy(index_select(logits, Tensor::from_vec(last, {last.size()}, dev), 0));
    for (size_t b = 0; b < seqs.size(); ++b) {
      seqs[b].push_back(next[b]);
      out[b].push_back(next[b]);
    }
  }
  return out;
}

// ---- data and training ----------------------------------------------------------------------

std::vector<std::string> split_documents(const std::string& text) {
  // A blank line followed by a headword in capitals and a comma starts an entry.
  const std::regex boundary(R"(\n\n(?=[A-Z][A-Z' -]*, ))");
  std::vector<std::string> docs;
  for (std::sregex_token_iterator it(text.begin(), text.end(), boundary, -1), end; it != end; ++it) {
    std::string d = it->str();
    while (!d.empty() && d.back() == '\n') d.pop_back();
    d += '\n';  // every entry ends the same way, so the model learns where entries stop
    if (d.size() >= 2) docs.push_back(d);
  }
  return docs;
}

Batch make_batch(const std::vector<std::vector<int64_t>>& docs, size_t tokens, size_t max_len, uint64_t step,
                 uint64_t seed, Device device) {
  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + step);
  std::vector<int64_t> in, tgt;
  std::vector<uint32_t> cu{0};
  Batch b;
  while (in.size() < tokens) {
    const auto& d = docs[gen() % docs.size()];
    // a window of up to max_len + 1 characters: max_len inputs, each predicting the next
    size_t len = std::min({d.size(), max_len + 1, tokens - in.size() + 1});
    if (len < 2) continue;
    size_t start = d.size() > len ? gen() % (d.size() - len + 1) : 0;
    in.insert(in.end(), d.begin() + static_cast<std::ptrdiff_t>(start), d.begin() + static_cast<std::ptrdiff_t>(start + len - 1));
    tgt.insert(tgt.end(), d.begin() + static_cast<std::ptrdiff_t>(start + 1), d.begin() + static_cast<std::ptrdiff_t>(start + len));
    cu.push_back(static_cast<uint32_t>(in.size()));
    b.max_len = std::max(b.max_len, len - 1);
  }
  b.total = in.size();
  b.inputs = Tensor::from_vec(in, {in.size()}, device);
  b.targets = Tensor::from_vec(tgt, {tgt.size()}, device);
  b.cu_seqlens = Tensor::from_vec(cu, {cu.size()}, device);
  b.positions = varlen_positions(b.cu_seqlens);
  return b;
}

TrainResult train(Model& m, const std::vector<std::vector<int64_t>>& docs, const TrainConfig& tc,
                  const std::function<void(size_t, double, double, double)>& on_log) {
  autograd::AdamWOptions o;
  o.lr = tc.lr;
  o.weight_decay = 0.01;
  autograd::AdamW opt(m.parameters(), o);
  nn::CosineSchedule schedule(tc.lr, tc.steps, std::min(tc.warmup, tc.steps), tc.lr / 10);
  TrainResult r;
  std::vector<double> recent;
  const auto start = std::chrono::steady_clock::now();
  auto since = start;
  size_t tokens_since = 0;
  for (size_t step = 0; step < tc.steps; ++step) {
    Batch b = make_batch(docs, tc.batch_tokens, tc.max_len, step, tc.seed, m.device());
    Tensor loss = cross_entropy(m.forward_packed(b.inputs, b.cu_seqlens, b.max_len), b.targets);
    schedule.apply(opt, step);
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm(opt.params(), tc.clip);
    opt.step();
    const double value = loss.item();
    if (step == 0) r.first_loss = value;
    recent.push_back(value);
    if (recent.size() > 10) recent.erase(recent.begin());
    tokens_since += b.total;
    if (on_log && tc.log_every && (step % tc.log_every == 0 || step + 1 == tc.steps)) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - since).count();
      on_log(step, value, opt.lr(), secs > 0 ? static_cast<double>(tokens_since) / secs : 0.0);
      since = now;
      tokens_since = 0;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (double v : recent) r.final_loss += v / static_cast<double>(recent.size());
  r.tokens_per_second = static_cast<double>(tc.steps * tc.batch_tokens) / r.seconds;
  return r;
}

}  // namespace wick::tiny_lm
