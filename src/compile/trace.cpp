// nuvec: tracing a function for compile, ordering its graph into a tape, and replaying the
// (simplified, fused) tape on real inputs. MLX compile.cpp: compile_trace, compile_dfs,
// compile_replace; the walk is the transforms' (transforms/graph_walk.h).
#include <sstream>
#include <typeinfo>

#include "compile/graph.h"
#include "core/errors.h"
#include "fast/fast_primitive.h"
#include "primitives/gather_scatter.h"
#include "primitives/partition.h"
#include "primitives/primitives.h"
#include "transforms/graph_walk.h"
#include "transforms/trace.h"

namespace nuvec::detail {

namespace {

// Node a's primitive recorded again on `inputs`: its outputs in order, with a's dtypes and
// `shapes` (a's own shapes when empty).
std::vector<array> remake_node(const array& a, std::vector<array> inputs, std::vector<Shape> shapes) {
  auto outs = a.outputs();
  std::vector<Dtype> dtypes;
  for (auto& o : outs) {
    dtypes.push_back(o.dtype());
    if (shapes.size() < outs.size()) shapes.push_back(o.shape());
  }
  if (outs.size() == 1) {
    return {array(std::move(shapes[0]), dtypes[0], a.primitive_ptr(), std::move(inputs))};
  }
  return array::make_arrays(std::move(shapes), dtypes, a.primitive_ptr(), inputs);
}

} // namespace

std::pair<std::vector<array>, std::vector<array>> compile_trace(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& inputs) {
  InTracing in_tracing;
  std::vector<array> tracers;
  tracers.reserve(inputs.size());
  for (auto& in : inputs) {
    // A placeholder: shape and dtype, no data and no primitive.
    array t(in.shape(), in.dtype(), nullptr, {});
    t.set_tracer(true);
    tracers.push_back(std::move(t));
  }
  auto outputs = fun(tracers);
  return {std::move(tracers), std::move(outputs)};
}

std::pair<std::vector<array>, ParentsMap> compile_dfs(
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    const std::vector<array>& original_inputs) {
  std::unordered_set<std::uintptr_t> originals;
  for (auto& in : original_inputs) originals.insert(in.id());
  for (auto& in : inputs) originals.erase(in.id());

  std::vector<array> tape;
  ParentsMap parents_map;
  std::unordered_set<std::uintptr_t> visited;
  for (auto& out : outputs) {
    walk_post_order(
        out,
        visited,
        [&](const array& a) {
          if (originals.count(a.id())) {
            throw_invalid_argument(
                "compile", "the function must only read its inputs through its arguments; "
                "got a graph that reads an input directly (an uncaptured input).");
          }
        },
        [&](const array& a) {
          for (size_t i = 0; i < a.inputs().size(); ++i) {
            auto& readers = parents_map[a.inputs()[i].id()];
            readers.push_back({a, static_cast<int>(i)});
            for (auto& s : a.siblings()) readers.push_back({s, static_cast<int>(i)});
          }
          tape.push_back(a);
        });
  }

  // Copy every inner node, so that simplification and fusion rewire copies and never an
  // array the caller holds (a captured lazy array, say). Inputs and outputs keep their ids.
  std::unordered_set<std::uintptr_t> io_set;
  std::unordered_map<std::uintptr_t, array> old_to_new;
  for (auto& o : outputs) {
    for (auto& x : o.outputs()) {
      old_to_new.insert({x.id(), x});
      io_set.insert(x.id());
    }
  }
  for (auto& i : inputs) {
    io_set.insert(i.id());
    old_to_new.insert({i.id(), i});
  }
  std::vector<array> new_tape;
  new_tape.reserve(tape.size());
  for (auto& a : tape) {
    if (!a.has_primitive() || io_set.count(a.id())) {
      old_to_new.insert({a.id(), a});
      new_tape.push_back(a);
      continue;
    }
    std::vector<array> ins;
    ins.reserve(a.inputs().size());
    for (auto& i : a.inputs()) ins.push_back(old_to_new.at(i.id()));
    auto outs = a.outputs();
    auto copies = remake_node(a, std::move(ins), {});
    size_t pos = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      old_to_new.insert({outs[k].id(), copies[k]});
      if (outs[k].id() == a.id()) pos = k;
    }
    new_tape.push_back(copies[pos]);
  }
  io_set.clear();
  for (auto& o : outputs) {
    if (!io_set.insert(o.id()).second) continue;
    for (auto x : o.outputs()) {
      io_set.insert(x.id());
      for (auto& i : x.inputs()) i = old_to_new.at(i.id());
    }
  }
  tape = std::move(new_tape);

  ParentsMap new_parents_map;
  for (auto& [id, readers] : parents_map) {
    for (auto& r : readers) r.first = old_to_new.at(r.first.id());
    new_parents_map[old_to_new.at(id).id()] = std::move(readers);
  }
  return {std::move(tape), std::move(new_parents_map)};
}

namespace {

// Primitives whose parameters hold traced shapes, or whose output_shapes takes an input's
// shape while the kernel assumes the others agree with it (slice bounds and update shapes,
// gather slice sizes, scatter updates, partition's kth, every fused op's checks): at other
// shapes they could read or write outside their buffers.
bool holds_traced_shapes(const Primitive& p) {
  const std::type_info& t = typeid(p);
  return dynamic_cast<const fast::FastPrimitive*>(&p) != nullptr || t == typeid(Slice) || t == typeid(SliceUpdate) ||
      t == typeid(DynamicSlice) || t == typeid(DynamicSliceUpdate) || t == typeid(Gather) || t == typeid(Scatter) ||
      t == typeid(GatherAxis) || t == typeid(ScatterAxis) || t == typeid(Partition) || t == typeid(ArgPartition);
}

// Whether traced node a can run on real_inputs' shapes: at its traced shapes always; else
// not when its parameters hold traced shapes, and only when the dims of its inputs that
// were equal in the trace are equal again (a product's K, an element-wise op's matching
// axes): output_shapes assumes what the op checked when it was traced.
bool replays_at(const array& a, const std::vector<array>& real_inputs) {
  const std::vector<array>& traced = a.inputs();
  bool same = true;
  for (size_t i = 0; i < traced.size(); ++i) same = same && traced[i].shape() == real_inputs[i].shape();
  if (same) return true;
  if (holds_traced_shapes(a.primitive())) return false;
  std::vector<std::pair<int64_t, int64_t>> dims; // (traced, real) of every input axis
  for (size_t i = 0; i < traced.size(); ++i) {
    for (int d = 0; d < traced[i].ndim(); ++d) dims.emplace_back(traced[i].shape(d), real_inputs[i].shape(d));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    for (size_t j = i + 1; j < dims.size(); ++j) {
      if (dims[i].first == dims[j].first && dims[i].second != dims[j].second) return false;
    }
  }
  return true;
}

// The output shapes of traced node a on real inputs (shapeless replay). A reshape to a
// fixed shape cannot follow an input of another size.
std::vector<Shape> replay_shapes(const array& a, const std::vector<array>& real_inputs) {
  if (!replays_at(a, real_inputs)) {
    std::ostringstream shapes;
    shapes << "a shapeless trace cannot replay " << a.primitive().name() << " on inputs of shapes";
    for (auto& x : real_inputs) shapes << " " << x.shape();
    shapes << ": it was traced on";
    for (auto& x : a.inputs()) shapes << " " << x.shape();
    throw ShapelessMismatch(error_message("compile", shapes.str(), " and its checks or parameters hold those shapes."));
  }
  auto shapes = a.primitive().output_shapes(real_inputs);
  if (typeid(a.primitive()) == typeid(Reshape) && !real_inputs.empty()) {
    size_t n = 1;
    for (auto d : shapes[0]) n *= d;
    if (n != real_inputs[0].size()) {
      throw_invalid_argument(
          "compile", "a shapeless reshape must keep the size; got input shape ",
          real_inputs[0].shape(), " for the traced output shape ", shapes[0], ".");
    }
  }
  return shapes;
}

} // namespace

std::vector<array> compile_replace(
    const std::vector<array>& tape,
    const std::vector<array>& trace_inputs,
    const std::vector<array>& trace_outputs,
    const std::vector<array>& inputs,
    bool shapeless) {
  std::unordered_map<std::uintptr_t, array> trace_to_real;
  for (size_t i = 0; i < inputs.size(); ++i) trace_to_real.insert({trace_inputs[i].id(), inputs[i]});

  for (auto& a : tape) {
    // Without a primitive: an input (already mapped) or a constant, used as it is.
    if (!a.has_primitive()) {
      trace_to_real.insert({a.id(), a});
      continue;
    }
    std::vector<array> real_inputs;
    real_inputs.reserve(a.inputs().size());
    for (auto& in : a.inputs()) real_inputs.push_back(trace_to_real.at(in.id()));
    auto shapes = shapeless ? replay_shapes(a, real_inputs) : std::vector<Shape>{};
    auto trace_out = a.outputs();
    auto real_out = remake_node(a, std::move(real_inputs), std::move(shapes));
    for (size_t i = 0; i < trace_out.size(); ++i) {
      trace_to_real.insert({trace_out[i].id(), std::move(real_out[i])});
    }
  }

  std::vector<array> outputs;
  outputs.reserve(trace_outputs.size());
  for (auto& o : trace_outputs) outputs.push_back(trace_to_real.at(o.id()));
  return outputs;
}

} // namespace nuvec::detail
