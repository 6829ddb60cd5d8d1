// nuvec: custom_function, custom_vjp and checkpoint, and the rules of their node
// (CustomTransforms). The node's inputs are the primals followed by the function's outputs
// (computed eagerly in the graph, behind stop_gradient), so evaluating it only forwards them
// (MLX's design, shared/seeds/004_*.txt).
#include "core/errors.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "primitives/primitives.h"

namespace nuvec {

const char* CustomTransforms::name() const {
  return "CustomTransforms";
}

std::vector<Shape> CustomTransforms::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (size_t i = inputs.size() - num_outputs_; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape());
  }
  return shapes;
}

std::vector<array> CustomTransforms::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  std::vector<array> args(primals.begin(), primals.end() - num_outputs_);
  auto all = vjp_fun_(args, cotangents, outputs);
  if (all.size() != args.size()) {
    throw_invalid_argument(
        "custom_function", "the vjp must return one cotangent per primal (", args.size(),
        "); got ", all.size(), ".");
  }
  std::vector<array> out;
  for (int a : argnums) {
    if (a < static_cast<int>(args.size())) {
      if (all[a].shape() != args[a].shape()) {
        throw_invalid_argument(
            "custom_function", "the vjp's cotangent ", a, " must have the primal's shape ",
            args[a].shape(), "; got ", all[a].shape(), ".");
      }
      out.push_back(astype(all[a], args[a].dtype()));
    } else {
      out.push_back(zeros_like(primals[a])); // the outputs fed in are not differentiable
    }
  }
  return out;
}

std::vector<array> CustomTransforms::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<array> args(primals.begin(), primals.end() - num_outputs_);
  std::vector<array> ts;
  std::vector<int> as;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] < static_cast<int>(args.size())) {
      ts.push_back(tangents[i]);
      as.push_back(argnums[i]);
    }
  }
  auto out = jvp_fun_(args, ts, as);
  if (static_cast<int>(out.size()) != num_outputs_) {
    throw_invalid_argument(
        "custom_function", "the jvp must return one tangent per output (", num_outputs_,
        "); got ", out.size(), ".");
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> CustomTransforms::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  std::vector<array> args(inputs.begin(), inputs.end() - num_outputs_);
  std::vector<int> arg_axes(axes.begin(), axes.end() - num_outputs_);
  auto [outs, out_axes] = vmap_fun_(args, arg_axes);
  if (static_cast<int>(outs.size()) != num_outputs_) {
    throw_invalid_argument(
        "custom_function", "the vmap rule must return one output per output (", num_outputs_,
        "); got ", outs.size(), ".");
  }
  return {outs, out_axes};
}

bool CustomTransforms::is_equivalent(const Primitive&) const {
  return false; // user functions cannot be compared
}

std::function<std::vector<array>(const std::vector<array>&)> custom_function(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::optional<std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<array>&)>> fun_vjp,
    std::optional<std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<int>&)>> fun_jvp,
    std::optional<std::function<std::pair<std::vector<array>, std::vector<int>>(
        const std::vector<array>&,
        const std::vector<int>&)>> fun_vmap) {
  if (!fun_vjp && !fun_jvp && !fun_vmap) return fun;
  return [fun, fun_vjp, fun_jvp, fun_vmap](const std::vector<array>& args) {
    auto outputs = fun(args);
    if (outputs.empty()) {
      throw_invalid_argument("custom_function", "the function must return at least one array; got none.");
    }
    for (auto& o : outputs) o = stop_gradient(o);
    std::vector<array> inputs = args;
    inputs.insert(inputs.end(), outputs.begin(), outputs.end());
    Stream s = outputs[0].has_primitive() ? outputs[0].primitive().stream()
                                           : default_stream(default_device());
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto& o : outputs) {
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    // Rules the user did not give are derived from fun itself.
    CustomTransforms::VjpFn vjp_rule = fun_vjp.value_or(
        [fun](const std::vector<array>& primals, const std::vector<array>& cotangents,
              const std::vector<array>&) { return vjp(fun, primals, cotangents).second; });
    CustomTransforms::JvpFn jvp_rule = fun_jvp.value_or(
        [fun](const std::vector<array>& primals, const std::vector<array>& tangents,
              const std::vector<int>& argnums) {
          std::vector<array> all;
          for (size_t i = 0, j = 0; i < primals.size(); ++i) {
            if (j < argnums.size() && argnums[j] == static_cast<int>(i)) {
              all.push_back(tangents[j++]);
            } else {
              all.push_back(zeros_like(primals[i]));
            }
          }
          return jvp(fun, primals, all).second;
        });
    CustomTransforms::VmapFn vmap_rule = fun_vmap.value_or(
        [fun, n = outputs.size()](const std::vector<array>& inputs, const std::vector<int>& axes) {
          std::vector<int> out_axes(n, 0);
          return std::make_pair(vmap(fun, axes, out_axes)(inputs), out_axes);
        });
    return array::make_arrays(
        std::move(shapes), dtypes,
        std::make_shared<CustomTransforms>(
            s, static_cast<int>(outputs.size()), std::move(vjp_rule), std::move(jvp_rule),
            std::move(vmap_rule)),
        inputs);
  };
}

std::function<std::vector<array>(const std::vector<array>&)> custom_vjp(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<array>&)> fun_vjp) {
  return custom_function(std::move(fun), std::move(fun_vjp), std::nullopt, std::nullopt);
}

std::function<std::vector<array>(const std::vector<array>&)> checkpoint(
    std::function<std::vector<array>(const std::vector<array>&)> fun) {
  // The backward pass re-runs fun; `depends` ties the recomputation to the forward outputs
  // so it is scheduled after them instead of being merged with the forward pass.
  auto vjp_rule = [fun](const std::vector<array>& primals,
                        const std::vector<array>& cotangents,
                        const std::vector<array>& outputs) {
    return vjp(fun, depends(primals, outputs), cotangents).second;
  };
  return custom_vjp(fun, vjp_rule);
}

} // namespace nuvec
