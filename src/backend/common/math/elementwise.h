// nuvec: the element-wise math layer in one include (unary and binary functors, visits)
// and the element types the kernels of a functor read and write.
#pragma once

#include "backend/common/math/binary.h"

NUVEC_MATH_BEGIN

/// The element type a functor writes for input element type T (Arity operands): T when it
/// returns T's compute type (so half types round back), else what it returns (bool for
/// predicates, float for |complex|, Re and Im). tests/math/math_layer_test.cpp checks that
/// this agrees with the op table's ResultKind for every op and dtype.
template <typename Op, typename T, int Arity>
struct ResultElem;
template <typename Op, typename T>
struct ResultElem<Op, T, 1> {
  using R = std::invoke_result_t<Op, compute_t<T>>;
  using type = std::conditional_t<std::is_same_v<R, compute_t<T>>, T, R>;
};
template <typename Op, typename T>
struct ResultElem<Op, T, 2> {
  using R = std::invoke_result_t<Op, compute_t<T>, compute_t<T>>;
  using type = std::conditional_t<std::is_same_v<R, compute_t<T>>, T, R>;
};
template <typename Op, typename T, int Arity>
using result_elem_t = typename ResultElem<Op, T, Arity>::type;

/// Whether Op declares that its integer results depend only on the operands' bits.
template <typename Op>
concept SignFree = Op::kSignFree;

/// The element type the kernels of Op run on for element type T: the unsigned type of the
/// same width for signed integers under a SignFree op (identical bits), else T.
template <typename Op, typename T>
struct KernelElem {
  using type = T;
};
template <SignFree Op, typename T>
  requires(std::is_integral_v<T> && std::is_signed_v<T>)
struct KernelElem<Op, T> {
  using type = std::make_unsigned_t<T>;
};
template <typename Op, typename T>
using kernel_elem_t = typename KernelElem<Op, T>::type;

NUVEC_MATH_END
