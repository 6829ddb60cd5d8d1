// nuvec: reverse and forward mode (vjp, jvp) and the gradient wrappers built on them
// (value_and_grad, grad). The algorithms are MLX's (shared/seeds/004_*.txt): trace the
// function on tracer copies of the primals, order the nodes that depend on them, then run
// each primitive's rule over that tape.
#include <numeric>
#include <set>
#include <sstream>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "core/scheduler.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"
#include "primitives/primitives.h"
#include "transforms/graph_walk.h"
#include "transforms/trace.h"

namespace nuvec {

namespace {

bool is_stop_gradient(const array& a) {
  return a.has_primitive() && typeid(a.primitive()) == typeid(StopGradient);
}

Stream stream_of(const array& a) {
  return a.has_primitive() ? a.primitive().stream() : default_stream(default_device());
}

// Tracer copies of the primals: new graph nodes sharing the data, so the function's graph
// can be told apart from everything that existed before.
std::vector<array> make_tracers(const std::vector<array>& primals) {
  std::vector<array> out;
  out.reserve(primals.size());
  for (auto& p : primals) {
    // A pending Copy that is not a live tracer (a tracer a finished transform left in the
    // caller's container: build_tape cleared its flag) holds its input's value, so wrap the
    // input instead and reusing the container does not stack one Copy per call (MLX's
    // autograd test "container reuse"). A live tracer of an enclosing transform (grad of
    // grad) must stay wrapped: unwrapping it would cut the outer derivative.
    const bool stale_copy = p.status() == array::Status::unscheduled && p.has_primitive() &&
        !p.is_tracer() && typeid(p.primitive()) == typeid(Copy);
    out.push_back(copy(stale_copy ? p.inputs()[0] : p, stream_of(p)));
    out.back().set_tracer(true);
  }
  return out;
}

// The nodes between the primals and the outputs that need a rule, inputs first. A node is
// on the tape when one of its inputs is a primal in `seeds` or on the tape; stop_gradient
// cuts the walk.
std::vector<array> build_tape(
    const std::vector<array>& outputs,
    const std::vector<array>& primals,
    std::unordered_set<std::uintptr_t> seeds) {
  std::unordered_set<std::uintptr_t> visited;
  for (auto p : primals) {
    p.set_tracer(false);
    visited.insert(p.id());
  }
  std::vector<array> tape;
  auto& active = seeds;
  for (auto& out : outputs) {
    detail::walk_post_order(
        out,
        visited,
        [](const array& a) {
          array h = a;
          h.set_tracer(false);
          for (auto s : a.siblings()) s.set_tracer(false);
        },
        [&](const array& a) {
          if (is_stop_gradient(a)) return;
          for (auto& in : a.inputs()) {
            if (active.count(in.id())) {
              tape.push_back(a);
              active.insert(a.id());
              for (auto& s : a.siblings()) active.insert(s.id());
              break;
            }
          }
        });
  }
  return tape;
}

} // namespace

namespace detail {

std::pair<std::vector<array>, std::vector<array>> vjp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& cotans,
    const std::vector<int>& argnums) {
  detail::InTracing tracing(true);
  auto primals_ = make_tracers(primals);
  auto outputs = fun(primals_);

  // Outputs cut by stop_gradient take no cotangent.
  std::vector<std::pair<int, int>> output_cotan_pairs;
  int cotan_index = 0;
  for (int i = 0; i < static_cast<int>(outputs.size()); ++i) {
    auto& out = outputs[i];
    if (is_stop_gradient(out)) continue;
    if (cotan_index >= static_cast<int>(cotans.size())) {
      throw_invalid_argument(
          "vjp", "the number of outputs to differentiate (", outputs.size(),
          ") must match the number of cotangents; got ", cotans.size(), ".");
    }
    if (out.shape() != cotans[cotan_index].shape()) {
      std::ostringstream extra;
      if (outputs.size() == 1 && out.size() == 1) {
        extra << " If you are using grad, your function must return a scalar (0-d array).";
      }
      throw_invalid_argument(
          "vjp", "cotangent shape must match the output shape ", out.shape(), "; got ",
          cotans[cotan_index].shape(), ".", extra.str());
    }
    output_cotan_pairs.emplace_back(i, cotan_index++);
  }

  std::unordered_set<std::uintptr_t> seeds;
  for (int arg : argnums) seeds.insert(primals_[arg].id());
  auto tape = build_tape(outputs, primals_, seeds);
  std::unordered_set<std::uintptr_t> needs_grad = seeds;
  for (auto& a : tape) {
    needs_grad.insert(a.id());
    for (auto& s : a.siblings()) needs_grad.insert(s.id());
  }

  std::unordered_map<std::uintptr_t, array> cotan_map;
  for (auto [out_idx, cotan_idx] : output_cotan_pairs) {
    auto& o = outputs[out_idx];
    array c = astype(cotans[cotan_idx], o.dtype(), stream_of(o));
    auto it = cotan_map.find(o.id());
    if (it != cotan_map.end()) {
      it->second = add(it->second, c, stream_of(o)); // the same array returned twice
    } else {
      cotan_map.emplace(o.id(), c);
    }
  }

  for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
    auto& a = *it;
    std::vector<int> args;
    for (int i = 0; i < static_cast<int>(a.inputs().size()); ++i) {
      if (needs_grad.count(a.inputs()[i].id())) args.push_back(i);
    }
    auto outs = a.outputs();
    bool has_cotan = false;
    for (auto& o : outs) has_cotan |= cotan_map.count(o.id()) > 0;
    if (!has_cotan || args.empty()) continue;

    Stream s = a.primitive().stream();
    std::vector<array> cotangents;
    for (auto& o : outs) {
      auto c = cotan_map.find(o.id());
      if (c != cotan_map.end()) {
        cotangents.push_back(c->second);
        cotan_map.erase(c);
      } else {
        cotangents.push_back(zeros_like(o, s));
      }
    }
    std::vector<array> vjps;
    {
      detail::RetainGraph retain;
      detail::DefaultStreamScope on_stream(s); // the rule's ops run on the primal's stream
      vjps = a.primitive().vjp(a.inputs(), cotangents, args, outs);
    }
    if (vjps.size() != args.size()) {
      throw std::logic_error(
          std::string("[vjp] ") + a.primitive().name() + " returned the wrong number of cotangents.");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      auto in_id = a.inputs()[args[i]].id();
      auto c = cotan_map.find(in_id);
      if (c != cotan_map.end()) {
        c->second = add(c->second, vjps[i], s);
      } else {
        cotan_map.emplace(in_id, vjps[i]);
      }
    }
  }

  std::vector<array> vjps;
  for (int arg : argnums) {
    auto& p = primals_[arg];
    auto c = cotan_map.find(p.id());
    vjps.push_back(c != cotan_map.end() ? c->second : zeros_like(p, stream_of(p)));
  }
  return {outputs, vjps};
}

} // namespace detail

std::pair<std::vector<array>, std::vector<array>> vjp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents) {
  std::vector<int> argnums(primals.size());
  std::iota(argnums.begin(), argnums.end(), 0);
  return detail::vjp(fun, primals, cotangents, argnums);
}

std::pair<array, array> vjp(
    const std::function<array(const array&)>& fun,
    const array& primal,
    const array& cotangent) {
  auto vfun = [&fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs[0])}; };
  auto [outs, vjps] = vjp(vfun, {primal}, {cotangent});
  return {outs[0], vjps[0]};
}

std::pair<std::vector<array>, std::vector<array>> jvp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& tangents) {
  detail::InTracing tracing(true);
  if (primals.size() != tangents.size()) {
    throw_invalid_argument(
        "jvp", "the number of tangents must match the number of primals (", primals.size(),
        "); got ", tangents.size(), ".");
  }
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].shape() != tangents[i].shape()) {
      throw_invalid_argument(
          "jvp", "tangent ", i, " must have the primal's shape ", primals[i].shape(),
          "; got ", tangents[i].shape(), ".");
    }
  }
  auto primals_ = make_tracers(primals);
  auto outputs = fun(primals_);

  std::unordered_set<std::uintptr_t> seeds;
  for (auto& p : primals_) seeds.insert(p.id());
  auto tape = build_tape(outputs, primals_, seeds);

  std::unordered_map<std::uintptr_t, array> tan_map;
  for (size_t i = 0; i < primals_.size(); ++i) {
    tan_map.emplace(primals_[i].id(), astype(tangents[i], primals_[i].dtype()));
  }
  for (auto& a : tape) {
    std::vector<int> args;
    std::vector<array> ts;
    for (int i = 0; i < static_cast<int>(a.inputs().size()); ++i) {
      auto t = tan_map.find(a.inputs()[i].id());
      if (t != tan_map.end()) {
        args.push_back(i);
        ts.push_back(t->second);
      }
    }
    detail::DefaultStreamScope on_stream(a.primitive().stream()); // rule ops on its stream
    auto jvps = a.primitive().jvp(a.inputs(), ts, args);
    auto outs = a.outputs();
    if (jvps.size() != outs.size()) {
      throw std::logic_error(
          std::string("[jvp] ") + a.primitive().name() + " returned the wrong number of tangents.");
    }
    for (size_t i = 0; i < outs.size(); ++i) tan_map.emplace(outs[i].id(), jvps[i]);
  }

  std::vector<array> jvps;
  for (auto& out : outputs) {
    auto t = tan_map.find(out.id());
    jvps.push_back(t != tan_map.end() ? t->second : zeros_like(out, stream_of(out)));
  }
  return {outputs, jvps};
}

std::pair<array, array> jvp(
    const std::function<array(const array&)>& fun,
    const array& primal,
    const array& tangent) {
  auto vfun = [&fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs[0])}; };
  auto [outs, jvps] = jvp(vfun, {primal}, {tangent});
  return {outs[0], jvps[0]};
}

ValueAndGradFn value_and_grad(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  if (argnums.empty()) {
    throw_invalid_argument("grad", "argnums must name at least one argument; got none.");
  }
  return [fun, argnums](const std::vector<array>& inputs) {
    std::set<int> args;
    for (int a : argnums) args.insert(a < 0 ? a + static_cast<int>(inputs.size()) : a);
    if (args.size() != argnums.size()) {
      throw_invalid_argument("grad", "argnums must not repeat an argument; got ",
                             Shape(argnums.begin(), argnums.end()), ".");
    }
    if (*args.begin() < 0 || *args.rbegin() >= static_cast<int>(inputs.size())) {
      throw_invalid_argument("grad", "argnums must lie in [0, ", inputs.size(),
                             ") for a function of ", inputs.size(), " inputs; got ",
                             Shape(argnums.begin(), argnums.end()), ".");
    }
    std::vector<int> sorted(args.begin(), args.end());
    auto gfun = [&fun](const std::vector<array>& xs) {
      auto outs = fun(xs);
      for (size_t i = 1; i < outs.size(); ++i) outs[i] = stop_gradient(outs[i], stream_of(outs[i]));
      return outs;
    };
    auto [outputs, grads] = detail::vjp(gfun, inputs, {array(1.0f)}, sorted);
    // Gradients in the caller's argnums order.
    std::vector<array> ordered;
    for (int a : argnums) {
      int ai = a < 0 ? a + static_cast<int>(inputs.size()) : a;
      ordered.push_back(grads[std::distance(sorted.begin(), std::find(sorted.begin(), sorted.end(), ai))]);
    }
    return std::make_pair(outputs, ordered);
  };
}

ValueAndGradFn value_and_grad(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs[0])}; },
      std::vector<int>{0});
  return [vg](const array& x) {
    auto [outs, grads] = vg({x});
    return std::make_pair(outs[0], grads[0]);
  };
}

SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& xs) { return std::vector<array>{fun(xs)}; }, argnums);
  return [vg](const std::vector<array>& xs) {
    auto [outs, grads] = vg(xs);
    return std::make_pair(outs[0], grads);
  };
}

SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum) {
  return value_and_grad(fun, std::vector<int>{argnum});
}

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums) {
  auto vg = value_and_grad(fun, argnums);
  return [vg](const std::vector<array>& xs) { return vg(xs).second; };
}

std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum) {
  return grad(fun, std::vector<int>{argnum});
}

std::function<array(const array&)> grad(const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(fun);
  return [vg](const array& x) { return vg(x).second; };
}

} // namespace nuvec
