// save_npy / load_npy against files numpy itself wrote (tests/data/npy, made by
// scripts/make_npy_fixtures.py): wick reads numpy's bytes as the same numbers, and writes
// C-order little-endian arrays back byte for byte. Plus round trips of every DType and
// layout on every device, and the F section of docs/errors.md, triggered with exact texts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include <unistd.h>

#include "devices.h"
#include "errors_catalog.h"
#include "io/npy.h"
#include "seed.h"
#include "tensor/tensor.h"

using namespace wick;
using wick::catalog::error_of;
namespace fs = std::filesystem;

namespace {

fs::path fixture(const std::string& name) {
  return fs::path(__FILE__).parent_path() / "data" / "npy" / (name + ".npy");
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A scratch folder for this test binary, emptied on creation.
fs::path scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("wick_test_npy_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::vector<double> ramp(size_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<double>(i);
  return v;
}

// Each fixture's dtype, shape and values, computed from the formulas in
// scripts/make_npy_fixtures.py. Integers are compared through doubles only where exact.
struct Expected {
  DType dtype;
  Shape shape;
  std::vector<double> values;
  bool written_back_identically;  // C order, little-endian: wick's file equals numpy's
};

std::map<std::string, Expected> expected_fixtures() {
  return {
      {"u8", {DType::U8, {2, 3}, {0, 50, 100, 150, 200, 250}, true}},
      {"u4", {DType::U32, {4}, {0, 1, 4000000000.0, 4294967295.0}, true}},
      {"i2", {DType::I16, {2, 2}, {-32768, -1, 0, 32767}, true}},
      {"i4", {DType::I32, {3}, {-2147483648.0, -7, 2147483647.0}, true}},
      {"i8", {DType::I64, {2, 2}, {}, true}},  // beyond doubles: checked with to_vec<int64_t>
      {"f2", {DType::F16, {5}, {1.5, -0.0, 65504.0, std::ldexp(1.0, -24), -3.25}, true}},
      {"f4", {DType::F32, {2, 3, 4}, ramp(24, 0.125, -1.5), true}},
      {"f8", {DType::F64, {3, 2}, {std::numbers::pi, -std::numbers::e, 1e300, -std::ldexp(1.0, -1074), 0.1, 7.0}, true}},
      {"bf16", {DType::BF16, {2, 3}, {1.0, -2.5, 0.15625, 256.0, -0.0, std::ldexp(1.0, -126)}, true}},
      {"scalar_f4", {DType::F32, Shape{}, {2.5}, true}},
      {"empty_f4", {DType::F32, {0, 3}, {}, true}},
      {"fortran_f4", {DType::F32, {2, 3}, ramp(6, 1.0, 0.0), false}},
      {"big_endian_f8", {DType::F64, {3}, ramp(3, -0.5, 2.0), false}},
      {"big_endian_i4", {DType::I32, {3}, {1, -2, 65536}, false}},
  };
}

// Same values, same signs (so -0.0 is told from 0.0).
void check_values(const Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = t.to_f64_vec();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element ", i);
    CHECK(got[i] == want[i]);
    CHECK(std::signbit(got[i]) == std::signbit(want[i]));
  }
}

}  // namespace

TEST_CASE("npy: wick reads the files numpy wrote") {
  for (const auto& entry : expected_fixtures()) {  // no structured binding: INFO captures its names
    const auto& name = entry.first;
    const auto& want = entry.second;
    INFO("fixture ", name);
    REQUIRE_MESSAGE(fs::exists(fixture(name)), "missing; run scripts/make_npy_fixtures.py");
    for (Device dev : test::test_devices()) {
      DEVICE_CONTEXT(dev);
      Tensor t = load_npy(fixture(name).string(), dev);
      CHECK(t.dtype() == want.dtype);
      CHECK(t.shape() == want.shape);
      CHECK(t.device() == dev);
      CHECK(t.is_contiguous());
      if (name == "i8")
        CHECK(t.to_vec<int64_t>() == std::vector<int64_t>{INT64_MIN, -1, (int64_t{1} << 40) + 3, INT64_MAX});
      else
        check_values(t, want.values);
    }
  }
}

TEST_CASE("npy: wick writes numpy's C-order files back byte for byte") {
  for (const auto& entry : expected_fixtures()) {  // no structured binding: INFO captures its names
    const auto& name = entry.first;
    const auto& want = entry.second;
    INFO("fixture ", name);
    const fs::path out = scratch() / (name + ".npy");
    Tensor t = load_npy(fixture(name).string());
    save_npy(out.string(), t);
    if (want.written_back_identically) CHECK(read_bytes(out) == read_bytes(fixture(name)));
    // Fortran-order and big-endian files come back as C order, little-endian, same values.
    Tensor back = load_npy(out.string());
    CHECK(back.shape() == t.shape());
    CHECK(back.dtype() == t.dtype());
    CHECK(back.to_f64_vec() == t.to_f64_vec());
  }
}

TEST_CASE("npy: every DType round-trips from any layout on every device") {
  const uint64_t seed = test::seed(20240611);  // WICK_TEST_SEED moves it
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::BF16, DType::F16,
                     DType::F32, DType::F64}) {
      INFO("dtype ", dtype_name(dt));
      // A transposed, narrowed view: written in logical order.
      Tensor base = Tensor::randn({5, 4, 3}, DType::F32, dev, seed).to_dtype(DType::F64);
      std::vector<double> vals = base.to_f64_vec();
      if (!is_float(dt))
        for (double& x : vals) x = std::min(250.0, std::fabs(std::round(x * 40)));  // fits u8 and every int
      Tensor t = Tensor::from_vec(vals, {5, 4, 3}, dev).to_dtype(dt).transpose(0, 2).narrow(1, 1, 2);
      const fs::path out = scratch() / (std::string("rt_") + dtype_name(dt) + ".npy");
      save_npy(out.string(), t);
      Tensor back = load_npy(out.string(), dev);
      CHECK(back.shape() == t.shape());
      CHECK(back.dtype() == dt);
      CHECK(back.to_f64_vec() == t.to_f64_vec());
    }
  }
}

namespace {

struct FEntry {
  std::string id, templ;
  std::function<void()> trigger;
  std::string expected;
};

// Writes bytes to a scratch file and returns its path.
std::string scratch_file(const std::string& name, const std::string& bytes) {
  fs::path p = scratch() / name;
  write_bytes(p, bytes);
  return p.string();
}

// A v1.0 .npy file with this header dict and data, as numpy lays it out (unpadded here).
std::string npy_bytes(const std::string& dict, const std::string& data, char major = 1) {
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

std::vector<FEntry> f_entries() {
  const std::string dir = scratch().string();
  const std::string bad_dir = dir + "/no/such/dir/x.npy";
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string notnpy = scratch_file("text.npy", "0.5 1.5\n");
  const std::string v9 = scratch_file("v9.npy", npy_bytes(good, std::string(8, '\0'), 9));
  const std::string cut = scratch_file("cut.npy", npy_bytes(good, "").substr(0, 20));
  const std::string structured = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }";
  const std::string fields = scratch_file("fields.npy", npy_bytes(structured, std::string(12, '\0')));
  const std::string short_data = scratch_file("short.npy", npy_bytes(good, std::string(6, '\0')));
  return {
      {"F01", "save_npy: cannot write {path}: {reason}",
       [=] { save_npy(bad_dir, Tensor::zeros({2}, DType::F32, Device::cpu())); },
       "save_npy: cannot write " + bad_dir + ": No such file or directory"},
      {"F02", "load_npy: cannot open {path}: {reason}", [=] { load_npy(dir + "/absent.npy"); },
       "load_npy: cannot open " + dir + "/absent.npy: No such file or directory"},
      {"F03", "load_npy: {path} is not a .npy file (it does not start with the NumPy magic string)",
       [=] { load_npy(notnpy); },
       "load_npy: " + notnpy + " is not a .npy file (it does not start with the NumPy magic string)"},
      {"F04", "load_npy: {path} has .npy format version {major}.{minor}; wick reads versions 1.0, 2.0 and 3.0",
       [=] { load_npy(v9); }, "load_npy: " + v9 + " has .npy format version 9.0; wick reads versions 1.0, 2.0 and 3.0"},
      {"F05", "load_npy: {path} ends inside its header ({size} bytes in the file, the header needs {needed})",
       [=] { load_npy(cut); },
       "load_npy: " + cut + " ends inside its header (20 bytes in the file, the header needs " +
           std::to_string(10 + good.size()) + ")"},
      {"F06", "load_npy: {path} has a malformed header ({why}): {header}", [=] { load_npy(fields); },
       "load_npy: " + fields + " has a malformed header (descr is not a simple dtype string): " + structured},
      {"F07",
       "load_npy: {path} holds dtype '{descr}', which wick has no DType for (it reads u1, u4, i2, i4, i8, f2, f4, f8 and V2 as BF16)",
       [] { load_npy(fixture("bool").string()); },
       "load_npy: " + fixture("bool").string() +
           " holds dtype '|b1', which wick has no DType for (it reads u1, u4, i2, i4, i8, f2, f4, f8 and V2 as BF16)"},
      {"F08", "load_npy: {path} has {have} bytes of data but its header ({descr}, shape {shape:?}) calls for {need}",
       [=] { load_npy(short_data); },
       "load_npy: " + short_data + " has 6 bytes of data but its header (<f4, shape [2]) calls for 8"},
  };
}

}  // namespace

TEST_CASE("npy: every F entry of docs/errors.md raises its exact text and code") {
  std::map<std::string, std::string> tested;
  for (const FEntry& e : f_entries()) {
    INFO(e.id, ": ", e.expected);
    CHECK(catalog::matches_template(e.expected, e.templ));
    std::string code;
    try {
      e.trigger();
    } catch (const Error& err) {
      CHECK(std::string(err.what()) == e.expected);
      code = err.code();
    }
    CHECK(code == e.id);
    tested[e.id] = e.templ;
  }
  // numpy dtypes without a wick DType: uint16 too (bf16 is a 2-byte void, never u2).
  CHECK(error_of([] { load_npy(fixture("u2").string()); }).find("holds dtype '<u2'") != std::string::npos);
  const std::string md = catalog::read_errors_md();
  REQUIRE(!md.empty());
  catalog::check_sections_in_sync(catalog::documented_messages(md), "F", tested, {});
}

TEST_CASE("npy: headers of every version and spelling parse") {
  const std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f
  for (const std::string& dict : {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"),
                                  std::string("{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f4\"}\n")}) {
    INFO(dict);
    CHECK(load_npy(scratch_file("v1.npy", npy_bytes(dict, data))).to_vec<float>() == std::vector<float>{1, 2});
    // Versions 2.0 and 3.0: a 4-byte header length.
    for (char major : {char(2), char(3)}) {
      std::string bytes = std::string("\x93NUMPY", 6) + major + '\0';
      for (int i = 0; i < 4; ++i) bytes += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
      CHECK(load_npy(scratch_file("v23.npy", bytes + dict + data)).to_vec<float>() == std::vector<float>{1, 2});
    }
  }
  // numpy's spelling of a bfloat16 array from ml_dtypes: '<V2'.
  std::string bf = std::string("\x80\x3f\x20\xc0", 4);  // 1.0, -2.5
  CHECK(load_npy(scratch_file("bf.npy", npy_bytes("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", bf)))
            .to_f64_vec() == std::vector<double>{1.0, -2.5});
}
