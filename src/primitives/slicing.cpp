// nuvec: rules of the slicing and joining families (Slice, SliceUpdate, DynamicSlice,
// DynamicSliceUpdate, Concatenate). Derivatives follow shared/seeds/000_*.txt (MLX's rules):
// a slice's cotangent is written back into zeros, an update's is sliced out, a join's is split.
#include "nuvec/utils.h"
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "primitives/slicing.h"

namespace nuvec {

namespace {

/// Batches a primitive that has no batched form for some input (a per-example start): runs
/// `one` on each example and stacks the results along a new first axis.
template <typename F>
std::pair<std::vector<array>, std::vector<int>> vmap_by_loop(
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    F&& one) {
  int n = batch_size(inputs, axes);
  std::vector<array> results;
  results.reserve(n);
  for (int b = 0; b < n; ++b) {
    std::vector<array> xs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const array& x = inputs[i];
      if (axes[i] < 0) {
        xs.push_back(x);
        continue;
      }
      Shape start(x.ndim(), 0), stop = x.shape();
      start[axes[i]] = b;
      stop[axes[i]] = b + 1;
      xs.push_back(squeeze(slice(x, start, stop), axes[i]));
    }
    results.push_back(one(xs));
  }
  return {{stack(results, 0)}, {0}};
}

/// The tangent of primal i: the given one, or zeros when i is not among argnums.
array tangent_or_zeros(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums,
    int i) {
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == i) return tangents[k];
  }
  return zeros_like(primals[i]);
}

/// The cotangent of a window's start: zero, since the output is piecewise constant in an
/// integer index (the seeds' rule for integer inputs).
array index_cotangent(const array& start) {
  return zeros_like(start);
}

} // namespace

// ---------------------------------------------------------------------------------------
// Names

const char* Slice::name() const { return "Slice"; }
const char* SliceUpdate::name() const { return "SliceUpdate"; }
const char* DynamicSlice::name() const { return "DynamicSlice"; }
const char* DynamicSliceUpdate::name() const { return "DynamicSliceUpdate"; }
const char* Concatenate::name() const { return "Concatenate"; }

// ---------------------------------------------------------------------------------------
// Output shapes

std::vector<Shape> Slice::output_shapes(const std::vector<array>&) {
  return {slicing::slice_shape(start_, stop_, strides_)};
}

std::vector<Shape> SliceUpdate::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<Shape> DynamicSlice::output_shapes(const std::vector<array>&) {
  return {slice_size_};
}

std::vector<Shape> DynamicSliceUpdate::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<Shape> Concatenate::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  shape[axis_] = 0;
  for (auto& x : inputs) shape[axis_] += x.shape(axis_);
  return {shape};
}

// ---------------------------------------------------------------------------------------
// Reverse mode

std::vector<array> Slice::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  auto update = std::make_shared<SliceUpdate>(stream(), start_, stop_, strides_);
  return {array(x.shape(), g.dtype(), update, {zeros(x.shape(), g.dtype()), g})};
}

std::vector<array> SliceUpdate::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  const array& update = primals[1];
  std::vector<array> grads;
  for (int i : argnums) {
    if (i == 0) {
      // The source's elements under the window were overwritten: they get no cotangent.
      auto zeroed = std::make_shared<SliceUpdate>(stream(), start_, stop_, strides_);
      grads.push_back(array(
          g.shape(), g.dtype(), zeroed, {g, zeros(update.shape(), g.dtype())}));
    } else {
      auto part = std::make_shared<Slice>(stream(), start_, stop_, strides_);
      grads.push_back(array(update.shape(), g.dtype(), part, {g}));
    }
  }
  return grads;
}

std::vector<array> DynamicSlice::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  std::vector<array> grads;
  for (int i : argnums) {
    if (i != 0) {
      grads.push_back(index_cotangent(primals[1]));
      continue;
    }
    auto update = std::make_shared<DynamicSliceUpdate>(stream(), axes_);
    grads.push_back(array(
        x.shape(), g.dtype(), update, {zeros(x.shape(), g.dtype()), g, primals[1]}));
  }
  return grads;
}

std::vector<array> DynamicSliceUpdate::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  const array& update = primals[1];
  const array& start = primals[2];
  std::vector<array> grads;
  for (int i : argnums) {
    if (i == 0) {
      auto zeroed = std::make_shared<DynamicSliceUpdate>(stream(), axes_);
      grads.push_back(array(
          g.shape(), g.dtype(), zeroed, {g, zeros(update.shape(), g.dtype()), start}));
    } else if (i == 1) {
      auto part = std::make_shared<DynamicSlice>(stream(), axes_, update.shape());
      grads.push_back(array(update.shape(), g.dtype(), part, {g, start}));
    } else {
      grads.push_back(index_cotangent(start));
    }
  }
  return grads;
}

std::vector<array> Concatenate::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  std::vector<int32_t> offsets(primals.size() + 1, 0);
  for (size_t i = 0; i < primals.size(); ++i) {
    offsets[i + 1] = offsets[i] + primals[i].shape(axis_);
  }
  std::vector<array> grads;
  for (int i : argnums) {
    Shape start(g.ndim(), 0), stop = g.shape(), strides(g.ndim(), 1);
    start[axis_] = offsets[i];
    stop[axis_] = offsets[i + 1];
    auto part = std::make_shared<Slice>(stream(), start, stop, strides);
    grads.push_back(array(primals[i].shape(), g.dtype(), part, {g}));
  }
  return grads;
}

// ---------------------------------------------------------------------------------------
// Forward mode: every family is linear in its data inputs, so the tangent goes through the
// same primitive (the starts of the dynamic forms are reused as they are; their own tangents
// are ignored).

std::vector<array> Slice::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  auto same = std::make_shared<Slice>(stream(), start_, stop_, strides_);
  const array& t = tangents[0];
  return {array(slicing::slice_shape(start_, stop_, strides_), t.dtype(), same, {t})};
}

std::vector<array> SliceUpdate::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  array ts = tangent_or_zeros(primals, tangents, argnums, 0);
  array tu = astype(tangent_or_zeros(primals, tangents, argnums, 1), ts.dtype());
  auto same = std::make_shared<SliceUpdate>(stream(), start_, stop_, strides_);
  return {array(ts.shape(), ts.dtype(), same, {ts, tu})};
}

std::vector<array> DynamicSlice::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  // The start's tangent contributes nothing (an integer index).
  array t = tangent_or_zeros(primals, tangents, argnums, 0);
  auto same = std::make_shared<DynamicSlice>(stream(), axes_, slice_size_);
  return {array(slice_size_, t.dtype(), same, {t, primals[1]})};
}

std::vector<array> DynamicSliceUpdate::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  array ts = tangent_or_zeros(primals, tangents, argnums, 0);
  array tu = astype(tangent_or_zeros(primals, tangents, argnums, 1), ts.dtype());
  auto same = std::make_shared<DynamicSliceUpdate>(stream(), axes_);
  return {array(ts.shape(), ts.dtype(), same, {ts, tu, primals[2]})};
}

std::vector<array> Concatenate::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<array> ts;
  ts.reserve(primals.size());
  for (int i = 0; i < static_cast<int>(primals.size()); ++i) {
    ts.push_back(tangent_or_zeros(primals, tangents, argnums, i));
  }
  Dtype dtype = result_type(ts);
  for (auto& t : ts) t = astype(t, dtype);
  auto same = std::make_shared<Concatenate>(stream(), axis_);
  Shape shape = output_shapes(ts)[0];
  return {array(shape, dtype, same, ts)};
}

// ---------------------------------------------------------------------------------------
// Batching: the batch axis becomes a leading full-range axis of the window.

std::pair<std::vector<array>, std::vector<int>> Slice::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int ax = axes[0];
  if (ax < 0) {
    auto same = std::make_shared<Slice>(stream(), start_, stop_, strides_);
    return {{array(slicing::slice_shape(start_, stop_, strides_), x.dtype(), same, {x})}, {-1}};
  }
  // Inserting the full range at the batch axis keeps x's layout (no transpose needed).
  Shape start = start_, stop = stop_, strides = strides_;
  start.insert(start.begin() + ax, 0);
  stop.insert(stop.begin() + ax, x.shape(ax));
  strides.insert(strides.begin() + ax, 1);
  Shape shape = slicing::slice_shape(start, stop, strides);
  auto batched = std::make_shared<Slice>(stream(), start, stop, strides);
  return {{array(shape, x.dtype(), batched, {x})}, {ax}};
}

std::pair<std::vector<array>, std::vector<int>> SliceUpdate::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  array src = with_batch_front(inputs[0], axes[0], n);
  array update = with_batch_front(inputs[1], axes[1], n);
  Shape start = start_, stop = stop_, strides = strides_;
  start.insert(start.begin(), 0);
  stop.insert(stop.begin(), n);
  strides.insert(strides.begin(), 1);
  auto batched = std::make_shared<SliceUpdate>(stream(), start, stop, strides);
  return {{array(src.shape(), src.dtype(), batched, {src, update})}, {0}};
}

std::pair<std::vector<array>, std::vector<int>> DynamicSlice::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[1] >= 0) {
    // Each example has its own start: one window per example.
    return vmap_by_loop(inputs, axes, [&](const std::vector<array>& xs) {
      auto one = std::make_shared<DynamicSlice>(stream(), axes_, slice_size_);
      return array(slice_size_, xs[0].dtype(), one, {xs[0], xs[1]});
    });
  }
  const array& x = inputs[0];
  int n = x.shape(axes[0]);
  array front = with_batch_front(x, axes[0], n);
  std::vector<int> shifted = axes_;
  for (auto& a : shifted) a += 1;
  Shape size = slice_size_;
  size.insert(size.begin(), n);
  auto batched = std::make_shared<DynamicSlice>(stream(), shifted, size);
  return {{array(size, x.dtype(), batched, {front, inputs[1]})}, {0}};
}

std::pair<std::vector<array>, std::vector<int>> DynamicSliceUpdate::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[2] >= 0) {
    return vmap_by_loop(inputs, axes, [&](const std::vector<array>& xs) {
      auto one = std::make_shared<DynamicSliceUpdate>(stream(), axes_);
      return array(xs[0].shape(), xs[0].dtype(), one, {xs[0], xs[1], xs[2]});
    });
  }
  int n = batch_size(inputs, axes);
  array src = with_batch_front(inputs[0], axes[0], n);
  array update = with_batch_front(inputs[1], axes[1], n);
  std::vector<int> shifted = axes_;
  for (auto& a : shifted) a += 1;
  auto batched = std::make_shared<DynamicSliceUpdate>(stream(), shifted);
  return {{array(src.shape(), src.dtype(), batched, {src, update, inputs[2]})}, {0}};
}

std::pair<std::vector<array>, std::vector<int>> Concatenate::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  std::vector<array> fronts;
  fronts.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    fronts.push_back(with_batch_front(inputs[i], axes[i], n));
  }
  auto batched = std::make_shared<Concatenate>(stream(), axis_ + 1);
  Shape shape = batched->output_shapes(fronts)[0];
  return {{array(shape, fronts[0].dtype(), batched, fronts)}, {0}};
}

// ---------------------------------------------------------------------------------------
// Equivalence

bool Slice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Slice*>(&other);
  return o && start_ == o->start_ && stop_ == o->stop_ && strides_ == o->strides_;
}

bool SliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const SliceUpdate*>(&other);
  return o && start_ == o->start_ && stop_ == o->stop_ && strides_ == o->strides_;
}

bool DynamicSlice::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSlice*>(&other);
  return o && axes_ == o->axes_ && slice_size_ == o->slice_size_;
}

bool DynamicSliceUpdate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const DynamicSliceUpdate*>(&other);
  return o && axes_ == o->axes_;
}

bool Concatenate::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Concatenate*>(&other);
  return o && axis_ == o->axis_;
}

} // namespace nuvec
