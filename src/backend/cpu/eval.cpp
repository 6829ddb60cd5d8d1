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
  auto task =
      [p = arr.primitive_ptr(), inputs = std::move(inputs), outputs = arr.outputs(), s]() mutable {
        try {
          p->eval_cpu(inputs, outputs);
        } catch (...) {
          record_kernel_error(std::current_exception());
          zero_failed_outputs(outputs);
        }
        scheduler::notify_task_completion(s);
      };
  // Detached before the worker can see the task: the worker's copies of the outputs read
  // their sibling lists when it releases them, and detaching empties those lists.
  if (!arr.is_tracer()) arr.detach();
  scheduler::enqueue(s, std::move(task));
}

void zero_failed_outputs(std::vector<array>& outputs) {
  for (auto& o : outputs) {
    try {
      // One zero broadcast over the shape (stride 0, as broadcast_to lays it out): a failed
      // node must not need a full-size buffer, since running out of memory is a common way
      // to fail. A new buffer also leaves inputs the kernel may have shared untouched.
      auto buf = allocator::malloc(o.itemsize());
      std::memset(buf.raw_ptr(), 0, o.itemsize());
      const bool dense = o.size() <= 1;
      o.set_data(buf, 1, Strides(o.ndim(), 0), array::Flags{dense, dense, dense});
    } catch (...) {
      // Not even one element: the error is already recorded; the output stays unreadable.
    }
  }
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
