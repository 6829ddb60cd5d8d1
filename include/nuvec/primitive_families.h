// nuvec: the primitive families (public, as MLX's primitives.h). Each family is one class over an op enum; the
// element-wise, reduce and scan enums come from the op tables (nuvec/op_tables.h), so
// adding expm1 is a table row, and every other `switch` over them is built with
// -Werror=switch, so a missing case does not compile. A family's rules live in src/primitives/<family>.cpp in the order:
// output shapes, vjp, jvp, vmap, equivalence; its CPU kernel in src/backend/cpu/<family>.cpp.
// Rules follow MLX's primitives.cpp as given in shared/seeds/000_*.txt.
#pragma once

#include <functional>
#include <string>
#include <vector>
#include <tuple>

#include "nuvec/op_tables.h"
#include "nuvec/ops.h"
#include "nuvec/primitives.h"

namespace nuvec {

// Declares the rules every primitive must define (all pure virtual in Primitive).
#define NUVEC_PRIMITIVE_RULES()                                                      \
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs)        \
      override;                                                                      \
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs)        \
      override;                                                                      \
  std::vector<array> jvp(                                                            \
      const std::vector<array>& primals,                                             \
      const std::vector<array>& tangents,                                            \
      const std::vector<int>& argnums) override;                                     \
  std::vector<array> vjp(                                                            \
      const std::vector<array>& primals,                                             \
      const std::vector<array>& cotangents,                                          \
      const std::vector<int>& argnums,                                               \
      const std::vector<array>& outputs) override;                                   \
  std::pair<std::vector<array>, std::vector<int>> vmap(                              \
      const std::vector<array>& inputs, const std::vector<int>& axes) override;      \
  bool is_equivalent(const Primitive& other) const override;                         \
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;       \
  const char* name() const override;

// ---------------------------------------------------------------------------------------
// Element-wise (src/primitives/unary.cpp, binary.cpp, select.cpp)

class Unary : public Primitive {
 public:
  Unary(Stream stream, UnaryOp op) : Primitive(stream), op_(op) {}
  UnaryOp op() const { return op_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  UnaryOp state() const { return op_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  UnaryOp op_;
};

class Binary : public Primitive {
 public:
  Binary(Stream stream, BinaryOp op) : Primitive(stream), op_(op) {}
  BinaryOp op() const { return op_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  BinaryOp state() const { return op_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  BinaryOp op_;
};

/// MLX's per-op primitive names. nuvec keeps one class per family, so each name is an
/// alias of its family: `typeid(p) == typeid(Exp)` tells a Unary node from other families
/// (as MLX's tests use it), and the op itself is `static_cast<const Unary&>(p).op()`.
using Abs = Unary;
using Negative = Unary;
using Sign = Unary;
using Floor = Unary;
using Ceil = Unary;
using Round = Unary;
using Sqrt = Unary;
using Rsqrt = Unary;
using Square = Unary;
using Exp = Unary;
using Expm1 = Unary;
using Log = Unary;
using Log1p = Unary;
using Sin = Unary;
using Cos = Unary;
using Tan = Unary;
using ArcSin = Unary;
using ArcCos = Unary;
using ArcTan = Unary;
using Sinh = Unary;
using Cosh = Unary;
using Tanh = Unary;
using ArcSinh = Unary;
using ArcCosh = Unary;
using ArcTanh = Unary;
using Sigmoid = Unary;
using Erf = Unary;
using ErfInv = Unary;
using LogicalNot = Unary;
using BitwiseInvert = Unary;
using Conjugate = Unary;
using Real = Unary;
using Imag = Unary;
using Add = Binary;
using Subtract = Binary;
using Multiply = Binary;
using Divide = Binary;
using Remainder = Binary;
using Power = Binary;
using Maximum = Binary;
using Minimum = Binary;
using LogAddExp = Binary;
using ArcTan2 = Binary;
using Equal = Binary;
using NotEqual = Binary;
using Less = Binary;
using LessEqual = Binary;
using Greater = Binary;
using GreaterEqual = Binary;
using LogicalAnd = Binary;
using LogicalOr = Binary;
using BitwiseBinary = Binary;

/// (floor_divide, remainder) of two inputs: one node, two outputs (siblings).
class DivMod : public Primitive {
 public:
  explicit DivMod(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

/// where(condition, x, y).
class Select : public Primitive {
 public:
  explicit Select(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

// ---------------------------------------------------------------------------------------
// Casts (src/primitives/cast.cpp), graph plumbing (graph.cpp) and creation (creation.cpp)

/// astype.
class AsType : public Primitive {
 public:
  AsType(Stream stream, Dtype dtype) : Primitive(stream), dtype_(dtype) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  Dtype state() const { return dtype_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Dtype dtype_;
};

/// Bit reinterpretation (view). No derivative (throws when one is asked for).
class View : public Primitive {
 public:
  View(Stream stream, Dtype dtype) : Primitive(stream), dtype_(dtype) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  Dtype state() const { return dtype_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Dtype dtype_;
};

/// copy: shares the input's buffer.
class Copy : public Primitive {
 public:
  explicit Copy(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

/// contiguous: a row-contiguous (or column-contiguous when allowed) copy.
class Contiguous : public Primitive {
 public:
  Contiguous(Stream stream, bool allow_col_major)
      : Primitive(stream), allow_col_major_(allow_col_major) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  bool state() const { return allow_col_major_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  bool allow_col_major_;
};

/// stop_gradient: the identity with zero derivatives.
class StopGradient : public Primitive {
 public:
  explicit StopGradient(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

/// depends: outputs the first n inputs; the rest are dependencies. num_outputs is n (the
/// jvp and vmap rules need it; they do not see the outputs).
class Depends : public Primitive {
 public:
  explicit Depends(Stream stream, int num_outputs = 1)
      : Primitive(stream), num_outputs_(num_outputs) {}
  int num_outputs() const { return num_outputs_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return num_outputs_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int num_outputs_;
};

/// as_strided: a view with explicit shape, strides and offset.
class AsStrided : public Primitive {
 public:
  AsStrided(Stream stream, Shape shape, Strides strides, size_t offset)
      : Primitive(stream), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<Shape, Strides, size_t> state() const { return {shape_, strides_, offset_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape shape_;
  Strides strides_;
  size_t offset_;
};

/// full: the (already cast) input broadcast to the output shape, materialised.
class Full : public Primitive {
 public:
  explicit Full(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

/// arange: start + i * step.
class Arange : public Primitive {
 public:
  Arange(Stream stream, double start, double stop, double step)
      : Primitive(stream), start_(start), stop_(stop), step_(step) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<double, double, double> state() const { return {start_, stop_, step_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  double start_, stop_, step_;
};

/// The custom_function node: inputs are the primals then the function's outputs; the
/// rules are the user's (or derived from fun). Lives in src/transforms/custom.cpp.
class CustomTransforms : public Primitive {
 public:
  using VjpFn = std::function<std::vector<array>(
      const std::vector<array>&, const std::vector<array>&, const std::vector<array>&)>;
  using JvpFn = std::function<std::vector<array>(
      const std::vector<array>&, const std::vector<array>&, const std::vector<int>&)>;
  using VmapFn = std::function<std::pair<std::vector<array>, std::vector<int>>(
      const std::vector<array>&, const std::vector<int>&)>;
  CustomTransforms(Stream stream, int num_outputs, VjpFn vjp, JvpFn jvp, VmapFn vmap)
      : Primitive(stream),
        num_outputs_(num_outputs),
        vjp_fun_(std::move(vjp)),
        jvp_fun_(std::move(jvp)),
        vmap_fun_(std::move(vmap)) {}
  /// The number of outputs (read by export).
  int num_outputs() const { return num_outputs_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int num_outputs_;
  VjpFn vjp_fun_;
  JvpFn jvp_fun_;
  VmapFn vmap_fun_;
};

// ---------------------------------------------------------------------------------------
// Shape and views (src/primitives/shape.cpp, slicing.cpp)

class Reshape : public Primitive {
 public:
  Reshape(Stream stream, Shape shape) : Primitive(stream), shape_(std::move(shape)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  Shape state() const { return shape_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape shape_;
};

class Transpose : public Primitive {
 public:
  Transpose(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::vector<int> state() const { return axes_; }
  const std::vector<int>& axes() const { return axes_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_;
};

class Broadcast : public Primitive {
 public:
  Broadcast(Stream stream, Shape shape) : Primitive(stream), shape_(std::move(shape)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  Shape state() const { return shape_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape shape_;
};

class Squeeze : public Primitive {
 public:
  Squeeze(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::vector<int> state() const { return axes_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_; // sorted, non-negative
};

class ExpandDims : public Primitive {
 public:
  ExpandDims(Stream stream, std::vector<int> axes) : Primitive(stream), axes_(std::move(axes)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::vector<int> state() const { return axes_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_; // sorted, non-negative output positions
};

/// a[start:stop:strides], normalised: start in range, strides non-zero (may be negative).
class Slice : public Primitive {
 public:
  Slice(Stream stream, Shape start, Shape stop, Shape strides)
      : Primitive(stream), start_(std::move(start)), stop_(std::move(stop)), strides_(std::move(strides)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<Shape, Shape, Shape> state() const { return {start_, stop_, strides_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape start_, stop_, strides_;
};

/// src with a normalised slice replaced by update (update already has the slice's shape).
class SliceUpdate : public Primitive {
 public:
  SliceUpdate(Stream stream, Shape start, Shape stop, Shape strides)
      : Primitive(stream), start_(std::move(start)), stop_(std::move(stop)), strides_(std::move(strides)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<Shape, Shape, Shape> state() const { return {start_, stop_, strides_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  Shape start_, stop_, strides_;
};

/// slice with array starts: inputs (a, start); window of slice_size along axes.
class DynamicSlice : public Primitive {
 public:
  DynamicSlice(Stream stream, std::vector<int> axes, Shape slice_size)
      : Primitive(stream), axes_(std::move(axes)), slice_size_(std::move(slice_size)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<std::vector<int>, Shape> state() const { return {axes_, slice_size_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_;
  Shape slice_size_;
};

/// slice_update with array starts: inputs (src, update, start).
class DynamicSliceUpdate : public Primitive {
 public:
  DynamicSliceUpdate(Stream stream, std::vector<int> axes)
      : Primitive(stream), axes_(std::move(axes)) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::vector<int> state() const { return axes_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> axes_;
};

class Concatenate : public Primitive {
 public:
  Concatenate(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return axis_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int axis_;
};

// ---------------------------------------------------------------------------------------
// Reductions (src/primitives/reduce.cpp)

/// Reduces `axes` (sorted, non-negative), keeping them as size-1 dimensions.
class Reduce : public Primitive {
 public:
  Reduce(Stream stream, ReduceOp op, std::vector<int> axes)
      : Primitive(stream), op_(op), axes_(std::move(axes)) {}
  ReduceOp op() const { return op_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<ReduceOp, std::vector<int>> state() const { return {op_, axes_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  ReduceOp op_;
  std::vector<int> axes_;
};

enum class ArgReduceOp { ArgMin, ArgMax };

/// Index of the first extreme along axis (kept as size 1), uint32.
class ArgReduce : public Primitive {
 public:
  /// MLX's spelling of the op: ArgReduce::ReduceType, ArgReduce::ArgMin, ArgReduce::ArgMax.
  using ReduceType = ArgReduceOp;
  static constexpr ReduceType ArgMin = ArgReduceOp::ArgMin;
  static constexpr ReduceType ArgMax = ArgReduceOp::ArgMax;
  ArgReduce(Stream stream, ArgReduceOp op, int axis) : Primitive(stream), op_(op), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<ArgReduceOp, int> state() const { return {op_, axis_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  ArgReduceOp op_;
  int axis_;
};

// ---------------------------------------------------------------------------------------
// Sorting and axis indexing (src/primitives/sort.cpp, indexing.cpp)

class Sort : public Primitive {
 public:
  Sort(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return axis_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int axis_;
};

class ArgSort : public Primitive {
 public:
  ArgSort(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return axis_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int axis_;
};

/// take_along_axis with indices already broadcast and non-negative-normalised at run time:
/// inputs (a, indices).
class GatherAxis : public Primitive {
 public:
  GatherAxis(Stream stream, int axis) : Primitive(stream), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  int state() const { return axis_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int axis_;
};

enum class ScatterReduce { None, Sum };

/// put_along_axis (None) / scatter_add_axis (Sum): inputs (a, indices, updates).
class ScatterAxis : public Primitive {
 public:
  ScatterAxis(Stream stream, ScatterReduce reduce, int axis)
      : Primitive(stream), reduce_(reduce), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<ScatterReduce, int> state() const { return {reduce_, axis_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  ScatterReduce reduce_;
  int axis_;
};

// ---------------------------------------------------------------------------------------
// Matrix products (src/primitives/matmul.cpp)

class Matmul : public Primitive {
 public:
  explicit Matmul(Stream stream) : Primitive(stream) {}
  NUVEC_PRIMITIVE_RULES()
};

/// alpha * (a @ b) + beta * c: inputs (a, b, c), c already broadcast to the output.
class AddMM : public Primitive {
 public:
  AddMM(Stream stream, float alpha, float beta) : Primitive(stream), alpha_(alpha), beta_(beta) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<float, float> state() const { return {alpha_, beta_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  float alpha_, beta_;
};

// ---------------------------------------------------------------------------------------
// Convolution (src/primitives/conv.cpp, src/backend/cpu/conv.cpp)

/// conv_general in MLX's channels-last layout: inputs (input (N, spatial..., C_in), weight
/// (C_out, K..., C_in / groups)), output (N, spatial_out..., C_out). One entry per spatial
/// axis in every vector; padding may be negative (crops).
class Convolution : public Primitive {
 public:
  Convolution(
      Stream stream,
      std::vector<int> strides,
      std::vector<int> padding_lo,
      std::vector<int> padding_hi,
      std::vector<int> kernel_dilation,
      std::vector<int> input_dilation,
      int groups,
      bool flip)
      : Primitive(stream),
        strides_(std::move(strides)),
        padding_lo_(std::move(padding_lo)),
        padding_hi_(std::move(padding_hi)),
        kernel_dilation_(std::move(kernel_dilation)),
        input_dilation_(std::move(input_dilation)),
        groups_(groups),
        flip_(flip) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<std::vector<int>, std::vector<int>, std::vector<int>, std::vector<int>, std::vector<int>, int, bool>
  state() const {
    return {strides_, padding_lo_, padding_hi_, kernel_dilation_, input_dilation_, groups_, flip_};
  }
  NUVEC_PRIMITIVE_RULES()

 private:
  std::vector<int> strides_, padding_lo_, padding_hi_, kernel_dilation_, input_dilation_;
  int groups_;
  bool flip_;
};

} // namespace nuvec
