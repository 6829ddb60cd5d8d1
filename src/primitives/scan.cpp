// nuvec: rules of the Scan family: shapes, vjp, jvp, vmap, equivalence. The derivatives are
// those of shared/seeds/000_*.txt (MLX's Scan::vjp): reversed scans for sums and
// log-sum-exp, the first-zero rule for products, the owner rule (ties to the latest element
// in scan order) for maxima and minima.
#include <cfloat>
#include <typeinfo>

#include "primitives/scan.h"

namespace nuvec {

namespace {

// The most negative finite value of a float dtype: the log of a zero cotangent half, so
// exp of it underflows to zero without producing -inf - -inf = NaN.
array lowest(Dtype dtype) {
  if (dtype == float64) return array(-DBL_MAX, float64);
  if (dtype == float16) return array(-65504.0, float16);
  return array(-FLT_MAX, dtype);
}

array scalar(double v, Dtype dtype) {
  return array(v, dtype);
}

// Positions start..stop along axis, as a view.
array window(const array& a, int axis, int start, int stop) {
  Shape lo(a.ndim(), 0), hi = a.shape();
  lo[axis] = start;
  hi[axis] = stop;
  return slice(a, lo, hi);
}

// (log|v| where v > 0 else lowest, log|v| where v < 0 else lowest).
std::pair<array, array> log_halves(const array& v) {
  array low = lowest(v.dtype());
  array log_abs = log(abs(v));
  array zero = scalar(0, v.dtype());
  return {where(greater(v, zero), log_abs, low), where(less(v, zero), log_abs, low)};
}

// The range of output positions a max/min owner covers, and the owner indices (uint32,
// no gradient): per covered output position, the index of the input element holding its
// running extreme, ties going to the latest in scan order.
struct Owner {
  array index;
  int start, stop;
};

Owner scan_owner(const array& x, const array& out, int axis, bool reverse, bool inclusive) {
  int n = x.shape(axis);
  array in_win = x, ext_win = out;
  int out_start = 0, out_stop = n, first = 0, last = n;
  if (!inclusive && reverse) {
    in_win = window(x, axis, 1, n);
    ext_win = window(out, axis, 0, n - 1);
    out_stop = n - 1;
    first = 1;
  } else if (!inclusive) {
    in_win = window(x, axis, 0, n - 1);
    ext_win = window(out, axis, 1, n);
    out_start = 1;
    last = n - 1;
  }
  Shape index_shape(x.ndim(), 1);
  index_shape[axis] = last - first;
  array iota = reshape(arange(first, last), index_shape);
  array fill(reverse ? n : -1, int32);
  array masked = where(equal(in_win, ext_win), iota, fill);
  array owner = reverse ? cummin(masked, axis, true, true) : cummax(masked, axis, false, true);
  return {stop_gradient(astype(owner, uint32)), out_start, out_stop};
}

// For products: the mask of each lane's first zero (in scan order), the product with that
// zero replaced by one, and where the output is zero.
struct FirstZero {
  array first, with_one, zero;
};

FirstZero first_zero(const array& x, const array& out, int axis, bool reverse, bool inclusive) {
  array other = cumprod(x, axis, reverse, !inclusive);
  array excl = inclusive ? other : out;
  array incl = inclusive ? out : other;
  array zero = scalar(0, x.dtype());
  array first = logical_and(equal(incl, zero), not_equal(excl, zero));
  array with_one = cumprod(where(first, scalar(1, x.dtype()), x), axis, reverse, inclusive);
  return {first, with_one, equal(out, zero)};
}

} // namespace

const char* Scan::name() const {
  switch (op_) {
    case ScanOp::Sum: return "CumSum";
    case ScanOp::Prod: return "CumProd";
    case ScanOp::Max: return "CumMax";
    case ScanOp::Min: return "CumMin";
    case ScanOp::LogAddExp: return "LogCumSumExp";
  }
  return "Scan";
}

std::vector<Shape> Scan::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

std::vector<array> Scan::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& out = outputs[0];
  const array& g = cotangents[0];
  const int a = axis_;
  switch (op_) {
    case ScanOp::Sum:
      return {cumsum(g, a, !reverse_, inclusive_)};
    case ScanOp::LogAddExp: {
      auto [pos, neg] = log_halves(g);
      auto half = [&](const array& h) {
        return exp(add(logcumsumexp(subtract(h, out), a, !reverse_, inclusive_), x));
      };
      return {subtract(half(pos), half(neg))};
    }
    case ScanOp::Prod: {
      auto fz = first_zero(x, out, a, reverse_, inclusive_);
      auto partial = [&](const array& p) { return cumsum(multiply(p, g), a, !reverse_, inclusive_); };
      array regular = divide(partial(out), x);
      return {where(
          fz.first, partial(fz.with_one), where(fz.zero, scalar(0, x.dtype()), regular))};
    }
    case ScanOp::Max:
    case ScanOp::Min: {
      if (x.shape(a) == 0) return {zeros_like(x)};
      auto owner = scan_owner(x, out, a, reverse_, inclusive_);
      array gw = inclusive_ ? g : window(g, a, owner.start, owner.stop);
      return {scatter_add_axis(zeros_like(x), owner.index, gw, a)};
    }
  }
  return {};
}

std::vector<array> Scan::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  const array& x = primals[0];
  const array& t = tangents[0];
  const int a = axis_;
  // The rules need the forward value; recomputing it records one more scan node.
  array out = array(x.shape(), x.dtype(),
      std::make_shared<Scan>(stream(), op_, axis_, reverse_, inclusive_), {x});
  switch (op_) {
    case ScanOp::Sum:
      return {cumsum(t, a, reverse_, inclusive_)};
    case ScanOp::LogAddExp: {
      auto [pos, neg] = log_halves(t);
      auto half = [&](const array& h) {
        return exp(subtract(logcumsumexp(add(h, x), a, reverse_, inclusive_), out));
      };
      array neg_inf = equal(out, scalar(-INFINITY, out.dtype()));
      return {where(neg_inf, scalar(0, out.dtype()), subtract(half(pos), half(neg)))};
    }
    case ScanOp::Prod: {
      // Before the first zero: y * sum t/x. From it on: the zero's tangent times the
      // product with the zero replaced by one.
      auto fz = first_zero(x, out, a, reverse_, inclusive_);
      array zero = scalar(0, x.dtype());
      array safe = where(equal(x, zero), scalar(1, x.dtype()), x);
      array regular = multiply(out, cumsum(divide(t, safe), a, reverse_, inclusive_));
      array t_zero = sum(where(fz.first, t, zero), a, true);
      return {where(fz.zero, multiply(fz.with_one, t_zero), regular)};
    }
    case ScanOp::Max:
    case ScanOp::Min: {
      if (x.shape(a) == 0) return {zeros_like(x)};
      auto owner = scan_owner(x, out, a, reverse_, inclusive_);
      array moved = take_along_axis(t, owner.index, a);
      if (inclusive_) return {moved};
      // The position with no elements before it (in scan order) has no tangent.
      array edge = zeros_like(window(t, a, 0, 1));
      return {owner.start == 0 ? concatenate({moved, edge}, a) : concatenate({edge, moved}, a)};
    }
  }
  return {};
}

std::pair<std::vector<array>, std::vector<int>> Scan::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  int b = axes[0];
  int axis = (b >= 0 && axis_ >= b) ? axis_ + 1 : axis_;
  array out(x.shape(), x.dtype(),
      std::make_shared<Scan>(stream(), op_, axis, reverse_, inclusive_), {x});
  return {{out}, {b}};
}

bool Scan::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(*this)) return false;
  const auto& o = static_cast<const Scan&>(other);
  return o.op_ == op_ && o.axis_ == axis_ && o.reverse_ == reverse_ && o.inclusive_ == inclusive_;
}

} // namespace nuvec
