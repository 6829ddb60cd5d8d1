// nuvec: compile (MLX's compile.h API): trace a function once per input signature, simplify
// the graph (constant merging, no-op removal, CSE), fuse element-wise chains into one
// `Compiled` node and replay the result on new inputs. Rules: MLX 0.32 mlx/compile.cpp;
// the implementation is src/compile/ (docs/COMPILE.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/primitive_families.h"

namespace nuvec {

/// How much of compile runs: nothing (the function is called as is), everything but
/// simplification, everything but fusion, or all of it (the default; MLX_DISABLE_COMPILE
/// or NUVEC_DISABLE_COMPILE in the environment starts as disabled).
enum class CompileMode { disabled, no_simplify, no_fuse, enabled };

/// fun, traced once per input signature (the number of inputs, each input's shape — only
/// its ndim when shapeless — and dtype, the default stream) and replayed afterwards.
/// Called with tracer inputs (inside another transform or compile) it calls fun directly.
/// Shapes: any; shapeless reuses a trace for new shapes of the same ndim, recomputing
/// every node's output shape (throws std::invalid_argument when a node cannot follow, e.g.
/// a reshape to a fixed shape of a different size).
/// Throws: std::invalid_argument for an empty fun (unless compile is disabled).
/// Source: MLX compile.cpp. Runs: fused nodes op by op (generated kernels: later).
std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    bool shapeless = false);

/// compile of a plain function: the function's address keys the cache, so two compiles of
/// the same function share traces (MLX).
std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::vector<array> (*fun)(const std::vector<array>&),
    bool shapeless = false);

/// compile of a capture-less lambda, through its function pointer (MLX's overload).
template <
    typename F,
    typename = std::enable_if_t<std::is_convertible_v<F, decltype(+std::declval<F>())>>>
std::function<std::vector<array>(const std::vector<array>&)> compile(
    F&& f,
    bool shapeless = false) {
  return compile(+f, shapeless);
}

/// nuvec's addition: compile whose calls on a GPU stream each become one GraphReplay node —
/// the trace captured once per input signature as a CUDA graph and replayed — instead of the
/// trace's nodes (which MLX's compile returns, and code may inspect). Elsewhere (the CPU, a
/// trace spanning streams, inside another transform) it is compile(fun). Meant for a step
/// run many times at the same shapes: an LLM's decode step, where the host's cost per node
/// exceeds the device's. State computed in place of an input (a KV cache updated by
/// slice_update or paged_write) stays in that input's buffer; see GraphReplay.
/// Throws: std::invalid_argument for an empty fun (unless compile is disabled).
std::function<std::vector<array>(const std::vector<array>&)> compile_graph(
    std::function<std::vector<array>(const std::vector<array>&)> fun);

/// Turns compile off globally: compile(fun) then returns fun itself.
void disable_compile();

/// Turns compile back on (CompileMode::enabled), overriding the environment.
void enable_compile();

/// Sets the compile mode (see CompileMode).
void set_compile_mode(CompileMode mode);

/// A fused element-wise section of a compiled graph: one node computing `outputs` (all of
/// one shape, the broadcast of the inputs' shapes) from `inputs` through `tape`, a list of
/// Unary, Binary, Select, AsType and Broadcast nodes in evaluation order. Scalar constants
/// among the inputs are listed in constant_ids. eval_cpu / eval_gpu run the tape node by
/// node at the output shape (every input broadcast to it; Broadcast nodes are then
/// identities); vjp, jvp and vmap replay the tape as a graph under the same transform, so
/// the tape's own rules apply. Source: MLX primitives.h / backend/common/compiled.cpp.
class Compiled : public Primitive {
 public:
  Compiled(
      Stream stream,
      std::vector<array> inputs,
      std::vector<array> outputs,
      std::vector<array> tape,
      std::unordered_set<std::uintptr_t> constant_ids);
  NUVEC_PRIMITIVE_RULES()

  /// The name of the fused kernel: equal for two Compiled nodes whose tapes do the same
  /// work on the same dtypes and constants (so a generated kernel can be reused).
  std::string lib_name() const { return kernel_lib_; }
  /// The traced inputs, outputs and tape (trace arrays; they hold no data).
  const std::vector<array>& inputs() const { return inputs_; }
  const std::vector<array>& outputs() const { return outputs_; }
  const std::vector<array>& tape() const { return tape_; }
  /// Whether input i is a scalar constant baked into the node.
  bool is_constant(size_t i) const { return constant_ids_.count(inputs_[i].id()) > 0; }
  /// The tape as a graph on `inputs` (each broadcast to their common shape): the arrays
  /// that stand for outputs(). Used by the transform rules.
  std::vector<array> replay(const std::vector<array>& inputs) const;

 private:
  void eval_tape(const std::vector<array>& inputs, std::vector<array>& outputs, bool gpu);

  std::vector<array> inputs_;
  std::vector<array> outputs_;
  std::vector<array> tape_;
  std::unordered_set<std::uintptr_t> constant_ids_;
  std::string kernel_lib_;
  mutable std::string name_;
};

namespace detail {
struct ReplayTape;
} // namespace detail

/// A compiled function's whole tape as one node of a GPU stream (what compile_graph returns
/// on a GPU stream, so that a call costs one node instead of one per op). Its first evaluation
/// runs the tape's nodes one after the other inside the node; the second captures them as a
/// CUDA graph; later ones copy any input whose buffer moved into the captured one, launch
/// the graph, and copy the outputs out — except an output that the tape computed in place
/// of an input (a KV cache updated by slice_update, paged_write, norm_rope: buffer
/// donation), which is handed out in that input's buffer, so state passed back in stays put.
/// A call whose inputs cannot be replayed (a view, a buffer another handle still sees) and a
/// tape that cannot be captured (a node that waits for the host) run the nodes instead:
/// the answer is always the uncompiled one. Made by compile_graph; NUVEC_CUDA_GRAPHS=0 makes
/// compile_graph behave as compile.
/// Rules: the tape's own, replayed as a graph under the transform (as Compiled).
/// Source: PyTorch's CUDA graphs (static buffers, capture after a warm-up run), vLLM.
class GraphReplay : public Primitive {
 public:
  GraphReplay(Stream stream, std::shared_ptr<detail::ReplayTape> tape)
      : Primitive(stream), tape_(std::move(tape)) {}
  NUVEC_PRIMITIVE_RULES()
  /// The traced function it runs, with its replay counters (src/compile/graph.h; for tests).
  const detail::ReplayTape& tape() const { return *tape_; }

 private:
  std::vector<array> replay(const std::vector<array>& inputs) const;
  std::shared_ptr<detail::ReplayTape> tape_;
};

namespace detail {

/// The current compile mode (process-wide, as in MLX).
CompileMode& compile_mode();

/// compile with an explicit cache key: fun_id names the function, constants extend the
/// key (MLX's detail::compile, used by bindings that manage function lifetimes).
std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::uintptr_t fun_id,
    bool shapeless = false,
    std::vector<uint64_t> constants = {},
    bool graph = false);

/// Drops every trace cached for fun_id.
void compile_erase(std::uintptr_t fun_id);

/// Drops every cached trace.
void compile_clear_cache();

} // namespace detail

} // namespace nuvec
