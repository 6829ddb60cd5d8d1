// nuvec: the CPU thread pool (thread_pool.h). A job is a shared block with its own task
// counter: workers take a reference under the pool's lock when they wake, so a worker that
// wakes late for a finished job finds its counter past the end and never calls its function,
// whose storage belongs to the (returned) caller.
#include "backend/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nuvec::cpu {

namespace {

thread_local bool in_task = false; // set while this thread runs a pool task
// A child of fork() has none of the parent's workers: its jobs run inline.
std::atomic<bool> forked_child{false};

struct Job {
  const std::function<void(size_t)>* task;
  size_t tasks;
  std::atomic<size_t> next{0};     // the next task index to claim
  std::atomic<size_t> finished{0}; // tasks run to the end
  std::mutex error_mtx;
  std::exception_ptr error;

  // Claims and runs tasks until none is left; true when this call ran the job's last task.
  bool drain() {
    bool last = false;
    for (size_t i; (i = next.fetch_add(1)) < tasks;) {
      in_task = true;
      try {
        (*task)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mtx);
        if (!error) error = std::current_exception();
      }
      in_task = false;
      last = finished.fetch_add(1) + 1 == tasks;
    }
    return last;
  }
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    pthread_atfork(nullptr, nullptr, [] { forked_child = true; });
    for (int t = 1; t < threads; ++t) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (...) {
        break; // fewer threads than asked for: the pool still works, with what it has
      }
    }
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(size_t tasks, const std::function<void(size_t)>& task) {
    std::unique_lock<std::mutex> owner(run_mtx_, std::try_to_lock);
    auto job = std::make_shared<Job>();
    job->task = &task;
    job->tasks = tasks;
    if (tasks <= 1 || workers_.empty() || in_task || forked_child || !owner.owns_lock()) {
      // Inline, with the same contract: every task runs, the first error is rethrown.
      const bool nested = in_task;
      job->drain();
      in_task = nested;
      if (job->error) std::rethrow_exception(job->error);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mtx_);
      job_ = job;
      ++generation_;
    }
    wake_.notify_all();
    job->drain();
    {
      std::unique_lock<std::mutex> lk(mtx_);
      done_.wait(lk, [&] { return job->finished.load() == tasks; });
      job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  void work() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(mtx_);
        wake_.wait(lk, [&] { return generation_ != seen; });
        seen = generation_;
        job = job_;
      }
      if (job && job->drain()) {
        std::lock_guard<std::mutex> lk(mtx_); // the caller checks `finished` under this lock
        done_.notify_all();
      }
    }
  }

  std::mutex run_mtx_; // held by the caller whose job runs; others run inline
  std::mutex mtx_;
  std::condition_variable wake_, done_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  std::vector<std::thread> workers_;
};

ThreadPool& pool() {
  // Never destroyed: workers may still be parked at exit, and a stream thread may still be
  // running a CPU kernel while static destructors run.
  static ThreadPool* p = new ThreadPool(num_threads());
  return *p;
}

} // namespace

int num_threads() {
  static const int n = [] {
    if (const char* env = std::getenv("NUVEC_NUM_THREADS")) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min(v, 1024L));
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return n;
}

void run_tasks(size_t tasks, const std::function<void(size_t)>& task) {
  pool().run(tasks, task);
}

void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f) {
  grain = std::max<size_t>(grain, 64);
  size_t chunks = std::min<size_t>(static_cast<size_t>(num_threads()), n / grain);
  if (chunks <= 1) {
    f(0, n);
    return;
  }
  // Chunk boundaries on multiples of 64 elements, the last chunk taking the remainder.
  size_t per = ((n + chunks - 1) / chunks + 63) & ~size_t(63); // at most `chunks` of them
  chunks = (n + per - 1) / per;
  run_tasks(chunks, [&](size_t c) { f(c * per, std::min(n, (c + 1) * per)); });
}

} // namespace nuvec::cpu
