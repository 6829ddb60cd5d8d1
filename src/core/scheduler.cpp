// nuvec: stream workers and the registry of streams (see scheduler.h).
#include "core/scheduler.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "nuvec/event.h"

namespace nuvec {

namespace {

thread_local bool tls_on_worker = false;

// One worker thread draining a FIFO of tasks.
class StreamWorker {
 public:
  StreamWorker() : thread_([this] { loop(); }) {}
  ~StreamWorker() {
    {
      std::lock_guard<std::mutex> lk(mtx_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lk(mtx_);
      q_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    tls_on_worker = true;
    std::deque<std::function<void()>> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mtx_);
        cv_.wait(lk, [this] { return stop_ || !q_.empty(); });
        if (q_.empty() && stop_) return;
        // Take everything queued at once: one lock per batch, not per task.
        std::swap(batch, q_);
      }
      while (!batch.empty()) {
        auto task = std::move(batch.front());
        batch.pop_front();
        task();
      }
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_{false};
  std::thread thread_;
};

struct Registry {
  std::mutex mtx;
  std::vector<Stream> streams;
  // One worker per stream: a CPU stream's runs its kernels, a GPU stream's launches them on
  // the stream's CUDA stream (src/backend/cuda/eval.cpp).
  std::vector<std::unique_ptr<StreamWorker>> workers;
  std::optional<Stream> default_cpu;
  std::optional<Stream> default_gpu;

  Stream make(Device d) {
    Stream s(static_cast<int>(streams.size()), d);
    streams.push_back(s);
    workers.push_back(std::make_unique<StreamWorker>());
    return s;
  }
};

Registry& registry() {
  // Leaked on purpose: workers may still run during static destruction of user objects.
  static Registry* r = new Registry();
  return *r;
}

std::atomic<int> active_tasks{0};
std::atomic<int> waiters{0};
// Completions notify only once the count reaches the highest level some waiter waits for,
// so a waiting scheduler is woken once per batch instead of once per finished task.
std::atomic<int> wake_at{-1};
std::mutex active_mtx;
std::condition_variable active_cv;

} // namespace

namespace scheduler {

void enqueue(const Stream& stream, std::function<void()> task) {
  StreamWorker* w;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lk(r.mtx);
    if (stream.index < 0 || stream.index >= static_cast<int>(r.workers.size()) ||
        !r.workers[stream.index]) {
      std::ostringstream msg;
      msg << "[scheduler] no worker for stream " << stream.index << ".";
      throw std::invalid_argument(msg.str());
    }
    w = r.workers[stream.index].get();
  }
  w->enqueue(std::move(task));
}

void notify_new_task(const Stream&) {
  active_tasks.fetch_add(1, std::memory_order_relaxed);
}

void notify_task_completion(const Stream&) {
  int left = active_tasks.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (waiters.load(std::memory_order_acquire) > 0 &&
      left <= wake_at.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(active_mtx);
    active_cv.notify_all();
  }
}

int n_active_tasks() {
  return active_tasks.load(std::memory_order_acquire);
}

void wait_until_at_most(int target) {
  if (n_active_tasks() <= target) return;
  std::unique_lock<std::mutex> lk(active_mtx);
  waiters.fetch_add(1);
  int seen = wake_at.load();
  while (seen < target && !wake_at.compare_exchange_weak(seen, target)) {
  }
  active_cv.wait(lk, [target] { return n_active_tasks() <= target; });
  if (waiters.fetch_sub(1) == 1) wake_at.store(-1);
}

void wait_for_one() {
  int current = n_active_tasks();
  if (current > 0) wait_until_at_most(current - 1);
}

bool on_worker_thread() {
  return tls_on_worker;
}

} // namespace scheduler

Stream default_stream(Device d) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mtx);
  auto& slot = d == Device::cpu ? r.default_cpu : r.default_gpu;
  if (!slot) {
    if (d == Device::gpu && !is_available(d)) {
      throw std::invalid_argument("[default_stream] no GPU is available (this build has no CUDA backend, or no CUDA device was found).");
    }
    slot = r.make(d);
  }
  return *slot;
}

void set_default_stream(Stream s) {
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mtx);
  (s.device == Device::cpu ? r.default_cpu : r.default_gpu) = s;
}

Stream new_stream(Device d) {
  if (!is_available(d)) {
    throw std::invalid_argument("[new_stream] the device is not available (no CUDA backend in this build, no CUDA device found, or a GPU index other than 0).");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lk(r.mtx);
  return r.make(d);
}

void synchronize(Stream s) {
  Event e(s);
  e.set_value(1);
  e.signal(s);
  e.wait();
}

void synchronize() {
  synchronize(default_stream(default_device()));
}

Stream to_stream(StreamOrDevice s) {
  return to_stream(s, default_device());
}

Stream to_stream(StreamOrDevice s, Device default_) {
  if (std::holds_alternative<std::monostate>(s)) {
    return default_stream(default_);
  } else if (std::holds_alternative<Device>(s)) {
    return default_stream(std::get<Device>(s));
  }
  return std::get<Stream>(s);
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

} // namespace nuvec
