// The error catalogue (docs/errors.md) compiled into the programs that explain errors: the
// demo and the `wick` CLI print an error's code, its exact text and the catalogue's fix
// from the document itself, so there is no second copy to drift.
#pragma once
#include <string>
#include <vector>

#include "tensor/error.h"

namespace wick::errors_doc {

// One "### ID title" entry of docs/errors.md.
struct Entry {
  std::string id;        // "A22"
  std::string title;     // "page size not a multiple of 32"
  std::string message;   // the template, e.g. "paged flash-attn requires ... (got {page_block_size})"
  std::string fix;       // the "- Fix:" text (continuation lines joined with spaces)
  std::string example;   // the entry's code block (before/after lines), may be empty
};

// Every entry, in document order (parsed once from the embedded text).
const std::vector<Entry>& entries();
// The embedded docs/errors.md, byte for byte.
const std::string& document();
// The entry with this id, or nullptr.
const Entry* find(const std::string& id);
// True when text is the template with each {placeholder} replaced by any text.
bool matches(const std::string& text, const std::string& templ);
// The entry of an error: its code() when set, else the first entry whose template the text
// matches; nullptr when none does.
const Entry* entry_for(const Error& e);
// "error A22: <exact text>" then the fix and the example, indented; for a message the
// catalogue does not list, the text alone.
std::string explain(const Error& e);

}  // namespace wick::errors_doc
