// nuvec: the scan ops (cumsum, cumprod, cummax, cummin, logcumsumexp, diff) and the
// selection ops (partition, argpartition, topk, searchsorted). MLX's signatures and
// semantics; diff and searchsorted follow NumPy.
#include "ops/ops_common.h"
#include "primitives/scan.h"
#include "primitives/partition.h"

namespace nuvec {

namespace {

// The dtype a cumulative sum or product runs in: small integers widen as sum does.
Dtype scan_dtype(Dtype t, ScanOp op) {
  switch (op) {
    case ScanOp::Sum:
    case ScanOp::Prod: return sum_dtype(t);
    case ScanOp::Max:
    case ScanOp::Min: return t;
    case ScanOp::LogAddExp: return float_result_type(t);
  }
  return t;
}

array scan(const array& a, int axis, bool reverse, bool inclusive, ScanOp op, const char* name, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), name);
  if (a.dtype() == complex64 && op != ScanOp::Sum && op != ScanOp::Prod) {
    throw_invalid_argument(name, "input must have a real dtype; got complex64.");
  }
  Dtype dt = scan_dtype(a.dtype(), op);
  return array(a.shape(), dt, std::make_shared<Scan>(to_stream(s), op, ax, reverse, inclusive),
      {astype(a, dt, s)});
}

array flat(const array& a, StreamOrDevice s) {
  return flatten(a, s);
}

// kth normalised to [0, n), or std::invalid_argument naming op.
int normalize_kth(int kth, int n, const char* op) {
  if (kth < -n || kth >= n) {
    throw_invalid_argument(op, "kth must lie in [-", n, ", ", n, ") for an axis of size ", n,
        "; got ", kth, ".");
  }
  return kth < 0 ? kth + n : kth;
}

} // namespace

array cumsum(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, reverse, inclusive, ScanOp::Sum, "cumsum", s);
}
array cumsum(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumsum(flat(a, s), 0, reverse, inclusive, s);
}
array cumprod(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, reverse, inclusive, ScanOp::Prod, "cumprod", s);
}
array cumprod(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cumprod(flat(a, s), 0, reverse, inclusive, s);
}
array cumsum(const array& a, int axis, bool reverse, bool inclusive, Dtype dtype, StreamOrDevice s) {
  return cumsum(astype(a, dtype, s), axis, reverse, inclusive, s);
}
array cumprod(const array& a, int axis, bool reverse, bool inclusive, Dtype dtype, StreamOrDevice s) {
  return cumprod(astype(a, dtype, s), axis, reverse, inclusive, s);
}
array cummax(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, reverse, inclusive, ScanOp::Max, "cummax", s);
}
array cummax(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cummax(flat(a, s), 0, reverse, inclusive, s);
}
array cummin(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, reverse, inclusive, ScanOp::Min, "cummin", s);
}
array cummin(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return cummin(flat(a, s), 0, reverse, inclusive, s);
}
array logcumsumexp(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, reverse, inclusive, ScanOp::LogAddExp, "logcumsumexp", s);
}
array logcumsumexp(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {
  return logcumsumexp(flat(a, s), 0, reverse, inclusive, s);
}

array diff(const array& a, int n, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) throw_invalid_argument("diff", "input must be at least 1-d; got a 0-d array.");
  if (n < 0) throw_invalid_argument("diff", "order n must be non-negative; got ", n, ".");
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "diff");
  array out = a;
  for (int i = 0; i < n && out.shape(ax) > 0; ++i) {
    int len = out.shape(ax);
    Shape lo(out.ndim(), 0), hi = out.shape(), st(out.ndim(), 1);
    lo[ax] = 1;
    array upper = slice(out, lo, hi, st, s);
    lo[ax] = 0;
    hi[ax] = len - 1;
    array lower = slice(out, lo, hi, st, s);
    out = out.dtype() == bool_ ? not_equal(upper, lower, s) : subtract(upper, lower, s);
  }
  return out;
}

array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "partition");
  int k = normalize_kth(kth, a.shape(ax), "partition");
  return array(a.shape(), a.dtype(), std::make_shared<Partition>(to_stream(s), k, ax), {a});
}
array partition(const array& a, int kth, StreamOrDevice s) {
  return partition(flat(a, s), kth, 0, s);
}
array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "argpartition");
  int k = normalize_kth(kth, a.shape(ax), "argpartition");
  return array(a.shape(), uint32, std::make_shared<ArgPartition>(to_stream(s), k, ax), {a});
}
array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(flat(a, s), kth, 0, s);
}

array topk(const array& a, int k, int axis, StreamOrDevice s) {
  int ax = normalize_axis_index(axis, static_cast<int>(a.ndim()), "topk");
  int n = a.shape(ax);
  if (k < 0 || k > n) {
    throw_invalid_argument("topk", "k must lie in [0, ", n, "] for an axis of size ", n,
        "; got ", k, ".");
  }
  Shape lo(a.ndim(), 0), hi = a.shape(), st(a.ndim(), 1);
  if (k == 0) {
    hi[ax] = 0;
    return slice(a, lo, hi, st, s);
  }
  lo[ax] = n - k;
  return sort(slice(partition(a, n - k, ax, s), lo, hi, st, s), ax, s);
}
array topk(const array& a, int k, StreamOrDevice s) {
  return topk(flat(a, s), k, 0, s);
}

array searchsorted(const array& a, const array& v, const std::string& side, StreamOrDevice s) {
  if (side != "left" && side != "right") {
    throw_invalid_argument("searchsorted", "side must be \"left\" or \"right\"; got \"", side, "\".");
  }
  const bool right = side == "right";
  if (a.ndim() != 1) {
    throw_invalid_argument("searchsorted", "a must be 1-d; got shape ", a.shape(), ".");
  }
  if (a.dtype() == complex64 || v.dtype() == complex64) {
    throw_invalid_argument("searchsorted", "inputs must have real dtypes; got complex64.");
  }
  // v gets a trailing axis compared against every element of a; NaNs order last.
  array vv = expand_dims(v, -1, s);
  array before = right ? logical_or(less_equal(a, vv, s), isnan(vv, s), s)
                       : logical_or(less(a, vv, s),
                             logical_and(isnan(vv, s), logical_not(isnan(a, s), s), s), s);
  return astype(sum(before, -1, false, s), uint32, s);
}
array searchsorted(const array& a, const array& v, const char* side, StreamOrDevice s) {
  return searchsorted(a, v, std::string(side), s);
}

} // namespace nuvec
