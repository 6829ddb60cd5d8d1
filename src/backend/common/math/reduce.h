// nuvec: the combiners of the Reduce family over the accumulator type A, host and device:
// init() is the op's identity, operator() combines two partial results (associative and
// commutative up to floating-point rounding, so the kernels may split and reorder).
#pragma once

#include "backend/common/math/binary.h"

NUVEC_MATH_BEGIN

template <ReduceOp op, typename A>
struct Combine;

/// Sum: the element-wise Add (integers wrap; bool is "or").
template <typename A>
struct Combine<ReduceOp::Sum, A> {
  NUVEC_HD static A init() { return A(0); }
  NUVEC_HD A operator()(const A& a, const A& b) const { return Add{}(a, b); }
};
/// Product: the element-wise Multiply (integers wrap; bool is "and").
template <typename A>
struct Combine<ReduceOp::Prod, A> {
  NUVEC_HD static A init() { return A(1); }
  NUVEC_HD A operator()(const A& a, const A& b) const { return Multiply{}(a, b); }
};
/// all (the ops cast to bool first).
template <typename A>
struct Combine<ReduceOp::And, A> {
  NUVEC_HD static A init() { return A(true); }
  NUVEC_HD A operator()(const A& a, const A& b) const { return static_cast<bool>(a) && static_cast<bool>(b); }
};
/// any (the ops cast to bool first).
template <typename A>
struct Combine<ReduceOp::Or, A> {
  NUVEC_HD static A init() { return A(false); }
  NUVEC_HD A operator()(const A& a, const A& b) const { return static_cast<bool>(a) || static_cast<bool>(b); }
};
/// max (kMax) or min: `(is_nan(a) || a >= b) ? a : b` for max, so a NaN on either side
/// wins (a >= NaN is false); complex numbers order lexicographically, with a NaN (either
/// part) winning from either side too (NumPy's max of complex arrays).
template <bool kMax, typename A>
struct ExtremumCombine {
  NUVEC_HD static A init() {
    if constexpr (kMax) return lowest_or_neg_inf<A>();
    else return max_or_inf<A>();
  }
  NUVEC_HD A operator()(const A& a, const A& b) const {
    bool keep_a;
    if constexpr (Complex<A>) keep_a = is_nan(a) || (!is_nan(b) && !(kMax ? less_than(a, b) : less_than(b, a)));
    else keep_a = is_nan(a) || (kMax ? a >= b : a <= b);
    return keep_a ? a : b;
  }
};
template <typename A>
struct Combine<ReduceOp::Max, A> : ExtremumCombine<true, A> {};
template <typename A>
struct Combine<ReduceOp::Min, A> : ExtremumCombine<false, A> {};

NUVEC_MATH_END
