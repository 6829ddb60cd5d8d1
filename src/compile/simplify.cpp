// nuvec: graph simplification for compile (MLX compile.cpp, compile_simplify): equal scalar
// constants become one, Copy and StopGradient disappear, and nodes computing the same
// primitive on the same inputs merge (common subexpressions, multi-output nodes output by
// output).
#include <cstring>
#include <map>
#include <typeinfo>

#include "compile/graph.h"

namespace nuvec::detail {

namespace {

// A constant that can be read now: evaluated and 0-d.
bool is_scalar_constant(const array& a) {
  return a.is_available() && a.ndim() == 0 && !a.has_primitive();
}

// The bits and dtype of a scalar constant, so that equal values of one dtype compare equal
// (NaN included, which == would not give).
std::pair<uint64_t, int> scalar_key(const array& a) {
  uint64_t v = 0;
  std::memcpy(&v, a.data<uint8_t>(), std::min<size_t>(a.itemsize(), sizeof(v)));
  return {v, static_cast<int>(a.dtype().val())};
}

// Depth-1 equivalence: distinct nodes, same primitive type and parameters, same inputs.
bool nodes_equivalent(const array& a, const array& b) {
  if (!a.has_primitive() || !b.has_primitive() || a.primitive_id() == b.primitive_id()) {
    return false;
  }
  const auto& pa = a.primitive();
  const auto& pb = b.primitive();
  if (typeid(pa) != typeid(pb) || a.inputs().size() != b.inputs().size()) return false;
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    if (a.inputs()[i].id() != b.inputs()[i].id()) return false;
  }
  return pa.is_equivalent(pb);
}

void merge_scalars(std::vector<array>& tape, ParentsMap& parents_map) {
  std::map<std::pair<uint64_t, int>, array> first_of;
  std::vector<array> kept;
  for (auto& a : tape) {
    if (is_scalar_constant(a)) {
      auto [it, fresh] = first_of.insert({scalar_key(a), a});
      if (!fresh) {
        merge(it->second, a, parents_map);
        continue; // orphaned
      }
    }
    kept.push_back(std::move(a));
  }
  tape = std::move(kept);
}

void remove_noops(std::vector<array>& tape, ParentsMap& parents_map, std::vector<array>& outputs) {
  std::unordered_map<std::uintptr_t, array> output_map;
  for (auto& o : outputs) output_map.insert({o.id(), o});
  std::vector<array> kept;
  for (auto& a : tape) {
    if (!a.has_primitive() || !is_noop(a.primitive())) {
      kept.push_back(std::move(a));
      continue;
    }
    array in = a.inputs()[0];
    merge_one(in, a, parents_map);
    if (auto it = output_map.find(a.id()); it != output_map.end()) it->second = in;
  }
  tape = std::move(kept);
  for (auto& o : outputs) o = output_map.at(o.id());
}

// One CSE pass: for every array, merge equivalent readers of it (the later one into the
// earlier one); drop nodes none of whose outputs is read or is a graph output.
void merge_equivalent_readers(
    std::vector<array>& tape,
    ParentsMap& parents_map,
    const std::unordered_map<std::uintptr_t, uint32_t>& tape_order,
    const std::unordered_set<std::uintptr_t>& output_set) {
  auto order = [&](const array& a) {
    auto it = tape_order.find(a.id());
    return it == tape_order.end() ? UINT32_MAX : it->second;
  };
  // Returns whether a has no readers and is not an output.
  auto merge_readers = [&](const array& a) {
    auto found = parents_map.find(a.id());
    if (found == parents_map.end()) return !output_set.count(a.id());
    auto& readers = found->second;
    // Group candidates by (type, input ids) so only plausible pairs are compared.
    std::map<std::vector<uint64_t>, std::vector<size_t>> groups;
    for (size_t i = 0; i < readers.size(); ++i) {
      auto& r = readers[i].first;
      std::vector<uint64_t> key;
      for (auto& in : r.inputs()) key.push_back(in.id());
      key.push_back(r.has_primitive() ? typeid(r.primitive()).hash_code() : 0);
      groups[key].push_back(i);
    }
    std::vector<bool> merged(readers.size(), false);
    for (auto& [key, group] : groups) {
      for (size_t gi = 0; gi < group.size(); ++gi) {
        if (merged[group[gi]]) continue;
        for (size_t gj = gi + 1; gj < group.size(); ++gj) {
          size_t dst_i = group[gi], src_i = group[gj];
          if (merged[src_i]) continue;
          if (order(readers[src_i].first) < order(readers[dst_i].first)) std::swap(src_i, dst_i);
          array src = readers[src_i].first;
          array dst = readers[dst_i].first;
          if (src.id() != dst.id() && nodes_equivalent(src, dst) && !output_set.count(src.id())) {
            merge(dst, src, parents_map);
            merged[src_i] = true;
            if (src_i == group[gi]) break; // the group's head is gone
          }
        }
      }
    }
    // merge() may have rehashed the map: look the list up again.
    auto& now = parents_map[a.id()];
    std::vector<std::pair<array, int>> kept;
    for (size_t i = 0; i < now.size(); ++i) {
      if (i >= merged.size() || !merged[i]) kept.push_back(std::move(now[i]));
    }
    now = std::move(kept);
    return false;
  };

  std::vector<array> kept;
  for (auto& a : tape) {
    bool unused = merge_readers(a);
    for (auto& s : a.siblings()) unused &= merge_readers(s);
    if (!unused) kept.push_back(std::move(a));
  }
  tape = std::move(kept);
}

} // namespace

void compile_simplify(
    std::vector<array>& tape,
    ParentsMap& parents_map,
    std::vector<array>& outputs,
    int passes) {
  merge_scalars(tape, parents_map);
  remove_noops(tape, parents_map, outputs);

  std::unordered_map<std::uintptr_t, uint32_t> tape_order;
  for (uint32_t i = 0; i < tape.size(); ++i) tape_order.insert({tape[i].id(), i});
  std::unordered_set<std::uintptr_t> output_set;
  for (auto& o : outputs) output_set.insert(o.id());
  for (int pass = 0; pass < passes; ++pass) {
    merge_equivalent_readers(tape, parents_map, tape_order, output_set);
  }
}

} // namespace nuvec::detail
