// nuvec: GraphReplay on a GPU stream (include/nuvec/compile.h): a compiled tape evaluated in
// one node — node by node on its first call, captured as a CUDA graph on its second (the
// first has uploaded the constants, made cuBLASLt's choices and grown the caches), replayed
// with one cudaGraphLaunch after that. Why: an LLM's decode step is ~700 small kernels, and
// launched a node at a time the host's cost per node (scheduling, checks, cuBLASLt's
// heuristics, the launch itself) is several times the device's.
//
// A captured graph bakes in addresses: the inputs' buffers at capture and every block the
// nodes allocated. So the graph owns those (CapturedResources), a replay copies an input whose
// buffer moved into the captured one (only when nothing else can see that one), and outputs
// are copied out into fresh buffers, since the next replay rewrites the captured ones —
// except outputs the tape computed in place of an input (buffer donation: a KV cache updated
// by slice_update or paged_write), which are handed out in that input's buffer: passed back
// in, as state is, they need no copy, and the replay updates them in place again once
// nothing else can see them. Whatever a replay cannot honour runs the nodes instead.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/common/donation.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/runtime/stream.h"
#include "backend/gpu.h"
#include "compile/graph.h"
#include "core/host_profile.h"

namespace nuvec::cu {

namespace {

struct CapturedGraph {
  const StreamState* stream = nullptr; // whose reservations in_bufs are
  cudaGraphExec_t exec = nullptr;
  std::vector<array> in_bufs; // views holding the captured inputs' buffers
  std::vector<void*> in_ptrs;
  std::vector<bool> written; // the graph writes input k's buffer (donated to a node)
  struct Output {
    int alias = -1; // the input whose buffer holds it, or -1: copied out of ptr
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  std::vector<Output> outs;
  CapturedResources res;

  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    for (auto& b : in_bufs) reserve_for_graph(stream, b.data_shared_ptr().get(), -1);
  }
};

struct TapeState {
  int runs = 0;
  bool capturable = true;
  std::shared_ptr<CapturedGraph> graph;
};

bool dense(const array& a) {
  return a.flags().row_contiguous && a.data_size() == a.size();
}

// Owners of a's buffer other than `mine` handles of the caller's, this stream's holds and
// captured graphs' reservations (the graphs' own views of their inputs: StreamState::holds_of).
long foreign_owners(const array& a, long mine, StreamState& st) {
  const array::Data* raw = a.data_shared_ptr().get();
  return a.buffer_owners() - mine - st.holds_of(raw);
}

// Lends the node's own inputs (StreamState::lend) for as long as it lives.
class Lent {
 public:
  explicit Lent(StreamState& st) : st_(st) {}
  ~Lent() {
    for (auto* d : data_) st_.lend(d, -1);
  }
  void add(const array::Data* d) {
    st_.lend(d, 1);
    data_.push_back(d);
  }

 private:
  StreamState& st_;
  std::vector<const array::Data*> data_;
};

// Runs the tape's nodes with `inputs` standing for the trace inputs; returns the arrays
// standing for the trace outputs. A value is dropped at its last read, so that the reading
// node's input list holds its only handle and the node may donate its buffer; the node's
// inputs that nothing outside it sees are lent to the stream for the same reason. Every
// output is held by the stream (while capturing: by the graph) for its kernels.
// With `donated`, the inputs whose whole buffer a node's output took over are added to it.
std::vector<array> run_nodes(const detail::ReplayTape& t, const std::vector<array>& inputs, StreamState& st,
                             std::unordered_set<const array::Data*>* donated = nullptr) {
  std::unordered_map<std::uintptr_t, int> reads;
  for (auto& a : t.tape) {
    if (a.has_primitive()) {
      for (auto& in : a.inputs()) ++reads[in.id()];
    }
  }
  for (auto& o : t.outputs) ++reads[o.id()];

  Lent lent(st);
  std::unordered_map<std::uintptr_t, array> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array v(inputs[i].shape(), inputs[i].dtype(), nullptr, {});
    v.copy_shared_buffer(inputs[i]);
    if (inputs[i].is_sole_handle()) lent.add(inputs[i].data_shared_ptr().get());
    values.insert_or_assign(t.inputs[i].id(), std::move(v));
  }
  for (auto& a : t.tape) {
    if (!a.has_primitive()) {
      // A constant (inputs are in already): its buffer must outlive the kernels reading it
      // (the tape that owns it may go first), and a captured graph keeps reading it.
      if (values.emplace(a.id(), a).second) st.hold(a.data_shared_ptr());
      continue;
    }
    std::vector<array> ins;
    ins.reserve(a.inputs().size());
    for (auto& in : a.inputs()) {
      auto it = values.find(in.id());
      if (--reads[in.id()] == 0) {
        ins.push_back(std::move(it->second));
        values.erase(it);
      } else {
        ins.push_back(it->second);
      }
    }
    const std::vector<array> trace_outs = a.outputs();
    std::vector<array> outs;
    outs.reserve(trace_outs.size());
    for (auto& o : trace_outs) outs.push_back(array(o.shape(), o.dtype(), nullptr, {}));
    a.primitive().eval_gpu(ins, outs);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (donated) {
        for (auto& in : inputs) {
          if (outs[k].data_shared_ptr() == in.data_shared_ptr() && donation_layout_ok(in, outs[k])) {
            donated->insert(in.data_shared_ptr().get());
          }
        }
      }
      st.hold(outs[k].data_shared_ptr());
      if (reads[trace_outs[k].id()] > 0) values.insert_or_assign(trace_outs[k].id(), std::move(outs[k]));
    }
  }
  std::vector<array> results;
  results.reserve(t.outputs.size());
  for (auto& o : t.outputs) results.push_back(values.at(o.id()));
  return results;
}

void run_eager(const detail::ReplayTape& t, const std::vector<array>& inputs, std::vector<array>& outputs,
               StreamState& st) {
  auto results = run_nodes(t, inputs, st);
  for (size_t j = 0; j < outputs.size(); ++j) outputs[j].copy_shared_buffer(results[j]);
}

// Captures the tape on these inputs into ts.graph (not launched). False when this call's
// inputs cannot be captured (a view, two inputs on one buffer), or the tape cannot be at all
// (a node that waits for the host or registers a one-shot callback; ts.capturable is then
// cleared and the tape always runs node by node).
bool capture(TapeState& ts, const detail::ReplayTape& t, const std::vector<array>& inputs, StreamState& st) {
  std::unordered_set<const array::Data*> in_data;
  for (auto& in : inputs) {
    if (!dense(in) || !in_data.insert(in.data_shared_ptr().get()).second) return false;
    device_ptr(in); // uploads now: a copy inside the capture would be replayed from stale staging
  }
  auto g = std::make_shared<CapturedGraph>();
  cudaStream_t s = st.stream();
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  st.begin_capture(&g->res);
  std::vector<array> results;
  std::unordered_set<const array::Data*> donated;
  bool ok = true;
  try {
    results = run_nodes(t, inputs, st, &donated);
  } catch (...) {
    ok = false;
  }
  st.end_capture();
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(s, &graph);
  if (ok && err == cudaSuccess) err = cudaGraphInstantiate(&g->exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  if (!ok || err != cudaSuccess) {
    cudaGetLastError(); // a capture error is not sticky: clear it
    ts.capturable = false;
    return false;
  }
  g->stream = &st;
  for (auto& in : inputs) {
    array v(in.shape(), in.dtype(), nullptr, {});
    v.copy_shared_buffer(in);
    g->in_ptrs.push_back(device_ptr(in));
    reserve_for_graph(&st, in.data_shared_ptr().get(), 1);
    g->in_bufs.push_back(std::move(v));
  }
  // An input whose buffer a node's output took over (donation) is written by every replay,
  // whether or not it is handed out; so is one an output is handed out in (below).
  g->written.assign(inputs.size(), false);
  for (size_t k = 0; k < inputs.size(); ++k) g->written[k] = donated.count(inputs[k].data_shared_ptr().get()) > 0;
  for (auto& r : results) {
    CapturedGraph::Output o;
    for (size_t k = 0; k < inputs.size() && o.alias < 0; ++k) {
      if (r.data_shared_ptr() == inputs[k].data_shared_ptr() && r.shape() == inputs[k].shape() &&
          r.dtype() == inputs[k].dtype() && dense(r) && device_ptr(r) == g->in_ptrs[k]) {
        o.alias = int(k);
        g->written[k] = true; // in place or as it is: either way the output is that buffer
      }
    }
    if (o.alias < 0) {
      if (!dense(r)) {
        ts.capturable = false;
        return false;
      }
      o.ptr = device_ptr(r);
      o.bytes = r.nbytes();
      g->res.data.push_back(r.data_shared_ptr());
    }
    g->outs.push_back(o);
  }
  // The inputs' buffers are held through in_bufs, which replays count as their own.
  std::erase_if(g->res.data, [&](const auto& d) { return in_data.count(d.get()) > 0; });
  ts.graph = std::move(g);
  return true;
}

// Launches ts.graph on these inputs; false (nothing done) when a buffer it would write is
// seen by something else or an input is a view.
bool replay(TapeState& ts, const std::vector<array>& inputs, std::vector<array>& outputs, StreamState& st) {
  CapturedGraph& g = *ts.graph;
  std::vector<size_t> copy_in;
  // Why a replay is refused (NUVEC_HOST_PROFILE=1 counts them).
  auto refuse = [](const char* why) {
    if (host_profile::enabled()) host_profile::add(std::string("graph refused: ") + why, 0);
    return false;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const array& in = inputs[k];
    if (!dense(in)) return refuse("an input is a view");
    // A buffer the graph writes must have no host copy: it would go stale, and the output
    // handed out in it would read the old values (donation refuses such buffers too).
    if (g.written[k] && g.in_bufs[k].data_shared_ptr()->buffer.ptr()) return refuse("state read on the host");
    if (device_ptr(in) == g.in_ptrs[k]) {
      // Updated in place: only when this node's input list holds the only handle.
      if (g.written[k] && !(in.is_sole_handle() && foreign_owners(in, 1, st) == 0)) {
        return refuse("state input seen elsewhere");
      }
    } else {
      if (foreign_owners(g.in_bufs[k], 0, st) != 0) return refuse("captured input seen elsewhere");
      copy_in.push_back(k);
    }
  }
  cudaStream_t s = st.stream();
  for (size_t k : copy_in) {
    check(cudaMemcpyAsync(g.in_ptrs[k], device_ptr(inputs[k]), inputs[k].nbytes(), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (graph input)");
  }
  if (host_profile::enabled()) {
    // The graph's device time (profiling only: this waits for the device).
    cudaEvent_t ev[2];
    for (auto& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
    check(cudaEventRecord(ev[0], s), "cudaEventRecord");
    const double t0 = host_profile::now();
    check(cudaGraphLaunch(g.exec, s), "cudaGraphLaunch");
    host_profile::add("graph launch (host)", host_profile::now() - t0);
    check(cudaEventRecord(ev[1], s), "cudaEventRecord");
    check(cudaEventSynchronize(ev[1]), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ev[0], ev[1]), "cudaEventElapsedTime");
    host_profile::add("graph device time", ms * 1e-3);
    for (auto& e : ev) cudaEventDestroy(e);
  } else {
    check(cudaGraphLaunch(g.exec, s), "cudaGraphLaunch");
  }
  // Registered before anything below can throw: the launch runs whatever happens next.
  for (auto& f : g.res.each_run) st.after_device(f);
  st.after_device([keep = ts.graph] {}); // the graph and its buffers outlive this launch
  for (size_t j = 0; j < outputs.size(); ++j) {
    const auto& o = g.outs[j];
    if (o.alias >= 0) {
      outputs[j].copy_shared_buffer(g.in_bufs[o.alias]);
    } else {
      void* dst = alloc_output(outputs[j]);
      check(cudaMemcpyAsync(dst, o.ptr, o.bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync (graph output)");
    }
  }
  return true;
}

} // namespace

} // namespace nuvec::cu

namespace nuvec::gpu {

void run_tape(detail::ReplayTape& t, const std::vector<array>& inputs, std::vector<array>& outputs) {
  cu::StreamState& st = *cu::current_state();
  if (!t.device_state) t.device_state = std::make_shared<cu::TapeState>();
  auto& ts = *static_cast<cu::TapeState*>(t.device_state.get());
  const double t0 = host_profile::enabled() ? host_profile::now() : 0;
  bool replayed = ts.graph && cu::replay(ts, inputs, outputs, st);
  if (!replayed && !ts.graph && ts.capturable && ts.runs++ > 0) {
    replayed = cu::capture(ts, t, inputs, st) && cu::replay(ts, inputs, outputs, st);
  }
  if (!replayed) cu::run_eager(t, inputs, outputs, st);
  ++(replayed ? t.replays : t.node_runs);
  if (t0) host_profile::add(replayed ? "graph replay" : "graph tape run", host_profile::now() - t0);
}

} // namespace nuvec::gpu
