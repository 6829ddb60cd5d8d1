// nuvec: print_graph and export_to_dot (MLX's graph_utils.cpp output formats), over the
// iterative post-order walk the transforms share.
#include "nuvec/graph_utils.h"

#include <ostream>
#include <unordered_set>

#include "nuvec/primitives.h"
#include "nuvec/utils.h"
#include "transforms/graph_walk.h"

namespace nuvec {

const std::string& NodeNamer::get_name(const array& x) {
  auto it = names.find(x.id());
  if (it != names.end()) return it->second;
  // The next name of the sequence A..Z, AA, AB, ... (bijective base 26).
  std::string name;
  for (size_t n = names.size() + 1; n > 0; n = (n - 1) / 26) {
    name.insert(name.begin(), static_cast<char>('A' + (n - 1) % 26));
  }
  return names.emplace(x.id(), std::move(name)).first->second;
}

void NodeNamer::set_name(const array& x, std::string n) {
  names[x.id()] = std::move(n);
}

namespace {

// Calls visit(a) for every array reachable from outputs, inputs first, once per node.
template <typename Visit>
void post_order(const std::vector<array>& outputs, Visit&& visit) {
  std::unordered_set<std::uintptr_t> visited;
  for (auto& o : outputs) detail::walk_post_order(o, visited, [](const array&) {}, visit);
}

} // namespace

void print_graph(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs) {
  std::vector<array> tape, inputs;
  post_order(outputs, [&](const array& x) { (x.has_primitive() ? tape : inputs).push_back(x); });
  auto print_arrays = [&](const std::vector<array>& arrs) {
    for (size_t i = 0; i < arrs.size(); ++i) {
      os << (i ? ", " : "") << namer.get_name(arrs[i]) << " [" << arrs[i].shape() << ", "
         << arrs[i].dtype() << "]";
    }
  };
  os << "Inputs: ";
  print_arrays(inputs);
  os << "\nOutputs: ";
  print_arrays(outputs);
  os << "\n";
  for (auto& x : tape) {
    x.primitive().print(os);
    os << " ";
    print_arrays(x.inputs());
    os << " -> ";
    print_arrays(x.outputs());
    os << "\n";
  }
}

void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs) {
  std::unordered_set<std::uintptr_t> output_set;
  for (auto& o : outputs) output_set.insert(o.id());
  os << "digraph {\n";
  post_order(outputs, [&](const array& x) {
    if (!x.has_primitive()) {
      os << "{ rank=source; " << namer.get_name(x) << "; }\n";
      return;
    }
    os << "{ " << x.primitive_id() << " [label =\"";
    x.primitive().print(os);
    os << "\", shape=rectangle]; }\n";
    for (auto& in : x.inputs()) os << namer.get_name(in) << " -> " << x.primitive_id() << "\n";
    for (auto& out : x.outputs()) {
      os << "{ " << (output_set.count(out.id()) ? "rank=sink; " : "") << namer.get_name(out) << "; }\n";
      os << x.primitive_id() << " -> " << namer.get_name(out) << "\n";
    }
  });
  os << "}";
}

} // namespace nuvec
