// nuvec: the post-order graph walk shared by vjp, jvp and vmap. MLX recurses over inputs;
// this walk keeps an explicit stack so a graph of any depth costs heap, not call stack.
#pragma once

#include <unordered_set>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec::detail {

/// Visits every node reachable from `root` whose id is not yet in `visited`, inputs before
/// the node itself. `on_enter(a)` runs when a node is first reached (siblings are marked
/// visited with it); `on_exit(a)` runs after all of its inputs have been visited.
template <typename Enter, typename Exit>
void walk_post_order(
    const array& root,
    std::unordered_set<std::uintptr_t>& visited,
    Enter&& on_enter,
    Exit&& on_exit) {
  auto enter = [&](const array& a) -> bool {
    if (!visited.insert(a.id()).second) return false;
    for (auto& s : a.siblings()) visited.insert(s.id());
    on_enter(a);
    return true;
  };
  if (!enter(root)) return;
  std::vector<std::pair<array, size_t>> stack;
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    size_t top = stack.size() - 1;
    if (stack[top].second < stack[top].first.inputs().size()) {
      // Copy the handle: the push below may reallocate the stack.
      array in = stack[top].first.inputs()[stack[top].second++];
      if (enter(in)) stack.emplace_back(std::move(in), 0);
      continue;
    }
    array a = std::move(stack[top].first);
    stack.pop_back();
    on_exit(a);
  }
}

} // namespace nuvec::detail
