#include "tensor/graph.h"

#include "tensor/cuda_check.h"
#include "tensor/error.h"
#include "tensor/storage.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace wick {

namespace {

// What one graph's captured calls keep: the current arrays and every array made for it.
struct Workspace {
  int* counters = nullptr;
  size_t ints = 0;
  float* scratch = nullptr;
  size_t floats = 0;
  std::vector<void*> blocks;
};

// The live graphs' workspaces, by capture stream.
std::mutex workspaces_mu;
std::map<void*, Workspace>& workspaces() {
  static std::map<void*, Workspace> m;
  return m;
}

}  // namespace

CudaGraph::CudaGraph(const Device& device) : device_(device), stream_(create_stream(device)) {
  const std::lock_guard<std::mutex> lock(workspaces_mu);
  workspaces()[stream_.handle] = Workspace{};
}

CudaGraph::~CudaGraph() {
#ifdef WICK_WITH_CUDA
  delete guard_;
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  std::vector<void*> blocks;
  {
    const std::lock_guard<std::mutex> lock(workspaces_mu);
    blocks = std::move(workspaces()[stream_.handle].blocks);
    workspaces().erase(stream_.handle);
  }
  if (!blocks.empty()) {
    (void)cudaDeviceSynchronize();  // a replay still running may use them
    for (void* b : blocks) (void)cudaFree(b);
  }
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_.handle));
  (void)cudaGetLastError();
#endif
}

bool graph_workspace(void* stream, size_t ints, size_t floats, int** counters, float** scratch) {
#ifdef WICK_WITH_CUDA
  const std::lock_guard<std::mutex> lock(workspaces_mu);
  auto it = workspaces().find(stream);
  if (it == workspaces().end()) return false;
  Workspace& w = it->second;
  // Plain cudaMalloc: a stream-ordered allocation would become part of the graph. The capture
  // is relaxed (begin_capture), which allows it.
  auto grow = [&](size_t need, size_t have, size_t elem) {
    void* mem = nullptr;
    WICK_CUDA_CHECK(cudaMalloc(&mem, std::max(need, 2 * have) * elem));
    w.blocks.push_back(mem);
    return mem;
  };
  if (w.ints < ints) {
    void* mem = grow(ints, w.ints, sizeof(int));
    w.ints = std::max(ints, 2 * w.ints);
    // Zeroed in stream order: while the stream is captured this becomes a step of the graph,
    // before the first launch that uses the counters (each launch leaves them at zero).
    WICK_CUDA_CHECK(cudaMemsetAsync(mem, 0, w.ints * sizeof(int), static_cast<cudaStream_t>(stream)));
    w.counters = static_cast<int*>(mem);
  }
  if (w.floats < floats) {
    void* mem = grow(floats, w.floats, sizeof(float));
    w.floats = std::max(floats, 2 * w.floats);
    w.scratch = static_cast<float*>(mem);
  }
  *counters = w.counters, *scratch = w.scratch;
  return true;
#else
  (void)stream, (void)ints, (void)floats, (void)counters, (void)scratch;
  return false;
#endif
}

void CudaGraph::begin_capture() {
#ifdef WICK_WITH_CUDA
  set_current_device(device_);
  // The capture stream starts after the work already queued on the current stream.
  cudaEvent_t ready;
  WICK_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  WICK_CUDA_CHECK(cudaEventRecord(ready, static_cast<cudaStream_t>(current_stream(device_).handle)));
  WICK_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_.handle), ready, 0));
  WICK_CUDA_CHECK(cudaEventDestroy(ready));
  guard_ = new StreamGuard(stream_);
  WICK_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_.handle), cudaStreamCaptureModeRelaxed));
#endif
}

void CudaGraph::end_capture() {
#ifdef WICK_WITH_CUDA
  cudaGraph_t graph = nullptr;
  WICK_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream_.handle), &graph));
  delete guard_;
  guard_ = nullptr;
  if (exec_) WICK_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
  if (graph_) WICK_CUDA_CHECK(cudaGraphDestroy(static_cast<cudaGraph_t>(graph_)));
  graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  WICK_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  exec_ = exec;
#endif
}

void CudaGraph::replay() {
#ifdef WICK_WITH_CUDA
  set_current_device(device_);
  WICK_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_),
                                  static_cast<cudaStream_t>(current_stream(device_).handle)));
#endif
}

}  // namespace wick
