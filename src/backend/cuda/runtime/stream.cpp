// nuvec: GPU streams. Each nuvec GPU stream's worker owns a non-blocking CUDA stream; nodes
// launch kernels there without waiting. A buffer a kernel uses must outlive the kernel, not
// just the node's task on the worker, so owners are held and released in batches once an
// event recorded after them has completed (a freed block may then be reused by any stream).
#include "backend/cuda/runtime/stream.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/runtime/allocator.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/gpu.h"

namespace nuvec::cu {

namespace {

// Nodes between two release events: an event per node would cost more than the kernels of
// small graphs, and holding a few dozen nodes' buffers costs little memory.
constexpr int kTasksPerEvent = 8;

thread_local StreamState* tl_current = nullptr;

} // namespace

StreamState::StreamState(int device) : device_(device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

StreamState::~StreamState() {
  // Streams live for the process; at exit the driver may already be gone, so errors are
  // ignored here.
  cudaStreamSynchronize(stream_);
  for (auto& [ev, held] : pending_) cudaEventDestroy(ev);
  for (auto ev : free_events_) cudaEventDestroy(ev);
  cudaStreamDestroy(stream_);
}

void StreamState::hold(std::shared_ptr<array::Data> data) {
  if (!data) return;
  (capture_ ? capture_->data : current_.data).push_back(std::move(data));
}

void StreamState::hold_scratch(void* ptr, size_t size) {
  (capture_ ? capture_->device_blocks : current_.scratch).emplace_back(ptr, size);
}

void StreamState::hold_pinned(void* ptr, size_t size) {
  (capture_ ? capture_->pinned : current_.pinned).emplace_back(ptr, size);
}

void StreamState::after_device(std::function<void()> f) {
  if (capture_) {
    throw std::runtime_error("[cuda graph] a node with a one-shot host callback cannot be captured.");
  }
  current_.after.push_back(std::move(f));
}

void StreamState::after_each_replay(std::function<void()> f, std::function<void()> release) {
  if (!capture_) throw std::logic_error("[cuda graph] after_each_replay outside a capture.");
  capture_->each_run.push_back(std::move(f));
  capture_->at_release.push_back(std::move(release));
}

void StreamState::begin_capture(CapturedResources* r) {
  capture_ = r;
  set_capture_allocations(r);
}

void StreamState::end_capture() {
  capture_ = nullptr;
  set_capture_allocations(nullptr);
}

void StreamState::lend(const array::Data* d, long n) {
  auto it = lent_.emplace(d, 0).first;
  it->second += n;
  if (it->second == 0) lent_.erase(it);
}

CapturedResources::~CapturedResources() {
  for (auto& f : at_release) f();
  data.clear();
  for (auto& [p, n] : device_blocks) device_free(p, n);
  for (auto& [p, n] : pinned) pinned_free(p, n);
}

void StreamState::release(Held& h) {
  // Moved out first: a batch must never run its callbacks twice (a second run would free
  // an index-error slot twice).
  auto after = std::move(h.after);
  h.after.clear();
  for (auto& f : after) f();
  h.data.clear();
  for (auto& [p, n] : h.scratch) device_free(p, n);
  h.scratch.clear();
  for (auto& [p, n] : h.pinned) pinned_free(p, n);
  h.pinned.clear();
}

long StreamState::holds_of(const array::Data* d) const {
  long n = 0;
  auto count = [&](const Held& h) {
    for (auto& p : h.data) n += p.get() == d;
  };
  count(current_);
  for (auto& [ev, h] : pending_) count(h);
  if (capture_) {
    for (auto& p : capture_->data) n += p.get() == d;
  }
  if (auto it = lent_.find(d); it != lent_.end()) n += it->second;
  return n + graph_reservations(this, d);
}

void StreamState::end_task() {
  if (++tasks_ >= kTasksPerEvent) {
    tasks_ = 0;
    cudaEvent_t ev;
    if (free_events_.empty()) {
      check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    } else {
      ev = free_events_.back();
      free_events_.pop_back();
    }
    check(cudaEventRecord(ev, stream_), "cudaEventRecord");
    pending_.emplace_back(ev, std::move(current_));
    current_ = Held{};
  }
  while (!pending_.empty()) {
    cudaError_t st = cudaEventQuery(pending_.front().first);
    if (st == cudaErrorNotReady) break;
    check(st, "cudaEventQuery");
    release(pending_.front().second);
    free_events_.push_back(pending_.front().first);
    pending_.pop_front();
  }
}

void StreamState::synchronize() {
  cudaError_t err = cudaStreamSynchronize(stream_);
  // At process exit the runtime may unload while a worker still finishes a signal: the
  // device work is moot then, and throwing on a worker would terminate the process.
  if (err == cudaErrorCudartUnloading) return;
  // After a device error nothing held will be used again: release it all before reporting,
  // or every later node would pile its buffers onto a stream that never drains.
  release_pending();
  release(current_);
  tasks_ = 0;
  check(err, "cudaStreamSynchronize");
}

void StreamState::reclaim() {
  if (cudaStreamSynchronize(stream_) != cudaSuccess) return; // reported by the next sync
  release_pending();
}

void StreamState::release_pending() {
  for (auto& [ev, held] : pending_) {
    release(held);
    free_events_.push_back(ev);
  }
  pending_.clear();
}

namespace {

struct Reservations {
  std::mutex mtx;
  std::map<std::pair<const StreamState*, const array::Data*>, long> count;
};

Reservations& reservations() {
  static auto* r = new Reservations(); // leaked: graphs may go during static destruction
  return *r;
}

} // namespace

void reserve_for_graph(const StreamState* st, const array::Data* d, long n) {
  auto& r = reservations();
  std::lock_guard<std::mutex> lk(r.mtx);
  auto it = r.count.emplace(std::make_pair(st, d), 0).first;
  it->second += n;
  if (it->second == 0) r.count.erase(it);
}

long graph_reservations(const StreamState* st, const array::Data* d) {
  auto& r = reservations();
  std::lock_guard<std::mutex> lk(r.mtx);
  auto it = r.count.find(std::make_pair(st, d));
  return it == r.count.end() ? 0 : it->second;
}

namespace {

struct States {
  std::mutex mtx;
  std::unordered_map<int, std::unique_ptr<StreamState>> by_index;
};

States& states() {
  // Leaked: worker threads may still run during static destruction.
  static auto* s = new States();
  return *s;
}

} // namespace

StreamState& stream_state(Stream s) {
  // Each worker serves one stream: remember its state instead of locking a map per node.
  thread_local StreamState* mine = nullptr;
  thread_local int mine_index = -1;
  if (mine && mine_index == s.index) return *mine;
  auto& all = states();
  std::lock_guard<std::mutex> lk(all.mtx);
  auto& st = all.by_index[s.index];
  if (!st) st = std::make_unique<StreamState>(s.device.index);
  mine = st.get();
  mine_index = s.index;
  return *st;
}


StreamState* current_state() {
  return tl_current;
}

cudaStream_t stream() {
  if (!tl_current) {
    throw std::runtime_error("[cuda] no GPU node is being evaluated on this thread.");
  }
  return tl_current->stream();
}

void* scratch(size_t bytes) {
  if (!tl_current) {
    throw std::runtime_error("[cuda] scratch memory is only available inside eval_gpu.");
  }
  void* p = device_malloc(bytes);
  tl_current->hold_scratch(p, bytes);
  return p;
}

void retain(const array& a) {
  if (tl_current) tl_current->hold(a.data_shared_ptr());
}

void set_current_state(StreamState* s) {
  tl_current = s;
}

} // namespace nuvec::cu
