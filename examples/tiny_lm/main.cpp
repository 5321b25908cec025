// tiny_lm: trains a character-level transformer on a public-domain text, saves and reloads
// its weights as safetensors, and generates from several prompts at once through a paged
// K/V cache. See examples/tiny_lm/README.md.
//
//   tiny_lm [--steps N] [--device cpu|cuda] [--save PATH] [--load PATH] [--new N]
//           [--text PATH] [--seed S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "examples/tiny_lm/model.h"

using namespace wick;
using namespace wick::tiny_lm;

namespace {

struct Args {
  size_t steps = 1000;
  size_t new_tokens = 120;
  uint64_t seed = 1;
  std::string device = "auto";
  std::string save = "tiny_lm.safetensors";
  std::string load;
  std::string text = TINY_LM_TEXT;  // the copy next to the sources, set by the build
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tiny_lm: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--steps")) a.steps = std::stoul(value("--steps"));
    else if (!std::strcmp(argv[i], "--new")) a.new_tokens = std::stoul(value("--new"));
    else if (!std::strcmp(argv[i], "--seed")) a.seed = std::stoull(value("--seed"));
    else if (!std::strcmp(argv[i], "--device")) a.device = value("--device");
    else if (!std::strcmp(argv[i], "--save")) a.save = value("--save");
    else if (!std::strcmp(argv[i], "--load")) a.load = value("--load");
    else if (!std::strcmp(argv[i], "--text")) a.text = value("--text");
    else {
      std::fprintf(stderr, "usage: tiny_lm [--steps N] [--device cpu|cuda] [--save PATH] [--load PATH] [--new N] "
                           "[--text PATH] [--seed S]\n");
      std::exit(2);
    }
  }
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("tiny_lm: cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string shown(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const Device dev = args.device == "cuda" || (args.device == "auto" && Device::cuda_available()) ? Device::cuda(0)
                                                                                                     : Device::cpu();
    const std::string text = read_file(args.text);
    const Vocab vocab(text);
    std::vector<std::vector<int64_t>> docs;
    for (const std::string& d : split_documents(text)) docs.push_back(vocab.encode(d));

    Config cfg;
    cfg.vocab = vocab.chars.size();
    std::map<std::string, std::string> meta;
    if (!args.load.empty()) {
      meta = load_safetensors_metadata(args.load);
      cfg = Config::from_metadata(meta);
    }
    Model model(cfg, dev, args.seed);
    std::printf("tiny_lm on %s: %zu characters, %zu documents, vocab %zu; %zu layers, dim %zu, %zu heads / %zu kv heads, "
                "%zu parameters\n",
                to_string(dev).c_str(), text.size(), docs.size(), cfg.vocab, cfg.layers, cfg.dim, cfg.heads, cfg.kv_heads,
                model.num_parameters());

    if (args.load.empty()) {
      TrainConfig tc;
      tc.steps = args.steps;
      tc.seed = args.seed;
      TrainResult r = train(model, docs, tc, [](size_t step, double loss, double lr, double tps) {
        std::printf("step %4zu | loss %.4f | lr %.2e | %6.0f tok/s\n", step, loss, lr, tps);
        std::fflush(stdout);
      });
      std::printf("trained %zu steps in %.1f s (%.0f tok/s): loss %.3f -> %.3f (mean of the last 10 steps)\n", tc.steps,
                  r.seconds, r.tokens_per_second, r.first_loss, r.final_loss);
      std::map<std::string, std::string> m = cfg.to_metadata();
      m["chars"] = vocab.chars;
      model.save(args.save, m);
      // A fresh model from the file computes the same logits.
      Model reloaded(Config::from_metadata(load_safetensors_metadata(args.save)), dev, args.seed + 1000);
      reloaded.load(args.save);
      autograd::NoGradGuard no_grad;
      Batch b = make_batch(docs, 64, 32, 0, 7, dev);
      const bool same = allclose(model.forward_packed(b.inputs, b.cu_seqlens, b.max_len),
                                 reloaded.forward_packed(b.inputs, b.cu_seqlens, b.max_len), 0, 0);
      std::printf("saved %s; reloaded it into a fresh model: logits %s\n", args.save.c_str(),
                  same ? "identical" : "DIFFERENT");
      if (!same) return 1;
    } else {
      model.load(args.load);
      if (meta.count("chars") && meta["chars"] != vocab.chars)
        std::printf("note: the checkpoint's characters differ from this text's\n");
      std::printf("loaded %s\n", args.load.c_str());
    }

    const std::vector<std::string> prompts_text = {"A", "CYNIC, n.  ", "BORE, n.  A person who", "ABSURDITY, n.  "};
    std::vector<std::vector<int64_t>> prompts;
    for (const std::string& p : prompts_text) prompts.push_back(vocab.encode(p));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<int64_t>> out = generate_cached(model, prompts, args.new_tokens);
    synchronize(dev);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("greedy generation, %zu prompts of lengths", prompts.size());
    for (const auto& p : prompts) std::printf(" %zu", p.size());
    std::printf(", %zu new tokens each, prefilled into a paged cache and decoded through the paged op: "
                "%.0f tokens/s\n",
                args.new_tokens, static_cast<double>(prompts.size() * args.new_tokens) / secs);
    for (size_t b = 0; b < prompts.size(); ++b)
      std::printf("  [%s] -> %s\n", shown(prompts_text[b]).c_str(), shown(vocab.decode(out[b])).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiny_lm: %s\n", e.what());
    return 1;
  }
}
