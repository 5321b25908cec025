// Device: where a tensor's storage lives. Prints as candle's location does.
#pragma once
#include <string>

namespace wick {

struct Device {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int gpu_id = 0;  // meaningful for Cuda only

  static Device cpu() { return {}; }
  static Device cuda(int gpu_id = 0) { return {Kind::Cuda, gpu_id}; }
  bool is_cpu() const { return kind == Kind::Cpu; }
  bool is_cuda() const { return kind == Kind::Cuda; }
  // True when this build has CUDA and at least one GPU is visible.
  static bool cuda_available();

  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && (a.kind == Kind::Cpu || a.gpu_id == b.gpu_id);
  }
};

// "Cpu" or "Cuda { gpu_id: 0 }"
std::string to_string(const Device& d);

}  // namespace wick
