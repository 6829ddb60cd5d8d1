// nuvec: printing a graph as text or as Graphviz dot (MLX's graph_utils.h API).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Names arrays for printing: A, B, ..., Z, AA, AB, ... in the order they are first asked
/// for, unless set_name gave one.
struct NodeNamer {
  std::unordered_map<std::uintptr_t, std::string> names;

  /// x's name (a new one in the sequence when x has none yet).
  const std::string& get_name(const array& x);
  /// Names x (replacing any earlier name).
  void set_name(const array& x, std::string n);
};

/// Prints the graph of outputs, one node per line after the leaves and outputs:
///   Inputs: A [(2, 2), float32], ...
///   Outputs: C [(2, 2), float32]
///   Add A [(2, 2), float32], B [...] -> C [(2, 2), float32]
/// Leaves are arrays without a primitive (evaluated or constant). Nodes print through
/// Primitive::print, inputs before their users. Source: MLX's print_graph.
void print_graph(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs);

inline void print_graph(std::ostream& os, const std::vector<array>& outputs) {
  print_graph(os, NodeNamer{}, outputs);
}

template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
inline void print_graph(std::ostream& os, Arrays&&... outputs) {
  print_graph(os, NodeNamer{}, std::vector<array>{std::forward<Arrays>(outputs)...});
}

template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
inline void print_graph(std::ostream& os, NodeNamer namer, Arrays&&... outputs) {
  print_graph(os, std::move(namer), std::vector<array>{std::forward<Arrays>(outputs)...});
}

/// Writes the graph of outputs in Graphviz dot: leaves as source-ranked nodes, primitives as
/// rectangles labelled by Primitive::print, outputs sink-ranked, edges along the data flow.
/// Source: MLX's export_to_dot.
void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs);

inline void export_to_dot(std::ostream& os, const std::vector<array>& outputs) {
  export_to_dot(os, NodeNamer{}, outputs);
}

template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
inline void export_to_dot(std::ostream& os, Arrays&&... outputs) {
  export_to_dot(os, NodeNamer{}, std::vector<array>{std::forward<Arrays>(outputs)...});
}

template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
inline void export_to_dot(std::ostream& os, NodeNamer namer, Arrays&&... outputs) {
  export_to_dot(os, std::move(namer), std::vector<array>{std::forward<Arrays>(outputs)...});
}

} // namespace nuvec
