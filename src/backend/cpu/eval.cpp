// nuvec: CPU node execution. A kernel error cannot propagate from a worker thread, so it is
// recorded with its type (std::exception_ptr), the outputs get fresh zeroed buffers (nothing
// reads unallocated or half-written memory), and the next eval on the host rethrows it.
#include "backend/cpu/eval.h"

#include <cstring>
#include <exception>
#include <mutex>

#include "core/scheduler.h"
#include "nuvec/primitives.h"

namespace nuvec::cpu {

namespace {
std::mutex error_mtx;
std::exception_ptr first_error;
} // namespace

void eval(array& arr) {
  Stream s = arr.primitive().stream();
  scheduler::notify_new_task(s);
  // The node is detached right after dispatch unless a transform keeps its graph, so its
  // inputs can be moved into the task instead of copied.
  std::vector<array> inputs = arr.is_tracer() ? arr.inputs() : std::move(arr.inputs());
  scheduler::enqueue(
      s,
      [p = arr.primitive_ptr(), inputs = std::move(inputs), outputs = arr.outputs(), s]() mutable {
        try {
          p->eval_cpu(inputs, outputs);
        } catch (...) {
          record_kernel_error(std::current_exception());
          // A kernel may have failed after allocating or partly writing (or sharing an
          // input's buffer); a new buffer leaves the inputs untouched.
          for (auto& o : outputs) {
            auto buf = allocator::malloc(o.nbytes());
            if (o.nbytes() > 0) std::memset(buf.raw_ptr(), 0, o.nbytes());
            o.set_data(buf);
          }
        }
        scheduler::notify_task_completion(s);
      });
}

void record_kernel_error(std::exception_ptr e) {
  std::lock_guard<std::mutex> lk(error_mtx);
  if (!first_error) first_error = std::move(e);
}

void rethrow_kernel_error() {
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(error_mtx);
    std::swap(err, first_error);
  }
  if (err) std::rethrow_exception(err);
}

} // namespace nuvec::cpu
