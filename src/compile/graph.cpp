// nuvec: the graph edits the compile passes share (MLX compile.cpp: merge_one, merge,
// split_one) and the primitive classes they test for.
#include "compile/graph.h"

#include <stdexcept>
#include <typeinfo>

#include "primitives/primitives.h"

namespace nuvec::detail {

bool is_broadcast(const Primitive& p) {
  return typeid(p) == typeid(Broadcast);
}

bool is_fusable(const Primitive& p) {
  const auto& t = typeid(p);
  return t == typeid(Unary) || t == typeid(Binary) || t == typeid(Select) ||
      t == typeid(AsType) || t == typeid(Broadcast);
}

bool is_noop(const Primitive& p) {
  return typeid(p) == typeid(Copy) || typeid(p) == typeid(StopGradient);
}

void merge_one(array& dst, array& src, ParentsMap& parents_map) {
  auto src_parents = parents_map.find(src.id());
  if (src_parents == parents_map.end()) return;
  auto moved = std::move(src_parents->second);
  parents_map.erase(src_parents);
  auto& pairs = parents_map[dst.id()];
  for (auto& parent : moved) {
    parent.first.inputs()[parent.second] = dst;
    // src itself reading dst is not a reader of dst once src is gone.
    if (parent.first.id() != src.id()) pairs.push_back(std::move(parent));
  }
  std::erase_if(pairs, [&](const auto& p) { return p.first.id() == src.id(); });
}

void merge(array& dst, array& src, ParentsMap& parents_map) {
  auto sources = src.outputs();
  auto dests = dst.outputs();
  if (sources.size() != dests.size()) {
    throw std::logic_error("[compile] merging nodes with different numbers of outputs.");
  }
  for (size_t i = 0; i < sources.size(); ++i) merge_one(dests[i], sources[i], parents_map);
}

array split_one(
    const array& x,
    ParentsMap& parents_map,
    const std::unordered_set<std::uintptr_t>& keep) {
  array y(x.shape(), x.dtype(), x.primitive_ptr(), x.inputs());
  auto& x_parents = parents_map[x.id()];
  std::vector<std::pair<array, int>> y_parents;
  std::vector<std::pair<array, int>> rest;
  for (auto& p : x_parents) {
    if (keep.count(p.first.id())) {
      p.first.inputs()[p.second] = y;
      y_parents.push_back(std::move(p));
    } else {
      rest.push_back(std::move(p));
    }
  }
  x_parents = std::move(rest);
  parents_map[y.id()] = std::move(y_parents);
  // y reads x's inputs too.
  for (size_t i = 0; i < y.inputs().size(); ++i) {
    parents_map[y.inputs()[i].id()].push_back({y, static_cast<int>(i)});
  }
  return y;
}

} // namespace nuvec::detail
