#include "tensor/graph.h"

#include "tensor/cuda_check.h"
#include "tensor/error.h"
#include "tensor/storage.h"

#ifdef WICK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace wick {

CudaGraph::CudaGraph(const Device& device) : device_(device), stream_(create_stream(device)) {}

CudaGraph::~CudaGraph() {
#ifdef WICK_WITH_CUDA
  delete guard_;
  if (exec_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_.handle));
  (void)cudaGetLastError();
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
