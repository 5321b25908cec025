#include "tools/svg.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace wick::cli::svg {

namespace {

// One colour per sequence (cycled), readable on white and in print.
const char* seq_colour(size_t b) {
  static const char* colours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return colours[b % (sizeof colours / sizeof colours[0])];
}

class Doc {
 public:
  Doc(double w, double h) : w_(w), h_(h) {}
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& extra = "") {
    char buf[256];
    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s%s/>\n",
                  x, y, w, h, fill.c_str(), extra.empty() ? "" : " ", extra.c_str());
    body_ += buf;
  }
  void text(double x, double y, const std::string& s, double size = 11, const std::string& anchor = "start",
            const std::string& extra = "") {
    char buf[128];
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y,
                  size, anchor.c_str(), extra.empty() ? "" : " ", extra.c_str());
    body_ += buf + escape(s) + "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1) {
    char buf[192];
    std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n",
                  x1, y1, x2, y2, stroke.c_str(), width);
    body_ += buf;
  }
  std::string str() const {
    char head[512];
    std::snprintf(head, sizeof head,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
                  "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                  "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
                  "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#bbbbbb\" stroke-width=\"2\"/></pattern></defs>\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                  w_, h_, w_, h_);
    return head + body_ + "</svg>\n";
  }

 private:
  static std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '<') out += "&lt;";
      else if (c == '>') out += "&gt;";
      else if (c == '&') out += "&amp;";
      else out += c;
    }
    return out;
  }
  double w_, h_;
  std::string body_;
};

// White -> blue by value in [0, 1].
std::string shade_of(float x) {
  x = std::clamp(x, 0.0f, 1.0f);
  char buf[16];
  auto mix = [&](int from, int to) { return static_cast<int>(from + (to - from) * x); };
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(0xe8, 0x1f), mix(0xf0, 0x4e), mix(0xfa, 0x99));
  return buf;
}

}  // namespace

std::string mask(const Probs& p, const std::string& title, bool shade, size_t first_query_pos) {
  const double cell = std::clamp(480.0 / std::max<size_t>(1, std::max(p.cols, p.rows)), 4.0, 22.0);
  const double left = 92, top = 52;
  Doc doc(std::max(left + p.cols * cell + 20, 440.0), top + p.rows * cell + 40);
  doc.text(8, 18, title, 13, "start", "font-weight=\"bold\"");
  doc.text(left, 38, shade ? "keys \u2192 (shade: probability)" : "keys \u2192 (filled: the query sees the key)", 10);
  float row_max = 0;
  for (float x : p.p) row_max = std::max(row_max, x);
  for (size_t i = 0; i < p.rows; ++i) {
    if (p.rows <= 40 || i % 8 == 0)
      doc.text(left - 6, top + i * cell + cell * 0.75, "q" + std::to_string(i) + " @" + std::to_string(first_query_pos + i),
               std::min(10.0, cell * 0.8), "end");
    for (size_t j = 0; j < p.cols; ++j) {
      const float x = p.at(i, j);
      const std::string fill = x <= 0 ? "url(#hatch)" : shade ? shade_of(row_max > 0 ? x / row_max : 0) : "#4e79a7";
      doc.rect(left + j * cell, top + i * cell, cell - (cell > 6 ? 1 : 0), cell - (cell > 6 ? 1 : 0), fill);
    }
  }
  for (size_t j = 0; j < p.cols; ++j)
    if (p.cols <= 40 || j % 8 == 0)
      doc.text(left + j * cell + cell / 2, top + p.rows * cell + 14, std::to_string(j), std::min(10.0, cell * 0.8), "middle");
  doc.text(left, top + p.rows * cell + 32, "key position; query i sits at position @p (hatched: masked)", 10);
  return doc.str();
}

std::string packing(const std::vector<size_t>& lengths, const std::string& what) {
  size_t longest = 1, total = 0;
  for (size_t n : lengths) longest = std::max(longest, n), total += n;
  const double unit = std::clamp(560.0 / std::max(total, longest * 1), 1.0, 24.0), bar = 18, left = 110;
  const double padded_top = 40, packed_top = padded_top + lengths.size() * (bar + 6) + 46;
  Doc doc(left + std::max(total, longest) * unit + 40, packed_top + bar + 50);
  doc.text(8, 18, "padded batch: (" + std::to_string(lengths.size()) + ", " + std::to_string(longest) + ") " + what +
                      " rows, " + std::to_string(lengths.size() * longest - total) + " of them padding",
           12, "start", "font-weight=\"bold\"");
  for (size_t b = 0; b < lengths.size(); ++b) {
    const double y = padded_top + b * (bar + 6);
    doc.text(left - 8, y + 13, "seq " + std::to_string(b), 11, "end");
    doc.rect(left, y, lengths[b] * unit, bar, seq_colour(b));
    doc.rect(left + lengths[b] * unit, y, (longest - lengths[b]) * unit, bar, "url(#hatch)");
  }
  doc.text(8, packed_top - 16, "packed (varlen): " + std::to_string(total) + " rows, sequence b owns rows [cu[b], cu[b+1])",
           12, "start", "font-weight=\"bold\"");
  doc.text(left - 8, packed_top + 13, "packed", 11, "end");
  size_t at = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    doc.rect(left + at * unit, packed_top, lengths[b] * unit, bar, seq_colour(b));
    doc.line(left + at * unit, packed_top - 4, left + at * unit, packed_top + bar + 4, "#333333");
    doc.text(left + at * unit, packed_top + bar + 16, std::to_string(at), 10, "middle");
    at += lengths[b];
  }
  doc.line(left + at * unit, packed_top - 4, left + at * unit, packed_top + bar + 4, "#333333");
  doc.text(left + at * unit, packed_top + bar + 16, std::to_string(at), 10, "middle");
  doc.text(left, packed_top + bar + 34, "cumulative lengths cu = seqlens: the tick labels", 10);
  return doc.str();
}

std::string pages(const std::vector<size_t>& len_k, const std::vector<std::vector<int32_t>>& table,
                  const std::vector<size_t>& used, size_t page, size_t num_blocks) {
  const size_t shown_rows = std::min<size_t>(page, 64), rows_per_cell = (page + shown_rows - 1) / shown_rows;
  const double cw = 7, ch = 16, left = 70, top = 44;
  const size_t cols = table.empty() ? 0 : table[0].size();
  const double table_left = left + shown_rows * cw + 60, tcw = 34;
  Doc doc(table_left + std::max(70 + cols * tcw + 20, 260.0), top + std::max(num_blocks, table.size() + 2) * (ch + 2) + 50);
  doc.text(8, 18, "the block pool: " + std::to_string(num_blocks) + " blocks x " + std::to_string(page) + " rows",
           12, "start", "font-weight=\"bold\"");
  doc.text(left, 34, rows_per_cell > 1 ? "one cell = " + std::to_string(rows_per_cell) + " rows" : "one cell = one row (token)", 10);
  std::map<int32_t, std::pair<size_t, size_t>> owner;  // block -> (sequence, index in its row)
  for (size_t b = 0; b < table.size(); ++b)
    for (size_t c = 0; c < std::min(used[b], table[b].size()); ++c) owner[table[b][c]] = {b, c};
  for (size_t blk = 0; blk < num_blocks; ++blk) {
    const double y = top + blk * (ch + 2);
    doc.text(left - 8, y + 12, "block " + std::to_string(blk), 10, "end");
    auto it = owner.find(static_cast<int32_t>(blk));
    for (size_t r = 0; r < shown_rows; ++r) {
      std::string fill = "#eeeeee";
      if (it != owner.end()) {
        const auto [b, c] = it->second;
        const size_t token = c * page + r * rows_per_cell;
        fill = token < len_k[b] ? seq_colour(b) : "url(#hatch)";
      }
      doc.rect(left + r * cw, y, cw - 1, ch, fill);
    }
    if (it != owner.end()) {
      const auto [b, c] = it->second;
      doc.text(left + shown_rows * cw + 6, y + 12, "s" + std::to_string(b) + " t" + std::to_string(c * page) + "+", 9);
    }
  }
  doc.text(table_left, 34, "block_table (batch x " + std::to_string(cols) + ")", 12, "start", "font-weight=\"bold\"");
  for (size_t b = 0; b < table.size(); ++b) {
    const double y = top + b * (ch + 2);
    doc.text(table_left + 60, y + 12, "seq " + std::to_string(b) + " (" + std::to_string(len_k[b]) + ")", 10, "end");
    for (size_t c = 0; c < cols; ++c) {
      const bool pad = c >= used[b];
      doc.rect(table_left + 70 + c * tcw, y, tcw - 2, ch, pad ? "url(#hatch)" : seq_colour(b));
      doc.text(table_left + 70 + c * tcw + tcw / 2 - 1, y + 12, std::to_string(table[b][c]), 10, "middle",
               pad ? "fill=\"#888888\"" : "fill=\"white\"");
    }
  }
  doc.text(table_left, top + (table.size() + 1) * (ch + 2), "hatched: padding (never read)", 10);
  doc.text(table_left, top + (table.size() + 2) * (ch + 2), "token t: block table[b][t / " + std::to_string(page) +
                                                                "], row t % " + std::to_string(page), 10);
  return doc.str();
}

std::string heads(size_t num_heads, size_t num_heads_k) {
  const double w = 44, gap = 8, left = 90;
  const size_t group = num_heads_k ? num_heads / num_heads_k : 0;
  Doc doc(std::max(left + num_heads * (w + gap) + 20, 480.0), 150);
  doc.text(8, 18, std::to_string(num_heads) + " query heads, " + std::to_string(num_heads_k) +
                      " kv heads: query head h reads kv head h / " + std::to_string(group),
           12, "start", "font-weight=\"bold\"");
  doc.text(left - 8, 56, "q heads", 11, "end");
  doc.text(left - 8, 126, "k/v heads", 11, "end");
  const double kw = group * (w + gap) - gap;
  for (size_t g = 0; g < num_heads_k; ++g) {
    doc.rect(left + g * group * (w + gap), 108, kw, 28, seq_colour(g));
    doc.text(left + g * group * (w + gap) + kw / 2, 126, std::to_string(g), 11, "middle", "fill=\"white\"");
  }
  for (size_t h = 0; h < num_heads; ++h) {
    const size_t g = group ? h / group : 0;
    doc.rect(left + h * (w + gap), 40, w, 26, seq_colour(g));
    doc.text(left + h * (w + gap) + w / 2, 58, std::to_string(h), 11, "middle", "fill=\"white\"");
    doc.line(left + h * (w + gap) + w / 2, 66, left + g * group * (w + gap) + kw / 2, 108, "#666666");
  }
  return doc.str();
}

}  // namespace wick::cli::svg
