// nuvec: thread-local tracing counters (see trace.h).
#include "transforms/trace.h"

namespace nuvec::detail {

namespace {
thread_local int tracing_depth = 0;
thread_local int grad_depth = 0;
thread_local int retain_depth = 0;
thread_local bool grad_flags[256];
thread_local unsigned long baked = 0;
} // namespace

void note_shape_baked() {
  ++baked;
}
unsigned long shape_baked_count() {
  return baked;
}

InTracing::InTracing(bool grad) {
  if (tracing_depth < 256) grad_flags[tracing_depth] = grad;
  ++tracing_depth;
  grad_depth += grad;
}
InTracing::~InTracing() {
  --tracing_depth;
  if (tracing_depth < 256) grad_depth -= grad_flags[tracing_depth];
}
bool InTracing::in_tracing() {
  return tracing_depth > 0;
}
bool InTracing::in_grad_tracing() {
  return grad_depth > 0;
}

RetainGraph::RetainGraph() {
  ++retain_depth;
}
RetainGraph::~RetainGraph() {
  --retain_depth;
}
bool RetainGraph::retain_graph() {
  return retain_depth > 0;
}

} // namespace nuvec::detail
