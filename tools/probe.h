// Reading attention probabilities out of the operator itself. With v set to one-hot rows
// (key j's value is the unit vector e_j), out = P V = P: the output row of query i is its
// probability row. Head sizes are finite, so the keys are covered d at a time: in pass c,
// keys [c d, (c + 1) d) get unit vectors and every other key a zero value; softmax's
// normalisation does not depend on v, so each pass reads its columns of P exactly.
//
// With q = 0 and k = 0 every logit is 0 and P is uniform over the keys a query may see:
// the mask, drawn by the operator (no second copy of the visibility rule).
#pragma once
#include <vector>

#include "ops/attention/flash_attn.h"

namespace wick::cli {

// One sequence's (rows x cols) probabilities, row-major; 0 where a key is masked.
struct Probs {
  size_t rows = 0, cols = 0;
  std::vector<float> p;
  float at(size_t i, size_t j) const { return p[i * cols + j]; }
};

// The probabilities of every sequence for query head `head`, from op.forward with the given
// q and k (any layout the op accepts) and one-hot v. The op must be valid for q and k.
std::vector<Probs> probabilities(const FlashAttnVarLen& op, const Tensor& q, const Tensor& k, size_t head);

// The mask of every sequence: the op's lengths, block table, windows and prefix ranges,
// with q = k = 0, no ALiBi and no softcap, on the CPU. Visible keys have p > 0.
std::vector<Probs> mask(const FlashAttnVarLen& op);

}  // namespace wick::cli
