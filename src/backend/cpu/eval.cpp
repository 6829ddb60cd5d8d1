// nuvec: CPU node execution. A kernel error cannot propagate from a worker thread, so it goes
// through the kernel-error channel (core/kernel_errors.h): recorded with its type, the outputs
// zeroed, rethrown by the next eval on the host.
#include "backend/cpu/eval.h"

#include "core/kernel_errors.h"
#include "core/scheduler.h"
#include "nuvec/primitives.h"

namespace nuvec::cpu {

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

} // namespace nuvec::cpu
