// Printing tensors (operator<< and to_string): exact texts for each formatting rule.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "devices.h"
#include "wick.h"

using namespace wick;

namespace {
std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST_CASE("print: a float matrix, one row per line, one column width, four decimals") {
  for (Device dev : test::test_devices()) {
    DEVICE_CONTEXT(dev);
    Tensor x = Tensor::from_vec(std::vector<float>{0.5f, -1.25f, 3.0f, 10.0f, 0.125f, -2.0f}, {2, 3}, dev);
    const std::string dev_name = to_string(dev);
    CHECK(printed(x) == "Tensor[[2, 3], F32, " + dev_name + "]\n"
                        "[[ 0.5000, -1.2500,  3.0000],\n"
                        " [10.0000,  0.1250, -2.0000]]");
    CHECK(to_string(x) == printed(x));
    // a transposed view prints its logical order
    CHECK(printed(x.t()) == "Tensor[[3, 2], F32, " + dev_name + "]\n"
                            "[[ 0.5000, 10.0000],\n"
                            " [-1.2500,  0.1250],\n"
                            " [ 3.0000, -2.0000]]");
  }
}

TEST_CASE("print: integral floats, integers, scientific notation, non-finite values, scalars, empty") {
  CHECK(printed(Tensor::arange(0, 4, DType::F64, Device::cpu())) == "Tensor[[4], F64, Cpu]\n[0., 1., 2., 3.]");
  CHECK(printed(Tensor::from_vec(std::vector<int64_t>{-7, 12, 3}, {3}, Device::cpu())) ==
        "Tensor[[3], I64, Cpu]\n[-7, 12,  3]");
  CHECK(printed(Tensor::from_vec(std::vector<double>{1e-5, 2.5}, {2}, Device::cpu())) ==
        "Tensor[[2], F64, Cpu]\n[1.0000e-05, 2.5000e+00]");
  CHECK(printed(Tensor::from_vec(std::vector<double>{NAN, INFINITY, -1.5}, {3}, Device::cpu())) ==
        "Tensor[[3], F64, Cpu]\n[    nan,     inf, -1.5000]");
  CHECK(printed(Tensor::full(Shape{}, 2.25, DType::BF16, Device::cpu())) == "Tensor[[], BF16, Cpu]\n2.2500");
  CHECK(printed(Tensor::zeros({2, 0}, DType::F32, Device::cpu())) == "Tensor[[2, 0], F32, Cpu]\n[[]]");
  CHECK(printed(Tensor()) == "Tensor[empty]");
}

TEST_CASE("print: rank 3 separates blocks by a blank line; large tensors elide their middles") {
  CHECK(printed(Tensor::arange(0, 8, DType::I32, Device::cpu()).reshape({2, 2, 2})) ==
        "Tensor[[2, 2, 2], I32, Cpu]\n"
        "[[[0, 1],\n"
        "  [2, 3]],\n"
        "\n"
        " [[4, 5],\n"
        "  [6, 7]]]");
  CHECK(printed(Tensor::arange(0, 2000, DType::I64, Device::cpu())) ==
        "Tensor[[2000], I64, Cpu]\n[   0,    1,    2, ..., 1997, 1998, 1999]");
  CHECK(printed(Tensor::arange(0, 1100, DType::I64, Device::cpu()).reshape({100, 11})) ==
        "Tensor[[100, 11], I64, Cpu]\n"
        "[[   0,    1,    2, ...,    8,    9,   10],\n"
        " [  11,   12,   13, ...,   19,   20,   21],\n"
        " [  22,   23,   24, ...,   30,   31,   32],\n"
        " ...,\n"
        " [1067, 1068, 1069, ..., 1075, 1076, 1077],\n"
        " [1078, 1079, 1080, ..., 1086, 1087, 1088],\n"
        " [1089, 1090, 1091, ..., 1097, 1098, 1099]]");
}

TEST_CASE("print: a long row wraps at 80 columns under its first element") {
  const std::string s = printed(Tensor::arange(0, 30, DType::F32, Device::cpu()).reshape({1, 30}));
  CHECK(s == "Tensor[[1, 30], F32, Cpu]\n"
             "[[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13., 14.,\n"
             "  15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28., 29.]]");
  for (size_t start = 0, end; (end = s.find('\n', start)) != std::string::npos || start < s.size(); start = end + 1) {
    if (end == std::string::npos) end = s.size();
    CHECK(end - start <= 80);
  }
}
