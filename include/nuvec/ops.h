// nuvec: the array operations (MLX's ops.h API: names, argument order, defaults). Each op
// validates its arguments, works out the output dtype and shape, and records a node; nothing
// runs until eval. Errors: std::invalid_argument for shapes and dtypes, std::out_of_range
// for axes and indices, each message starting with "[op]".
//
// Conventions for every op below:
// - Binary ops broadcast with NumPy's rules and promote with promote_types.
// - `axes` may be negative (counted from the end); duplicates or out-of-range axes throw.
// - `s` picks the stream or device (default: the default device's default stream).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/device.h"
#include "nuvec/stream.h"

namespace nuvec {

// ---------------------------------------------------------------------------------------
// Creation (src/ops/creation.cpp)

/// Values start, start + step, ... below stop (NumPy's arange). Dtype: `dtype`, else float32
/// for the double overloads and int32 for the int ones. Throws std::invalid_argument for a
/// zero or NaN step, an infinite bound, or a bool dtype.
array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, double step, StreamOrDevice s = {});
array arange(double start, double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, StreamOrDevice s = {});
array arange(double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double stop, StreamOrDevice s = {});
array arange(int start, int stop, int step, StreamOrDevice s = {});
array arange(int start, int stop, StreamOrDevice s = {});
array arange(int stop, StreamOrDevice s = {});

/// `num` evenly spaced values from start to stop (stop included when endpoint, NumPy's
/// rule: step = (stop - start) / (num - endpoint)), computed in float64 and cast to dtype
/// once; integer dtypes take the floor first (NumPy; MLX truncates toward zero). Throws
/// std::invalid_argument for num < 0. Source: MLX/NumPy linspace.
array linspace(
    double start,
    double stop,
    int num = 50,
    bool endpoint = true,
    Dtype dtype = float32,
    StreamOrDevice s = {});
/// linspace with the endpoint included (nuvec's earlier overload, kept for callers).
array linspace(double start, double stop, int num, Dtype dtype, StreamOrDevice s = {});

/// The elements of a converted to dtype (NumPy casting: truncation toward zero for float
/// to int, "!= 0" for bool, real part for complex to real). Out-of-range floats wrap
/// modulo 2^bits into unsigned dtypes (-1.0 -> 255 for uint8, as NumPy, MLX and PyTorch on
/// x86) and clamp into signed ones; NaN gives 0.
array astype(array a, Dtype dtype, StreamOrDevice s = {});

/// A view of a's data with the given shape, element strides and element offset (no bounds
/// are checked beyond a's buffer; a is made contiguous first). Source: NumPy as_strided.
array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s = {});

/// A copy of a (shares the buffer until written: arrays are immutable).
array copy(array a, StreamOrDevice s = {});

/// An array of `shape` filled with vals (broadcast to shape), converted to dtype.
/// Throws std::invalid_argument when vals does not broadcast to shape.
array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, array vals, StreamOrDevice s = {});
template <typename T>
array full(Shape shape, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val, dtype), s);
}
template <typename T>
array full(Shape shape, T val, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val), s);
}

/// Zeros / ones of a shape (float32 by default) or of another array's shape and dtype.
array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
array zeros(const Shape& shape, StreamOrDevice s = {});
array zeros_like(const array& a, StreamOrDevice s = {});
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
array ones(const Shape& shape, StreamOrDevice s = {});
array ones_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, Dtype dtype, StreamOrDevice s = {});
/// full(a.shape(), vals, dtype), dtype a's unless given (MLX's full_like; a scalar val is
/// converted to the output dtype first). Throws as full.
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s = {});
array full_like(const array& a, array vals, StreamOrDevice s = {});
template <typename T>
array full_like(const array& a, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full_like(a, array(val, dtype), dtype, s);
}
template <typename T>
array full_like(const array& a, T val, StreamOrDevice s = {}) {
  return full_like(a, array(val, a.dtype()), s);
}

/// An n x m matrix with ones on the k-th diagonal (k > 0 above the main one).
/// Throws std::invalid_argument for negative n or m.
array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s = {});
array eye(int n, Dtype dtype, StreamOrDevice s = {});
array eye(int n, int m, StreamOrDevice s = {});
array eye(int n, int m, int k, StreamOrDevice s = {});
array eye(int n, StreamOrDevice s = {});

/// The n x n identity.
array identity(int n, Dtype dtype, StreamOrDevice s = {});
array identity(int n, StreamOrDevice s = {});

/// An n x m matrix with ones at and below the k-th diagonal.
array tri(int n, int m, int k, Dtype type, StreamOrDevice s = {});
array tri(int n, Dtype type, StreamOrDevice s = {});

/// x with the elements above (tril) or below (triu) the k-th diagonal of the last two axes
/// zeroed. Throws std::invalid_argument for x with fewer than 2 dimensions.
array tril(array x, int k = 0, StreamOrDevice s = {});
array triu(array x, int k = 0, StreamOrDevice s = {});

/// Coordinate grids from 1-d arrays (NumPy's meshgrid; indexing "xy" or "ij").
std::vector<array> meshgrid(
    const std::vector<array>& arrays,
    bool sparse = false,
    const std::string& indexing = "xy",
    StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Shape and views (src/ops/shape.cpp, src/ops/slicing.cpp)

/// a with a new shape of the same size; one dimension may be -1 (inferred). A view when a
/// is row-contiguous. Throws std::invalid_argument when sizes differ.
array reshape(const array& a, Shape shape, StreamOrDevice s = {});

/// Axis `axis` split into `shape` (one entry may be -1).
array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s = {});

/// Axes start_axis..end_axis merged into one.
array flatten(const array& a, int start_axis, int end_axis = -1, StreamOrDevice s = {});
array flatten(const array& a, StreamOrDevice s = {});

/// a without the given size-1 axes (all size-1 axes without `axes`). Throws for an axis
/// whose size is not 1.
array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array squeeze(const array& a, int axis, StreamOrDevice s = {});
array squeeze(const array& a, StreamOrDevice s = {});

/// a with size-1 axes inserted at `axes` (positions in the output).
array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});

/// a[start:stop:strides] per axis (NumPy semantics: negative starts/stops count from the end
/// and are clamped; negative strides walk backwards). A view of a's buffer.
array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s = {});
array slice(const array& a, Shape start, Shape stop, StreamOrDevice s = {});
// Brace-list forms: `slice(a, {0, 1}, {2, 3})` would otherwise be ambiguous with the
// array-start overload below (an array converts from a list too), as in MLX.
inline array slice(
    const array& a,
    std::initializer_list<int> start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {}) {
  return slice(a, Shape(start), std::move(stop), std::move(strides), s);
}
inline array slice(
    const array& a,
    std::initializer_list<int> start,
    Shape stop,
    StreamOrDevice s = {}) {
  return slice(a, Shape(start), std::move(stop), s);
}
/// A window of `slice_size` along `axes` starting at the (integer) array `start` (one entry
/// per axis, clamped so the window fits).
array slice(
    const array& a,
    const array& start,
    std::vector<int> axes,
    Shape slice_size,
    StreamOrDevice s = {});

/// src with src[start:stop:strides] replaced by update (broadcast to the slice). When nothing
/// else refers to src at evaluation (array::is_donatable: the caller replaced its handle with
/// the result, as a KV cache update does) the result takes over src's buffer and only the
/// window is written; otherwise src is copied first. The same holds for the array-start form.
array slice_update(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {});
array slice_update(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    StreamOrDevice s = {});
// Brace-list forms, for the same reason as slice's.
inline array slice_update(
    const array& src,
    const array& update,
    std::initializer_list<int> start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {}) {
  return slice_update(src, update, Shape(start), std::move(stop), std::move(strides), s);
}
inline array slice_update(
    const array& src,
    const array& update,
    std::initializer_list<int> start,
    Shape stop,
    StreamOrDevice s = {}) {
  return slice_update(src, update, Shape(start), std::move(stop), s);
}
/// src with the window at the (integer) array `start` along `axes` replaced by update.
array slice_update(
    const array& src,
    const array& update,
    const array& start,
    std::vector<int> axes,
    StreamOrDevice s = {});

/// a split into `num_splits` equal parts, or at `indices`, along axis (default 0).
/// Throws std::invalid_argument when the axis does not divide evenly.
std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s = {});

/// The arrays joined along axis (promoted to a common dtype); without axis, flattened.
array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s = {});
array concatenate(std::vector<array> arrays, StreamOrDevice s = {});

/// The arrays stacked along a new axis (all shapes equal).
array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, StreamOrDevice s = {});

/// The slices of a along axis, each without that axis (NumPy 2's unstack).
std::vector<array> unstack(const array& a, int axis = 0, StreamOrDevice s = {});

/// Each element repeated `repeats` times along axis (flattened without axis).
array repeat(const array& arr, int repeats, int axis, StreamOrDevice s = {});
array repeat(const array& arr, int repeats, StreamOrDevice s = {});

/// arr tiled reps times per axis (NumPy's tile).
array tile(const array& arr, std::vector<int> reps, StreamOrDevice s = {});

/// The axes of a permuted (reversed without axes). A view.
array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
array transpose(const array& a, std::initializer_list<int> axes, StreamOrDevice s = {});
array transpose(const array& a, StreamOrDevice s = {});

/// Two axes swapped; one axis moved to a new position. Views.
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination, StreamOrDevice s = {});

/// a padded along axes with low/high widths. Modes (NumPy's): "constant" (pad_value),
/// "edge" (the end values repeated), "reflect" (mirrored without the edge value) and
/// "symmetric" (mirrored with it); a reflection wider than the axis repeats. Throws
/// std::invalid_argument for mismatched lengths, negative widths, a bad axis, an unknown
/// mode or an empty axis in a non-constant mode; std::overflow_error when a padded size
/// passes 2^31 - 1. Runs: a slice_update of a full array (constant) or a take per axis.
array pad(
    const array& a,
    const std::vector<int>& axes,
    const Shape& low_pad_size,
    const Shape& high_pad_size,
    const array& pad_value = array(0),
    const std::string& mode = "constant",
    StreamOrDevice s = {});
array pad(
    const array& a,
    const std::vector<std::pair<int, int>>& pad_width,
    const array& pad_value = array(0),
    const std::string& mode = "constant",
    StreamOrDevice s = {});
array pad(
    const array& a,
    const std::pair<int, int>& pad_width,
    const array& pad_value = array(0),
    const std::string& mode = "constant",
    StreamOrDevice s = {});
array pad(
    const array& a,
    int pad_width,
    const array& pad_value = array(0),
    const std::string& mode = "constant",
    StreamOrDevice s = {});

/// a broadcast to shape (a view). Throws std::invalid_argument when not broadcastable.
array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
/// The inputs broadcast to their common shape.
std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s = {});
/// The broadcast shape of two shapes (NumPy's rule). Throws std::invalid_argument.
Shape broadcast_shapes(const Shape& s1, const Shape& s2);

/// Elements shifted by `shift` along axes (flattened without axes), wrapping around.
array roll(const array& a, int shift, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, StreamOrDevice s = {});
array roll(const array& a, int shift, int axis, StreamOrDevice s = {});
array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, const std::vector<int>& axes, StreamOrDevice s = {});

/// a reversed along axes (all axes without them): a view with negative strides
/// (NumPy's flip; nuvec addition).
array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array flip(const array& a, int axis, StreamOrDevice s = {});
array flip(const array& a, StreamOrDevice s = {});

/// The offset diagonal of the (axis1, axis2) planes, as a new last axis (NumPy's diagonal).
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1, StreamOrDevice s = {});
/// The k-th diagonal of a 2-d array, or a 2-d array with a 1-d array on its k-th diagonal.
array diag(const array& a, int k = 0, StreamOrDevice s = {});
/// Sum of the offset diagonal of the (axis1, axis2) planes.
array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype, StreamOrDevice s = {});
array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s = {});
array trace(const array& a, StreamOrDevice s = {});

/// a with at least 1, 2 or 3 dimensions (size-1 axes added as NumPy does).
array atleast_1d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s = {});
array atleast_2d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s = {});
array atleast_3d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s = {});

/// a's bits reinterpreted as dtype; the last axis scales by the itemsize ratio.
/// Throws std::invalid_argument when the last axis does not divide.
array view(const array& a, const Dtype& dtype, StreamOrDevice s = {});

/// A row-contiguous copy of a (or a itself when already contiguous; column-major too when
/// allow_col_major).
array contiguous(const array& a, bool allow_col_major = false, StreamOrDevice s = {});

/// a, with gradients cut: its vjp and jvp are zero.
array stop_gradient(const array& a, StreamOrDevice s = {});

/// The inputs, made to depend on `dependencies` (evaluating them evaluates the
/// dependencies first; no gradient flows to the dependencies).
std::vector<array> depends(
    const std::vector<array>& inputs,
    const std::vector<array>& dependencies);

// ---------------------------------------------------------------------------------------
// Element-wise (src/ops/elementwise.cpp). Unary math ops on integer or bool inputs compute
// in float32 (float ops) as MLX does.

/// Comparisons: bool arrays.
array equal(const array& a, const array& b, StreamOrDevice s = {});
array not_equal(const array& a, const array& b, StreamOrDevice s = {});
array greater(const array& a, const array& b, StreamOrDevice s = {});
array greater_equal(const array& a, const array& b, StreamOrDevice s = {});
array less(const array& a, const array& b, StreamOrDevice s = {});
array less_equal(const array& a, const array& b, StreamOrDevice s = {});

/// Whether a and b have the same shape and elements (NaNs equal when equal_nan).
array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s = {});
array array_equal(const array& a, const array& b, StreamOrDevice s = {});

/// Element-wise tests on floating values (false for integer inputs).
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array isfinite(const array& a, StreamOrDevice s = {});
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});

/// x where condition, else y (all three broadcast; x and y promote).
array where(const array& condition, const array& x, const array& y, StreamOrDevice s = {});

/// NaN, +inf and -inf replaced (defaults: 0, the dtype's max and lowest finite values).
array nan_to_num(
    const array& a,
    float nan = 0.0f,
    const std::optional<float> posinf = std::nullopt,
    const std::optional<float> neginf = std::nullopt,
    StreamOrDevice s = {});

/// a limited to [a_min, a_max] (either may be absent, not both).
array clip(
    const array& a,
    const std::optional<array>& a_min = std::nullopt,
    const std::optional<array>& a_max = std::nullopt,
    StreamOrDevice s = {});

/// |a - b| <= atol + rtol |b| element-wise (isclose) and over all elements (allclose).
array allclose(
    const array& a,
    const array& b,
    double rtol = 1e-5,
    double atol = 1e-8,
    bool equal_nan = false,
    StreamOrDevice s = {});
array isclose(
    const array& a,
    const array& b,
    double rtol = 1e-5,
    double atol = 1e-8,
    bool equal_nan = false,
    StreamOrDevice s = {});

/// Unary math. Float ops on integer/bool inputs return float32.
array abs(const array& a, StreamOrDevice s = {});
array negative(const array& a, StreamOrDevice s = {});
array sign(const array& a, StreamOrDevice s = {});
array logical_not(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array expm1(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
/// log(1 + a); complex a as log|1 + a| + i·arg(1 + a), the modulus through the real log1p
/// so that small values keep their digits.
array log1p(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
/// The error function and its inverse (erfinv on (-1, 1); +-inf at +-1).
array erf(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
/// Round half to even to `decimals` places (NumPy's round); complex: each part apart.
array round(const array& a, int decimals, StreamOrDevice s = {});
array round(const array& a, StreamOrDevice s = {});
/// Complex conjugate, real and imaginary parts (identity / a / zeros for real inputs).
array conjugate(const array& a, StreamOrDevice s = {});
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});

/// Binary arithmetic, with NumPy's semantics for integers: floor_divide and remainder
/// round toward negative infinity (remainder takes the divisor's sign); integer division
/// by zero gives 0. divide always returns a floating dtype (true division).
array add(const array& a, const array& b, StreamOrDevice s = {});
array subtract(const array& a, const array& b, StreamOrDevice s = {});
array multiply(const array& a, const array& b, StreamOrDevice s = {});
array divide(const array& a, const array& b, StreamOrDevice s = {});
array floor_divide(const array& a, const array& b, StreamOrDevice s = {});
array remainder(const array& a, const array& b, StreamOrDevice s = {});
/// (floor_divide(a, b), remainder(a, b)) computed by one node.
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s = {});
/// a ** b (NumPy's power).
array power(const array& a, const array& b, StreamOrDevice s = {});
/// Element-wise max/min; NaN propagates (NumPy's maximum/minimum).
array maximum(const array& a, const array& b, StreamOrDevice s = {});
array minimum(const array& a, const array& b, StreamOrDevice s = {});
/// log(exp(a) + exp(b)), computed stably as max + log1p(exp(min - max)); equal infinities
/// give themselves, NaN propagates. Inexact result dtype (integers promote to float32).
/// complex64 is accepted as in MLX (lexicographic max; NumPy has no complex logaddexp).
/// Broadcasts; throws std::invalid_argument for shapes that do not broadcast.
array logaddexp(const array& a, const array& b, StreamOrDevice s = {});
/// The angle of (b, a): atan2(a, b).
array arctan2(const array& a, const array& b, StreamOrDevice s = {});

/// Logical ops (bool results) and bitwise ops (integer and bool dtypes only).
array logical_and(const array& a, const array& b, StreamOrDevice s = {});
array logical_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_and(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_or(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_xor(const array& a, const array& b, StreamOrDevice s = {});
array left_shift(const array& a, const array& b, StreamOrDevice s = {});
array right_shift(const array& a, const array& b, StreamOrDevice s = {});
array bitwise_invert(const array& a, StreamOrDevice s = {});

/// Operators: each is the named op above (-a is negative, !a logical_not, ~a bitwise_invert,
/// a % b remainder, && and || logical_and/or, << and >> left/right_shift), with the same
/// broadcasting, promotion and errors. Scalar forms make the scalar a 0-d array of its C++
/// type first.
array operator-(const array& a);
array operator!(const array& a);
array operator~(const array& a);
array operator+(const array& a, const array& b);
array operator-(const array& a, const array& b);
array operator*(const array& a, const array& b);
array operator/(const array& a, const array& b);
array operator%(const array& a, const array& b);
array operator==(const array& a, const array& b);
array operator!=(const array& a, const array& b);
array operator<(const array& a, const array& b);
array operator<=(const array& a, const array& b);
array operator>(const array& a, const array& b);
array operator>=(const array& a, const array& b);
array operator&&(const array& a, const array& b);
array operator||(const array& a, const array& b);
array operator&(const array& a, const array& b);
array operator|(const array& a, const array& b);
array operator^(const array& a, const array& b);
array operator<<(const array& a, const array& b);
array operator>>(const array& a, const array& b);

#define NUVEC_SCALAR_OPERATOR(OP)                    \
  template <typename T>                              \
  array operator OP(T a, const array& b) {           \
    return array(a) OP b;                            \
  }                                                  \
  template <typename T>                              \
  array operator OP(const array& a, T b) {           \
    return a OP array(b);                            \
  }
NUVEC_SCALAR_OPERATOR(+)
NUVEC_SCALAR_OPERATOR(-)
NUVEC_SCALAR_OPERATOR(*)
NUVEC_SCALAR_OPERATOR(/)
NUVEC_SCALAR_OPERATOR(%)
NUVEC_SCALAR_OPERATOR(==)
NUVEC_SCALAR_OPERATOR(!=)
NUVEC_SCALAR_OPERATOR(<)
NUVEC_SCALAR_OPERATOR(<=)
NUVEC_SCALAR_OPERATOR(>)
NUVEC_SCALAR_OPERATOR(>=)
NUVEC_SCALAR_OPERATOR(&)
NUVEC_SCALAR_OPERATOR(|)
NUVEC_SCALAR_OPERATOR(^)
#undef NUVEC_SCALAR_OPERATOR

// ---------------------------------------------------------------------------------------
// Reductions (src/ops/reduce.cpp). Without axes they reduce over all axes. Sums of
// integers and bools accumulate in the output dtype (int32 for bool/int8/int16/uint8..,
// as MLX), float16/bfloat16 accumulate in float32.

/// Whether all / any elements are true (bool output).
array all(const array& a, bool keepdims, StreamOrDevice s = {});
array all(const array& a, StreamOrDevice s = {});
array all(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array all(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array any(const array& a, bool keepdims, StreamOrDevice s = {});
array any(const array& a, StreamOrDevice s = {});
array any(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array any(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// Sum; bool and small integers sum in int32 (uint32 for unsigned), as MLX.
array sum(const array& a, bool keepdims, StreamOrDevice s = {});
array sum(const array& a, StreamOrDevice s = {});
array sum(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array sum(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// Mean (floating output: float32 for integer inputs).
array mean(const array& a, bool keepdims, StreamOrDevice s = {});
array mean(const array& a, StreamOrDevice s = {});
array mean(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array mean(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// Variance with ddof (divides by N - ddof; NaN-free: max(N - ddof, 0) gives inf/NaN as NumPy).
array var(const array& a, bool keepdims, int ddof = 0, StreamOrDevice s = {});
array var(const array& a, StreamOrDevice s = {});
array var(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
array var(const array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});

/// Standard deviation: sqrt(var).
array std(const array& a, bool keepdims, int ddof = 0, StreamOrDevice s = {});
array std(const array& a, StreamOrDevice s = {});
array std(const array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
array std(const array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});

/// Product.
array prod(const array& a, bool keepdims, StreamOrDevice s = {});
array prod(const array& a, StreamOrDevice s = {});
array prod(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array prod(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// Maximum / minimum (NaN propagates). Throws std::invalid_argument on an empty reduction.
array max(const array& a, bool keepdims, StreamOrDevice s = {});
array max(const array& a, StreamOrDevice s = {});
array max(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array max(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array min(const array& a, bool keepdims, StreamOrDevice s = {});
array min(const array& a, StreamOrDevice s = {});
array min(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array min(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// Index (uint32) of the first minimum / maximum along axis (of the flattened array without).
array argmin(const array& a, bool keepdims, StreamOrDevice s = {});
array argmin(const array& a, StreamOrDevice s = {});
array argmin(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array argmax(const array& a, bool keepdims, StreamOrDevice s = {});
array argmax(const array& a, StreamOrDevice s = {});
array argmax(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// log(sum(exp(a))) computed stably (shifted by the max; inf inputs handled). Throws
/// std::invalid_argument for an empty a (MLX), std::out_of_range for a bad axis.
array logsumexp(const array& a, bool keepdims, StreamOrDevice s = {});
array logsumexp(const array& a, StreamOrDevice s = {});
array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array logsumexp(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

/// exp(a - max) / sum(exp(a - max)) over axes; precise computes half inputs in float32.
array softmax(const array& a, const std::vector<int>& axes, bool precise = false, StreamOrDevice s = {});
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
array softmax(const array& a, int axis, bool precise = false, StreamOrDevice s = {});

/// Number of non-zero elements (NaN counts as non-zero), int32, over axes (all axes without
/// them); the overloads follow sum's, so `count_nonzero(a, true)` means keepdims as in MLX.
/// Throws std::invalid_argument for a bad axis. Source: MLX/NumPy count_nonzero.
array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, bool keepdims, StreamOrDevice s = {});
array count_nonzero(const array& a, StreamOrDevice s = {});

/// Median (mean of the two middle values for even counts; float output; NaN propagates).
array median(const array& a, bool keepdims, StreamOrDevice s = {});
array median(const array& a, StreamOrDevice s = {});
array median(const array& a, const std::vector<int>& axes, bool keepdims = false, StreamOrDevice s = {});
array median(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Sorting and axis indexing used by the core (src/ops/sort.cpp, src/ops/indexing.cpp)

/// a sorted along axis (flattened without axis); NaNs last, as NumPy. Complex numbers sort
/// lexicographically and any with a NaN part go last, tied among themselves in their input
/// order (NumPy orders those too: R + nanj, then nan + Rj, then nan + nanj).
array sort(const array& a, int axis, StreamOrDevice s = {});
array sort(const array& a, StreamOrDevice s = {});
/// The indices (uint32) that sort a along axis; stable (equal values keep their order; NaNs
/// last, -0 equal to +0). Runs: a stable LSD radix sort of (key, position) pairs for
/// float32/int32/uint32 lines of at least 2048 elements, std::stable_sort otherwise.
array argsort(const array& a, int axis, StreamOrDevice s = {});
array argsort(const array& a, StreamOrDevice s = {});

/// a's elements at `indices` along axis (indices broadcast with a except along axis;
/// negative indices count from the end). Throws std::invalid_argument for non-integer
/// indices or mismatched ranks, std::out_of_range for the axis; an index outside [-n, n)
/// makes the next eval throw std::out_of_range naming take_along_axis, the index and n.
array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s = {});
/// a with values written at indices along axis (last write wins for duplicates). Throws as
/// take_along_axis (naming put_along_axis).
array put_along_axis(const array& a, const array& indices, const array& values, int axis, StreamOrDevice s = {});
/// a with values added at indices along axis (duplicates accumulate). Throws as
/// take_along_axis (naming scatter_add_axis).
array scatter_add_axis(const array& a, const array& indices, const array& values, int axis, StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Linear algebra products (src/ops/matmul.cpp)

/// Matrix product with NumPy's matmul rules: 1-d operands are promoted and the added axis
/// removed, batch axes broadcast. float32/float64/complex64 run through BLAS; float16 and
/// bfloat16 accumulate in float32; integer dtypes are supported (wrapping as NumPy) and
/// bool @ bool is bool (any of a && b, NumPy's answer). Throws std::invalid_argument when the
/// inner dimensions differ, batch axes do not broadcast or an operand is 0-d.
array matmul(const array& a, const array& b, StreamOrDevice s = {});

/// alpha * (a @ b) + beta * c, with c broadcast to the product's shape (1-d a or b as in
/// matmul). Throws std::invalid_argument as matmul does, when c does not broadcast to the
/// product's shape, or when the operands do not promote to a floating or complex dtype (MLX).
array addmm(array c, array a, array b, const float& alpha = 1.f, const float& beta = 1.f, StreamOrDevice s = {});

/// Sum over the last `axis` axes of a and the first of b; or over the given axis pairs.
array tensordot(const array& a, const array& b, const int axis = 2, StreamOrDevice s = {});
array tensordot(
    const array& a,
    const array& b,
    const std::vector<int>& axes_a,
    const std::vector<int>& axes_b,
    StreamOrDevice s = {});

/// Outer product of the flattened inputs.
array outer(const array& a, const array& b, StreamOrDevice s = {});
/// Inner product over the last axes.
array inner(const array& a, const array& b, StreamOrDevice s = {});
/// Kronecker product.
array kron(const array& a, const array& b, StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Convolution (src/ops/conv.cpp). MLX's channels-last layout throughout: input
// (N, spatial..., C_in), weight (C_out, K..., C_in / groups), output (N, spatial_out..., C_out).
// Dtype: promote_types(input, weight), which must be float16, bfloat16, float32 or float64.
// Runs: im2col then one BLAS gemm per group (half types through float32).

/// out[n, o..., g*Cog + co] = sum_{k..., c} in_p[n, o*stride + k*kernel_dilation, g*Cig + c]
///   * w[g*Cog + co, flip ? K-1-k : k, c], with in_p the input dilated by input_dilation
///   (input_dilation - 1 zeros between elements), then padded with padding_lo / padding_hi
///   zeros per spatial axis (negative padding crops). Per axis the output size is
///   floor((in_p - kernel_dilation * (K - 1) - 1) / stride) + 1.
/// Shapes: input (N, S..., C_in), weight (C_out, K..., C_in / groups), output (N, O..., C_out).
/// Empty vectors mean 1 (0 for padding); a one-entry vector applies to every spatial axis.
/// Throws std::invalid_argument (naming conv_general and the shapes) for ranks that differ or
/// are below 3, a vector of the wrong length, non-positive strides, dilations or groups, groups
/// not dividing C_in and C_out, a channel mismatch, a kernel larger than the padded input, or
/// a non-floating dtype. Source: MLX's conv_general.
array conv_general(
    array input,
    array weight,
    std::vector<int> stride = {},
    std::vector<int> padding_lo = {},
    std::vector<int> padding_hi = {},
    std::vector<int> kernel_dilation = {},
    std::vector<int> input_dilation = {},
    int groups = 1,
    bool flip = false,
    StreamOrDevice s = {});

/// conv_general with the same padding on both sides of every spatial axis (MLX's overload).
/// As in MLX, a call that fits both overloads (eight arguments or fewer) is ambiguous: give
/// every argument through `flip` to select the one above, or end with `s` to select this one.
inline array conv_general(
    const array& input,
    const array& weight,
    std::vector<int> stride = {},
    std::vector<int> padding = {},
    std::vector<int> kernel_dilation = {},
    std::vector<int> input_dilation = {},
    int groups = 1,
    bool flip = false,
    StreamOrDevice s = {}) {
  return conv_general(
      input, weight, std::move(stride), padding, padding, std::move(kernel_dilation),
      std::move(input_dilation), groups, flip, s);
}

/// 1-d cross-correlation: conv_general with one spatial axis and symmetric padding.
/// Shapes: input (N, L, C_in), weight (C_out, K, C_in / groups), output (N, L_out, C_out)
/// with L_out = floor((L + 2 * padding - dilation * (K - 1) - 1) / stride) + 1.
/// Throws std::invalid_argument naming conv1d (see conv_general). Source: MLX's conv1d.
/// Runs one Convolution node (im2col and a GEMM); a depthwise call (groups = C_in, weight
/// (C_in, K, 1) of the input's real floating dtype, padding >= 0) one DepthwiseConv1d node
/// instead: direct CPU and CUDA kernels summing in float32 (float64 for float64), with the
/// Convolution node as its fallback (gradients, vmap).
array conv1d(
    const array& input,
    const array& weight,
    int stride = 1,
    int padding = 0,
    int dilation = 1,
    int groups = 1,
    StreamOrDevice s = {});

/// 2-d cross-correlation: input (N, H, W, C_in), weight (C_out, KH, KW, C_in / groups),
/// output (N, H_out, W_out, C_out); (stride, padding, dilation) per axis as (height, width).
/// Throws std::invalid_argument naming conv2d (see conv_general). Source: MLX's conv2d.
array conv2d(
    const array& input,
    const array& weight,
    const std::pair<int, int>& stride = {1, 1},
    const std::pair<int, int>& padding = {0, 0},
    const std::pair<int, int>& dilation = {1, 1},
    int groups = 1,
    StreamOrDevice s = {});

/// 3-d cross-correlation: input (N, D, H, W, C_in), weight (C_out, KD, KH, KW, C_in / groups),
/// output (N, D_out, H_out, W_out, C_out). Throws std::invalid_argument naming conv3d.
/// Source: MLX's conv3d.
array conv3d(
    const array& input,
    const array& weight,
    const std::tuple<int, int, int>& stride = {1, 1, 1},
    const std::tuple<int, int, int>& padding = {0, 0, 0},
    const std::tuple<int, int, int>& dilation = {1, 1, 1},
    int groups = 1,
    StreamOrDevice s = {});

/// Transposed 1-d convolution (the input gradient of conv1d with these parameters):
/// conv_general(input, weight, stride 1, padding_lo = dilation * (K - 1) - padding,
/// padding_hi = padding_lo + output_padding, kernel_dilation = dilation,
/// input_dilation = stride, groups, flip = true).
/// Shapes: input (N, L, C_in), weight (C_out, K, C_in / groups), output (N, L_out, C_out)
/// with L_out = (L - 1) * stride - 2 * padding + dilation * (K - 1) + 1 + output_padding.
/// Throws std::invalid_argument naming conv_transpose1d (see conv_general).
/// Source: MLX's conv_transpose1d (same weight layout and formula).
array conv_transpose1d(
    const array& input,
    const array& weight,
    int stride = 1,
    int padding = 0,
    int dilation = 1,
    int output_padding = 0,
    int groups = 1,
    StreamOrDevice s = {});

/// Transposed 2-d convolution: conv_transpose1d's formula per spatial axis (height, width).
/// Shapes: input (N, H, W, C_in), weight (C_out, KH, KW, C_in / groups), output
/// (N, H_out, W_out, C_out). Throws std::invalid_argument naming conv_transpose2d.
/// Source: MLX's conv_transpose2d.
array conv_transpose2d(
    const array& input,
    const array& weight,
    const std::pair<int, int>& stride = {1, 1},
    const std::pair<int, int>& padding = {0, 0},
    const std::pair<int, int>& dilation = {1, 1},
    const std::pair<int, int>& output_padding = {0, 0},
    int groups = 1,
    StreamOrDevice s = {});

/// Transposed 3-d convolution: conv_transpose1d's formula per spatial axis (depth, height,
/// width). Shapes: input (N, D, H, W, C_in), weight (C_out, KD, KH, KW, C_in / groups).
/// Throws std::invalid_argument naming conv_transpose3d. Source: MLX's conv_transpose3d.
array conv_transpose3d(
    const array& input,
    const array& weight,
    const std::tuple<int, int, int>& stride = {1, 1, 1},
    const std::tuple<int, int, int>& padding = {0, 0, 0},
    const std::tuple<int, int, int>& dilation = {1, 1, 1},
    const std::tuple<int, int, int>& output_padding = {0, 0, 0},
    int groups = 1,
    StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Scans and selection (src/ops/scan.cpp; rules src/primitives/scan.cpp, kernels
// src/backend/cpu/scan.cpp). Scans run along one axis (the flattened array without axis);
// `reverse` scans from the end, `inclusive = false` shifts by one and starts from the
// identity (0, 1, lowest, highest, -inf). Axes may be negative; an axis out of range throws
// std::out_of_range naming the op. Derivatives follow shared/seeds/000_*.txt (MLX's Scan).

/// out[i] = sum_{j <= i} a[j] along axis (j < i when exclusive; j >= i when reversed).
/// Dtypes: bool, int8 and int16 give int32, uint8 and uint16 give uint32 (as sum); others
/// keep their dtype; float16/bfloat16 accumulate in float32. Throws std::out_of_range for
/// the axis. Source: MLX's cumsum. Runs: Scan(Sum), contiguous copy for strided inputs.
array cumsum(const array& a, int axis, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cumsum(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
/// cumsum accumulated and returned in dtype (a is cast first; the array API's
/// cumulative_sum dtype).
array cumsum(const array& a, int axis, bool reverse, bool inclusive, Dtype dtype, StreamOrDevice s = {});

/// out[i] = prod_{j <= i} a[j] along axis (conventions and dtypes as cumsum). The gradient
/// handles zeros exactly (first-zero rule of the seed). Source: MLX's cumprod.
array cumprod(const array& a, int axis, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cumprod(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
/// cumprod accumulated and returned in dtype (a is cast first).
array cumprod(const array& a, int axis, bool reverse, bool inclusive, Dtype dtype, StreamOrDevice s = {});

/// out[i] = max_{j <= i} a[j] (cummax) / min (cummin) along axis; NaN propagates (NumPy's
/// maximum.accumulate). Dtype: a's (complex throws std::invalid_argument). The gradient goes
/// to the element holding the running extreme, ties to the latest in scan order (seed).
/// Source: MLX's cummax / cummin.
array cummax(const array& a, int axis, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cummax(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cummin(const array& a, int axis, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array cummin(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});

/// out[i] = log(sum_{j <= i} exp(a[j])) along axis, computed stably (running logaddexp).
/// Dtype: a's when floating, float32 for integer and bool inputs (complex throws
/// std::invalid_argument). Source: MLX's logcumsumexp.
array logcumsumexp(const array& a, int axis, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});
array logcumsumexp(const array& a, bool reverse = false, bool inclusive = true, StreamOrDevice s = {});

/// The n-th discrete difference along axis: out = a[1:] - a[:-1], applied n times (bool
/// inputs use not_equal, as NumPy). Shape: a's with axis shortened by n (to 0 at least).
/// Throws std::invalid_argument for n < 0 or a 0-d input, std::out_of_range for the axis.
/// Source: NumPy's diff (nuvec addition). Runs: slices and subtract.
array diff(const array& a, int n = 1, int axis = -1, StreamOrDevice s = {});

/// a rearranged along axis so that position kth holds the element a sorted copy would
/// hold there, smaller-or-equal elements before it and greater-or-equal after (NaNs last);
/// the order within each side is unspecified (deterministic). kth may be negative
/// (counted from the end). Without axis, a is flattened. Dtype: a's (argpartition: uint32
/// indices). Throws std::invalid_argument for kth outside [-n, n), std::out_of_range for
/// the axis. Source: MLX's partition / argpartition. Runs: std::nth_element per line.
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array partition(const array& a, int kth, StreamOrDevice s = {});
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {});

/// The k largest elements along axis (flattened without axis). MLX leaves their order
/// unspecified; nuvec returns them sorted ascending. Shape: a's with axis of size k.
/// Throws std::invalid_argument for k outside [0, n], std::out_of_range for the axis.
/// Source: MLX's topk. Runs: partition at n - k, slice, sort.
array topk(const array& a, int k, int axis, StreamOrDevice s = {});
array topk(const array& a, int k, StreamOrDevice s = {});

/// For each element of v, the index at which it would be inserted into the sorted 1-d a to
/// keep it sorted: the first such index (side "left": count of a < v) or the last (side
/// "right": count of a <= v), with NaNs ordered last as in sort. Shape: v's; dtype uint32.
/// Throws std::invalid_argument when a is not 1-d, for complex inputs, or for a side other
/// than "left"/"right". Source: MLX/NumPy searchsorted (MLX's `side` string; a bool no
/// longer converts). Runs: a broadcast comparison and a sum (O(size(a) * size(v)) work; no
/// derivative).
array searchsorted(
    const array& a,
    const array& v,
    const std::string& side = "left",
    StreamOrDevice s = {});
array searchsorted(const array& a, const array& v, const char* side, StreamOrDevice s = {});
// A bool or integer `side` is an error (it used to mean right = true), not a conversion.
template <typename T>
  requires(std::is_arithmetic_v<T>)
array searchsorted(const array&, const array&, T, StreamOrDevice = {}) = delete;

// ---------------------------------------------------------------------------------------
// Indexing (src/ops/gather_scatter.cpp; primitives in src/primitives/gather_scatter.h)
//
// Shared rules: indices have any integer dtype; negative indices count from the end of their
// axis. Index arrays are data, so their range is checked when the kernel runs: an index
// outside [-n, n) makes the next eval throw std::out_of_range naming the op, the index and
// n (the failed outputs hold zeros). An index inside the axis whose window overruns it is
// JAX's dynamic-slice case: a gather moves the start back so the window fits, a scatter
// drops the part of the window outside the array. Errors name the op: std::invalid_argument
// for dtypes, counts and shapes, std::out_of_range for axes and indices.

/// The elements of a along `axis` at `indices` (NumPy's take):
/// out[i..., j, k...] = a[i..., indices[j], k...].
/// Shape: a.shape[:axis] + indices.shape + a.shape[axis+1:]. Dtype: a's.
/// Throws std::invalid_argument for non-integer indices, std::out_of_range for the axis (and
/// at eval for an index outside [-n, n)). Source: MLX's take. Runs: gather with one index
/// array, then a transpose (a view).
array take(const array& a, const array& indices, int axis, StreamOrDevice s = {});
/// a's element `index` along axis (negative counts from the end); the axis is dropped.
/// Throws std::out_of_range for the axis or for an index outside [-n, n), when called (MLX).
array take(const array& a, int index, int axis, StreamOrDevice s = {});
/// take of the flattened a: out[j...] = a.flatten()[indices[j...]]. Shape: indices'.
array take(const array& a, const array& indices, StreamOrDevice s = {});
/// The flattened a's element `index` (a scalar). Throws std::out_of_range outside [-n, n).
array take(const array& a, int index, StreamOrDevice s = {});

/// Windows of a at positions given by one index array per axis in `axes` (MLX's gather):
/// with the indices broadcast together to shape I,
/// out[i..., w...] = a[c] where c_d = indices[k][i...] + w_d for d = axes[k], c_d = w_d else.
/// Shape: I + slice_sizes (one slice size per dimension of a, 0 <= slice_sizes[d] <= a.shape[d]).
/// Dtype: a's. Throws std::invalid_argument when indices and axes differ in count, axes
/// repeat, indices are not integers or do not broadcast, or slice_sizes has the wrong length
/// or a size out of range; std::out_of_range for an axis. Source: MLX's gather.
/// Runs: the Gather primitive (an index outside [-n, n) throws std::out_of_range at eval; a
/// start whose window overruns the axis moves back so the window fits).
array gather(
    const array& a,
    const std::vector<array>& indices,
    const std::vector<int>& axes,
    const Shape& slice_sizes,
    StreamOrDevice s = {});
/// gather with one index array along one axis.
array gather(const array& a, const array& indices, int axis, const Shape& slice_sizes, StreamOrDevice s = {});

/// a with windows overwritten by updates (MLX's scatter): with the indices broadcast to shape
/// I, updates has shape I + U (U: one window size per dimension of a, U[d] <= a.shape[d];
/// updates' leading part broadcasts to I), and out[c] = updates[i..., w...] with c as in
/// gather. For duplicate positions one of the updates is kept (nuvec: the last in row-major
/// order of I). Dtype: a's (updates are cast). Throws as gather does, plus
/// std::invalid_argument for an updates shape that does not fit. Source: MLX's scatter.
/// Runs: the Scatter primitive (an index outside [-n, n) throws std::out_of_range at eval,
/// naming the scatter op; window elements past the end of an axis are dropped).
array scatter(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    StreamOrDevice s = {});
array scatter(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s = {});
/// scatter that adds: out[c] = a[c] + sum of the updates landing on c (duplicates accumulate;
/// bool: logical or).
array scatter_add(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    StreamOrDevice s = {});
array scatter_add(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s = {});
/// scatter that multiplies: out[c] = a[c] * product of the updates landing on c
/// (bool: logical and). Derivatives (MLX has none): w.r.t. a, the product of the updates at
/// each position; w.r.t. an update, a times the product of the other updates at its
/// position (exact with zeros).
array scatter_prod(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    StreamOrDevice s = {});
array scatter_prod(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s = {});
/// scatter keeping the maximum: out[c] = max(a[c], updates landing on c); NaN propagates.
/// Reverse-mode derivative as MLX's: every input equal to the result shares the cotangent
/// (ties all receive it); forward mode throws std::invalid_argument, as MLX has none.
array scatter_max(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    StreamOrDevice s = {});
array scatter_max(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s = {});
/// scatter keeping the minimum: out[c] = min(a[c], updates landing on c); as scatter_max.
array scatter_min(
    const array& a,
    const std::vector<array>& indices,
    const array& updates,
    const std::vector<int>& axes,
    StreamOrDevice s = {});
array scatter_min(const array& a, const array& indices, const array& updates, int axis, StreamOrDevice s = {});

/// a with the positions where mask is true filled, in row-major order, by the elements of
/// src taken in row-major order (NumPy's place): out[p] = src.flatten()[r(p) mod src.size]
/// where r(p) counts the true mask positions before p (NumPy cycles a short src too).
/// Shapes: mask is aligned with a's leading axes (a lower-rank mask gets trailing size-1
/// axes, as in MLX), then broadcast to a's shape; src any shape, non-empty. Dtype: a's (src is
/// cast). Throws std::invalid_argument for a non-bool mask, a mask that does not broadcast,
/// or an empty src with a non-empty a. Source: MLX's masked_scatter.
/// Runs: a MaskedRank node (the ranks), take and where.
array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s = {});

/// src with src[start:stop:strides] replaced by src[start:stop:strides] + update (update
/// broadcast to the slice; dtype promoted as add, then cast to src's). Throws as
/// slice_update does, naming slice_update_add. Source: MLX's slice_update_add.
/// Runs: slice, add, slice_update.
array slice_update_add(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {});
array slice_update_add(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s = {});
/// As slice_update_add with the slice multiplied by update.
array slice_update_prod(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {});
array slice_update_prod(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s = {});
/// As slice_update_add with the slice replaced by maximum(slice, update).
array slice_update_max(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {});
array slice_update_max(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s = {});
/// As slice_update_add with the slice replaced by minimum(slice, update).
array slice_update_min(
    const array& src,
    const array& update,
    Shape start,
    Shape stop,
    Shape strides,
    StreamOrDevice s = {});
array slice_update_min(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Einsum and structured products (src/ops/einsum.cpp, src/ops/structured_mm.cpp). Composed
// from transpose/reshape/matmul/sum/take_along_axis/where, so vjp, jvp and vmap come from
// the pieces. Signatures and semantics are MLX's.

/// The pairwise contraction order einsum uses for `subscripts` ("ij,jk->ik"; implicit output
/// = the letters seen once, sorted; "..." broadcasts) and a description: the equation and,
/// per step, the pair contracted (positions in the current operand list, results appended at
/// the end, NumPy's convention), its sub-equation and its multiply-add count. Greedy: each
/// step contracts the pair with the smallest result. Throws std::invalid_argument naming
/// einsum_path for malformed subscripts, an operand count or rank that does not match, or
/// inconsistent label sizes. Source: MLX einsum_path, NumPy einsum_path.
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts,
    const std::vector<array>& operands);

/// Einstein summation: out[output labels] = sum over the other labels of the product of the
/// operands at their labels. A label repeated within one operand takes its diagonal.
/// Shapes: out has one axis per output label (ellipsis axes broadcast, NumPy's rules).
/// Dtype: the operands' promoted dtype. Throws std::invalid_argument naming einsum (as
/// einsum_path). Source: MLX einsum, NumPy einsum. Runs: matmul per contracted pair.
array einsum(const std::string& subscripts, const std::vector<array>& operands, StreamOrDevice s = {});

/// The Hadamard transform along the last axis, times scale (default 1/sqrt(n)):
/// out[..., :] = scale * (H_m kron H_p) a[..., :] for n = m * p, p = 2^k, m in {1, 12, 20, 28};
/// H_p[i][j] = (-1)^popcount(i & j) (Sylvester), H_m the fixed order-m matrix MLX uses (from
/// Sloane's library; H_20 and H_28 are not symmetric), H_1 = [1]. With scale = 1 the matrix
/// times its transpose is n I. Shapes: as a. Dtype: a's if floating, else float32; n = 1 (a
/// 0-d array counts as one) is MLX's special case: a itself at the default scale, whatever
/// its dtype, else a * scale. Throws std::invalid_argument naming hadamard_transform for an n
/// not of that form, or complex input. Source: MLX hadamard_transform. Runs: log2(p) butterfly
/// steps, then one (m x m) matmul; composed of public ops, so vjp/jvp/vmap come from theirs.
array hadamard_transform(const array& a, std::optional<float> scale = std::nullopt, StreamOrDevice s = {});

/// Matrix product with block masks (blocks of block_size x block_size): out = ((a * Ml) @
/// (b * Mr)) * Mo, where Ml, Mr, Mo are mask_lhs (..., ceil(M/bs), ceil(K/bs)), mask_rhs
/// (..., ceil(K/bs), ceil(N/bs)) and mask_out (..., ceil(M/bs), ceil(N/bs)) expanded to
/// element level; bool masks zero blocks, floating masks scale them. Shapes: a (..., M, K),
/// b (..., K, N), out (..., M, N). Throws std::invalid_argument naming block_masked_mm for
/// a non-positive block size, ranks below 2 or mask shapes that do not match.
/// Source: MLX block_masked_mm.
array block_masked_mm(
    array a,
    array b,
    int block_size,
    std::optional<array> mask_out = std::nullopt,
    std::optional<array> mask_lhs = std::nullopt,
    std::optional<array> mask_rhs = std::nullopt,
    StreamOrDevice s = {});

/// Matrix products of gathered matrices: out[i...] = a_flat[lhs_indices[i...]] @
/// b_flat[rhs_indices[i...]], with a_flat (A, M, K) and b_flat (B, K, N) the batch axes of
/// a and b flattened; a missing index array means a's (b's) own batch positions.
/// Shapes: out = broadcast(lhs_indices, rhs_indices) + (M, N). sorted_indices is a hint.
/// Throws std::invalid_argument naming gather_mm for ranks below 2, non-integer indices,
/// inner dimensions that differ or index shapes that do not broadcast; std::out_of_range
/// naming it for an index outside [0, A) or [0, B), reported when the product is evaluated
/// (an empty product, K = 0 or M·N = 0, checks none, as MLX checks none at all).
/// Runs: GatherMm (CPU: BLAS per run of equal indices, b read in place when its matrices have
/// a BLAS layout; CUDA: gemv_plain.cu, qmm_generic.cu). Source: MLX gather_mm.
array gather_mm(
    array a,
    array b,
    std::optional<array> lhs_indices = std::nullopt,
    std::optional<array> rhs_indices = std::nullopt,
    bool sorted_indices = false,
    StreamOrDevice s = {});

/// Products over segments of the inner axis: out[..., i, :, :] = a[..., :, s0:s1] @
/// b[..., s0:s1, :] with (s0, s1) = segments[..., i, :] (empty or clamped ranges sum to zero).
/// Shapes: a (..., M, K), b (..., K, N), segments (..., S, 2) integer, out (..., S, M, N).
/// Throws std::invalid_argument naming segmented_mm for ranks below 2, inner dimensions that
/// differ or segments not of shape (..., 2) with an integer dtype. Source: MLX segmented_mm.
array segmented_mm(array a, array b, array segments, StreamOrDevice s = {});

} // namespace nuvec

namespace nuvec {

// ---------------------------------------------------------------------------------------
// Windows and small array-API ops (src/ops/windows.cpp, src/ops/elementwise.cpp)

/// The Hann window of M points, w[n] = sin^2(pi n / (M - 1)), float32 (empty for M < 1,
/// [1] for M == 1). Source: MLX/NumPy hanning.
array hanning(int M, StreamOrDevice s = {});
/// The Hamming window, w[n] = 0.54 - 0.46 cos(2 pi n / (M - 1)), float32. Source: NumPy.
array hamming(int M, StreamOrDevice s = {});
/// The Bartlett (triangular) window, w[n] = 1 - |2n/(M-1) - 1|, float32. Source: NumPy.
array bartlett(int M, StreamOrDevice s = {});
/// The Blackman window, w[n] = 0.42 - 0.5 cos(2 pi n/(M-1)) + 0.08 cos(4 pi n/(M-1)),
/// float32. Source: NumPy.
array blackman(int M, StreamOrDevice s = {});

/// +a: a copy with a's dtype. Throws std::invalid_argument for bool (NumPy's rule).
/// Source: the array API's positive.
array positive(const array& a, StreamOrDevice s = {});
/// a XOR b on truth values (inputs cast to bool, broadcast), bool. Source: NumPy
/// logical_xor.
array logical_xor(const array& a, const array& b, StreamOrDevice s = {});
/// a rounded toward zero; integers and bool unchanged; float dtypes keep their dtype.
/// Throws std::invalid_argument for complex64. Source: NumPy trunc.
array trunc(const array& a, StreamOrDevice s = {});
/// sum(conj(a) * b, axis) after broadcasting (the array API's vecdot; complex a is
/// conjugated). Throws std::invalid_argument when the broadcast shape has no `axis` or the
/// two sizes along it differ. Source: MLX/array API vecdot.
array vecdot(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});
/// The number of elements along axes (or, inverted, along the other axes) as a scalar of
/// dtype. Throws std::invalid_argument for a bad or repeated axis or a non-numeric dtype.
/// Source: MLX number_of_elements (a constant here: shapes are static).
array number_of_elements(
    const array& a,
    std::vector<int> axes,
    bool inverted,
    Dtype dtype = int32,
    StreamOrDevice s = {});

// ---------------------------------------------------------------------------------------
// Quantization. quantize, dequantize, to_fp8 and from_fp8 (src/ops/quantized.cpp) are graphs
// of ordinary ops: the meaning the quantized products' kernels are tested against. The
// products (src/quantized/) record fused nodes (src/quantized/quantized.h) whose kernels read
// the packed weights directly: src/backend/cpu/quantized/, src/backend/cuda/quantized/.
// Source: MLX 0.32's quantize, dequantize, quantized_matmul, gather_qmm, qqmm, gather_qqmm,
// to_fp8 and from_fp8.

/// Quantizes w along its last axis in groups of group_size. Modes (defaults group_size,
/// bits): "affine" (64, 4; groups 32/64/128, bits 2/3/4/5/6/8): per group a scale and bias
/// with w ~ scale * q + bias, q in [0, 2^bits - 1], MLX's fit (0 exact, the larger-magnitude
/// edge exact); "mxfp4" (32, 4: E2M1 values, E8M0 scales), "mxfp8" (32, 8: E4M3 values, E8M0
/// scales), "nvfp4" (16, 4: E2M1 values, E4M3 scales; optional global_scale, a one-element
/// float array, the tensor's amax, as MLX's CUDA kernels; 0, an all-zero tensor's amax,
/// encodes as no global scale).
/// Returns {w_q, scales, biases} (affine) or {w_q, scales} (fp modes). Shapes: w (..., K),
/// w_q (..., K * bits / 32), scales and biases (..., K / group_size). Dtypes: w_q uint32
/// (values packed little-endian, bit i*bits of a row upward, across word boundaries for 3, 5
/// and 6 bits, as MLX); affine scales/biases w's dtype; fp scales uint8 codes.
/// Throws std::invalid_argument for an unknown mode, a group size or bit width the mode does
/// not take, a non-floating w, w with fewer than 2 dimensions, a last axis not divisible by
/// the group size, a global_scale with affine.
/// Runs: a graph of element-wise, reduction and shift ops (no kernel yet).
std::vector<array> quantize(
    const array& w,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "affine",
    const std::optional<array>& global_scale = std::nullopt,
    StreamOrDevice s = {});

/// The inverse of quantize: affine scale * q + bias, fp modes value(q) * scale (divided by
/// 448 * 6 / global_scale when given). Shapes: w (..., K * bits / 32) uint32, scales (and
/// biases) (..., K / group_size); result (..., K). Dtype: `dtype`, else affine promote(scales,
/// biases), fp modes bfloat16 (MLX's defaults).
/// Throws std::invalid_argument for an unknown mode, bad group size or bits for the mode,
/// a non-uint32 w or w with fewer than 2 dimensions, scales/biases whose shape does not fit
/// w, missing biases (affine) or given biases (fp modes), non-floating affine scales, fp
/// scales that are not uint8, a non-floating dtype.
array dequantize(
    const array& w,
    const array& scales,
    const std::optional<array>& biases = std::nullopt,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "affine",
    const std::optional<array>& global_scale = std::nullopt,
    std::optional<Dtype> dtype = std::nullopt,
    StreamOrDevice s = {});

/// out = x @ dequantize(w, scales, biases).T (transpose) or x @ dequantize(...) (not
/// transpose), without materialising the dequantized matrix.
/// Shapes: x (..., M, K); w (..., N, K * bits / 32) when transpose, else (..., K, N * bits /
/// 32); scales, biases (..., N, K / group_size) or (..., K, N / group_size); the batch axes of
/// x and w broadcast; out (..., M, N). Dtypes: affine: out is promote(x, scales, biases)
/// (an integer x is promoted with the scales, as MLX), which must be real floating; fp modes:
/// x's dtype, real floating (scales uint8 codes); float64 computes in float32 and is returned
/// as float64. group_size, bits and mode as quantize (MLX's defaults per mode).
/// A 1-D x (K) is one row, and the result is (N) (as MLX's kernels treat it).
/// Throws std::invalid_argument naming quantized_matmul for a non-uint32 w, w with fewer than
/// 2 dimensions, a 0-d x, scales/biases of the wrong shape or dtype, missing (affine) or extra
/// (fp modes) biases, a last axis of x other than K, batch axes that do not broadcast, an
/// unknown mode or a group/bit width the mode does not take.
/// Rules: gradients for x, and for affine scales and biases (MLX's); asking for w's (or fp
/// scales') throws std::invalid_argument. Runs: QuantizedMatmul (2-D w) or GatherQmm (batched
/// w) nodes; CPU: dequantize-in-register dot products on the thread pool; CUDA: qmv for few
/// rows, tensor-core qmm for more.
array quantized_matmul(
    array x,
    array w,
    array scales,
    std::optional<array> biases = std::nullopt,
    bool transpose = true,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "affine",
    StreamOrDevice s = {});

/// Quantized matrix products of gathered matrices (mixture-of-experts):
/// out[i...] = x_flat[lhs_indices[i...]] @ dequantize(w_flat[rhs_indices[i...]]).T (or
/// without .T), x_flat (A, M, K) and w_flat (E, ...) the batch axes flattened; a missing
/// index array means the operand's own batch positions (broadcast as gather_mm's).
/// Shapes: out = broadcast(lhs_indices, rhs_indices) + (M, N). sorted_indices: rhs_indices
/// is sorted, so a kernel reads each expert's weights once for all rows that use it.
/// Dtypes and modes as quantized_matmul; indices integer. Throws std::invalid_argument
/// naming gather_qmm as quantized_matmul does and for non-integer or non-broadcasting
/// indices; std::out_of_range (at evaluation) for an index outside [0, A) or [0, E).
/// Rules: gradient for x (scatter-added over lhs_indices) and affine scales/biases; none for
/// w. Runs: one GatherQmm node (grouped kernels when sorted).
array gather_qmm(
    const array& x,
    const array& w,
    const array& scales,
    const std::optional<array>& biases = std::nullopt,
    std::optional<array> lhs_indices = std::nullopt,
    std::optional<array> rhs_indices = std::nullopt,
    bool transpose = true,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "affine",
    bool sorted_indices = false,
    StreamOrDevice s = {});

/// A product with both operands quantized to an fp mode: out = fq(x) @ fq(w).T, fq the value
/// after quantize/dequantize along K ("mxfp4", "mxfp8", "nvfp4"; affine is rejected). w is
/// either already quantized (uint32 with w_scales) or floating (quantized here).
/// global_scale_x/_w (nvfp4 only, both or neither): the tensors' amax, as quantize's.
/// Shapes: x (..., M, K), w (N, K) or packed (N, K * bits / 32) with w_scales (N, K /
/// group_size); out (..., M, N) in x's dtype. Throws std::invalid_argument naming qqmm for
/// the affine mode, a w of neither form, missing or unexpected w_scales, K not divisible by
/// the group size, shapes that do not agree, or one global scale without the other.
/// Rules: the gradient for x is the straight-through estimator g @ fq(w) (x's rounding
/// treated as the identity); none for w. Runs: a QQMatmul node. CPU: dequantize-in-register
/// dot products of the rounded x (float32 sums). CUDA (sm_90): x rounded on the GPU bit for
/// bit as the CPU does; bfloat16 x then multiplies fq(x) and fq(w) written as bfloat16 (exact)
/// with cuBLASLt (float32 accumulation); float16 and float32 x run on Hopper's FP8 tensor
/// cores (wgmma e4m3, the fp4 modes through E4M3, which holds every E2M1 value), whose
/// accumulation keeps fewer bits than float32 (errors near 4e-4 of sum |fq(x)| |fq(w)|).
/// With global scales: the graph.
array qqmm(
    array x,
    array w,
    const std::optional<array> w_scales = std::nullopt,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "nvfp4",
    const std::optional<array> global_scale_x = std::nullopt,
    const std::optional<array> global_scale_w = std::nullopt,
    StreamOrDevice s = {});

/// qqmm of gathered matrices: out[i...] = fq(x_flat[lhs[i...]]) @ fq(w_flat[rhs[i...]]).T,
/// with gather_qmm's indexing and qqmm's quantization. Throws as qqmm and gather_qmm.
/// Runs: the graph of gathers and qqmm (sorted_indices is a hint).
array gather_qqmm(
    const array& x,
    const array& w,
    const std::optional<array>& w_scales = std::nullopt,
    std::optional<array> lhs_indices = std::nullopt,
    std::optional<array> rhs_indices = std::nullopt,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "nvfp4",
    const std::optional<array>& global_scale_x = std::nullopt,
    const std::optional<array>& global_scale_w = std::nullopt,
    bool sorted_indices = false,
    StreamOrDevice s = {});

/// E4M3 (fn) code of each element as uint8, MLX's CPU rounding: nearest, ties to even;
/// magnitudes from 448 up, infinities and NaN become 0x7e (448) with the sign kept (never
/// the NaN code 0x7f). Shape: x's. Throws
/// std::invalid_argument for a non-floating x. No derivative (integer output).
array to_fp8(array x, StreamOrDevice s = {});
/// The value of each E4M3 (fn) uint8 code (0x7f/0xff NaN) in `dtype`. Shape: x's.
/// Throws std::invalid_argument for a non-uint8 x or a non-floating dtype.
array from_fp8(array x, Dtype dtype, StreamOrDevice s = {});

} // namespace nuvec
