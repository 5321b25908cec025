// The safetensors reader and writer (format: io/safetensors.h). The reader trusts nothing in
// the file: the header length is checked against the file size before it is read, every
// entry's dtype, shape and offsets are checked, the byte size its shape implies must equal
// its offsets' span, and the offsets must tile the data section exactly; only then is any
// tensor data read, straight into each tensor's storage.
#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "ops/ops.h"

namespace wick {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; wick reads and writes it as it lies in memory");

namespace {

using json = nlohmann::json;
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void io_error(const char* op, const char* action, const std::string& path, const std::string& reason) {
  throw Error("T01", std::string(op) + ": cannot " + action + " " + path + ": " + reason);
}

[[noreturn]] void bad_file(const char* code, const std::string& path, const std::string& what) {
  throw Error(code, "load_safetensors: " + path + ": " + what);
}

[[noreturn]] void bad_entry(const std::string& path, const std::string& name, const std::string& problem) {
  bad_file("T06", path, "tensor '" + name + "' " + problem);
}

// The wick dtype stored under a safetensors dtype name (BOOL as U8).
bool dtype_from_name(const std::string& s, DType& out) {
  if (s == "BOOL") {
    out = DType::U8;
    return true;
  }
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16, DType::F32,
                   DType::F64})
    if (s == dtype_name(dt)) {
      out = dt;
      return true;
    }
  return false;
}

struct Entry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<size_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;  // sorted by begin
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section
};

Entry parse_entry(const std::string& path, const std::string& name, const json& v) {
  Entry e;
  e.name = name;
  if (!v.is_object()) bad_entry(path, name, "is not a JSON object");
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) bad_entry(path, name, "has no \"dtype\" string");
  if (!dtype_from_name(dt->get<std::string>(), e.dtype))
    bad_entry(path, name,
              "has dtype \"" + dt->get<std::string>() +
                  "\", which wick cannot hold (it reads U8, U32, I16, I32, I64, BF16, F16, F32, F64, and BOOL as U8)");
  auto sh = v.find("shape");
  bool shape_ok = sh != v.end() && sh->is_array();
  if (shape_ok)
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) {
        shape_ok = false;
        break;
      }
      e.shape.push_back(d.get<size_t>());
    }
  if (!shape_ok) bad_entry(path, name, "has no \"shape\" array of non-negative integers");
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned() || (*off)[0].get<uint64_t>() > (*off)[1].get<uint64_t>())
    bad_entry(path, name, "has no \"data_offsets\" pair [begin, end] of integers with begin <= end");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  uint64_t need = dtype_size(e.dtype);
  for (size_t d : e.shape)
    if (__builtin_mul_overflow(need, static_cast<uint64_t>(d), &need))
      bad_entry(path, name, "has shape " + to_string(e.shape) + ", too large to address");
  if (need != e.end - e.begin)
    bad_entry(path, name,
              "spans " + std::to_string(e.end - e.begin) + " bytes but shape " + to_string(e.shape) + " of " +
                  dtype_name(e.dtype) + " needs " + std::to_string(need));
  return e;
}

// Opens path, reads and checks the header; f is left open for the data.
Header read_header(std::ifstream& f, const std::string& path) {
  f.open(path, std::ios::binary);
  if (!f) io_error("load_safetensors", "open", path, std::strerror(errno));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) io_error("load_safetensors", "read", path, ec.message());
  if (size < 8) bad_file("T02", path, "the file has " + std::to_string(size) + " bytes, fewer than the 8 of the header length");
  unsigned char len_bytes[8];
  if (!f.read(reinterpret_cast<char*>(len_bytes), 8)) io_error("load_safetensors", "read", path, std::strerror(errno));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > size - 8)
    bad_file("T03", path,
             "the header length " + std::to_string(n) + " is larger than the " + std::to_string(size - 8) + " bytes after it");
  std::string text(n, '\0');
  if (n && !f.read(text.data(), static_cast<std::streamsize>(n)))
    io_error("load_safetensors", "read", path, std::strerror(errno));

  // Top-level keys are collected as they are parsed: a JSON object keeps only the last of
  // two equal keys, and the format forbids them.
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t watch = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, watch);
  } catch (const json::parse_error& e) {
    bad_file("T04", path, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad_file("T05", path, "the header is not a JSON object");
  if (!duplicate.empty()) bad_file("T10", path, "the header names '" + duplicate + "' twice");

  Header h;
  h.data_start = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() != kMetadataKey) {
      h.entries.push_back(parse_entry(path, it.key(), it.value()));
      continue;
    }
    if (!it.value().is_object()) bad_file("T09", path, "__metadata__ is not an object of strings");
    for (auto m = it.value().begin(); m != it.value().end(); ++m) {
      if (!m.value().is_string())
        bad_file("T09", path, "__metadata__ is not an object of strings (the value of '" + m.key() + "' is not a string)");
      h.metadata[m.key()] = m.value().get<std::string>();
    }
  }
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const uint64_t data_size = size - h.data_start;
  uint64_t expected = 0;
  for (const Entry& e : h.entries) {
    if (e.begin != expected)
      bad_file("T07", path,
               "the data offsets must tile the data section without gaps or overlaps, but tensor '" + e.name +
                   "' starts at byte " + std::to_string(e.begin) + ", not " + std::to_string(expected));
    expected = e.end;
  }
  if (expected != data_size)
    bad_file("T08", path,
             "the data offsets end at byte " + std::to_string(expected) + " but the data section has " +
                 std::to_string(data_size) + " bytes");
  return h;
}

}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device) {
  std::ifstream f;
  const Header h = read_header(f, path);
  std::map<std::string, Tensor> out;
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::empty(Shape(e.shape), e.dtype, Device::cpu());
    const uint64_t bytes = e.end - e.begin;
    if (bytes) {
      f.seekg(static_cast<std::streamoff>(h.data_start + e.begin));
      if (!f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes)))
        io_error("load_safetensors", "read", path, std::strerror(errno));
    }
    out.emplace(e.name, t.to_device(device));
  }
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  std::ifstream f;
  return read_header(f, path).metadata;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == kMetadataKey)
      throw Error("T11", "save_safetensors: the name '__metadata__' is reserved for the metadata");
    if (!t.defined()) throw Error("T12", "save_safetensors: tensor '" + name + "' is an empty (default-constructed) tensor");
    host.push_back(t.detach().to_device(Device::cpu()).contiguous());
    const uint64_t bytes = t.elem_count() * dtype_size(t.dtype());
    header[name] = {{"dtype", dtype_name(t.dtype())}, {"shape", t.dims()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) io_error("save_safetensors", "open", path, std::strerror(errno));
  f.write(reinterpret_cast<const char*>(len_bytes), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Tensor& t : host)
    f.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.elem_count() * dtype_size(t.dtype())));
  f.flush();
  if (!f) io_error("save_safetensors", "write", path, std::strerror(errno));
}

}  // namespace wick
