#include "tools/catalog.h"

#include <regex>
#include <sstream>

extern const unsigned char wick_errors_md[];
extern const unsigned long wick_errors_md_size;

namespace wick::errors_doc {

namespace {

std::vector<Entry> parse(const std::string& md) {
  std::vector<Entry> out;
  const std::regex heading(R"(^### ([A-Z][0-9]{2}) (.*)$)"), message(R"(^Message: `(.*)`$)");
  std::istringstream in(md);
  Entry* cur = nullptr;
  bool in_fix = false, in_code = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind("#", 0) == 0) {  // any heading ends the entry
      cur = nullptr, in_fix = false, in_code = false;
      if (std::regex_match(line, m, heading)) cur = &out.emplace_back(Entry{m[1], m[2], "", "", ""});
      continue;
    }
    if (!cur) continue;
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code, in_fix = false;
      continue;
    }
    if (in_code) {
      cur->example += line + "\n";
    } else if (std::regex_match(line, m, message)) {
      cur->message = m[1];
    } else if (line.rfind("- Fix: ", 0) == 0) {
      cur->fix = line.substr(7), in_fix = true;
    } else if (line.rfind("- Means, trigger, fix: ", 0) == 0) {  // "as A14, for k."
      cur->fix = line.substr(23), in_fix = true;
    } else if (in_fix && line.rfind("  ", 0) == 0) {
      cur->fix += " " + line.substr(2);
    } else {
      in_fix = false;
    }
  }
  // "as A14, for k.": add the referenced entry's fix.
  const std::regex as_other(R"(^as ([A-Z][0-9]{2})\b.*)");
  for (Entry& e : out) {
    std::smatch m;
    if (!std::regex_match(e.fix, m, as_other)) continue;
    for (const Entry& other : out)
      if (other.id == m[1].str() && !other.fix.empty()) e.fix += " (" + other.id + ": " + other.fix + ")";
  }
  return out;
}

}  // namespace

const std::string& document() {
  static const std::string doc(reinterpret_cast<const char*>(wick_errors_md), wick_errors_md_size);
  return doc;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = parse(document());
  return all;
}

const Entry* find(const std::string& id) {
  for (const Entry& e : entries())
    if (e.id == id) return &e;
  return nullptr;
}

bool matches(const std::string& text, const std::string& templ) {
  std::string re;
  for (size_t i = 0; i < templ.size(); ++i) {
    size_t close = templ[i] == '{' ? templ.find('}', i) : std::string::npos;
    if (close != std::string::npos) {
      re += "[\\s\\S]*";
      i = close;
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(templ[i]) != std::string::npos) re += '\\';
    re += templ[i];
  }
  return std::regex_match(text, std::regex(re));
}

const Entry* entry_for(const Error& e) {
  if (!e.code().empty())
    if (const Entry* entry = find(e.code())) return entry;
  // A message raised without its code: find it by its text. The "must be a cuda tensor"
  // entries say "cpu" when q is on the CPU.
  for (const Entry& entry : entries()) {
    if (entry.message.empty()) continue;
    std::string on_cpu = std::regex_replace(entry.message, std::regex("must be a cuda tensor"),
                                            "must be a cpu tensor");
    if (matches(e.what(), entry.message) || matches(e.what(), on_cpu)) return &entry;
  }
  return nullptr;
}

std::string explain(const Error& e) {
  const Entry* entry = entry_for(e);
  if (!entry) return std::string("error: ") + e.what() + "\n";
  std::string out = "error " + entry->id + ": " + e.what() + "\n  fix: " + entry->fix + "\n";
  std::istringstream ex(entry->example);
  for (std::string line; std::getline(ex, line);) out += "    " + line + "\n";
  return out;
}

}  // namespace wick::errors_doc
