// nuvec: what the compile passes share: the parents map of a traced graph, the edits that
// rewire it (merge, split), which primitives fuse, and the passes themselves (trace.cpp,
// simplify.cpp, fuse.cpp). The algorithms are MLX 0.32's (mlx/compile.cpp, compile_impl.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nuvec/compile.h"

namespace nuvec::detail {

/// For each array id, the nodes that read it and at which input position.
using ParentsMap = std::unordered_map<std::uintptr_t, std::vector<std::pair<array, int>>>;

/// Deepest chain and most arrays (inputs and outputs) one fused node takes (MLX's limits).
constexpr int max_compile_depth = 11;
constexpr int max_compile_arrays = 24;

/// Element-wise primitives a fused node can hold: Unary, Binary, Select, AsType, Broadcast.
bool is_fusable(const Primitive& p);
bool is_broadcast(const Primitive& p);
/// Identities compile removes: Copy and StopGradient.
bool is_noop(const Primitive& p);

/// Points every reader of src at dst (src's siblings are left alone).
void merge_one(array& dst, array& src, ParentsMap& parents_map);
/// merge_one for every output of two equivalent nodes, in output order.
void merge(array& dst, array& src, ParentsMap& parents_map);
/// A copy of node x (same primitive and inputs) that the readers outside `keep` now read;
/// readers in `keep` keep reading x.
array split_one(const array& x, ParentsMap& parents_map, const std::unordered_set<std::uintptr_t>& keep);

/// A traced, simplified and fused function as GraphReplay runs it: the trace's inputs,
/// outputs and tape (inputs and constants first, then nodes in evaluation order), and the
/// backend's state for it (the captured CUDA graph; only the stream's worker touches it).
struct ReplayTape {
  std::vector<array> inputs;
  std::vector<array> outputs;
  std::vector<array> tape;
  std::shared_ptr<void> device_state;
  /// Calls that launched the captured graph, and calls that ran the nodes one by one.
  std::atomic<long> replays{0};
  std::atomic<long> node_runs{0};
};

/// The rules of a node standing for a traced graph (Compiled, GraphReplay): `replay` rebuilds
/// the graph on given inputs, and the transform runs on it, so each node's own rule applies.
using ReplayFn = std::function<std::vector<array>(const std::vector<array>&)>;
std::vector<array> replayed_vjp(
    const ReplayFn& replay,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums);
/// Tangents of the inputs not in argnums are zeros (made on stream s).
std::vector<array> replayed_jvp(
    const ReplayFn& replay,
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums,
    Stream s);
/// Every output batched along axis 0.
std::pair<std::vector<array>, std::vector<int>> replayed_vmap(
    const ReplayFn& replay,
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    size_t n_outputs);

/// Runs fun on placeholder tracers of inputs' shapes and dtypes; returns (tracers, outputs).
std::pair<std::vector<array>, std::vector<array>> compile_trace(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& inputs);

/// The nodes between the tracers and the outputs, inputs first, copied so that later edits
/// touch no array the caller holds, and their parents map. Throws std::invalid_argument
/// when the graph reads one of the real inputs (`original_inputs`) instead of its tracer.
std::pair<std::vector<array>, ParentsMap> compile_dfs(
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    const std::vector<array>& original_inputs);

/// Merges equal scalar constants, removes no-ops and merges equivalent nodes reading the
/// same inputs (`passes` times), editing tape, parents_map and outputs in place.
void compile_simplify(
    std::vector<array>& tape,
    ParentsMap& parents_map,
    std::vector<array>& outputs,
    int passes);

/// Replaces element-wise sections of the tape with Compiled nodes.
void compile_fuse(
    std::vector<array>& tape,
    ParentsMap& parents_map,
    const std::vector<array>& inputs,
    std::vector<array>& outputs);

/// What a shapeless replay throws for a node that cannot run at the real inputs' shapes
/// (compile then traces again at those shapes; an imported function reports it).
class ShapelessMismatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The tape rebuilt on the real inputs: the arrays standing for trace_outputs. With
/// shapeless, every node's shape is recomputed from its real inputs; a node whose traced
/// shapes live on in its parameters or checks (slices, gathers, scatters, partitions, fused
/// ops), or whose inputs' dims that were equal in the trace differ now, throws
/// ShapelessMismatch unless its inputs keep their traced shapes.
std::vector<array> compile_replace(
    const std::vector<array>& tape,
    const std::vector<array>& trace_inputs,
    const std::vector<array>& trace_outputs,
    const std::vector<array>& inputs,
    bool shapeless);

} // namespace nuvec::detail
