// nuvec: the shift of LogSumExpVjp's exponentials, one text for its CPU and CUDA kernels
// (NUVEC_HD). The value g · exp(x − c) / sum(exp(x − c)) is the same for any shift c; the
// fallback (src/fast/logsumexp.cpp) shifts by the row's max, the kernels by the forward's lse,
// which needs no max pass and whose rounding the division cancels.
#pragma once

#include <limits>

#include "backend/common/math/functions.h"

// In the math layer's namespace (math/config.h): its g++ and nvcc instantiations stay apart.
NUVEC_MATH_BEGIN

/// The shift of a row whose LogSumExp output is lse (or, on the second try, whose max is lse):
/// the value itself, or 0 where it is ±inf (the fallback replaces an infinite max by 0; NaN
/// stays NaN and makes the row NaN, as in the fallback).
template <typename A>
NUVEC_HD A lse_shift(A lse) {
  return is_inf(lse) ? A(0) : lse;
}

/// Whether the sum s of exp(x − lse_shift(lse)) over a row lets that shift stand. With a
/// finite lse within a few ulps of the row's true logsumexp, s is e^(true − lse), near 1; a sum
/// beyond [2^-32, 2^32] means the shift is off by more than 22 (lse rounded to a type too coarse
/// for its magnitude, such as bfloat16 past 2^15, where exp over- or underflows): the kernels
/// then shift by lse_shift(the row's max) instead, as the fallback does. A +inf lse takes that
/// path too: it comes from a +inf element (the max is +inf and the shift 0, the fallback's) or
/// from a finite logsumexp past the dtype's range (float16 rows summing past 65504, whose max
/// is finite and is the right shift). Rows with a -inf or NaN lse keep their shift (their sums
/// are the fallback's 0 or NaN).
template <typename A>
NUVEC_HD bool lse_shift_holds(A lse, A s) {
  if (lse != lse || lse == -std::numeric_limits<A>::infinity()) return true;
  return !is_inf(lse) && s >= A(0x1p-32) && s <= A(0x1p32);
}

NUVEC_MATH_END
