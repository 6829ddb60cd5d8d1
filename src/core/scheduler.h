// nuvec: the per-stream workers, internal side. Each stream's worker thread runs its tasks in
// FIFO order; eval counts tasks in flight so it can wait when memory is over the limit (MLX's
// scheduler, shared/seeds/004_*.txt). The public half is nuvec/scheduler.h.
#pragma once

#include <mutex>
#include <optional>

#include "nuvec/scheduler.h"

namespace nuvec::scheduler {

/// Blocks until at most `target` tasks are in flight.
void wait_until_at_most(int target);

/// Whether the calling thread is a stream worker (kernels must not block on events there).
bool on_worker_thread();

/// Throws std::runtime_error unless the calling thread may submit work to s: a new_stream
/// stream only from the thread that made it and before that thread cleared it (MLX 0.32's
/// rule); other streams from any thread. eval checks every stream of a graph before it
/// schedules anything.
void check_stream_access(const Stream& s);

/// Blocks until every stream worker running now has finished what was queued on it at the
/// time of the call (clear_cache waits for kernels still using buffers). Returns at once on
/// a worker thread, which cannot wait for its own queue.
void wait_for_streams();

} // namespace nuvec::scheduler

namespace nuvec::detail {

/// Held while a thread walks, schedules and detaches a graph (eval_impl), and while a thread
/// reads or drops an array's event (array::wait, is_available): two threads may evaluate and
/// wait on one graph at once. Kernels never take it.
std::mutex& graph_mutex();

/// While alive, ops on the calling thread that are given neither a stream nor a device run on
/// `s` (ops given a device other than s's keep that device's default stream). Autodiff runs
/// each primitive's derivative rule in one, so the derivative graph stays on the primal's
/// stream, as MLX's rules do by passing their stream explicitly. Nests.
class DefaultStreamScope {
 public:
  explicit DefaultStreamScope(const Stream& s);
  ~DefaultStreamScope();
  DefaultStreamScope(const DefaultStreamScope&) = delete;
  DefaultStreamScope& operator=(const DefaultStreamScope&) = delete;

 private:
  std::optional<Stream> previous_;
};

} // namespace nuvec::detail
