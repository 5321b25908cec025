// SVG drawings of an attention configuration, for `wick explain --svg PREFIX` and the
// lesson's diagrams (docs/varlen-paged-attention.md, made by scripts/make-lesson-diagrams.sh).
// Plain SVG 1.1 text, no scripts, no external fonts.
#pragma once
#include <string>
#include <vector>

#include "tools/probe.h"

namespace wick::cli::svg {

// One sequence's mask (or probabilities, shaded by value): rows = queries, columns = keys.
// first_query_pos: the key position of query 0 (bottom-right alignment: sk - sq).
std::string mask(const Probs& p, const std::string& title, bool shade, size_t first_query_pos);

// Padded batch beside the packed layout: one bar per sequence, then one packed bar, with
// the cumulative lengths as tick labels.
std::string packing(const std::vector<size_t>& lengths, const std::string& what);

// The pool of blocks (each row of a block a cell, coloured by the sequence that owns it) and
// the block table (padding entries hatched).
std::string pages(const std::vector<size_t>& len_k, const std::vector<std::vector<int32_t>>& table,
                  const std::vector<size_t>& used, size_t page, size_t num_blocks);

// Query heads and the kv head each reads (GQA / MQA).
std::string heads(size_t num_heads, size_t num_heads_k);

}  // namespace wick::cli::svg
