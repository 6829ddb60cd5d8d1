// nuvec: running nodes on GPU streams. The stream's worker calls eval_gpu, which launches
// kernels and returns; the node's inputs and outputs are held until the device has run them.
// An exception is reported by the next eval on the host, as CPU kernel errors are, and the
// outputs get zeroed host buffers so that nothing reads unallocated memory.
#include <cstring>

#include "core/kernel_errors.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/runtime/stream.h"
#include "backend/gpu.h"
#include "core/host_profile.h"
#include "core/scheduler.h"
#include "nuvec/memory.h"
#include "nuvec/primitives.h"

namespace nuvec::gpu {

void eval(array& arr) {
  Stream s = arr.primitive().stream();
  scheduler::notify_new_task(s);
  std::vector<array> inputs = arr.is_tracer() ? arr.inputs() : std::move(arr.inputs());
  auto task =
      [p = arr.primitive_ptr(), inputs = std::move(inputs), outputs = arr.outputs(), s]() mutable {
        cu::StreamState* st = nullptr;
        const bool prof = host_profile::enabled();
        const double t0 = prof ? host_profile::now() : 0;
        try {
          st = &cu::stream_state(s);
          cu::set_current_state(st);
          p->eval_gpu(inputs, outputs);
          if (prof) host_profile::add(std::string("gpu eval ") + p->name(), host_profile::now() - t0);
        } catch (...) {
          record_kernel_error(std::current_exception());
          // Kernels launched before the failure may still write the outputs' device
          // buffers: hold them until the stream has run, then replace them.
          if (st) {
            for (auto& o : outputs) st->hold(o.data_shared_ptr());
          }
          zero_failed_outputs(outputs);
        }
        if (st) {
          for (auto& in : inputs) st->hold(in.data_shared_ptr());
          for (auto& o : outputs) st->hold(o.data_shared_ptr());
          try {
            st->end_task();
            // Over the memory limit, release what this stream holds now rather than a
            // batch later: eval's own check runs ahead of the worker and cannot see it.
            if (get_active_memory() > get_memory_limit()) st->synchronize();
          } catch (...) {
            record_kernel_error(std::current_exception());
          }
        }
        cu::set_current_state(nullptr);
        scheduler::notify_task_completion(s);
        if (prof) host_profile::add("gpu task (all)", host_profile::now() - t0);
      };
  // Detached before the worker can see the task: the worker's copies of the outputs read
  // their sibling lists when it releases them, and detaching empties those lists.
  if (!arr.is_tracer()) arr.detach();
  const double t0 = host_profile::enabled() ? host_profile::now() : 0;
  scheduler::enqueue(s, std::move(task));
  if (t0) host_profile::add("gpu enqueue", host_profile::now() - t0);
}

void finalize(Stream s) {
  // Kernels are submitted as they are launched, so there is nothing to flush; what eval
  // needs when memory is over the limit is the buffers the stream still holds for running
  // kernels. A task that waits for the device and releases them, counted as work in flight
  // so that eval's wait covers it.
  scheduler::notify_new_task(s);
  scheduler::enqueue(s, [s] {
    try {
      cu::stream_state(s).synchronize();
    } catch (...) {
      record_kernel_error(std::current_exception());
    }
    scheduler::notify_task_completion(s);
  });
}

void synchronize(Stream s) {
  // Called on s's worker (Event::signal), so the state is this thread's to use.
  cu::stream_state(s).synchronize();
}

} // namespace nuvec::gpu
