// Streams: the queues that wick's device work goes on. Each CUDA device has, per host
// thread, a current stream: wick's own stream for that device (created on first use), or
// one set with StreamGuard. Every op, copy and allocation of wick on a device goes on its
// current stream, never on the legacy default stream, so a sequence of wick calls can be
// captured into a CUDA graph (cudaStreamBeginCapture on the current stream) and replayed.
//
// wick's own stream is a blocking stream: it waits for work queued on the legacy default
// stream before it and the legacy stream waits for it, so code that mixes wick with
// libraries on the legacy stream keeps its order. A stream you set is yours: work of a
// tensor used on two streams needs the usual event or synchronize between them.
#pragma once
#include "tensor/device.h"

namespace wick {

struct Stream {
  Device device = Device::cuda(0);
  void* handle = nullptr;  // a cudaStream_t of `device`
};

// The calling thread's current stream on dev (a CUDA device).
Stream current_stream(const Device& dev);
// The current stream of the CUDA device that is current on the calling thread, as a
// cudaStream_t: what kernels/ launches on.
void* current_stream_handle();

// A new stream on dev (blocking, like wick's own); destroy it with destroy_stream once no
// work of yours is queued on it.
Stream create_stream(const Device& dev);
void destroy_stream(const Stream& stream);

// Makes `stream` the current stream of its device on this thread, and restores the
// previous one when it goes out of scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
  bool was_set_ = false;
};

// wick's own stream of dev: the one current on a thread that set none.
Stream own_stream(const Device& dev);

// Waits for the work queued on one stream (synchronize(Device) waits for all of a device's).
// Raises a recorded device fault like every waiting call (tensor/device_fault.h).
void synchronize(const Stream& stream);

}  // namespace wick
