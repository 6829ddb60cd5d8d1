// nuvec: events (host-side for CPU and GPU streams): a counter with a condition variable, signaled and waited on through
// the stream workers (MLX's event semantics).
#include "nuvec/event.h"

#include <condition_variable>
#include <mutex>

#include "core/kernel_errors.h"
#include "backend/gpu.h"
#include "core/scheduler.h"

namespace nuvec {

namespace {
struct EventState {
  std::mutex mtx;
  std::condition_variable cv;
  uint64_t value{0};

  void signal(uint64_t v) {
    {
      std::lock_guard<std::mutex> lk(mtx);
      value = v;
    }
    cv.notify_all();
  }
  void wait(uint64_t v) {
    std::unique_lock<std::mutex> lk(mtx);
    cv.wait(lk, [&] { return value >= v; });
  }
};

EventState& state(const std::shared_ptr<void>& p) {
  return *static_cast<EventState*>(p.get());
}
} // namespace

Event::Event(Stream stream) : stream_(stream), event_(std::make_shared<EventState>()) {}

void Event::wait() {
  state(event_).wait(value_);
}

void Event::wait(Stream stream) {
  if (is_signaled()) return;
  scheduler::enqueue(stream, [ev = event_, v = value_] { state(ev).wait(v); });
}

void Event::signal(Stream stream) {
  // On a GPU stream the worker has only launched the kernels: the event may be signaled
  // once the device has run them, so the worker waits for the CUDA stream first.
  scheduler::enqueue(stream, [ev = event_, v = value_, stream] {
    if (stream.device == Device::gpu) {
      try {
        gpu::synchronize(stream);
      } catch (...) {
        // A failed device (an error surfacing at the sync) must still release the waiters;
        // the error reaches the host through the next eval.
        record_kernel_error(std::current_exception());
      }
    }
    state(ev).signal(v);
  });
}

bool Event::is_signaled() const {
  auto& s = state(event_);
  std::lock_guard<std::mutex> lk(s.mtx);
  return s.value >= value_;
}

} // namespace nuvec
