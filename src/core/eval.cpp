// nuvec: eval and async_eval: count consumers by an explicit-stack DFS, build the tape
// breadth first under a width limit, then hand nodes to their streams in dependency order,
// with events between streams and a wait when memory is over the limit (the algorithm of
// MLX's eval_impl, shared/seeds/004_*.txt).
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <stack>
#include <unordered_map>

#include "backend/cpu/eval.h"
#include "core/kernel_errors.h"
#include "backend/gpu.h"
#include "core/id_map.h"
#include "core/host_profile.h"
#include "core/scheduler.h"
#include "nuvec/memory.h"
#include "nuvec/primitives.h"
#include "nuvec/transforms.h"
#include "transforms/trace.h"

namespace nuvec {

namespace {

// Bound on queued tasks: keeps the tape's temporaries from piling up ahead of the workers.
constexpr int kMaxActiveTasks = 4096;

int bfs_max_width() {
  static int width = [] {
    const char* v = std::getenv("NUVEC_BFS_MAX_WIDTH");
    int w = v ? std::atoi(v) : 20;
    return w > 0 ? w : 20;
  }();
  return width;
}

// The root of a tape: a no-op node whose inputs are the outputs to evaluate, so one event
// on its stream tells when everything is done.
class Synchronizer : public Primitive {
 public:
  explicit Synchronizer(Stream stream) : Primitive(stream) {}
  void eval_cpu(const std::vector<array>&, std::vector<array>&) override {}
  void eval_gpu(const std::vector<array>&, std::vector<array>&) override {}
  std::vector<array> jvp(
      const std::vector<array>&,
      const std::vector<array>&,
      const std::vector<int>&) override {
    throw std::invalid_argument("[Synchronizer] has no derivative.");
  }
  std::vector<array> vjp(
      const std::vector<array>&,
      const std::vector<array>&,
      const std::vector<int>&,
      const std::vector<array>&) override {
    throw std::invalid_argument("[Synchronizer] has no derivative.");
  }
  std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>&,
      const std::vector<int>&) override {
    throw std::invalid_argument("[Synchronizer] cannot be batched.");
  }
  bool is_equivalent(const Primitive&) const override { return false; }
  std::vector<Shape> output_shapes(const std::vector<array>&) override { return {Shape{}}; }
  const char* name() const override { return "Synchronizer"; }
};

} // namespace

// Walking, scheduling and detaching a graph is one thread's at a time: two threads that
// evaluate one unevaluated graph at once must not both schedule (or one detach under the
// other) a shared node. The second finds the nodes the first scheduled and waits on their
// events. Kernels run outside this lock, on the stream workers, which never evaluate.
std::mutex& detail::graph_mutex() {
  static std::mutex m;
  return m;
}

namespace {

array eval_impl(std::vector<array> outputs, bool async) {
  std::lock_guard<std::mutex> scheduling(detail::graph_mutex());
  const bool prof = host_profile::enabled();
  const double t_start = prof ? host_profile::now() : 0;
  double t_dispatch = 0;
  Stream stream = default_stream(default_device());
  for (auto& o : outputs) {
    if (o.status() == array::Status::unscheduled && o.has_primitive()) {
      stream = o.primitive().stream();
      break;
    }
  }

  // Inputs consumed on a stream other than their producer's, and that producer stream.
  std::unordered_map<std::uintptr_t, Stream> needs_fence;
  array synchronizer(Shape{}, bool_, std::make_shared<Synchronizer>(stream), std::move(outputs));

  std::deque<array> tape;
  {
    // Consumers per unscheduled node (siblings share their count).
    detail::IdMap<int> degree;
    std::stack<std::pair<std::reference_wrapper<array>, size_t>> dfs;
    dfs.emplace(synchronizer, 0);
    while (!dfs.empty()) {
      auto& [a_ref, idx] = dfs.top();
      array& a = a_ref.get();
      if (idx < a.inputs().size()) {
        array& in = a.inputs()[idx++];
        if (in.status() == array::Status::unscheduled) {
          if (async && in.is_tracer()) {
            throw std::invalid_argument("[async_eval] Not allowed inside a graph transformation.");
          }
          if (!in.has_primitive()) {
            if (in.is_tracer()) {
              throw std::invalid_argument(
                  "[eval] Attempting to eval an array during function transformations "
                  "like vmap is not allowed.");
            }
            throw std::runtime_error("[eval] Attempting to eval an array without a primitive.");
          }
          if (a.primitive().stream() != in.primitive().stream()) {
            needs_fence.emplace(in.id(), in.primitive().stream());
          }
        }
        auto [count, inserted] = degree.try_emplace(in.id(), 1);
        if (inserted) {
          for (auto& s : in.siblings()) degree.try_emplace(s.id(), 1);
          dfs.emplace(in, 0);
        } else {
          ++*count;
          for (auto& s : in.siblings()) ++*degree.try_emplace(s.id(), 0).first;
        }
        continue;
      }
      if (a.status() != array::Status::unscheduled && !a.is_tracer() && a.has_primitive()) {
        a.detach(); // evaluated earlier and no transform needs its graph
      }
      dfs.pop();
    }

    // Breadth first, but when the frontier is wider than the limit, go depth first for a
    // while: this bounds how many intermediates are alive at once.
    const size_t max_width = bfs_max_width();
    std::stack<std::pair<std::reference_wrapper<array>, size_t>> deferred;
    tape.push_back(synchronizer);
    for (size_t i = 0; !degree.empty() && (i < tape.size() || !deferred.empty());) {
      size_t j = 0;
      array* ap;
      if (i >= tape.size()) {
        ap = &deferred.top().first.get();
        j = deferred.top().second;
        deferred.pop();
      } else {
        ap = &tape[i++];
      }
      array& a = *ap;
      for (; j < a.inputs().size(); ++j) {
        array& in = a.inputs()[j];
        if (in.status() != array::Status::unscheduled) continue;
        if (tape.size() - i >= max_width) {
          deferred.emplace(a, j);
          break;
        }
        int* count = degree.find(in.id());
        if (--*count != 0) {
          for (auto& s : in.siblings()) --*degree.try_emplace(s.id(), 0).first;
          continue;
        }
        degree.erase(in.id());
        for (auto& s : in.siblings()) degree.erase(s.id());
        tape.push_back(in);
      }
    }
  }

  // Refuse streams this thread may not use (another thread's new_stream) before anything
  // is scheduled, so a refused graph leaves no task or event behind.
  {
    std::vector<int> checked;
    for (auto& a : tape) {
      const Stream& s = a.primitive().stream();
      if (std::find(checked.begin(), checked.end(), s.index) == checked.end()) {
        scheduler::check_stream_access(s);
        checked.push_back(s.index);
      }
    }
  }

  const double t_walked = prof ? host_profile::now() : 0;
  const long n_nodes = static_cast<long>(tape.size());
  if (prof) host_profile::add("eval walk (per eval)", t_walked - t_start);
  std::unordered_map<int, Event> events;
  events.emplace(stream.index, Event(stream));
  std::unordered_map<std::uintptr_t, Event> fences;

  // If scheduling stops part-way (a stream refused at enqueue, say), the nodes queued so
  // far already carry this eval's events: signal them on the way out, or waiting on those
  // nodes later would block forever.
  try {
    while (!tape.empty()) {
      array arr = std::move(tape.back());
      tape.pop_back();
      Stream s = arr.primitive().stream();

      auto e = events.find(s.index);
      if (e == events.end()) e = events.emplace(s.index, Event(s)).first;
      e->second.set_value(1);
      arr.attach_event(e->second);
      for (auto& sib : arr.siblings()) sib.attach_event(e->second);

      for (auto& in : arr.inputs()) {
        if (auto f = fences.find(in.id()); f != fences.end()) {
          f->second.wait(s); // produced on another stream in this eval
        } else if (in.event().valid()) {
          if (in.event().is_signaled()) {
            in.detach_event();
          } else if (in.event().stream() != s) {
            in.event().wait(s); // produced by an earlier async_eval on another stream
          }
        }
      }

      // The backends detach arr (unless it is a tracer) before its task is queued.
      std::vector<array> outs = arr.outputs();
      const double t_d = prof ? host_profile::now() : 0;
      if (arr.primitive().device() == Device::gpu) {
        gpu::eval(arr);
      } else {
        cpu::eval(arr);
      }
      if (prof) t_dispatch += host_profile::now() - t_d;

      const bool over_memory = get_active_memory() > get_memory_limit();
      if (over_memory) {
        // A GPU stream's worker finishes its tasks at launch, but the buffers stay held until
        // the device has run them: have it wait for the device and release them.
        for (auto& [_, ev] : events) {
          if (ev.stream().device == Device::gpu) gpu::finalize(ev.stream());
        }
      }
      if (scheduler::n_active_tasks() > kMaxActiveTasks ||
          (over_memory && scheduler::n_active_tasks() > 0)) {
        if (scheduler::n_active_tasks() > kMaxActiveTasks) {
          // Let the workers drain half the queue before scheduling more: waiting for a single
          // task here made the scheduler and a worker wake each other once per node.
          scheduler::wait_until_at_most(kMaxActiveTasks / 2);
        } else {
          scheduler::wait_for_one();
        }
        while (get_active_memory() > get_memory_limit() && scheduler::n_active_tasks() > 0) {
          scheduler::wait_for_one();
        }
      }

      auto fence_if_needed = [&](const array& a) {
        if (needs_fence.count(a.id())) {
          Event f(s);
          f.set_value(1);
          f.signal(s);
          fences.emplace(a.id(), std::move(f));
        }
      };
      for (auto& o : outs) {
        o.set_status(array::Status::evaluated);
        fence_if_needed(o);
      }
    }

  } catch (...) {
    for (auto& [_, e] : events) {
      try {
        e.signal(e.stream());
      } catch (...) {
        // an event of the refused stream itself: nothing was queued there
      }
    }
    throw;
  }

  // A GPU stream's signal waits for the device first (Event::signal).
  for (auto& [_, e] : events) e.signal(e.stream());
  if (prof) {
    const double t_end = host_profile::now();
    host_profile::add("eval schedule (per node)", t_end - t_walked - t_dispatch, n_nodes);
    host_profile::add("eval dispatch (per node)", t_dispatch, n_nodes);
  }
  return synchronizer;
}

} // namespace

void async_eval(std::vector<array> outputs) {
  if (outputs.empty()) return;
  bool any = false;
  for (auto& x : outputs) any |= x.status() == array::Status::unscheduled;
  if (!any) return;
  eval_impl(std::move(outputs), true);
}

void eval(std::vector<array> outputs) {
  if (outputs.empty()) return;
  bool any = false;
  for (auto& x : outputs) any |= x.status() == array::Status::unscheduled;
  if (any) {
    eval_impl(std::move(outputs), false).event().wait();
  } else {
    for (auto& x : outputs) x.wait(); // scheduled already (async_eval)
  }
  // Either way a kernel error of theirs is rethrown here, or the caller would read a failed
  // node's zeros without an exception.
  rethrow_kernel_error();
}

} // namespace nuvec
