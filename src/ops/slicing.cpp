// nuvec: slicing and joining ops: slice, slice_update, split, concatenate, stack, unstack,
// repeat, tile, pad, roll, flip, diagonal, diag, trace. Semantics are NumPy's (bounds as
// Python's slice.indices, split/tile/roll/pad as numpy); signatures and defaults are MLX's.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "ops/ops_common.h"
#include "primitives/slicing.h"

namespace nuvec {

namespace {

/// The axes normalised to [0, ndim) in the given order (their positions pair them with
/// other per-axis arguments). Throws std::out_of_range for an axis out of range and
/// std::invalid_argument for a repeated one.
std::vector<int> normalize_axes_in_order(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int a : axes) out.push_back(normalize_axis_index(a, ndim, op));
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw_invalid_argument(op, "axes must be unique; got ", Shape(axes.begin(), axes.end()), ".");
  }
  return out;
}

/// Checks that one bound per dimension was given and that no step is zero, then clamps the
/// bounds in place (Python's slice.indices).
void normalize_slice(
    const char* op,
    const Shape& shape,
    Shape& start,
    Shape& stop,
    const Shape& strides) {
  int nd = static_cast<int>(shape.size());
  if (static_cast<int>(start.size()) != nd || static_cast<int>(stop.size()) != nd ||
      static_cast<int>(strides.size()) != nd) {
    throw_invalid_argument(
        op, "start, stop and strides must have one entry per dimension (", nd, "); got ",
        start, ", ", stop, " and ", strides, ".");
  }
  for (int i = 0; i < nd; ++i) {
    if (strides[i] == 0) {
      throw_invalid_argument(op, "strides must be non-zero; got ", strides, ".");
    }
    slicing::normalize_bounds(shape[i], start[i], stop[i], strides[i]);
  }
}

/// A slice of already normalised bounds, recorded as one Slice node.
array record_slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  Shape shape = slicing::slice_shape(start, stop, strides);
  return array(
      shape,
      a.dtype(),
      std::make_shared<Slice>(to_stream(s), std::move(start), std::move(stop), std::move(strides)),
      {a});
}

/// a[lo:hi] along one axis (bounds already in range).
array axis_slice(const array& a, int axis, int32_t lo, int32_t hi, StreamOrDevice s) {
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  start[axis] = lo;
  stop[axis] = hi;
  return record_slice(a, start, stop, strides, s);
}

/// Whether `from` broadcasts to exactly `to` (NumPy's rule).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

array cast_if_needed(const array& a, Dtype dtype, StreamOrDevice s) {
  return a.dtype() == dtype ? a : astype(a, dtype, s);
}

/// The start array of a dynamic window, checked: an integer array with one entry per axis.
void check_dynamic_start(const char* op, const array& start, const std::vector<int>& axes) {
  if (!issubdtype(start.dtype(), integer)) {
    throw_invalid_argument(op, "start must have an integer dtype; got ", start.dtype(), ".");
  }
  if (start.size() != axes.size()) {
    throw_invalid_argument(
        op, "start must have one entry per axis (", axes.size(), "); got ", start.size(), ".");
  }
}

/// x rolled by `shift` along one (normalised) axis: the last shift elements come first.
array roll_axis(const array& x, int64_t shift, int axis, StreamOrDevice s) {
  int64_t n = x.shape(axis);
  if (n == 0) return x;
  int64_t k = ((shift % n) + n) % n;
  if (k == 0) return x;
  int32_t cut = static_cast<int32_t>(n - k);
  return concatenate(
      {axis_slice(x, axis, cut, static_cast<int32_t>(n), s), axis_slice(x, axis, 0, cut, s)},
      axis,
      s);
}

/// Rolls along each listed axis by the matching shift (repeated axes add up, as NumPy).
array roll_axes(
    const array& a,
    const std::vector<int64_t>& shifts,
    const std::vector<int>& axes,
    StreamOrDevice s) {
  std::vector<int64_t> total(a.ndim(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    total[normalize_axis_index(axes[i], static_cast<int>(a.ndim()), "roll")] += shifts[i];
  }
  array out = a;
  for (int ax = 0; ax < static_cast<int>(a.ndim()); ++ax) {
    if (total[ax] != 0) out = roll_axis(out, total[ax], ax, s);
  }
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------
// slice, slice_update

array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  normalize_slice("slice", a.shape(), start, stop, strides);
  Shape shape = slicing::slice_shape(start, stop, strides);
  bool forward = std::all_of(strides.begin(), strides.end(), [](int32_t st) { return st > 0; });
  // A forward window with a's shape is a itself.
  if (forward && shape == a.shape()) return a;
  return record_slice(a, std::move(start), std::move(stop), std::move(strides), s);
}

array slice(const array& a, Shape start, Shape stop, StreamOrDevice s) {
  Shape strides(a.ndim(), 1);
  return slice(a, std::move(start), std::move(stop), std::move(strides), s);
}

array slice(
    const array& a,
    const array& start,
    std::vector<int> axes,
    Shape slice_size,
    StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axes = normalize_axes_in_order(axes, nd, "slice");
  check_dynamic_start("slice", start, axes);
  Shape size;
  if (static_cast<int>(slice_size.size()) == nd) {
    size = slice_size;
  } else if (slice_size.size() == axes.size()) {
    // Sizes given along the axes only: the other dimensions are taken whole.
    size = a.shape();
    for (size_t i = 0; i < axes.size(); ++i) size[axes[i]] = slice_size[i];
  } else {
    throw_invalid_argument(
        "slice", "slice_size must have one entry per dimension (", nd, ") or per axis (",
        axes.size(), "); got ", slice_size, ".");
  }
  for (int i = 0; i < nd; ++i) {
    if (size[i] < 0 || size[i] > a.shape(i)) {
      throw_invalid_argument(
          "slice", "slice_size must lie within the array's shape ", a.shape(), "; got ",
          size, ".");
    }
  }
  auto prim = std::make_shared<DynamicSlice>(to_stream(s), axes, size);
  return array(size, a.dtype(), prim, {a, start});
}

array slice_update(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s) {
  normalize_slice("slice_update", src.shape(), start, stop, strides);
  Shape shape = slicing::slice_shape(start, stop, strides);
  if (!broadcasts_to(update.shape(), shape)) {
    throw_invalid_argument(
        "slice_update", "update must broadcast to the slice's shape ", shape, "; got ",
        update.shape(), ".");
  }
  array upd = cast_if_needed(update, src.dtype(), s);
  if (upd.shape() != shape) upd = broadcast_to(upd, shape, s);
  auto prim = std::make_shared<SliceUpdate>(
      to_stream(s), std::move(start), std::move(stop), std::move(strides));
  return array(src.shape(), src.dtype(), prim, {src, upd});
}

array slice_update(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    StreamOrDevice s) {
  Shape strides(src.ndim(), 1);
  return slice_update(src, update, std::move(start), std::move(stop), std::move(strides), s);
}

array slice_update(
    const array& src,
    const array& update,
    const array& start,
    std::vector<int> axes,
    StreamOrDevice s) {
  int nd = static_cast<int>(src.ndim());
  axes = normalize_axes_in_order(axes, nd, "slice_update");
  check_dynamic_start("slice_update", start, axes);
  if (static_cast<int>(update.ndim()) > nd) {
    throw_invalid_argument(
        "slice_update", "update must have at most ", nd, " dimensions; got ", update.shape(),
        ".");
  }
  Shape window(nd - update.ndim(), 1);
  window.insert(window.end(), update.shape().begin(), update.shape().end());
  for (int i = 0; i < nd; ++i) {
    if (window[i] > src.shape(i)) {
      throw_invalid_argument(
          "slice_update", "update must fit in src's shape ", src.shape(), "; got ",
          update.shape(), ".");
    }
  }
  array upd = cast_if_needed(update, src.dtype(), s);
  if (upd.shape() != window) upd = reshape(upd, window, s);
  auto prim = std::make_shared<DynamicSliceUpdate>(to_stream(s), axes);
  return array(src.shape(), src.dtype(), prim, {src, upd, start});
}

// ---------------------------------------------------------------------------------------
// split, concatenate, stack, unstack

std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "split");
  std::vector<array> parts;
  parts.reserve(indices.size() + 1);
  int32_t n = a.shape(ax);
  int32_t prev = 0;
  // Each piece is a[prev:idx] with Python's bounds, so unsorted or out-of-range indices give
  // empty pieces as in NumPy.
  for (size_t i = 0; i <= indices.size(); ++i) {
    int32_t lo = prev, hi = i < indices.size() ? indices[i] : n;
    slicing::normalize_bounds(n, lo, hi, 1);
    hi = std::max(hi, lo);
    parts.push_back(hi - lo == n ? a : axis_slice(a, ax, lo, hi, s));
    if (i < indices.size()) prev = indices[i];
  }
  return parts;
}

std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s) {
  return split(a, indices, 0, s);
}

std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "split");
  int32_t n = a.shape(ax);
  if (num_splits <= 0 || n % num_splits != 0) {
    throw_invalid_argument(
        "split", "num_splits must be positive and divide the axis size ", n, "; got ",
        num_splits, ".");
  }
  Shape indices;
  for (int k = 1; k < num_splits; ++k) indices.push_back(k * (n / num_splits));
  return split(a, indices, ax, s);
}

std::vector<array> split(const array& a, int num_splits, StreamOrDevice s) {
  return split(a, num_splits, 0, s);
}

array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw_invalid_argument("concatenate", "arrays must not be empty; got none.");
  }
  int nd = static_cast<int>(arrays[0].ndim());
  if (nd == 0) {
    throw_invalid_argument("concatenate", "arrays must have at least one dimension; got 0-d.");
  }
  int ax = normalize_axis_index(axis, nd, "concatenate");
  Shape shape = arrays[0].shape();
  int64_t total = 0; // in 64 bits: the parts' sum may pass int32 (it wrapped to 0 once)
  for (auto& x : arrays) {
    bool match = static_cast<int>(x.ndim()) == nd;
    for (int i = 0; match && i < nd; ++i) match = i == ax || x.shape(i) == arrays[0].shape(i);
    if (!match) {
      throw_invalid_argument(
          "concatenate", "arrays must have equal shapes except along axis ", ax, "; got ",
          arrays[0].shape(), " and ", x.shape(), ".");
    }
    total += x.shape(ax);
  }
  shape[ax] = checked_int32(total, "concatenate", "the size of the joined axis");
  Dtype dtype = result_type(arrays);
  for (auto& x : arrays) x = cast_if_needed(x, dtype, s);
  if (arrays.size() == 1) return arrays[0];
  auto prim = std::make_shared<Concatenate>(to_stream(s), ax);
  return array(shape, dtype, prim, std::move(arrays));
}

array concatenate(std::vector<array> arrays, StreamOrDevice s) {
  for (auto& x : arrays) x = reshape(x, {-1}, s);
  return concatenate(std::move(arrays), 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) {
    throw_invalid_argument("stack", "arrays must not be empty; got none.");
  }
  for (auto& x : arrays) {
    if (x.shape() != arrays[0].shape()) {
      throw_invalid_argument(
          "stack", "arrays must all have the same shape; got ", arrays[0].shape(), " and ",
          x.shape(), ".");
    }
  }
  int ax = normalize_axis_index(axis, static_cast<int>(arrays[0].ndim()) + 1, "stack");
  std::vector<array> expanded;
  expanded.reserve(arrays.size());
  for (auto& x : arrays) expanded.push_back(expand_dims(x, ax, s));
  return concatenate(std::move(expanded), ax, s);
}

array stack(const std::vector<array>& arrays, StreamOrDevice s) {
  return stack(arrays, 0, s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) {
    throw_invalid_argument("unstack", "a must have at least one dimension; got 0-d.");
  }
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "unstack");
  std::vector<array> parts;
  parts.reserve(a.shape(ax));
  for (int i = 0; i < a.shape(ax); ++i) parts.push_back(squeeze(axis_slice(a, ax, i, i + 1, s), ax, s));
  return parts;
}

// ---------------------------------------------------------------------------------------
// repeat, tile

array repeat(const array& arr, int repeats, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(arr.ndim()), "repeat");
  if (repeats < 0) {
    throw_invalid_argument("repeat", "repeats must be non-negative; got ", repeats, ".");
  }
  // Each element gets a new axis of `repeats` copies right after it, then the two merge.
  Shape wide = arr.shape();
  wide.insert(wide.begin() + ax + 1, repeats);
  Shape out = arr.shape();
  out[ax] = checked_int32(int64_t{out[ax]} * repeats, "repeat", "the repeated axis");
  return reshape(broadcast_to(expand_dims(arr, ax + 1, s), wide, s), out, s);
}

array repeat(const array& arr, int repeats, StreamOrDevice s) {
  return repeat(reshape(arr, {-1}, s), repeats, 0, s);
}

array tile(const array& arr, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) {
      throw_invalid_argument(
          "tile", "reps must be non-negative; got ", Shape(reps.begin(), reps.end()), ".");
    }
  }
  size_t nd = std::max(arr.ndim(), reps.size());
  reps.insert(reps.begin(), nd - reps.size(), 1);
  Shape shape(nd - arr.ndim(), 1);
  shape.insert(shape.end(), arr.shape().begin(), arr.shape().end());
  if (std::all_of(reps.begin(), reps.end(), [](int r) { return r == 1; })) {
    return shape == arr.shape() ? arr : reshape(arr, shape, s);
  }
  // (d0, d1, ...) -> (1, d0, 1, d1, ...) -> broadcast (r0, d0, r1, d1, ...) -> merge pairs.
  Shape paired, wide, out;
  for (size_t i = 0; i < nd; ++i) {
    paired.insert(paired.end(), {1, shape[i]});
    wide.insert(wide.end(), {reps[i], shape[i]});
    out.push_back(checked_int32(int64_t{reps[i]} * shape[i], "tile", "each tiled dimension"));
  }
  return reshape(broadcast_to(reshape(arr, paired, s), wide, s), out, s);
}

// ---------------------------------------------------------------------------------------
// pad

namespace {

// The source index of every position of an axis of n padded with lo and hi in NumPy's
// "reflect" or "symmetric" mode. NumPy fills a pad wider than the axis in rounds: each round
// mirrors at most the filled length (less the edge for reflect) of what is there so far, the
// left side first, and the right side's mirror can reach values the left side padded in
// earlier rounds; so the result is not periodic when lo and hi differ (pad [0, 1, 2] by
// (9, 1): 1 2 1 2 1 0 1 2 1 0 1 2 1). The rounds are run on indices here. A one-element
// axis repeats its element (NumPy's legacy rule).
std::vector<int32_t> reflect_table(int32_t n, int32_t lo, int32_t hi, bool symmetric) {
  const int64_t len = int64_t{lo} + n + hi;
  std::vector<int32_t> at(static_cast<size_t>(len), 0);
  for (int32_t i = 0; i < n; ++i) at[lo + i] = i;
  if (n == 1) {
    std::fill(at.begin(), at.end(), 0);
    return at;
  }
  const int64_t edge = symmetric ? 1 : 0;
  int64_t left = lo, right = hi;
  while (left > 0 || right > 0) {
    const int64_t filled = len - left - right - (symmetric ? 0 : 1);
    if (left > 0) {
      const int64_t chunk = std::min(filled, left);
      // Position left − chunk + j takes left + chunk − j − edge (the mirror across `left`).
      for (int64_t j = 0; j < chunk; ++j) at[left - chunk + j] = at[left + chunk - j - edge];
      left -= chunk;
    }
    if (right > 0) {
      const int64_t chunk = std::min(filled, right);
      const int64_t r = len - right; // the first position to fill
      for (int64_t j = 0; j < chunk; ++j) at[r + j] = at[r - 2 + edge - j];
      right -= chunk;
    }
  }
  return at;
}

} // namespace

array pad(
    const array& a,
    const std::vector<int>& axes,
    const Shape& low_pad_size,
    const Shape& high_pad_size,
    const array& pad_value,
    const std::string& mode,
    StreamOrDevice s) {
  if (axes.size() != low_pad_size.size() || axes.size() != high_pad_size.size()) {
    throw_invalid_argument(
        "pad", "axes, low and high pad sizes must have equal lengths; got ", axes.size(), ", ",
        low_pad_size.size(), " and ", high_pad_size.size(), ".");
  }
  auto ax = normalize_axes_in_order(axes, static_cast<int>(a.ndim()), "pad");
  for (size_t i = 0; i < ax.size(); ++i) {
    if (low_pad_size[i] < 0 || high_pad_size[i] < 0) {
      throw_invalid_argument(
          "pad", "pad sizes must be non-negative; got low ", low_pad_size, " and high ",
          high_pad_size, ".");
    }
    // Shapes are int32: a padded size past 2^31 - 1 is rejected, never wrapped (MLX).
    if (int64_t{a.shape(ax[i])} + low_pad_size[i] + high_pad_size[i] > INT32_MAX) {
      std::ostringstream msg;
      msg << "[pad] the padded size of axis " << axes[i] << " (" << a.shape(ax[i]) << " + "
          << low_pad_size[i] << " + " << high_pad_size[i] << ") overflows int32.";
      throw std::overflow_error(msg.str());
    }
  }
  if (mode == "constant") {
    if (pad_value.size() != 1) {
      throw_invalid_argument(
          "pad", "pad_value must be a scalar; got shape ", pad_value.shape(), ".");
    }
    Shape out = a.shape(), start(a.ndim(), 0), stop = a.shape();
    for (size_t i = 0; i < ax.size(); ++i) {
      out[ax[i]] += low_pad_size[i] + high_pad_size[i];
      start[ax[i]] = low_pad_size[i];
      stop[ax[i]] = low_pad_size[i] + a.shape(ax[i]);
    }
    if (out == a.shape()) return a;
    array value = reshape(cast_if_needed(pad_value, a.dtype(), s), {}, s);
    return slice_update(full(out, value, a.dtype(), s), a, start, stop, s);
  }
  if (mode == "edge" || mode == "reflect" || mode == "symmetric") {
    // Each padded axis becomes a take with a table of source indices (NumPy's rules, a
    // reflection repeated when the pad is wider than the axis: reflect_table).
    array out = a;
    for (size_t i = 0; i < ax.size(); ++i) {
      int d = ax[i];
      int32_t n = a.shape(d), lo = low_pad_size[i], hi = high_pad_size[i];
      if (lo == 0 && hi == 0) continue;
      if (n == 0) {
        throw_invalid_argument(
            "pad", "an axis padded in ", mode, " mode must not be empty; got shape ", a.shape(),
            ".");
      }
      std::vector<int32_t> index(static_cast<size_t>(lo) + n + hi);
      if (mode == "edge") {
        for (int64_t p = -lo; p < int64_t{n} + hi; ++p) index[p + lo] = static_cast<int32_t>(std::clamp<int64_t>(p, 0, n - 1));
      } else {
        index = reflect_table(n, lo, hi, mode == "symmetric");
      }
      array table(index.begin(), {static_cast<int32_t>(index.size())}, int32);
      out = take(out, table, d, s);
    }
    return out;
  }
  throw_invalid_argument(
      "pad", "mode must be \"constant\", \"edge\", \"reflect\" or \"symmetric\"; got \"", mode,
      "\".");
}

array pad(
    const array& a,
    const std::vector<std::pair<int, int>>& pad_width,
    const array& pad_value,
    const std::string& mode,
    StreamOrDevice s) {
  size_t nd = a.ndim();
  if (pad_width.size() != nd && pad_width.size() != 1) {
    throw_invalid_argument(
        "pad", "pad_width must have one pair per dimension (", nd, ") or a single pair; got ",
        pad_width.size(), ".");
  }
  std::vector<int> axes(nd);
  Shape low(nd), high(nd);
  for (size_t i = 0; i < nd; ++i) {
    auto& w = pad_width.size() == 1 ? pad_width[0] : pad_width[i];
    axes[i] = static_cast<int>(i);
    low[i] = w.first;
    high[i] = w.second;
  }
  return pad(a, axes, low, high, pad_value, mode, s);
}

array pad(
    const array& a,
    const std::pair<int, int>& pad_width,
    const array& pad_value,
    const std::string& mode,
    StreamOrDevice s) {
  return pad(a, std::vector<std::pair<int, int>>{pad_width}, pad_value, mode, s);
}

array pad(
    const array& a,
    int pad_width,
    const array& pad_value,
    const std::string& mode,
    StreamOrDevice s) {
  return pad(a, std::pair<int, int>(pad_width, pad_width), pad_value, mode, s);
}

// ---------------------------------------------------------------------------------------
// roll, flip

array roll(const array& a, int shift, StreamOrDevice s) {
  return reshape(roll_axis(reshape(a, {-1}, s), shift, 0, s), a.shape(), s);
}

array roll(const array& a, const Shape& shift, StreamOrDevice s) {
  // NumPy applies every shift to the one axis of the flattened array.
  int64_t total = std::accumulate(shift.begin(), shift.end(), int64_t{0});
  return reshape(roll_axis(reshape(a, {-1}, s), total, 0, s), a.shape(), s);
}

array roll(const array& a, int shift, int axis, StreamOrDevice s) {
  return roll_axes(a, {shift}, {axis}, s);
}

array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s) {
  return roll_axes(a, std::vector<int64_t>(axes.size(), shift), axes, s);
}

array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s) {
  int64_t total = std::accumulate(shift.begin(), shift.end(), int64_t{0});
  return roll_axes(a, {total}, {axis}, s);
}

array roll(const array& a, const Shape& shift, const std::vector<int>& axes, StreamOrDevice s) {
  // Shifts and axes broadcast against each other, as in NumPy.
  size_t n = std::max(shift.size(), axes.size());
  if ((shift.size() != n && shift.size() != 1) || (axes.size() != n && axes.size() != 1)) {
    throw_invalid_argument(
        "roll", "shift and axes must have equal lengths (or one of them length 1); got ",
        shift.size(), " and ", axes.size(), ".");
  }
  std::vector<int64_t> shifts(n);
  std::vector<int> ax(n);
  for (size_t i = 0; i < n; ++i) {
    shifts[i] = shift.size() == 1 ? shift[0] : shift[i];
    ax[i] = axes.size() == 1 ? axes[0] : axes[i];
  }
  return roll_axes(a, shifts, ax, s);
}

array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "flip");
  if (ax.empty()) return a;
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  for (int d : ax) {
    start[d] = a.shape(d) - 1;
    stop[d] = -1;
    strides[d] = -1;
  }
  return record_slice(a, start, stop, strides, s);
}

array flip(const array& a, int axis, StreamOrDevice s) {
  return flip(a, std::vector<int>{axis}, s);
}

array flip(const array& a, StreamOrDevice s) {
  return flip(a, all_axes(static_cast<int>(a.ndim())), s);
}

// ---------------------------------------------------------------------------------------
// diagonal, diag, trace

array diagonal(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd < 2) {
    throw_invalid_argument(
        "diagonal", "a must have at least 2 dimensions; got shape ", a.shape(), ".");
  }
  // MLX reports diagonal's axes out of range as std::out_of_range, like a reduction's.
  int ax1 = normalize_reduce_axes({axis1}, nd, "diagonal")[0];
  int ax2 = normalize_reduce_axes({axis2}, nd, "diagonal")[0];
  if (ax1 == ax2) {
    throw_invalid_argument(
        "diagonal", "axis1 and axis2 must differ; got ", axis1, " and ", axis2, ".");
  }
  // The planes go last; the square block holding the diagonal is cut out, laid out
  // contiguously, and the diagonal is every (d + 1)-th element of its flattening.
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i) {
    if (i != ax1 && i != ax2) perm.push_back(i);
  }
  perm.push_back(ax1);
  perm.push_back(ax2);
  array t = transpose(a, perm, s);
  int64_t n1 = a.shape(ax1), n2 = a.shape(ax2);
  int64_t row0 = offset >= 0 ? 0 : -int64_t(offset);
  int64_t col0 = offset >= 0 ? int64_t(offset) : 0;
  int64_t d = std::max<int64_t>(0, std::min(n1 - row0, n2 - col0));
  row0 = std::min(row0, n1);
  col0 = std::min(col0, n2);
  Shape start(nd, 0), stop = t.shape(), strides(nd, 1);
  start[nd - 2] = static_cast<int32_t>(row0);
  start[nd - 1] = static_cast<int32_t>(col0);
  stop[nd - 2] = static_cast<int32_t>(row0 + d);
  stop[nd - 1] = static_cast<int32_t>(col0 + d);
  array block = slice(t, start, stop, strides, s);
  Shape flat(t.shape().begin(), t.shape().end() - 2);
  flat.push_back(static_cast<int32_t>(d * d));
  array line = reshape(block, flat, s);
  Shape lstart(nd - 1, 0), lstop = flat, lstrides(nd - 1, 1);
  lstrides[nd - 2] = static_cast<int32_t>(d + 1);
  return slice(line, lstart, lstop, lstrides, s);
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) return diagonal(a, k, 0, 1, s);
  if (a.ndim() != 1) {
    throw_invalid_argument("diag", "a must be 1-d or 2-d; got shape ", a.shape(), ".");
  }
  // In the flattened m x m result, a[i] sits at base + i (m + 1): lay a out with m zeros
  // after each element, shift it by base, and cut or extend it to m * m.
  int64_t n = a.shape(0), kk = std::abs(int64_t(k)), m = n + kk;
  int64_t base = k >= 0 ? kk : kk * m;
  array rows = concatenate({expand_dims(a, 1, s), zeros({int32_t(n), int32_t(m)}, a.dtype(), s)}, 1, s);
  array line = reshape(rows, {int32_t(n * (m + 1))}, s);
  int64_t len = base + n * (m + 1);
  line = pad(line, {0}, {int32_t(base)}, {int32_t(std::max<int64_t>(0, m * m - len))},
             array(0, a.dtype()), "constant", s);
  line = slice(line, {0}, {int32_t(m * m)}, s);
  return reshape(line, {int32_t(m), int32_t(m)}, s);
}

array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw_invalid_argument("trace", "a must have at least 2 dimensions; got shape ", a.shape(), ".");
  }
  int nd = static_cast<int>(a.ndim());
  int ax1 = normalize_reduce_axes({axis1}, nd, "trace")[0]; // out_of_range, as diagonal
  int ax2 = normalize_reduce_axes({axis2}, nd, "trace")[0];
  if (ax1 == ax2) {
    throw_invalid_argument("trace", "axis1 and axis2 must differ; got ", axis1, " and ", axis2, ".");
  }
  array d = cast_if_needed(diagonal(a, offset, ax1, ax2, s), dtype, s);
  return cast_if_needed(sum(d, -1, false, s), dtype, s);
}

array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  return trace(a, offset, axis1, axis2, a.dtype(), s);
}

array trace(const array& a, StreamOrDevice s) {
  return trace(a, 0, 0, 1, a.dtype(), s);
}

} // namespace nuvec
