// nuvec: the Scan family's ops over the accumulator type A, host and device: init() is the
// identity an exclusive scan starts from, f(acc, x) extends the running prefix acc by x
// (also with x the total of a later block: every op is associative up to rounding).
#pragma once

#include "backend/common/math/binary.h"

NUVEC_MATH_BEGIN

template <ScanOp op, typename A>
struct ScanCombine {
  NUVEC_HD static A init() {
    if constexpr (op == ScanOp::Sum) {
      return A(0);
    } else if constexpr (op == ScanOp::Prod) {
      return A(1);
    } else if constexpr (std::is_same_v<A, bool>) {
      return op != ScanOp::Max; // max is "or" (starts false), min is "and" (starts true)
    } else if constexpr (op == ScanOp::Max || op == ScanOp::LogAddExp) {
      return lowest_or_neg_inf<A>();
    } else {
      return max_or_inf<A>();
    }
  }
  NUVEC_HD A operator()(const A& acc, const A& x) const {
    if constexpr (op == ScanOp::Sum) {
      return Add{}(acc, x); // integers wrap, bool is "or"
    } else if constexpr (op == ScanOp::Prod) {
      return Multiply{}(acc, x);
    } else if constexpr (op == ScanOp::Max) {
      return (less_than(acc, x) || is_nan(x)) ? x : acc; // a NaN prefix stays (NaN < x is false)
    } else if constexpr (op == ScanOp::Min) {
      return (less_than(x, acc) || is_nan(x)) ? x : acc;
    } else if constexpr (Real<A>) {
      // log(e^acc + e^x) = hi + log1p(e^(lo - hi)); infinities short-cut (inf - inf is NaN).
      if (acc != acc || x != x) return std::numeric_limits<A>::quiet_NaN();
      const A hi = acc > x ? acc : x, lo = acc > x ? x : acc;
      if (lo == -std::numeric_limits<A>::infinity() || hi == std::numeric_limits<A>::infinity()) return hi;
      return hi + math::log1p(math::exp(lo - hi));
    } else {
      return acc; // unreachable: logcumsumexp casts to a float dtype first
    }
  }
};

NUVEC_MATH_END
