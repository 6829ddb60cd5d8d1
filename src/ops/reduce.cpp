// nuvec: the reduction ops (all, any, sum, mean, var, std, prod, max, min, argmin, argmax,
// logsumexp, softmax, count_nonzero, median). Semantics and output dtypes follow MLX's
// ops.cpp; NaN handling and the ddof convention follow NumPy.
#include <cmath>
#include <limits>

#include "ops/ops_common.h"
#include "transforms/trace.h"

namespace nuvec {

namespace {

// Number of elements over the (normalised) axes.
int64_t reduced_size(const array& a, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) n *= a.shape()[ax];
  return n;
}

Shape keepdims_shape(const Shape& in, const std::vector<int>& axes) {
  Shape out = in;
  for (int ax : axes) out[ax] = 1;
  return out;
}

// Records the Reduce node over normalised axes on a cast to `dtype` (the kernel reads and
// writes one dtype), then drops the reduced axes unless keepdims.
array reduce_node(
    const array& a,
    ReduceOp op,
    const std::vector<int>& axes,
    bool keepdims,
    Dtype dtype,
    StreamOrDevice s) {
  array in = a.dtype() == dtype ? a : astype(a, dtype, s);
  if (axes.empty()) return in;
  array out(
      keepdims_shape(in.shape(), axes),
      dtype,
      std::make_shared<Reduce>(to_stream(s), op, axes),
      {in});
  return keepdims ? out : squeeze(out, axes, s);
}

void check_not_empty(const array& a, const std::vector<int>& axes, const char* op) {
  if (reduced_size(a, axes) == 0) {
    throw_invalid_argument(
        op, "the reduction must cover at least one element; got shape ", a.shape(),
        " reduced over axes ", Shape(axes.begin(), axes.end()), ".");
  }
}


// A 0-d array of value in dtype.
array scalar(double value, Dtype dtype) {
  return array(value, dtype);
}

} // namespace

// ---------------------------------------------------------------------------------------
// all, any

array all(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "all");
  return reduce_node(a, ReduceOp::And, ax, keepdims, bool_, s);
}
array all(const array& a, bool keepdims, StreamOrDevice s) {
  return all(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array all(const array& a, StreamOrDevice s) {
  return all(a, false, s);
}
array all(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return all(a, std::vector<int>{axis}, keepdims, s);
}

array any(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "any");
  return reduce_node(a, ReduceOp::Or, ax, keepdims, bool_, s);
}
array any(const array& a, bool keepdims, StreamOrDevice s) {
  return any(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array any(const array& a, StreamOrDevice s) {
  return any(a, false, s);
}
array any(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return any(a, std::vector<int>{axis}, keepdims, s);
}

// ---------------------------------------------------------------------------------------
// sum, prod

array sum(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "sum");
  return reduce_node(a, ReduceOp::Sum, ax, keepdims, sum_dtype(a.dtype()), s);
}
array sum(const array& a, bool keepdims, StreamOrDevice s) {
  return sum(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array sum(const array& a, StreamOrDevice s) {
  return sum(a, false, s);
}
array sum(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return sum(a, std::vector<int>{axis}, keepdims, s);
}

array prod(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "prod");
  return reduce_node(a, ReduceOp::Prod, ax, keepdims, sum_dtype(a.dtype()), s);
}
array prod(const array& a, bool keepdims, StreamOrDevice s) {
  return prod(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array prod(const array& a, StreamOrDevice s) {
  return prod(a, false, s);
}
array prod(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return prod(a, std::vector<int>{axis}, keepdims, s);
}

// ---------------------------------------------------------------------------------------
// mean, var, std

array mean(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "mean");
  Dtype dt = float_result_type(a.dtype());
  Dtype acc = float_accumulate_type(dt);
  array total = reduce_node(a, ReduceOp::Sum, ax, keepdims, acc, s);
  // 1 / 0 = inf makes an empty mean 0 * inf = NaN, as NumPy.
  detail::note_shape_baked();
  array out = multiply(total, scalar(1.0 / static_cast<double>(reduced_size(a, ax)), acc), s);
  return acc == dt ? out : astype(out, dt, s);
}
array mean(const array& a, bool keepdims, StreamOrDevice s) {
  return mean(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array mean(const array& a, StreamOrDevice s) {
  return mean(a, false, s);
}
array mean(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return mean(a, std::vector<int>{axis}, keepdims, s);
}

// Two passes (the mean, then squared deviations) rather than E[x^2] - E[x]^2, which
// cancels catastrophically when the mean is large.
array var(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "var");
  Dtype dt = float_result_type(a.dtype());
  Dtype acc = float_accumulate_type(dt);
  array x = astype(a, acc, s);
  array d = subtract(x, mean(x, ax, true, s), s);
  // Complex: the mean of |d|², real (float32 for complex64), as NumPy; d² would be complex.
  const bool cplx = acc == complex64;
  if (cplx) {
    d = add(square(real(d, s), s), square(imag(d, s), s), s);
    dt = acc = float32;
  } else {
    d = square(d, s);
  }
  array ss = reduce_node(d, ReduceOp::Sum, ax, keepdims, acc, s);
  detail::note_shape_baked();
  double denom = std::max<double>(static_cast<double>(reduced_size(a, ax)) - ddof, 0.0);
  array out = multiply(ss, scalar(1.0 / denom, acc), s);
  return acc == dt ? out : astype(out, dt, s);
}
array var(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, all_axes(static_cast<int>(a.ndim())), keepdims, ddof, s);
}
array var(const array& a, StreamOrDevice s) {
  return var(a, false, 0, s);
}
array var(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{axis}, keepdims, ddof, s);
}

array std(const array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "std");
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}
array std(const array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, all_axes(static_cast<int>(a.ndim())), keepdims, ddof, s);
}
array std(const array& a, StreamOrDevice s) {
  return std(a, false, 0, s);
}
array std(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{axis}, keepdims, ddof, s);
}

// ---------------------------------------------------------------------------------------
// max, min

array max(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "max");
  check_not_empty(a, ax, "max");
  return reduce_node(a, ReduceOp::Max, ax, keepdims, a.dtype(), s);
}
array max(const array& a, bool keepdims, StreamOrDevice s) {
  return max(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array max(const array& a, StreamOrDevice s) {
  return max(a, false, s);
}
array max(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return max(a, std::vector<int>{axis}, keepdims, s);
}

array min(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "min");
  check_not_empty(a, ax, "min");
  return reduce_node(a, ReduceOp::Min, ax, keepdims, a.dtype(), s);
}
array min(const array& a, bool keepdims, StreamOrDevice s) {
  return min(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array min(const array& a, StreamOrDevice s) {
  return min(a, false, s);
}
array min(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return min(a, std::vector<int>{axis}, keepdims, s);
}

// ---------------------------------------------------------------------------------------
// argmin, argmax

namespace {

array arg_reduce(const array& a, int axis, bool keepdims, ArgReduceOp op, const char* name, StreamOrDevice s) {
  int ax = normalize_reduce_axes({axis}, static_cast<int>(a.ndim()), name)[0];
  check_not_empty(a, {ax}, name);
  array out(
      keepdims_shape(a.shape(), {ax}),
      uint32,
      std::make_shared<ArgReduce>(to_stream(s), op, ax),
      {a});
  return keepdims ? out : squeeze(out, ax, s);
}

// Over the flattened array; keepdims gives a shape of ndim ones.
array arg_reduce_all(const array& a, bool keepdims, ArgReduceOp op, const char* name, StreamOrDevice s) {
  if (a.size() == 0) {
    throw_invalid_argument(name, "the array must not be empty; got shape ", a.shape(), ".");
  }
  array flat = flatten(a, s);
  array out = arg_reduce(flat, 0, false, op, name, s);
  return keepdims ? reshape(out, Shape(a.ndim(), 1), s) : out;
}

} // namespace

array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduceOp::ArgMin, "argmin", s);
}
array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_all(a, keepdims, ArgReduceOp::ArgMin, "argmin", s);
}
array argmin(const array& a, StreamOrDevice s) {
  return argmin(a, false, s);
}
array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduceOp::ArgMax, "argmax", s);
}
array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_all(a, keepdims, ArgReduceOp::ArgMax, "argmax", s);
}
array argmax(const array& a, StreamOrDevice s) {
  return argmax(a, false, s);
}


// ---------------------------------------------------------------------------------------
// count_nonzero, median

array number_of_elements(
    const array& a,
    std::vector<int> axes,
    bool inverted,
    Dtype dtype,
    StreamOrDevice s) {
  if (dtype == bool_ || dtype == complex64) {
    throw_invalid_argument(
        "number_of_elements", "dtype must be a real numeric type; got ", dtype, ".");
  }
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "number_of_elements");
  std::vector<bool> picked(a.ndim(), false);
  for (int d : ax) picked[d] = true;
  detail::note_shape_baked();
  double n = 1;
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (picked[d] != inverted) n *= a.shape(static_cast<int>(d));
  }
  return astype(array(n, float64), dtype, s);
}

array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "count_nonzero");
  // "!= 0" is the bool cast; NaN counts as non-zero (NumPy).
  return reduce_node(astype(a, bool_, s), ReduceOp::Sum, ax, keepdims, int32, s);
}
array count_nonzero(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, std::vector<int>{axis}, keepdims, s);
}
array count_nonzero(const array& a, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array count_nonzero(const array& a, StreamOrDevice s) {
  return count_nonzero(a, all_axes(static_cast<int>(a.ndim())), false, s);
}

// The reduced axes are moved last and flattened into rows that are sorted; NaNs sort last,
// so a row holding one has a NaN as its last element and its median is NaN.
array median(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  if (axes.size() > a.ndim()) {
    // MLX: a value error (test_ops.py), before any axis is read.
    throw_invalid_argument("median", "got ", axes.size(), " axes for an array of ", a.ndim(), " dimensions.");
  }
  auto ax = normalize_reduce_axes(axes, static_cast<int>(a.ndim()), "median");
  Dtype dt = float_result_type(a.dtype());
  array x = astype(a, dt, s);
  Shape out_shape = keepdims ? keepdims_shape(a.shape(), ax) : Shape{};
  std::vector<int> perm;
  Shape rows_shape;
  std::vector<bool> reduced(a.ndim(), false);
  for (int d : ax) reduced[d] = true;
  for (int d = 0; d < static_cast<int>(a.ndim()); ++d) {
    if (!reduced[d]) {
      perm.push_back(d);
      rows_shape.push_back(a.shape()[d]);
      if (!keepdims) out_shape.push_back(a.shape()[d]);
    }
  }
  const int64_t n = reduced_size(a, ax);
  detail::note_shape_baked(); // the rows' reshape and the picked positions use n
  if (n == 0) {
    return full(out_shape, scalar(std::numeric_limits<double>::quiet_NaN(), dt), dt, s);
  }
  perm.insert(perm.end(), ax.begin(), ax.end());
  rows_shape.push_back(static_cast<int32_t>(n));
  array rows = sort(reshape(transpose(x, perm, s), rows_shape, s), -1, s);
  auto column = [&](int64_t i) {
    Shape start(rows_shape.size(), 0), stop = rows_shape;
    start.back() = static_cast<int32_t>(i);
    stop.back() = static_cast<int32_t>(i + 1);
    return slice(rows, start, stop, s);
  };
  array med = column(n / 2);
  if (n % 2 == 0) med = multiply(add(column(n / 2 - 1), med, s), scalar(0.5, dt), s);
  array last = column(n - 1);
  med = where(isnan(last, s), last, med, s);
  return reshape(med, out_shape, s);
}
array median(const array& a, bool keepdims, StreamOrDevice s) {
  return median(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array median(const array& a, StreamOrDevice s) {
  return median(a, false, s);
}
array median(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return median(a, std::vector<int>{axis}, keepdims, s);
}

} // namespace nuvec
