// One test body, every available device (candle's test_device! idea):
//   TEST_CASE("add") { for (Device dev : test_devices()) { DEVICE_CONTEXT(dev); ... } }
// Cases that need a GPU start with SKIP_WITHOUT_CUDA(), which prints a visible skip line.
#pragma once
#include <doctest/doctest.h>

#include <vector>

#include "tensor/device.h"
#include "tensor/device_fault.h"

namespace wick::test {

inline std::vector<Device> test_devices() {
  std::vector<Device> out{Device::cpu()};
  if (Device::cuda_available()) out.push_back(Device::cuda(0));
  return out;
}

// Runs fn, then raises what a device-side check of its call found (CUDA value checks run on
// the device and raise at the next wait; on the CPU they throw inside fn): so one
// CHECK_THROWS_WITH_AS states the error on every device.
template <class F>
void checked(const Device& dev, F&& fn) {
  fn();
  check_device_faults(dev);
}

}  // namespace wick::test

#define DEVICE_CONTEXT(dev) INFO("device: ", ::wick::to_string(dev))
#define SKIP_WITHOUT_CUDA()                          \
  do {                                               \
    if (!::wick::Device::cuda_available()) {         \
      MESSAGE("SKIPPED: no CUDA device");            \
      return;                                        \
    }                                                \
  } while (0)
