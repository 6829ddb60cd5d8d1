// nuvec: the tracing state of the transforms (MLX's InTracing/RetainGraph). Thread-local, so
// two threads can transform and evaluate independent graphs at once.
#pragma once

namespace nuvec::detail {

/// Marks the calling thread as inside a transform for the object's lifetime.
struct InTracing {
  explicit InTracing(bool grad = false);
  ~InTracing();
  InTracing(const InTracing&) = delete;
  InTracing& operator=(const InTracing&) = delete;
  static bool in_tracing();
  static bool in_grad_tracing();
};

/// Keeps evaluated nodes attached to the graph while alive (vjp rules that evaluate).
struct RetainGraph {
  RetainGraph();
  ~RetainGraph();
  RetainGraph(const RetainGraph&) = delete;
  RetainGraph& operator=(const RetainGraph&) = delete;
  static bool retain_graph();
};

/// Called by ops that bake the input's shape into the graph as a constant (mean's 1 / N,
/// masked_scatter's source length, ...). A shapeless compile whose trace saw such an op
/// traces again for new input shapes instead of replaying (its constants would be stale).
void note_shape_baked();
/// How many times note_shape_baked has run on this thread (compile compares before/after).
unsigned long shape_baked_count();

inline bool in_tracing() {
  return InTracing::in_tracing();
}
inline bool retain_graph() {
  return RetainGraph::retain_graph();
}

} // namespace nuvec::detail
