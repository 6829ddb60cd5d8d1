// nuvec: vmap. Trace the function on unbatched placeholders, then replay the graph with
// each primitive's batching rule (MLX's vmap_trace / vmap_replace, shared/seeds/004_*.txt),
// walking the graph with an explicit stack.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "nuvec/ops.h"
#include "nuvec/primitives.h"
#include "nuvec/transforms.h"
#include "transforms/graph_walk.h"
#include "transforms/trace.h"

namespace nuvec {

namespace {

// Placeholders for the batched inputs: arrays of the per-example shape with no data, which
// the function's graph is built on.
std::pair<std::vector<array>, std::vector<array>> vmap_trace(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& inputs,
    const std::vector<int>& in_axes) {
  detail::InTracing tracing;
  if (in_axes.size() != inputs.size()) {
    throw_invalid_argument(
        "vmap", "the number of in_axes must match the number of inputs (", inputs.size(),
        "); got ", in_axes.size(), ".");
  }
  int size = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] == -1) continue;
    if (in_axes[i] < -1 || in_axes[i] >= static_cast<int>(inputs[i].ndim())) {
      throw_invalid_argument(
          "vmap", "in_axes[", i, "] must be -1 or an axis of input ", i, " (ndim ",
          inputs[i].ndim(), "); got ", in_axes[i], ".");
    }
    int n = inputs[i].shape(in_axes[i]);
    if (size >= 0 && n != size) {
      throw_invalid_argument(
          "vmap", "mapped axes must all have the same size; got ", size, " and ", n, ".");
    }
    size = n;
  }
  if (size < 0) {
    throw_invalid_argument("vmap", "at least one input must be mapped; got in_axes all -1.");
  }
  std::vector<array> placeholders;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] == -1) {
      placeholders.push_back(inputs[i]);
      continue;
    }
    Shape shape = inputs[i].shape();
    shape.erase(shape.begin() + in_axes[i]);
    placeholders.emplace_back(std::move(shape), inputs[i].dtype(), nullptr, std::vector<array>{});
    placeholders.back().set_tracer(true);
  }
  return {placeholders, fun(placeholders)};
}

std::vector<array> vmap_replace(
    const std::vector<array>& inputs,
    const std::vector<array>& s_inputs,
    const std::vector<array>& s_outputs,
    const std::vector<int>& in_axes,
    const std::vector<int>& out_axes) {
  if (out_axes.size() != s_outputs.size()) {
    throw_invalid_argument(
        "vmap", "the number of out_axes must match the number of outputs (", s_outputs.size(),
        "); got ", out_axes.size(), ".");
  }
  int vmap_size = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] >= 0) {
      vmap_size = inputs[i].shape(in_axes[i]);
      break;
    }
  }

  // Batched value and batch axis of every node computed so far.
  std::unordered_map<std::uintptr_t, std::pair<array, int>> tmap;
  std::unordered_set<std::uintptr_t> needs_vmap;
  std::unordered_set<std::uintptr_t> visited;
  for (size_t i = 0; i < s_inputs.size(); ++i) {
    array in = s_inputs[i];
    if (in_axes[i] != -1) {
      tmap.emplace(in.id(), std::make_pair(inputs[i], in_axes[i]));
      needs_vmap.insert(in.id());
      in.set_tracer(false);
    }
    visited.insert(in.id());
  }

  std::vector<array> tape;
  for (auto& out : s_outputs) {
    if (!out.has_primitive()) continue;
    detail::walk_post_order(
        out, visited, [](const array&) {},
        [&](const array& a) {
          for (auto& in : a.inputs()) {
            if (needs_vmap.count(in.id())) {
              tape.push_back(a);
              tape.back().set_tracer(false);
              needs_vmap.insert(a.id());
              for (auto s : a.siblings()) {
                needs_vmap.insert(s.id());
                s.set_tracer(false);
              }
              break;
            }
          }
        });
  }

  for (auto& a : tape) {
    std::vector<array> v_inputs;
    std::vector<int> v_axes;
    for (auto& in : a.inputs()) {
      auto it = tmap.find(in.id());
      if (it != tmap.end()) {
        v_inputs.push_back(it->second.first);
        v_axes.push_back(it->second.second);
      } else {
        v_inputs.push_back(in);
        v_axes.push_back(-1);
      }
    }
    auto [v_outputs, v_out_axes] = a.primitive().vmap(v_inputs, v_axes);
    auto outs = a.outputs();
    if (v_outputs.size() != outs.size() || v_out_axes.size() != outs.size()) {
      throw std::logic_error(
          std::string("[vmap] ") + a.primitive().name() + " returned the wrong number of outputs.");
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      tmap.emplace(outs[i].id(), std::make_pair(v_outputs[i], v_out_axes[i]));
    }
  }

  std::vector<array> outputs;
  for (size_t i = 0; i < s_outputs.size(); ++i) {
    auto it = tmap.find(s_outputs[i].id());
    if (it != tmap.end()) {
      auto [out, vdim] = it->second;
      int target = out_axes[i];
      if (target < 0 || target >= static_cast<int>(out.ndim())) {
        throw_invalid_argument(
            "vmap", "out_axes[", i, "] must be an axis of the batched output (ndim ", out.ndim(),
            "); got ", target, ".");
      }
      if (vdim == -1) {
        // A rule may return an unbatched result (it did not depend on the batch after all).
        out = broadcast_to(expand_dims(out, target), [&] {
          Shape sh = out.shape();
          sh.insert(sh.begin() + target, vmap_size);
          return sh;
        }());
      } else if (vdim != target) {
        out = moveaxis(out, vdim, target);
      }
      outputs.push_back(out);
    } else {
      // Independent of the mapped inputs: the same value for every example.
      auto& o = s_outputs[i];
      int target = out_axes[i];
      if (target < 0 || target > static_cast<int>(o.ndim())) {
        throw_invalid_argument(
            "vmap", "out_axes[", i, "] must be an axis of the batched output (ndim ",
            o.ndim() + 1, "); got ", target, ".");
      }
      Shape sh = o.shape();
      sh.insert(sh.begin() + target, vmap_size);
      outputs.push_back(broadcast_to(expand_dims(o, target), sh));
    }
  }
  return outputs;
}

} // namespace

std::function<std::vector<array>(const std::vector<array>&)> vmap(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<int>& in_axes,
    const std::vector<int>& out_axes) {
  // Negative axes mean "not batched". Every input unbatched but some output batched (or the
  // reverse) has no batch size to use: MLX refuses it when the function is made.
  auto none_batched = [](const std::vector<int>& axes) {
    return !axes.empty() && std::all_of(axes.begin(), axes.end(), [](int ax) { return ax < 0; });
  };
  if (none_batched(in_axes) != none_batched(out_axes)) {
    throw std::invalid_argument(
        "[vmap] in_axes and out_axes must both batch something or both batch nothing; got "
        "in_axes that " + std::string(none_batched(in_axes) ? "batch nothing" : "batch") +
        " and out_axes that " + (none_batched(out_axes) ? "batch nothing." : "batch."));
  }
  return [fun, in_axes, out_axes](const std::vector<array>& inputs) {
    std::vector<int> ia = in_axes.empty() ? std::vector<int>(inputs.size(), 0) : in_axes;
    auto [s_inputs, s_outputs] = vmap_trace(fun, inputs, ia);
    std::vector<int> oa = out_axes.empty() ? std::vector<int>(s_outputs.size(), 0) : out_axes;
    return vmap_replace(inputs, s_inputs, s_outputs, ia, oa);
  };
}

std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun,
    int in_axis_a,
    int in_axis_b,
    int out_axis) {
  auto vfun = vmap(
      [fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs[0], xs[1])}; },
      {in_axis_a, in_axis_b},
      {out_axis});
  return [vfun](const array& a, const array& b) { return vfun({a, b})[0]; };
}

std::function<array(const array&)> vmap(
    const std::function<array(const array&)>& fun,
    int in_axis,
    int out_axis) {
  auto vfun = vmap(
      [fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs[0])}; },
      {in_axis},
      {out_axis});
  return [vfun](const array& a) { return vfun({a})[0]; };
}

} // namespace nuvec
