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
//
// A graph also owns the scratch its captured calls keep from launch to launch (graph_workspace
// below), so a captured call runs the same kernels as an eager one. Replays of one graph run
// one after another (CUDA orders the launches of a graph), so they can share it.
#pragma once
#include <cstddef>

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

// The device memory an eager call keeps per stream (kernels/ uses it for split-KV partials and
// for tile counters that every launch leaves at zero), for calls being captured by a CudaGraph:
// while `stream` is a live CudaGraph's capture stream, points `counters` at `ints` zeroed ints
// and `scratch` at `floats` floats, the same arrays for every call of that graph (grown on
// demand: a grown array's predecessor stays until the graph goes, since launches captured
// before may use it) and returns true. False for any other stream, such as one captured
// directly through the CUDA runtime: the caller then allocates inside the capture. Thread-safe.
bool graph_workspace(void* stream, size_t ints, size_t floats, int** counters, float** scratch);

}  // namespace wick
