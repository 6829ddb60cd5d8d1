// nuvec: what the element-wise families (Unary, Binary, DivMod, Select) share between their
// rules and their ops: output dtypes, the batching step written once for all of them, and
// scalars in an array's dtype (a double scalar would promote float32 rules to float64).
#pragma once

#include <algorithm>
#include <vector>

#include "primitives/batching.h"
#include "primitives/primitives.h"

namespace nuvec {

/// The output dtype of a unary op on dtype `in` (the op layer has already cast integer
/// inputs of float math to float32), by the op table's ResultKind: |z|, Re z and Im z of
/// complex64 are float32; logical_not gives bool; everything else keeps its dtype.
inline Dtype unary_output_dtype(UnaryOp op, Dtype in) {
  switch (unary_result_kind(op)) {
    case ResultKind::Same: return in;
    case ResultKind::Bool: return bool_;
    case ResultKind::RealOfComplex: return in == complex64 ? float32 : in;
  }
  return in;
}

/// Whether a binary op's result is a bool mask (comparisons and logical ops).
inline bool binary_is_predicate(BinaryOp op) {
  return binary_result_kind(op) == ResultKind::Bool;
}

/// The output dtype of a binary op on two inputs of dtype `in`.
inline Dtype binary_output_dtype(BinaryOp op, Dtype in) {
  return binary_is_predicate(op) ? bool_ : in;
}

/// v as a 0-d array of x's dtype.
inline array scalar_like(double v, const array& x) {
  return array(v, x.dtype());
}

/// The batching step of every element-wise family: batched inputs get their batch axis
/// moved to the front, unbatched ones a leading size-1 axis, and all are broadcast to one
/// shape, so the node can be recorded again with output batch axis 0. Returns the inputs
/// unchanged when none is batched.
inline std::vector<array> batch_to_front(
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    const Stream& s) {
  if (!any_batched(axes)) return inputs;
  // Each operand's own (logical) rank: a batched one's less its batch axis. Broadcasting aligns
  // them at the end, so the lower-rank ones get size-1 axes between the batch axis and their
  // own (else a batched 0-d operand, physically [V], met an unbatched [L] as [1, L] and the
  // batch axis was aligned with L).
  size_t rank = 0;
  for (size_t i = 0; i < inputs.size(); ++i) rank = std::max(rank, inputs[i].ndim() - (axes[i] >= 0 ? 1 : 0));
  std::vector<array> moved;
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array x = axes[i] >= 0 ? moveaxis(inputs[i], axes[i], 0, s) : expand_dims(inputs[i], 0, s);
    if (x.ndim() < rank + 1) {
      Shape padded{x.shape(0)};
      padded.insert(padded.end(), rank + 1 - x.ndim(), 1);
      padded.insert(padded.end(), x.shape().begin() + 1, x.shape().end());
      x = reshape(x, padded, s);
    }
    shape = i == 0 ? x.shape() : broadcast_shapes(shape, x.shape());
    moved.push_back(x);
  }
  for (auto& x : moved) {
    if (x.shape() != shape) x = broadcast_to(x, shape, s);
  }
  return moved;
}

} // namespace nuvec
