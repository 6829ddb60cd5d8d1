// nuvec: element-wise fusion for compile (MLX compile.cpp, compile_fuse). Walking the tape
// from the outputs back, each node that is not yet fused grows a section of fusable
// producers that nothing outside the section reads (up to max_compile_depth deep and
// max_compile_arrays arrays, one stream, graph outputs only at the section's shape); a
// section of two or more nodes becomes one Compiled node.
#include <algorithm>
#include <functional>

#include "compile/graph.h"

namespace nuvec::detail {

namespace {

// The section rooted at `root`: the ids of its nodes (empty when root cannot head one).
std::unordered_set<std::uintptr_t> grow_section(
    const array& root,
    ParentsMap& parents_map,
    const std::unordered_map<std::uintptr_t, array>& output_map) {
  std::unordered_set<std::uintptr_t> section;
  std::unordered_set<std::uintptr_t> boundary; // counts arrays toward max_compile_arrays
  // The result must be computed (has a primitive) and not a broadcast, which would turn a
  // cheap view into a materialised array.
  if (!root.has_primitive() || is_broadcast(root.primitive())) return section;
  const Stream s = root.primitive().stream();
  const Shape& shape = root.shape();
  const std::vector<std::pair<array, int>> no_readers;

  std::function<void(const array&, int)> grow = [&](const array& a, int depth) {
    if (section.count(a.id())) return;
    bool is_output = output_map.count(a.id()) > 0;
    if (depth >= max_compile_depth || !a.has_primitive() || a.primitive().stream() != s ||
        !is_fusable(a.primitive()) || (is_output && a.shape() != shape)) {
      boundary.insert(a.id());
      return;
    }
    if (depth > 0) {
      auto readers = parents_map.find(a.id());
      bool all_readers_in = readers != parents_map.end();
      for (auto& [p, idx] : all_readers_in ? readers->second : no_readers) {
        if (!section.count(p.id())) {
          all_readers_in = false;
          break;
        }
      }
      if (!all_readers_in) {
        // A broadcast read from outside too is split: the section gets its own copy.
        if (is_broadcast(a.primitive()) && boundary.size() < max_compile_arrays) {
          grow(split_one(a, parents_map, section), depth);
        } else {
          boundary.insert(a.id());
        }
        return;
      }
    }
    if (is_output) {
      boundary.insert(a.id());
    } else {
      boundary.erase(a.id());
    }
    if (boundary.size() >= max_compile_arrays) return;
    section.insert(a.id());
    for (auto& in : a.inputs()) grow(in, depth + 1);
  };
  grow(root, 0);
  return section;
}

} // namespace

void compile_fuse(
    std::vector<array>& tape,
    ParentsMap& parents_map,
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  std::unordered_map<std::uintptr_t, array> output_map;
  for (auto& o : outputs) output_map.insert({o.id(), o});
  std::unordered_set<std::uintptr_t> input_ids;
  for (auto& in : inputs) input_ids.insert(in.id());

  std::vector<array> new_tape;
  std::unordered_set<std::uintptr_t> fused;
  for (int i = static_cast<int>(tape.size()) - 1; i >= 0; --i) {
    array arr = tape[i];
    if (fused.count(arr.id())) continue;

    auto section = grow_section(arr, parents_map, output_map);
    if (section.size() <= 1) {
      new_tape.push_back(arr);
      continue;
    }

    // The section's nodes in evaluation order, and its inputs in first-read order.
    std::vector<array> fused_tape;
    std::vector<array> section_inputs;
    std::unordered_set<std::uintptr_t> seen_inputs;
    std::unordered_set<std::uintptr_t> placed;
    std::function<void(const array&)> place = [&](const array& a) {
      if (!section.count(a.id())) {
        if (seen_inputs.insert(a.id()).second) section_inputs.push_back(a);
        return;
      }
      if (!placed.insert(a.id()).second) return;
      for (auto& in : a.inputs()) place(in);
      fused_tape.push_back(a);
    };
    place(arr);

    // Graph outputs inside the section become outputs of the fused node, before arr.
    std::vector<array> old_outputs;
    for (size_t j = 0; j + 1 < fused_tape.size(); ++j) {
      auto& f = fused_tape[j];
      if (output_map.count(f.id())) {
        old_outputs.push_back(f);
        std::erase_if(parents_map[f.id()], [&](auto& p) { return section.count(p.first.id()) > 0; });
      } else {
        parents_map.erase(f.id());
      }
      fused.insert(f.id());
    }
    old_outputs.push_back(arr);

    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto& o : old_outputs) {
      if (o.shape() != arr.shape()) {
        throw std::runtime_error(
            "[compile] Compilation failed. Tried to fuse operations with different output shapes");
      }
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    std::unordered_set<std::uintptr_t> constant_ids;
    for (auto& in : section_inputs) {
      if (in.size() == 1 && !in.has_primitive() && !input_ids.count(in.id())) {
        constant_ids.insert(in.id());
      }
    }
    auto compiled_outputs = array::make_arrays(
        std::move(shapes),
        dtypes,
        std::make_shared<Compiled>(
            arr.primitive().stream(), section_inputs, old_outputs, std::move(fused_tape),
            std::move(constant_ids)),
        section_inputs);
    new_tape.push_back(compiled_outputs.back());

    // The section's inputs are now read by the fused node instead of the section's nodes.
    for (size_t k = 0; k < section_inputs.size(); ++k) {
      auto& readers = parents_map[section_inputs[k].id()];
      std::erase_if(readers, [&](auto& p) { return section.count(p.first.id()) > 0; });
      for (auto& o : compiled_outputs) readers.push_back({o, static_cast<int>(k)});
    }
    // Readers of the old outputs (and the graph outputs themselves) move to the new ones.
    for (size_t o = 0; o < old_outputs.size(); ++o) {
      merge_one(compiled_outputs[o], old_outputs[o], parents_map);
      if (auto it = output_map.find(old_outputs[o].id()); it != output_map.end()) {
        it->second = compiled_outputs[o];
      }
    }
  }

  std::reverse(new_tape.begin(), new_tape.end());
  tape = std::move(new_tape);
  for (auto& o : outputs) o = output_map.at(o.id());
}

} // namespace nuvec::detail
