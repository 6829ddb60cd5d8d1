// nuvec: the state of one nuvec GPU stream on its worker thread: the CUDA stream its kernels
// go to, and the buffers kept alive until the device has executed the kernels using them.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec::cu {

/// One nuvec GPU stream's CUDA stream and the buffer owners its launched kernels still use,
/// released in event-marked batches once the device has run them.
class StreamState {
 public:
  explicit StreamState(int device);
  ~StreamState();
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  cudaStream_t stream() const { return stream_; }

  /// Keeps a buffer owner alive until the work launched so far has run.
  void hold(std::shared_ptr<array::Data> data);
  /// Keeps a scratch block alive likewise, then returns it to the allocator.
  void hold_scratch(void* ptr, size_t size);
  /// Keeps a pinned staging block likewise, then returns it to the pinned pool.
  void hold_pinned(void* ptr, size_t size);
  /// Runs f on this worker once the device has run the work launched so far (when the batch
  /// holding it is released: at the next completed event or synchronize), before the
  /// buffers held with it go. For host work that reads what a kernel left in pinned memory
  /// (the index checks of index_errors.cuh) without a host function on the stream, which
  /// would stall the stream for tens of microseconds per node. f must not throw.
  void after_device(std::function<void()> f);
  /// How many of the buffer owners this stream holds are d (a linear scan: asked only for
  /// donation candidates, a few per decode layer).
  long holds_of(const array::Data* d) const;
  /// Ends a node: every few nodes an event marks what was held, and batches whose event
  /// has completed are released.
  void end_task();
  /// Waits for the device to run everything launched on the stream; releases all holds.
  void synchronize();
  /// Waits for the device and releases the batches held for completed nodes, but not the
  /// node in progress (its scratch may be in use): memory for a failed cudaMalloc.
  void reclaim();

 private:
  struct Held {
    std::vector<std::shared_ptr<array::Data>> data;
    std::vector<std::pair<void*, size_t>> scratch;
    std::vector<std::pair<void*, size_t>> pinned;
    std::vector<std::function<void()>> after;
  };
  void release(Held& h);
  // Releases every pending batch (the caller has synchronised the stream).
  void release_pending();

  int device_;
  cudaStream_t stream_{nullptr};
  Held current_;
  int tasks_{0};
  std::deque<std::pair<cudaEvent_t, Held>> pending_;
  std::vector<cudaEvent_t> free_events_;
};

/// The state of stream s (created on first use; only s's worker thread may use it).
StreamState& stream_state(Stream s);

/// The state of the node being evaluated on this thread (null outside gpu::eval tasks).
StreamState* current_state();
/// Marks the node being evaluated on this thread (gpu::eval's task; null when it ends).
void set_current_state(StreamState* s);

} // namespace nuvec::cu
