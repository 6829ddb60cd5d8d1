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

inline bool in_tracing() {
  return InTracing::in_tracing();
}
inline bool retain_graph() {
  return RetainGraph::retain_graph();
}

} // namespace nuvec::detail
