// examples/tiny_lm: its data helpers, a short training run that lowers the loss, and the
// check that matters for the paged cache: greedy tokens from cached decoding (prefill into a
// PagedKvCache per layer, then one token per step through the paged op) equal the tokens from
// running the whole prefix again at every step.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "devices.h"
#include "examples/tiny_lm/model.h"

using namespace wick;
using namespace wick::tiny_lm;

namespace {

std::string text() {
  const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() / "examples/tiny_lm/devils_dictionary_a_to_c.txt";
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Config small(size_t vocab) {
  Config c;
  c.vocab = vocab;
  c.dim = 32;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.hidden = 64;
  return c;
}

}  // namespace

TEST_CASE("tiny_lm: documents, vocabulary and packed batches") {
  const std::string t = text();
  REQUIRE(t.size() > 40000);
  const Vocab v(t);
  CHECK(v.decode(v.encode("CYNIC, n.")) == "CYNIC, n.");
  const std::vector<std::string> docs = split_documents(t);
  CHECK(docs.size() > 100);
  CHECK(docs[0].rfind("ABASEMENT, n.", 0) == 0);
  for (const std::string& d : docs) CHECK(d.back() == '\n');
  std::vector<std::vector<int64_t>> ids;
  for (const std::string& d : docs) ids.push_back(v.encode(d));
  Batch b = make_batch(ids, 300, 64, 5, 1, Device::cpu());
  CHECK(b.total == 300);
  std::vector<uint32_t> cu = b.cu_seqlens.to_vec<uint32_t>();
  CHECK(cu.front() == 0);
  CHECK(cu.back() == b.total);
  std::vector<int64_t> in = b.inputs.to_vec<int64_t>(), tgt = b.targets.to_vec<int64_t>(), pos = b.positions.to_vec<int64_t>();
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    CHECK(cu[s + 1] - cu[s] <= 64);
    CHECK(pos[cu[s]] == 0);
    for (uint32_t i = cu[s]; i + 1 < cu[s + 1]; ++i) CHECK(tgt[i] == in[i + 1]);  // targets are the next characters
  }
  // the same step and seed give the same batch
  CHECK(make_batch(ids, 300, 64, 5, 1, Device::cpu()).inputs.to_vec<int64_t>() == in);
}

TEST_CASE("tiny_lm: a short training run lowers the loss") {
  const std::string t = text();
  const Vocab v(t);
  std::vector<std::vector<int64_t>> docs;
  for (const std::string& d : split_documents(t)) docs.push_back(v.encode(d));
  Model m(small(v.chars.size()), Device::cpu(), 3);
  TrainConfig tc;
  tc.steps = 40;
  tc.batch_tokens = 256;
  tc.max_len = 64;
  tc.warmup = 5;
  tc.lr = 1e-2;
  TrainResult r = train(m, docs, tc);
  MESSAGE("tiny_lm short run: loss ", r.first_loss, " -> ", r.final_loss);
  CHECK(r.first_loss > 4.0);
  CHECK(r.final_loss < r.first_loss - 1.0);
}

TEST_CASE("tiny_lm: greedy tokens from paged cached decoding equal those from recomputing the prefix") {
  const std::string t = text();
  const Vocab v(t);
  // prompts of different lengths; the 40-token one spans two 32-row pages, and decoding
  // crosses page boundaries in every sequence
  const std::vector<std::vector<int64_t>> prompts = {v.encode("A"), v.encode("CYNIC, n.  "),
                                                     v.encode(t.substr(0, 40)), v.encode("BORE, n.  A person")};
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    for (uint64_t seed : {11, 12}) {
      INFO("seed ", seed);
      Model m(small(v.chars.size()), dev, seed);
      std::vector<std::vector<int64_t>> cached = generate_cached(m, prompts, 36);
      std::vector<std::vector<int64_t>> recomputed = generate_recompute(m, prompts, 36);
      REQUIRE(cached.size() == prompts.size());
      for (size_t b = 0; b < prompts.size(); ++b) {
        INFO("prompt ", b);
        CHECK(cached[b].size() == 36);
        CHECK(cached[b] == recomputed[b]);
      }
      // the prompts do not all continue alike (the check is not vacuous)
      CHECK(cached[0] != cached[2]);
    }
  }
}
