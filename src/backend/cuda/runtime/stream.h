// nuvec: the state of one nuvec GPU stream on its worker thread: the CUDA stream its kernels
// go to, and the buffers kept alive until the device has executed the kernels using them.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec::cu {

/// What a CUDA graph captured on a stream keeps for as long as it may be replayed: the
/// buffers its kernels read and write (node outputs, scratch, staging blocks), the device
/// blocks freed while it was captured (their addresses are baked into it, so they must not
/// go back to the cache), and the host checks to repeat after each replay. Destroyed only
/// once no replay is in flight; then everything goes back to the allocators.
struct CapturedResources {
  std::vector<std::shared_ptr<array::Data>> data;
  std::vector<std::pair<void*, size_t>> device_blocks;
  std::vector<std::pair<void*, size_t>> pinned;
  /// Run on the stream's worker after each replay's device work (index range checks).
  std::vector<std::function<void()>> each_run;
  /// Run when the graph goes (returns what each_run reads).
  std::vector<std::function<void()>> at_release;
  /// Device blocks handed out while capturing (allocator.cpp defers their frees).
  std::unordered_set<void*> allocated;

  CapturedResources() = default;
  CapturedResources(const CapturedResources&) = delete;
  CapturedResources& operator=(const CapturedResources&) = delete;
  ~CapturedResources();
};

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
  /// donation candidates, a few per decode layer), counting a capture's holds, owners lent
  /// by the node being evaluated and captured graphs' reservations.
  long holds_of(const array::Data* d) const;
  /// Counts n more owners of d as held by this stream until lent again with -n: the node
  /// being evaluated says an owner is its own input, so that an op it runs inside may still
  /// donate the buffer (graph_replay.cpp runs a whole compiled tape in one node).
  void lend(const array::Data* d, long n);

  /// Starts routing what nodes hold (hold, hold_scratch, hold_pinned, and the device blocks
  /// allocated or freed on this thread) into r: the stream is being captured into a CUDA
  /// graph, whose replays will use those addresses again. after_device throws meanwhile (a
  /// one-shot host callback cannot follow a graph); use after_each_replay.
  void begin_capture(CapturedResources* r);
  void end_capture();
  bool capturing() const { return capture_ != nullptr; }
  /// While capturing: f runs after every replay's device work; release when the graph goes.
  void after_each_replay(std::function<void()> f, std::function<void()> release);
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
  CapturedResources* capture_{nullptr};
  std::unordered_map<const array::Data*, long> lent_;
};

/// Buffers captured CUDA graphs bake in as inputs (graph_replay.cpp): such a graph reads or
/// writes the buffer only when replayed on its stream, after its own checks, so on that
/// stream its reservation is not a reader that must block writing the buffer in place
/// (holds_of counts the stream's own reservations; another stream's count as readers).
void reserve_for_graph(const StreamState* st, const array::Data* d, long n);
long graph_reservations(const StreamState* st, const array::Data* d);

/// The state of stream s (created on first use; only s's worker thread may use it).
StreamState& stream_state(Stream s);

/// The state of the node being evaluated on this thread (null outside gpu::eval tasks).
StreamState* current_state();
/// Marks the node being evaluated on this thread (gpu::eval's task; null when it ends).
void set_current_state(StreamState* s);

} // namespace nuvec::cu
