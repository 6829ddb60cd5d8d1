// nuvec: what the element-wise families (Unary, Binary, DivMod, Select) share between their
// rules and their ops: output dtypes, the batching step written once for all of them, and
// scalars in an array's dtype (a double scalar would promote float32 rules to float64).
#pragma once

#include <vector>

#include "primitives/batching.h"
#include "primitives/primitives.h"

namespace nuvec {

/// The output dtype of a unary op on dtype `in` (the op layer has already cast integer
/// inputs of float math to float32): |z|, Re z and Im z of complex64 are float32;
/// logical_not gives bool; everything else keeps its dtype.
inline Dtype unary_output_dtype(UnaryOp op, Dtype in) {
  switch (op) {
    case UnaryOp::Abs:
    case UnaryOp::Real:
    case UnaryOp::Imag: return in == complex64 ? float32 : in;
    case UnaryOp::LogicalNot: return bool_;
    case UnaryOp::Negative: case UnaryOp::Sign: case UnaryOp::Floor: case UnaryOp::Ceil:
    case UnaryOp::Round: case UnaryOp::Sqrt: case UnaryOp::Rsqrt: case UnaryOp::Square:
    case UnaryOp::Exp: case UnaryOp::Expm1: case UnaryOp::Log: case UnaryOp::Log2:
    case UnaryOp::Log10: case UnaryOp::Log1p: case UnaryOp::Sin: case UnaryOp::Cos:
    case UnaryOp::Tan: case UnaryOp::ArcSin: case UnaryOp::ArcCos: case UnaryOp::ArcTan:
    case UnaryOp::Sinh: case UnaryOp::Cosh: case UnaryOp::Tanh: case UnaryOp::ArcSinh:
    case UnaryOp::ArcCosh: case UnaryOp::ArcTanh: case UnaryOp::Sigmoid: case UnaryOp::Erf:
    case UnaryOp::ErfInv: case UnaryOp::BitwiseInvert: case UnaryOp::Conjugate: return in;
  }
  return in;
}

/// Whether a binary op's result is a bool mask (comparisons and logical ops).
inline bool binary_is_predicate(BinaryOp op) {
  switch (op) {
    case BinaryOp::Equal: case BinaryOp::NaNEqual: case BinaryOp::NotEqual:
    case BinaryOp::Less: case BinaryOp::LessEqual: case BinaryOp::Greater:
    case BinaryOp::GreaterEqual: case BinaryOp::LogicalAnd: case BinaryOp::LogicalOr:
      return true;
    case BinaryOp::Add: case BinaryOp::Subtract: case BinaryOp::Multiply:
    case BinaryOp::Divide: case BinaryOp::FloorDivide: case BinaryOp::Remainder:
    case BinaryOp::Power: case BinaryOp::Maximum: case BinaryOp::Minimum:
    case BinaryOp::LogAddExp: case BinaryOp::ArcTan2: case BinaryOp::BitwiseAnd:
    case BinaryOp::BitwiseOr: case BinaryOp::BitwiseXor: case BinaryOp::LeftShift:
    case BinaryOp::RightShift:
      return false;
  }
  return false;
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
  std::vector<array> moved;
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array x = axes[i] >= 0 ? moveaxis(inputs[i], axes[i], 0, s) : expand_dims(inputs[i], 0, s);
    shape = i == 0 ? x.shape() : broadcast_shapes(shape, x.shape());
    moved.push_back(x);
  }
  for (auto& x : moved) {
    if (x.shape() != shape) x = broadcast_to(x, shape, s);
  }
  return moved;
}

} // namespace nuvec
