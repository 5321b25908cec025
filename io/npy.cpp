#include "io/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

namespace wick {

static_assert(std::endian::native == std::endian::little,
              "io/npy.cpp writes host memory as little-endian data");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // numpy pads the header so the data starts 64-byte aligned

// descr without its byte-order character, per DType.
const char* type_code(DType dt) {
  switch (dt) {
    case DType::U8: return "u1";
    case DType::U32: return "u4";
    case DType::I16: return "i2";
    case DType::I32: return "i4";
    case DType::I64: return "i8";
    case DType::BF16: return "V2";
    case DType::F16: return "f2";
    case DType::F32: return "f4";
    case DType::F64: return "f8";
  }
  return "";
}

std::optional<DType> dtype_of_code(const std::string& code) {
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16,
                   DType::F32, DType::F64})
    if (code == type_code(dt)) return dt;
  return std::nullopt;
}

std::string shape_tuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.rank(); ++i) s += (i ? ", " : "") + std::to_string(shape.dims()[i]);
  return s + (shape.rank() == 1 ? ",)" : ")");  // "(3,)", "(2, 3)", "()"
}

// The header as numpy writes it: the dict, spaces, a newline, padded to kAlign.
std::string make_header(const Tensor& t) {
  std::string dict = std::string("{'descr': '") + (dtype_size(t.dtype()) == 1 || t.dtype() == DType::BF16 ? "|" : "<") +
                     type_code(t.dtype()) + "', 'fortran_order': False, 'shape': " +
                     shape_tuple(t.shape()) + ", }";
  const bool v1 = kMagicLen + 2 + 2 + dict.size() + 1 <= 65535;
  const size_t prefix = kMagicLen + 2 + (v1 ? 2 : 4);
  const size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  dict += std::string(total - prefix - dict.size() - 1, ' ') + "\n";
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (v1 ? 2u : 4u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + dict;
}

// ---- reading --------------------------------------------------------------------------

[[noreturn]] void malformed(const std::string& path, const std::string& why, const std::string& header) {
  std::string shown;
  for (char c : header.substr(0, 200)) shown += (c >= 32 && c < 127) ? c : '?';
  if (header.size() > 200) shown += "...";
  throw Error("F06", "load_npy: " + path + " has a malformed header (" + why + "): " + shown);
}

// The header dict, a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<size_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = quoted();
      expect(':');
      if (key == "descr") {
        if (!peek('\'') && !peek('"')) fail("descr is not a simple dtype string");
        h.descr = quoted(), seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean(), seen_order = true;
      } else if (key == "shape") {
        h.shape = tuple(), seen_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    if (!seen_descr || !seen_order || !seen_shape) fail("it needs descr, fortran_order and shape");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) { malformed(path_, why, s_); }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string quoted() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string at offset " + std::to_string(i_));
    const char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        return value;
      }
    fail("fortran_order is not True or False");
  }
  std::vector<size_t> tuple() {
    std::vector<size_t> dims;
    expect('(');
    while (!peek(')')) {
      skip_space();
      size_t start = i_;
      uint64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (UINT64_MAX - 9) / 10) fail("a dimension is too large");
        v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long literals
      if (i_ == start) fail("shape is not a tuple of non-negative integers");
      dims.push_back(static_cast<size_t>(v));
      if (!peek(')')) expect(',');
    }
    ++i_;
    return dims;
  }

  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("F02", "load_npy: cannot open " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error("F02", "load_npy: cannot open " + path + ": " + std::strerror(errno));
  return bytes;
}

// Reverses the byte order of each es-byte element in place.
void byteswap(std::string& data, size_t offset, size_t es) {
  for (size_t i = offset; i + es <= data.size(); i += es) std::reverse(data.begin() + i, data.begin() + i + es);
}

}  // namespace

void save_npy(const std::string& path, const Tensor& t) {
  std::string bytes = make_header(t);
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v = t.to_vec<T>();
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  });
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (f) f.close();
  if (!f) throw Error("F01", "save_npy: cannot write " + path + ": " + std::strerror(errno));
}

Tensor load_npy(const std::string& path, Device device) {
  std::string file = read_file(path);
  if (file.size() < kMagicLen + 2 || file.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw Error("F03", "load_npy: " + path + " is not a .npy file (it does not start with the NumPy magic string)");
  const int major = static_cast<unsigned char>(file[6]), minor = static_cast<unsigned char>(file[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw Error("F04", "load_npy: " + path + " has .npy format version " + std::to_string(major) + "." +
                           std::to_string(minor) + "; wick reads versions 1.0, 2.0 and 3.0");
  const size_t len_bytes = major == 1 ? 2 : 4;
  auto too_short = [&](size_t needed) {
    throw Error("F05", "load_npy: " + path + " ends inside its header (" + std::to_string(file.size()) +
                           " bytes in the file, the header needs " + std::to_string(needed) + ")");
  };
  if (file.size() < kMagicLen + 2 + len_bytes) too_short(kMagicLen + 2 + len_bytes);
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i)
    header_len |= static_cast<size_t>(static_cast<unsigned char>(file[kMagicLen + 2 + i])) << (8 * i);
  const size_t data_start = kMagicLen + 2 + len_bytes + header_len;
  if (file.size() < data_start) too_short(data_start);
  const std::string text = file.substr(kMagicLen + 2 + len_bytes, header_len);
  const Header h = HeaderParser(path, text).parse();

  const char order = h.descr.empty() ? '?' : h.descr[0];
  const std::optional<DType> dt = std::string("<>|=").find(order) != std::string::npos
                                      ? dtype_of_code(h.descr.substr(1)) : std::nullopt;
  if (!dt)
    throw Error("F07", "load_npy: " + path + " holds dtype '" + h.descr +
                           "', which wick has no DType for (it reads u1, u4, i2, i4, i8, f2, f4, f8 and V2 as BF16)");
  const size_t es = dtype_size(*dt);
  size_t count = 1;
  for (size_t d : h.shape) {
    if (d != 0 && count > SIZE_MAX / es / d) malformed(path, "the shape is too large", text);
    count *= d;
  }
  const Shape shape(h.shape);
  const size_t have = file.size() - data_start, need = count * es;
  if (have != need)
    throw Error("F08", "load_npy: " + path + " has " + std::to_string(have) + " bytes of data but its header (" +
                           h.descr + ", shape " + to_string(shape) + ") calls for " + std::to_string(need));
  if (order == '>' && *dt != DType::BF16 && es > 1) byteswap(file, data_start, es);

  const char* data = file.data() + data_start;
  if (!h.fortran_order || h.shape.size() < 2) return Tensor::from_bytes(data, shape, *dt, device);
  // Fortran order: the data is the row-major array of the reversed shape; reverse the dims back.
  std::vector<size_t> reversed(h.shape.rbegin(), h.shape.rend()), perm(h.shape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = perm.size() - 1 - i;
  return Tensor::from_bytes(data, Shape(reversed), *dt, device).permute(perm).contiguous();
}

}  // namespace wick
