// nuvec: the op tables of the element-wise, reduce and scan families. Each table is one
// X-macro row per op; the enum, the primitive's name(), the output-dtype rule (here) and
// the functor dispatch of both backends (src/backend/common/math/) are generated from it,
// so adding a unary op is one row, one functor, the op and its tests.
//
// Host-free on purpose: no includes, so that g++, nvcc and NVRTC all read it.
#pragma once

namespace nuvec {

/// What dtype an element-wise op writes for an input dtype: the input's (`Same`), bool
/// (`Bool`: predicates), or float32 for complex64 and the input's otherwise
/// (`RealOfComplex`: |z|, Re z, Im z).
enum class ResultKind { Same, Bool, RealOfComplex };

// X(Op, Functor, ResultKind): Op names the enum entry and the primitive (name() is "Op"),
// Functor the struct in src/backend/common/math/unary.h.
#define NUVEC_UNARY_OPS(X)                    \
  X(Abs, Abs, RealOfComplex)                  \
  X(Negative, Negative, Same)                 \
  X(Sign, Sign, Same)                         \
  X(Floor, Floor, Same)                       \
  X(Ceil, Ceil, Same)                         \
  X(Round, Round, Same)                       \
  X(Sqrt, Sqrt, Same)                         \
  X(Rsqrt, Rsqrt, Same)                       \
  X(Square, Square, Same)                     \
  X(Exp, Exp, Same)                           \
  X(Expm1, Expm1, Same)                       \
  X(Log, Log, Same)                           \
  X(Log2, Log2, Same)                         \
  X(Log10, Log10, Same)                       \
  X(Log1p, Log1p, Same)                       \
  X(Sin, Sin, Same)                           \
  X(Cos, Cos, Same)                           \
  X(Tan, Tan, Same)                           \
  X(ArcSin, ArcSin, Same)                     \
  X(ArcCos, ArcCos, Same)                     \
  X(ArcTan, ArcTan, Same)                     \
  X(Sinh, Sinh, Same)                         \
  X(Cosh, Cosh, Same)                         \
  X(Tanh, Tanh, Same)                         \
  X(ArcSinh, ArcSinh, Same)                   \
  X(ArcCosh, ArcCosh, Same)                   \
  X(ArcTanh, ArcTanh, Same)                   \
  X(Sigmoid, Sigmoid, Same)                   \
  X(Erf, Erf, Same)                           \
  X(ErfInv, ErfInv, Same)                     \
  X(LogicalNot, LogicalNot, Bool)             \
  X(BitwiseInvert, BitwiseInvert, Same)       \
  X(Conjugate, Conjugate, Same)               \
  X(Real, RealPart, RealOfComplex)            \
  X(Imag, ImagPart, RealOfComplex)

// X(Op, ResultKind): the functor of src/backend/common/math/binary.h has the op's name.
#define NUVEC_BINARY_OPS(X)   \
  X(Add, Same)                \
  X(Subtract, Same)           \
  X(Multiply, Same)           \
  X(Divide, Same)             \
  X(FloorDivide, Same)        \
  X(Remainder, Same)          \
  X(Power, Same)              \
  X(Maximum, Same)            \
  X(Minimum, Same)            \
  X(LogAddExp, Same)          \
  X(ArcTan2, Same)            \
  X(Equal, Bool)              \
  X(NaNEqual, Bool)           \
  X(NotEqual, Bool)           \
  X(Less, Bool)               \
  X(LessEqual, Bool)          \
  X(Greater, Bool)            \
  X(GreaterEqual, Bool)       \
  X(LogicalAnd, Bool)         \
  X(LogicalOr, Bool)          \
  X(BitwiseAnd, Same)         \
  X(BitwiseOr, Same)          \
  X(BitwiseXor, Same)         \
  X(LeftShift, Same)          \
  X(RightShift, Same)

#define NUVEC_OP_TABLE_ENUM_UNARY(op, functor, kind) op,
#define NUVEC_OP_TABLE_ENUM_BINARY(op, kind) op,

/// The ops of the Unary family (rows of NUVEC_UNARY_OPS).
enum class UnaryOp { NUVEC_UNARY_OPS(NUVEC_OP_TABLE_ENUM_UNARY) };
/// The ops of the Binary family (rows of NUVEC_BINARY_OPS).
enum class BinaryOp { NUVEC_BINARY_OPS(NUVEC_OP_TABLE_ENUM_BINARY) };

#undef NUVEC_OP_TABLE_ENUM_UNARY
#undef NUVEC_OP_TABLE_ENUM_BINARY

/// The ops of the Reduce family; combiners and identities in src/backend/common/math/reduce.h.
enum class ReduceOp { And, Or, Sum, Prod, Max, Min };
/// The ops of the Scan family; combiners and identities in src/backend/common/math/scan.h.
enum class ScanOp { Sum, Prod, Max, Min, LogAddExp };

/// The primitive name of a unary op ("Exp"); nullptr never (the switch is generated).
constexpr const char* unary_op_name(UnaryOp op) {
  switch (op) {
#define NUVEC_OP_TABLE_CASE(o, functor, kind) \
  case UnaryOp::o: return #o;
    NUVEC_UNARY_OPS(NUVEC_OP_TABLE_CASE)
#undef NUVEC_OP_TABLE_CASE
  }
  return "Unary";
}

/// The primitive name of a binary op ("Add").
constexpr const char* binary_op_name(BinaryOp op) {
  switch (op) {
#define NUVEC_OP_TABLE_CASE(o, kind) \
  case BinaryOp::o: return #o;
    NUVEC_BINARY_OPS(NUVEC_OP_TABLE_CASE)
#undef NUVEC_OP_TABLE_CASE
  }
  return "Binary";
}

/// The output-dtype rule of a unary op (its table row).
constexpr ResultKind unary_result_kind(UnaryOp op) {
  switch (op) {
#define NUVEC_OP_TABLE_CASE(o, functor, kind) \
  case UnaryOp::o: return ResultKind::kind;
    NUVEC_UNARY_OPS(NUVEC_OP_TABLE_CASE)
#undef NUVEC_OP_TABLE_CASE
  }
  return ResultKind::Same;
}

/// The output-dtype rule of a binary op (its table row).
constexpr ResultKind binary_result_kind(BinaryOp op) {
  switch (op) {
#define NUVEC_OP_TABLE_CASE(o, kind) \
  case BinaryOp::o: return ResultKind::kind;
    NUVEC_BINARY_OPS(NUVEC_OP_TABLE_CASE)
#undef NUVEC_OP_TABLE_CASE
  }
  return ResultKind::Same;
}

} // namespace nuvec
