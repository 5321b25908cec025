// Trains a small MLP to separate two interleaved spirals, on the CPU and on the first CUDA
// device when there is one, printing the loss as it goes.
//   train_mlp [steps]      (default 2000)
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "examples/spirals.h"

int main(int argc, char** argv) {
  using namespace wick;
  examples::TrainConfig config;
  config.steps = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2000;
  config.log_every = 200;

  std::vector<Device> devices{Device::cpu()};
  if (Device::cuda_available()) devices.push_back(Device::cuda(0));
  else std::printf("no CUDA device: training on the CPU only\n");

  try {
    for (const Device& dev : devices) {
      config.device = dev;
      std::printf("== %s: %zu points, MLP 2-%zu-%zu-2 (tanh), AdamW lr %g, %zu steps\n", to_string(dev).c_str(),
                  2 * config.points_per_class, config.hidden, config.hidden, config.lr, config.steps);
      examples::TrainResult r = examples::train_spirals(config, [](size_t step, double loss) {
        std::printf("step %5zu  loss %.5f\n", step, loss);
      });
      std::printf("%s: loss %.4f -> %.4f, training accuracy %.1f%%\n", to_string(dev).c_str(), r.first_loss,
                  r.final_loss, 100 * r.accuracy);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
