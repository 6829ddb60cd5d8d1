// nuvec: the rules every fused primitive derives from its fallback graph (fast_primitive.h).
#include "fast/fast_primitive.h"

#include <algorithm>
#include <typeinfo>

#include "nuvec/ops.h"
#include "nuvec/primitive_families.h"
#include "nuvec/transforms.h"

namespace nuvec::fast {

std::vector<array> FastPrimitive::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  // Forward mode through the fallback as a function of the differentiated primals only:
  // the others (integer indices, targets) enter as constants, since a zero tangent for an
  // index input is refused by the gathers' rules.
  std::vector<array> active;
  active.reserve(argnums.size());
  for (int a : argnums) active.push_back(primals[a]);
  auto f = [&](const std::vector<array>& xs) {
    std::vector<array> in = primals;
    for (size_t i = 0; i < argnums.size(); ++i) in[argnums[i]] = xs[i];
    return fallback_(in);
  };
  return nuvec::jvp(f, active, tangents).second;
}

std::vector<array> FastPrimitive::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // Only the wanted primals are differentiated (not, say, a node's integer targets).
  std::vector<int> wanted(argnums);
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  auto grads = detail::vjp(fallback_, primals, cotangents, wanted).second;
  std::vector<array> out;
  out.reserve(argnums.size());
  for (int a : argnums) {
    out.push_back(grads[std::lower_bound(wanted.begin(), wanted.end(), a) - wanted.begin()]);
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> FastPrimitive::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  auto outs = nuvec::vmap(fallback_, axes)(inputs);
  return {outs, std::vector<int>(outs.size(), 0)};
}

std::pair<std::vector<array>, std::vector<int>> FastPrimitive::vmap_trailing(
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    int core_ndim,
    const std::function<std::vector<array>(const std::vector<array>&)>& rebuild) {
  // Every batched input gets its batch axis at the front (inside the core axes it would be
  // mixed into the kernel's rows; in front it is one more leading index), and unbatched
  // ones a size-1 leading axis, so the leading axes broadcast as the op expects.
  std::vector<array> moved;
  moved.reserve(inputs.size());
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) any = any || axes[i] >= 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const array& x = inputs[i];
    if (axes[i] >= 0) {
      moved.push_back(axes[i] == 0 ? x : moveaxis(x, axes[i], 0, stream()));
    } else if (any && static_cast<int>(x.ndim()) > core_ndim) {
      moved.push_back(expand_dims(x, 0, stream()));
    } else {
      moved.push_back(x); // a core-only parameter (a weight over the last axis) stays as is
    }
  }
  auto outs = rebuild(moved);
  return {outs, std::vector<int>(outs.size(), any ? 0 : -1)};
}

bool is_known_zeros(const array& a) {
  if (!a.has_primitive() || typeid(a.primitive()) != typeid(Full)) return false;
  array v = a.inputs()[0];
  while (v.has_primitive() && typeid(v.primitive()) == typeid(Broadcast)) v = v.inputs()[0];
  if (v.size() != 1 || v.has_primitive() || !v.is_available()) return false;
  const auto* bytes = static_cast<const unsigned char*>(v.raw_data());
  return std::all_of(bytes, bytes + v.itemsize(), [](unsigned char c) { return c == 0; });
}

std::vector<array> record_or_fallback(
    bool kernel_covers,
    std::shared_ptr<FastPrimitive> primitive,
    const std::vector<Shape>& shapes,
    const std::vector<Dtype>& dtypes,
    const std::vector<array>& inputs) {
  if (!kernel_covers) return primitive->fallback()(inputs);
  if (shapes.size() == 1) return {array(shapes[0], dtypes[0], std::move(primitive), inputs)};
  return array::make_arrays(shapes, dtypes, primitive, inputs);
}

} // namespace nuvec::fast
