// nuvec: the per-stream workers. Each stream has one thread executing its tasks in FIFO
// order; eval counts tasks in flight so it can wait when memory is over the limit
// (MLX's scheduler, described in shared/seeds/004_*.txt).
#pragma once

#include <functional>

#include "nuvec/stream.h"

namespace nuvec::scheduler {

/// Runs `task` on the stream's worker, after everything enqueued before it.
void enqueue(const Stream& stream, std::function<void()> task);

/// Registers a task in flight (counted until notify_task_completion).
void notify_new_task(const Stream& stream);
void notify_task_completion(const Stream& stream);

/// Tasks in flight over all streams.
int n_active_tasks();

/// Blocks until at least one task in flight completes (returns at once when none are).
void wait_for_one();

/// Blocks until at most `target` tasks are in flight.
void wait_until_at_most(int target);

/// Whether the calling thread is a stream worker (kernels must not block on events there).
bool on_worker_thread();

} // namespace nuvec::scheduler
