// nuvec: stream workers and the registry of streams (MLX 0.32's stream and scheduler rules:
// per-thread default streams, new_stream streams tied to their thread, thread-unsafe and
// thread-local streams, clear_streams; see nuvec/stream.h). A stream's worker thread starts
// on its first task, as MLX's scheduler does, so making a stream costs no thread.
#include "core/scheduler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "nuvec/event.h"

namespace nuvec {

namespace {

thread_local bool tls_on_worker = false;

// One worker thread draining a FIFO of tasks. stop() lets it finish what is queued and end.
// A worker that replaces a stopped one of the same stream starts on its tasks only once the
// old one has finished (`after`), so the stream keeps its order.
class StreamWorker {
 public:
  explicit StreamWorker(std::shared_future<void> after)
      : after_(std::move(after)), thread_([this] { run(); }) {}
  ~StreamWorker() {
    stop();
    join();
  }

  // Queues the task (moving from it) unless the worker was stopped; returns whether it did.
  // The worker is woken only when it sleeps: while it spins (see loop) or runs, the queue
  // alone reaches it, and the enqueuing thread pays no futex call.
  bool enqueue(std::function<void()>& task) {
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mtx_);
      if (stop_) return false;
      q_.push_back(std::move(task));
      queued_.store(true, std::memory_order_release);
      wake = sleeping_;
    }
    if (wake) cv_.notify_one();
    return true;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mtx_);
      stop_ = true;
      queued_.store(true, std::memory_order_release);
    }
    cv_.notify_one();
  }

  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Ready once the worker has run its last task.
  std::shared_future<void> finished() const { return finished_; }

  // Whether the calling thread is this worker's.
  bool is_current() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run() {
    tls_on_worker = true;
    if (after_.valid()) after_.wait();
    loop();
    done_.set_value();
  }

  void loop() {
    std::deque<std::function<void()>> batch;
    for (;;) {
      // An eval hands over a node every few microseconds: spinning briefly for the next one
      // costs less than sleeping and being woken (a futex call on each side per node).
      const auto spin_until = std::chrono::steady_clock::now() + spin_time();
      while (!queued_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until) {
        cpu_relax();
      }
      {
        std::unique_lock<std::mutex> lk(mtx_);
        sleeping_ = true;
        cv_.wait(lk, [this] { return stop_ || !q_.empty(); });
        sleeping_ = false;
        if (q_.empty() && stop_) return;
        // Take everything queued at once: one lock per batch, not per task.
        std::swap(batch, q_);
        queued_.store(false, std::memory_order_relaxed);
      }
      while (!batch.empty()) {
        auto task = std::move(batch.front());
        batch.pop_front();
        task();
      }
    }
  }

  static std::chrono::microseconds spin_time() {
    static const std::chrono::microseconds t = [] {
      const char* v = std::getenv("NUVEC_WORKER_SPIN_US");
      return std::chrono::microseconds(v ? std::max(0, std::atoi(v)) : 50);
    }();
    return t;
  }
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  std::atomic<bool> queued_{false}; // q_ is not empty (read without the lock while spinning)
  bool sleeping_{false};            // the worker waits on cv_ (under mtx_)
  bool stop_{false};
  std::shared_future<void> after_;
  std::promise<void> done_;
  std::shared_future<void> finished_{done_.get_future().share()};
  std::thread thread_; // last: starts once the members above exist
};

// What a stream index stands for.
enum class Kind {
  owned,  // made by a thread (default, new_stream, a thread-local stream's per-thread stream)
  shared, // new_thread_unsafe_stream: no owner
  handle, // new_thread_local_stream: resolved to a per-thread stream, never runs work itself
};

struct Record {
  Stream stream;
  Kind kind;
  // new_stream: only the owner may submit work, and not after clearing it (MLX's rule).
  // Default and thread-local streams are not strict: any thread may evaluate work recorded
  // on them, even after their thread cleared them (a worker is then started again on demand,
  // owned by the thread that needed it).
  bool strict;
  std::thread::id owner;
  bool cleared{false};
  std::shared_ptr<StreamWorker> worker; // null until the first task, and after clearing
  std::shared_future<void> previous;    // the cleared worker's end: a new one waits for it
};

struct Registry {
  std::shared_mutex mtx;
  std::vector<Record> records; // by stream index
  std::atomic<int> handles{0}; // thread-local handles made: to_stream resolves only then
};

Registry& registry() {
  // Leaked on purpose: workers may still run during static destruction of user objects.
  static Registry* r = new Registry();
  return *r;
}

// The record of s, or null for an unknown index or a device that does not match.
Record* find(Registry& r, const Stream& s) {
  if (s.index < 0 || s.index >= static_cast<int>(r.records.size())) return nullptr;
  Record& rec = r.records[s.index];
  return rec.stream == s ? &rec : nullptr;
}

std::string describe(const Stream& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void check_available(const Device& d, const char* op) {
  if (!is_available(d)) {
    std::ostringstream msg;
    msg << "[" << op << "] the device " << d
        << " is not available (no CUDA backend in this build, no CUDA device found, or an "
           "index other than 0).";
    throw std::invalid_argument(msg.str());
  }
}

bool is_main_thread() {
  return static_cast<pid_t>(syscall(SYS_gettid)) == getpid();
}

// The streams of one thread.
struct ThreadStreams {
  std::optional<Stream> default_cpu;
  std::optional<Stream> default_gpu;
  std::unordered_map<int, Stream> resolved; // thread-local handle index -> this thread's stream
  std::vector<int> made;                    // owned streams this thread made

  std::optional<Stream>& default_slot(Device::DeviceType t) {
    return t == Device::cpu ? default_cpu : default_gpu;
  }

  void clear() {
    auto& r = registry();
    std::vector<std::shared_ptr<StreamWorker>> workers;
    {
      std::unique_lock lk(r.mtx);
      for (int i : made) {
        Record& rec = r.records[i];
        rec.cleared = true;
        if (rec.worker) {
          rec.previous = rec.worker->finished();
          workers.push_back(std::move(rec.worker));
        }
      }
    }
    made.clear();
    default_cpu.reset();
    default_gpu.reset();
    resolved.clear();
    // Stop them all before joining any: a queued task may wait for another stream's signal.
    for (auto& w : workers) w->stop();
    for (auto& w : workers) w->join();
  }
};

// The state lives on the heap behind a trivially destructible pointer, so it stays valid for
// the main thread until the process ends (static destructors may still make arrays); other
// threads clear their streams when they exit.
thread_local ThreadStreams* tls_state = nullptr;

struct ThreadStreamsOwner {
  ThreadStreams* state = nullptr;
  ~ThreadStreamsOwner() {
    if (state && !is_main_thread()) {
      state->clear();
      delete state;
      tls_state = nullptr;
    }
  }
};
thread_local ThreadStreamsOwner tls_owner;

ThreadStreams& thread_streams() {
  if (!tls_state) {
    tls_state = new ThreadStreams();
    tls_owner.state = tls_state;
  }
  return *tls_state;
}

Stream make_stream(Device d, Kind kind, bool strict) {
  auto& r = registry();
  Stream s(0, d);
  {
    std::unique_lock lk(r.mtx);
    s.index = static_cast<int>(r.records.size());
    r.records.push_back(Record{s, kind, strict, std::this_thread::get_id(), false, nullptr, {}});
    if (kind == Kind::handle) r.handles.fetch_add(1, std::memory_order_release);
  }
  if (kind == Kind::owned) thread_streams().made.push_back(s.index);
  return s;
}

// A thread-local handle stands for the calling thread's stream for it; any other stream for
// itself.
Stream resolve(const Stream& s) {
  auto& r = registry();
  if (r.handles.load(std::memory_order_acquire) == 0) return s;
  {
    std::shared_lock lk(r.mtx);
    Record* rec = find(r, s);
    if (!rec || rec->kind != Kind::handle) return s;
  }
  return stream_from_thread_local_stream(ThreadLocalStream(s.index, s.device));
}

// At exit (registered when the first worker starts, so it runs before the libraries' own
// finalisers): waits for every worker to reach the end of what was queued so far, at most
// kExitDrain in all. A program may return from main with work in flight (an async_eval it
// never waited for); without this, a worker could still be inside OpenBLAS or the CUDA
// runtime while their teardown frees what it uses (a crash after a passing test). A worker
// blocked for good (a wait on a signal that never comes) costs the deadline, not a hang;
// exit called from a task leaves that task's own worker alone.
constexpr auto kExitDrain = std::chrono::seconds(2);
pid_t drain_pid = 0; // the process that registered drain_at_exit (a fork's child has no workers)

void drain_at_exit() {
  if (getpid() != drain_pid) return;
  std::vector<std::shared_ptr<StreamWorker>> workers;
  {
    auto& r = registry();
    std::shared_lock lk(r.mtx);
    for (auto& rec : r.records) {
      if (rec.worker) workers.push_back(rec.worker);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kExitDrain;
  std::vector<std::future<void>> reached;
  for (auto& w : workers) {
    if (tls_on_worker && w->is_current()) continue;
    auto mark = std::make_shared<std::promise<void>>();
    std::function<void()> task = [mark] { mark->set_value(); };
    std::future<void> f = mark->get_future();
    if (w->enqueue(task)) reached.push_back(std::move(f));
  }
  for (auto& f : reached) f.wait_until(deadline);
}

// The worker of s, started if it has none. Throws for an unknown stream or a cleared
// new_stream stream.
std::shared_ptr<StreamWorker> worker_for(const Stream& s) {
  auto& r = registry();
  auto usable = [&s](Record* rec) -> Record& {
    if (!rec || rec->kind == Kind::handle) {
      throw std::invalid_argument("[scheduler] unknown stream " + describe(s) + ".");
    }
    if (rec->strict && rec->cleared) {
      throw std::runtime_error(
          "[scheduler] " + describe(s) + " was cleared by clear_streams() in its thread.");
    }
    return *rec;
  };
  {
    std::shared_lock lk(r.mtx);
    Record& rec = usable(find(r, s));
    if (rec.worker) return rec.worker;
  }
  std::shared_ptr<StreamWorker> worker;
  bool adopt = false;
  {
    std::unique_lock lk(r.mtx);
    Record& rec = usable(find(r, s));
    if (!rec.worker) {
      static std::once_flag at_exit;
      std::call_once(at_exit, [] {
        drain_pid = getpid();
        std::atexit(drain_at_exit);
      });
      rec.worker = std::make_shared<StreamWorker>(rec.previous);
      // A cleared (non-strict) stream still in use: the thread using it takes it over, so
      // its clear_streams or exit ends the new worker. Worker threads own nothing.
      adopt = rec.cleared && !tls_on_worker;
      if (adopt) rec.cleared = false;
    }
    worker = rec.worker;
  }
  if (adopt) thread_streams().made.push_back(s.index);
  return worker;
}

// The stream of the innermost DefaultStreamScope on this thread.
thread_local std::optional<Stream> tls_scope_stream;

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
  Stream s = resolve(stream);
  // A worker refuses tasks only once its thread cleared it, after taking it out of the
  // record: the next lookup throws or starts a new worker.
  while (!worker_for(s)->enqueue(task)) {
  }
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

void check_stream_access(const Stream& s) {
  auto& r = registry();
  std::shared_lock lk(r.mtx);
  Record* rec = find(r, s);
  if (!rec || !rec->strict) return; // unknown streams fail when their work is enqueued
  if (rec->owner != std::this_thread::get_id()) {
    throw std::runtime_error(
        "[eval] There is no " + describe(s) +
        " in current thread: a stream from new_stream() runs work only for the thread that "
        "made it (new_thread_unsafe_stream() makes one any thread may use).");
  }
  if (rec->cleared) {
    throw std::runtime_error(
        "[eval] There is no " + describe(s) +
        " in current thread: clear_streams() ended it.");
  }
}

void wait_for_streams() {
  if (tls_on_worker) return;
  std::vector<std::shared_ptr<StreamWorker>> workers;
  {
    auto& r = registry();
    std::shared_lock lk(r.mtx);
    for (auto& rec : r.records) {
      if (rec.worker) workers.push_back(rec.worker);
    }
  }
  std::vector<std::future<void>> done;
  for (auto& w : workers) {
    auto p = std::make_shared<std::promise<void>>();
    auto f = p->get_future();
    std::function<void()> barrier = [p] { p->set_value(); };
    // A worker being cleared runs its queue to the end anyway.
    if (w->enqueue(barrier)) done.push_back(std::move(f));
  }
  for (auto& f : done) f.wait();
}

} // namespace scheduler

Stream default_stream(Device d) {
  auto& slot = thread_streams().default_slot(d.type);
  if (slot && slot->device == d) return *slot;
  check_available(d, "default_stream");
  if (!slot) slot = make_stream(d, Kind::owned, false);
  return *slot;
}

void set_default_stream(Stream s) {
  s = resolve(s);
  check_available(s.device, "set_default_stream");
  thread_streams().default_slot(s.device.type) = s;
}

Stream new_stream(Device d) {
  check_available(d, "new_stream");
  return make_stream(d, Kind::owned, true);
}

Stream new_thread_unsafe_stream(Device d) {
  check_available(d, "new_thread_unsafe_stream");
  return make_stream(d, Kind::shared, false);
}

ThreadLocalStream new_thread_local_stream(Device d) {
  check_available(d, "new_thread_local_stream");
  Stream s = make_stream(d, Kind::handle, false);
  return ThreadLocalStream(s.index, s.device);
}

Stream stream_from_thread_local_stream(ThreadLocalStream tls) {
  auto& ts = thread_streams();
  if (auto it = ts.resolved.find(tls.index); it != ts.resolved.end()) return it->second;
  {
    auto& r = registry();
    std::shared_lock lk(r.mtx);
    Record* rec = find(r, tls);
    if (!rec || rec->kind != Kind::handle) {
      throw std::invalid_argument(
          "[stream_from_thread_local_stream] " + describe(tls) +
          " was not made by new_thread_local_stream().");
    }
  }
  Stream s = make_stream(tls.device, Kind::owned, false);
  ts.resolved.emplace(tls.index, s);
  return s;
}

std::vector<Stream> get_streams() {
  auto& r = registry();
  std::shared_lock lk(r.mtx);
  std::vector<Stream> out;
  out.reserve(r.records.size());
  for (auto& rec : r.records) {
    if (rec.kind != Kind::handle) out.push_back(rec.stream);
  }
  return out;
}

void clear_streams() {
  thread_streams().clear();
}

void synchronize(Stream s) {
  s = resolve(s);
  Event e(s);
  e.set_value(1);
  e.signal(s);
  e.wait();
}

void synchronize(ThreadLocalStream s) {
  synchronize(stream_from_thread_local_stream(s));
}

void synchronize() {
  synchronize(default_stream(default_device()));
}

Stream to_stream(StreamOrDevice s) {
  if (tls_scope_stream && std::holds_alternative<std::monostate>(s)) return *tls_scope_stream;
  return to_stream(s, default_device());
}

Stream to_stream(StreamOrDevice s, Device default_) {
  if (std::holds_alternative<std::monostate>(s)) {
    if (tls_scope_stream && tls_scope_stream->device == default_) return *tls_scope_stream;
    return default_stream(default_);
  } else if (std::holds_alternative<Device>(s)) {
    return default_stream(std::get<Device>(s));
  }
  return resolve(std::get<Stream>(s));
}

namespace detail {

DefaultStreamScope::DefaultStreamScope(const Stream& s) : previous_(tls_scope_stream) {
  tls_scope_stream = s;
}

DefaultStreamScope::~DefaultStreamScope() {
  tls_scope_stream = previous_;
}

} // namespace detail

namespace {
Stream context_target(const StreamOrDevice& s) {
  if (std::holds_alternative<std::monostate>(s)) {
    throw std::runtime_error(
        "[StreamContext] Invalid argument, please specify a stream or device.");
  }
  return to_stream(s);
}
} // namespace

StreamContext::StreamContext(StreamOrDevice s)
    : previous_device_(default_device()),
      previous_stream_(default_stream(context_target(s).device)) {
  Stream target = to_stream(s);
  set_default_device(target.device);
  try {
    set_default_stream(target);
  } catch (...) {
    set_default_device(previous_device_);
    throw;
  }
}

StreamContext::~StreamContext() {
  set_default_stream(previous_stream_);
  set_default_device(previous_device_);
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

} // namespace nuvec
