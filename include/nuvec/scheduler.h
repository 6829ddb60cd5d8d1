// nuvec: the scheduler's public surface (MLX's scheduler.h functions): run a task on a
// stream's worker, and the count of tasks in flight that eval uses to bound its queue.
// Implemented in src/core/scheduler.cpp.
#pragma once

// MLX's public headers bring these in, and code written against MLX (its own tests among it)
// uses std::thread, std::promise, std::mutex, std::atomic and std::set<Stream> without
// including them.
#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "nuvec/stream.h"

namespace nuvec::scheduler {

/// Runs `task` on the stream's worker thread, after everything enqueued on it before (a
/// ThreadLocalStream: the calling thread's stream for it). Streams run concurrently with one
/// another. The task must not throw. Throws std::invalid_argument for an unknown stream,
/// std::runtime_error for a new_stream stream its thread has cleared.
void enqueue(const Stream& stream, std::function<void()> task);

/// Counts a task in flight from now until notify_task_completion (eval's bookkeeping).
void notify_new_task(const Stream& stream);
void notify_task_completion(const Stream& stream);

/// Tasks in flight over all streams.
int n_active_tasks();

/// Blocks until at least one task in flight completes (returns at once when none is).
void wait_for_one();

} // namespace nuvec::scheduler
