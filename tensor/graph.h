// CudaGraph: records the device work of a stretch of wick calls once and replays it with one
// launch, which removes the per-call host cost (checks, allocation, launches) of a step
// that repeats, such as a decode step over every layer.
//
//   CudaGraph g(dev);
//   g.begin_capture();        // wick's calls on dev now record instead of running
//   step();                   // no waits inside: no to_vec, item, synchronize
//   g.end_capture();
//   for (...) { update inputs in place; g.replay(); }
//
// What the graph reads and writes are the device addresses the captured calls used: keep
// their tensors alive, write new inputs into the same tensors (copy_into, update_step),
// and read outputs from the same tensors. Tensors the captured calls allocate and free again
// inside the capture (scratch) are fine; a tensor allocated inside and kept is not (its
// memory belongs to the capture): allocate outputs before and use the *_into calls. Run the
// step once before capturing, so one-time set-up (handles, kernel attributes) is done.
#pragma once
#include "tensor/device.h"
#include "tensor/stream.h"

namespace wick {

class CudaGraph {
 public:
  explicit CudaGraph(const Device& device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Starts recording the calls made on this thread to the device (a stream of the graph's own
  // becomes the device's current stream until end_capture).
  void begin_capture();
  // Stops recording and prepares the graph for replay.
  void end_capture();
  // Runs the recorded work once more, on the device's current stream (no wait).
  void replay();

 private:
  Device device_;
  Stream stream_;
  StreamGuard* guard_ = nullptr;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace wick
