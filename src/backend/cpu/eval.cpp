// nuvec: CPU node execution. A kernel error cannot propagate from a worker thread, so it is
// recorded, the outputs get zeroed buffers (nothing reads unallocated memory), and the next
// eval on the host rethrows it.
#include "backend/cpu/eval.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/scheduler.h"
#include "nuvec/primitives.h"

namespace nuvec::cpu {

namespace {
std::mutex error_mtx;
std::optional<std::string> first_error;
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
        } catch (const std::exception& e) {
          {
            std::lock_guard<std::mutex> lk(error_mtx);
            if (!first_error) first_error = std::string(e.what());
          }
          for (auto& o : outputs) {
            if (!o.data_shared_ptr()) {
              auto buf = allocator::malloc(o.nbytes());
              std::memset(buf.raw_ptr(), 0, o.nbytes());
              o.set_data(buf);
            }
          }
        }
        scheduler::notify_task_completion(s);
      });
}

void rethrow_kernel_error() {
  std::optional<std::string> err;
  {
    std::lock_guard<std::mutex> lk(error_mtx);
    err.swap(first_error);
  }
  if (err) throw std::runtime_error(*err);
}

} // namespace nuvec::cpu
