// Shared by the error-catalogue tests (test_attention_errors.cpp, test_errors_catalog.cpp):
// catching a message and its code, matching it against a {placeholder} template, and
// reading the "### ID title" / "Message: `...`" entries of docs/errors.md, so the file and
// the tests cannot drift apart. One parser for the whole catalogue.
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tensor/error.h"

namespace wick::catalog {

// What f raised: the wick::Error's what() and code(), or "<no error>" and "" when f returned.
struct Raised {
  std::string what;
  std::string code;
};

// Runs f and returns what it raised. Every wick error carries its catalogue code: an error
// with an empty code fails the running test.
inline Raised raised_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK_MESSAGE(!e.code().empty(), "a wick::Error without a catalogue code: ", e.what());
    return {e.what(), e.code()};
  }
  return {"<no error>", ""};
}

// The what() of the wick::Error f throws, or "<no error>".
inline std::string error_of(const std::function<void()>& f) { return raised_by(f).what; }

// The check every catalogue entry makes: f raised exactly `expected`, with the entry's id as
// its code.
inline void check_raised(const Raised& got, const std::string& id, const std::string& expected) {
  CHECK(got.what == expected);
  CHECK_MESSAGE(!got.code.empty(), "no code on: ", got.what);
  CHECK(got.code == id);
}

// The template with each {placeholder} matching any text.
inline bool matches_template(const std::string& text, const std::string& templ) {
  std::string re;
  for (size_t i = 0; i < templ.size(); ++i) {
    if (templ[i] == '{') {
      size_t j = templ.find('}', i);
      if (j != std::string::npos) {
        re += ".*";
        i = j;
        continue;
      }
    }
    if (std::string("\\^$.|?*+()[]{}").find(templ[i]) != std::string::npos) re += '\\';
    re += templ[i];
  }
  return std::regex_match(text, std::regex(re));
}

// docs/errors.md, found from the working directory (the repository root) or this file.
inline std::string read_errors_md() {
  for (auto path : {std::filesystem::path("docs/errors.md"),
                    std::filesystem::path(__FILE__).parent_path().parent_path() / "docs/errors.md"}) {
    std::ifstream f(path);
    if (f) return std::string(std::istreambuf_iterator<char>(f), {});
  }
  return {};
}

// id -> message template, from "### ID ..." headings followed by a "Message: `...`" line.
// An id is one capital letter (the section) and two digits.
inline std::map<std::string, std::string> documented_messages(const std::string& md) {
  std::map<std::string, std::string> out;
  std::regex heading(R"(^### ([A-Z][0-9]{2})\b.*$)"), message(R"(^Message: `(.*)`$)");
  std::string id;
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, heading)) id = m[1];
    else if (std::regex_match(line, m, message) && !id.empty()) out[id] = m[1], id.clear();
  }
  return out;
}

// The documented entries whose id starts with one of `sections` (e.g. "AWXP").
inline std::map<std::string, std::string> section_messages(const std::map<std::string, std::string>& docs,
                                                           const std::string& sections) {
  std::map<std::string, std::string> out;
  for (const auto& [id, templ] : docs)
    if (sections.find(id[0]) != std::string::npos) out[id] = templ;
  return out;
}

// The sync rule for one test file's sections: every tested id is documented with the same
// template, and every documented id of those sections is tested or listed in `untestable`
// (messages no test can trigger, each with its reason beside the list).
inline void check_sections_in_sync(const std::map<std::string, std::string>& docs, const std::string& sections,
                                   const std::map<std::string, std::string>& tested,
                                   const std::set<std::string>& untestable) {
  // (Named references, not structured bindings: INFO captures them in a lambda.)
  for (const auto& entry : tested) {
    const std::string &id = entry.first, &templ = entry.second;
    INFO(id, ": ", templ);
    if (!docs.count(id)) {
      FAIL_CHECK("not documented: " << id);
      continue;
    }
    CHECK(docs.at(id) == templ);
  }
  for (const auto& entry : section_messages(docs, sections)) {
    const std::string &id = entry.first, &templ = entry.second;
    INFO(id, ": ", templ);
    CHECK_MESSAGE((tested.count(id) || untestable.count(id)), "documented but never triggered: ", id);
  }
}

}  // namespace wick::catalog
