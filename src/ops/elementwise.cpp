// nuvec: the element-wise ops (MLX's names and promotion; NumPy's semantics for plain math:
// floor division and remainder toward -inf, true division, NaN-propagating max/min). Each
// op validates, promotes, broadcasts and records a Unary, Binary, DivMod or Select node.
#include <cmath>
#include <limits>
#include <numbers>

#include "ops/ops_common.h"
#include "primitives/elementwise.h"

namespace nuvec {

namespace {

array cast(const array& a, Dtype t, StreamOrDevice s) {
  return a.dtype() == t ? a : astype(a, t, s);
}

bool is_inexact(Dtype t) {
  return issubdtype(t, inexact);
}

// The common shape of the inputs; the error names the op rather than the shape helper.
Shape common_shape(const char* op, const std::vector<array>& xs) {
  Shape shape = xs[0].shape();
  for (size_t i = 1; i < xs.size(); ++i) {
    const Shape& o = xs[i].shape();
    Shape big = shape.size() >= o.size() ? shape : o;
    const Shape& small = shape.size() >= o.size() ? o : shape;
    size_t off = big.size() - small.size();
    for (size_t d = 0; d < small.size(); ++d) {
      int32_t& x = big[off + d];
      if (x == small[d] || small[d] == 1) continue;
      if (x != 1) {
        if (xs.size() == 2) {
          throw_invalid_argument(op, "shapes must be broadcastable; got ", xs[0].shape(), " and ",
                                 xs[1].shape(), ".");
        }
        throw_invalid_argument(op, "shapes must be broadcastable; got ", shape, " and ", o, ".");
      }
      x = small[d];
    }
    shape = big;
  }
  return shape;
}

array unary(UnaryOp op, const array& a, StreamOrDevice s) {
  return array(a.shape(), unary_output_dtype(op, a.dtype()),
               std::make_shared<Unary>(to_stream(s), op), {a});
}

void reject_complex(const char* name, const array& a) {
  if (a.dtype() == complex64) {
    throw_invalid_argument(name, "input must be real; got complex64.");
  }
}

// Float math: integer and bool inputs compute in float32 (MLX).
array float_unary(const char* name, UnaryOp op, const array& a, StreamOrDevice s,
                  bool complex_ok = true) {
  if (!complex_ok) reject_complex(name, a);
  return unary(op, cast(a, float_result_type(a.dtype()), s), s);
}

// Casts both to t, broadcasts them to one shape and records op.
array binary(const char* name, BinaryOp op, const array& a, const array& b, Dtype t,
             StreamOrDevice s) {
  Shape shape = common_shape(name, {a, b});
  // 0-d operands stay unbroadcast (the kernels read them as scalars; Binary's rules sum
  // their cotangents back): no Broadcast node for the common `x * 2`.
  auto fit = [&](const array& v) {
    array c = cast(v, t, s);
    return c.ndim() == 0 ? c : broadcast_to(c, shape, s);
  };
  return array(shape, binary_output_dtype(op, t), std::make_shared<Binary>(to_stream(s), op),
               {fit(a), fit(b)});
}

array promoted(const char* name, BinaryOp op, const array& a, const array& b, StreamOrDevice s) {
  return binary(name, op, a, b, promote_types(a.dtype(), b.dtype()), s);
}

// Ops defined on real numbers only, in at least float32.
array float_binary(const char* name, BinaryOp op, const array& a, const array& b,
                   StreamOrDevice s) {
  Dtype t = float_result_type(promote_types(a.dtype(), b.dtype()));
  if (t == complex64) throw_invalid_argument(name, "inputs must be real; got complex64.");
  return binary(name, op, a, b, t, s);
}

Dtype real_promoted(const char* name, const array& a, const array& b) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (t == complex64) throw_invalid_argument(name, "inputs must be real; got complex64.");
  return t;
}

Dtype integer_promoted(const char* name, const array& a, const array& b) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (is_inexact(t)) {
    throw_invalid_argument(name, "inputs must be integer or bool; got ", a.dtype(), " and ",
                           b.dtype(), ".");
  }
  return t;
}

// The largest and lowest finite values of a floating dtype.
double finite_max(Dtype t) {
  switch (t.val()) {
    case Dtype::Val::float16: return 65504.0;
    case Dtype::Val::bfloat16: return 3.3895313892515355e38;
    case Dtype::Val::float64: return std::numeric_limits<double>::max();
    default: return std::numeric_limits<float>::max();
  }
}

array falses(const array& a, bool value, StreamOrDevice s) {
  return broadcast_to(array(value), a.shape(), s);
}

} // namespace

// ---- comparisons and tests ------------------------------------------------------------

array equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted("equal", BinaryOp::Equal, a, b, s);
}
array not_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted("not_equal", BinaryOp::NotEqual, a, b, s);
}
array greater(const array& a, const array& b, StreamOrDevice s) {
  return promoted("greater", BinaryOp::Greater, a, b, s);
}
array greater_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted("greater_equal", BinaryOp::GreaterEqual, a, b, s);
}
array less(const array& a, const array& b, StreamOrDevice s) {
  return promoted("less", BinaryOp::Less, a, b, s);
}
array less_equal(const array& a, const array& b, StreamOrDevice s) {
  return promoted("less_equal", BinaryOp::LessEqual, a, b, s);
}

array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s) {
  if (a.shape() != b.shape()) return array(false);
  Dtype t = promote_types(a.dtype(), b.dtype());
  BinaryOp op = equal_nan && is_inexact(t) ? BinaryOp::NaNEqual : BinaryOp::Equal;
  return all(binary("array_equal", op, a, b, t, s), false, s);
}
array array_equal(const array& a, const array& b, StreamOrDevice s) {
  return array_equal(a, b, false, s);
}

array isnan(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return falses(a, false, s);
  return not_equal(a, a, s);
}

array isposinf(const array& a, StreamOrDevice s) {
  reject_complex("isposinf", a);
  if (!is_inexact(a.dtype())) return falses(a, false, s);
  return equal(a, array(std::numeric_limits<double>::infinity(), a.dtype()), s);
}

array isneginf(const array& a, StreamOrDevice s) {
  reject_complex("isneginf", a);
  if (!is_inexact(a.dtype())) return falses(a, false, s);
  return equal(a, array(-std::numeric_limits<double>::infinity(), a.dtype()), s);
}

array isinf(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return falses(a, false, s);
  if (a.dtype() == complex64) return logical_or(isinf(real(a, s), s), isinf(imag(a, s), s), s);
  array mag = abs(a, s);
  return equal(mag, array(std::numeric_limits<double>::infinity(), mag.dtype()), s);
}

array isfinite(const array& a, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return falses(a, true, s);
  return logical_not(logical_or(isinf(a, s), isnan(a, s), s), s);
}

array where(const array& condition, const array& x, const array& y, StreamOrDevice s) {
  Dtype t = promote_types(x.dtype(), y.dtype());
  Shape shape = common_shape("where", {condition, x, y});
  std::vector<array> in{
      broadcast_to(cast(condition, bool_, s), shape, s),
      broadcast_to(cast(x, t, s), shape, s),
      broadcast_to(cast(y, t, s), shape, s)};
  return array(shape, t, std::make_shared<Select>(to_stream(s)), std::move(in));
}

namespace {
// x + i·y from real parts (complex64): the ops that work on a complex number's parts apart.
array complex_from(const array& x, const array& y, StreamOrDevice s) {
  return add(cast(x, complex64, s), multiply(cast(y, complex64, s), array(complex64_t(0.0f, 1.0f)), s), s);
}
} // namespace

array nan_to_num(const array& a, float nan, const std::optional<float> posinf,
                 const std::optional<float> neginf, StreamOrDevice s) {
  Dtype t = a.dtype();
  if (!is_inexact(t)) return a;
  if (t == complex64) {
    return complex_from(nan_to_num(real(a, s), nan, posinf, neginf, s), nan_to_num(imag(a, s), nan, posinf, neginf, s), s);
  }
  array hi(posinf ? double(*posinf) : finite_max(t), t);
  array lo(neginf ? double(*neginf) : -finite_max(t), t);
  array out = where(isnan(a, s), array(double(nan), t), a, s);
  out = where(isposinf(a, s), hi, out, s);
  return where(isneginf(a, s), lo, out, s);
}

array clip(const array& a, const std::optional<array>& a_min, const std::optional<array>& a_max,
           StreamOrDevice s) {
  if (!a_min && !a_max) {
    throw_invalid_argument("clip", "a_min or a_max must be given; got neither.");
  }
  array out = a;
  if (a_min) out = maximum(out, *a_min, s);
  if (a_max) out = minimum(out, *a_max, s);
  return out;
}

array isclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
              StreamOrDevice s) {
  Dtype t = float_result_type(promote_types(a.dtype(), b.dtype()));
  Shape shape = common_shape("isclose", {a, b});
  array x = broadcast_to(cast(a, t, s), shape, s);
  array y = broadcast_to(cast(b, t, s), shape, s);
  Dtype rt = t == complex64 ? float32 : t;
  array tol = add(array(atol, rt), multiply(array(rtol, rt), abs(y, s), s), s);
  array close = less_equal(abs(subtract(x, y, s), s), tol, s);
  // Infinities are close only to themselves (|inf - inf| would be NaN, |x - inf| <= inf).
  array finite = logical_and(isfinite(x, s), isfinite(y, s), s);
  array out = where(finite, close, equal(x, y, s), s);
  if (equal_nan) out = logical_or(out, logical_and(isnan(x, s), isnan(y, s), s), s);
  return out;
}

array allclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
               StreamOrDevice s) {
  return all(isclose(a, b, rtol, atol, equal_nan, s), false, s);
}

// ---- unary math -----------------------------------------------------------------------

array abs(const array& a, StreamOrDevice s) {
  return unary(UnaryOp::Abs, a, s);
}
array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw_invalid_argument("negative", "input must not be bool (use logical_not); got bool.");
  }
  return unary(UnaryOp::Negative, a, s);
}
array sign(const array& a, StreamOrDevice s) {
  return unary(UnaryOp::Sign, a, s);
}
array logical_not(const array& a, StreamOrDevice s) {
  return unary(UnaryOp::LogicalNot, cast(a, bool_, s), s);
}
array reciprocal(const array& a, StreamOrDevice s) {
  Dtype t = float_result_type(a.dtype());
  return divide(array(1.0, t), a, s);
}
array floor(const array& a, StreamOrDevice s) {
  reject_complex("floor", a);
  return is_inexact(a.dtype()) ? unary(UnaryOp::Floor, a, s) : a;
}
array ceil(const array& a, StreamOrDevice s) {
  reject_complex("ceil", a);
  return is_inexact(a.dtype()) ? unary(UnaryOp::Ceil, a, s) : a;
}
array square(const array& a, StreamOrDevice s) {
  return unary(UnaryOp::Square, a, s);
}
array sqrt(const array& a, StreamOrDevice s) { return float_unary("sqrt", UnaryOp::Sqrt, a, s); }
array rsqrt(const array& a, StreamOrDevice s) { return float_unary("rsqrt", UnaryOp::Rsqrt, a, s); }
array exp(const array& a, StreamOrDevice s) { return float_unary("exp", UnaryOp::Exp, a, s); }
array expm1(const array& a, StreamOrDevice s) {
  return float_unary("expm1", UnaryOp::Expm1, a, s, false);
}
array log(const array& a, StreamOrDevice s) { return float_unary("log", UnaryOp::Log, a, s); }
array log2(const array& a, StreamOrDevice s) { return float_unary("log2", UnaryOp::Log2, a, s); }
array log10(const array& a, StreamOrDevice s) { return float_unary("log10", UnaryOp::Log10, a, s); }

array log1p(const array& a, StreamOrDevice s) {
  if (a.dtype() == complex64) {
    // log(1 + z) = log|1 + z| + i·arg(1 + z), with log|1 + z| = ½·log1p(x(2 + x) + y²) so
    // that small z keep their digits (NumPy's and MLX's log1p take complex input too).
    const array x = real(a, s), y = imag(a, s);
    const array mag = multiply(array(0.5f), log1p(add(multiply(x, add(x, array(2.0f), s), s), square(y, s), s), s), s);
    return complex_from(mag, arctan2(y, add(x, array(1.0f), s), s), s);
  }
  return float_unary("log1p", UnaryOp::Log1p, a, s, false);
}
array sin(const array& a, StreamOrDevice s) { return float_unary("sin", UnaryOp::Sin, a, s); }
array cos(const array& a, StreamOrDevice s) { return float_unary("cos", UnaryOp::Cos, a, s); }
array tan(const array& a, StreamOrDevice s) { return float_unary("tan", UnaryOp::Tan, a, s); }
array arcsin(const array& a, StreamOrDevice s) {
  return float_unary("arcsin", UnaryOp::ArcSin, a, s);
}
array arccos(const array& a, StreamOrDevice s) {
  return float_unary("arccos", UnaryOp::ArcCos, a, s);
}
array arctan(const array& a, StreamOrDevice s) {
  return float_unary("arctan", UnaryOp::ArcTan, a, s);
}
array sinh(const array& a, StreamOrDevice s) { return float_unary("sinh", UnaryOp::Sinh, a, s); }
array cosh(const array& a, StreamOrDevice s) { return float_unary("cosh", UnaryOp::Cosh, a, s); }
array tanh(const array& a, StreamOrDevice s) { return float_unary("tanh", UnaryOp::Tanh, a, s); }
array arcsinh(const array& a, StreamOrDevice s) {
  return float_unary("arcsinh", UnaryOp::ArcSinh, a, s);
}
array arccosh(const array& a, StreamOrDevice s) {
  return float_unary("arccosh", UnaryOp::ArcCosh, a, s);
}
array arctanh(const array& a, StreamOrDevice s) {
  return float_unary("arctanh", UnaryOp::ArcTanh, a, s);
}
array degrees(const array& a, StreamOrDevice s) {
  reject_complex("degrees", a);
  Dtype t = float_result_type(a.dtype());
  return multiply(cast(a, t, s), array(180.0 / std::numbers::pi, t), s);
}
array radians(const array& a, StreamOrDevice s) {
  reject_complex("radians", a);
  Dtype t = float_result_type(a.dtype());
  return multiply(cast(a, t, s), array(std::numbers::pi / 180.0, t), s);
}
array sigmoid(const array& a, StreamOrDevice s) {
  return float_unary("sigmoid", UnaryOp::Sigmoid, a, s, false);
}
array erf(const array& a, StreamOrDevice s) { return float_unary("erf", UnaryOp::Erf, a, s, false); }
array erfinv(const array& a, StreamOrDevice s) {
  return float_unary("erfinv", UnaryOp::ErfInv, a, s, false);
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (a.dtype() == complex64) {
    // The real and imaginary parts rounded apart (NumPy's and MLX's rule).
    return complex_from(round(real(a, s), decimals, s), round(imag(a, s), decimals, s), s);
  }
  Dtype t = a.dtype();
  if (!is_inexact(t)) {
    if (decimals >= 0) return a;
    // Rounding integers to tens, hundreds...: through float64, exact below 2^53.
    return cast(round(cast(a, float64, s), decimals, s), t, s);
  }
  if (decimals == 0) return unary(UnaryOp::Round, a, s);
  // The scale is always a whole power of ten (exact up to 1e22): 10^-k is inexact, and
  // round(x * 1e-k) / 1e-k lands just below whole multiples (2 / 1e-9 < 2e9).
  array scale(std::pow(10.0, std::abs(decimals)), t);
  if (decimals < 0) return multiply(unary(UnaryOp::Round, divide(a, scale, s), s), scale, s);
  return divide(unary(UnaryOp::Round, multiply(a, scale, s), s), scale, s);
}
array round(const array& a, StreamOrDevice s) {
  return round(a, 0, s);
}

array conjugate(const array& a, StreamOrDevice s) {
  return a.dtype() == complex64 ? unary(UnaryOp::Conjugate, a, s) : a;
}
array real(const array& a, StreamOrDevice s) {
  return a.dtype() == complex64 ? unary(UnaryOp::Real, a, s) : a;
}
array imag(const array& a, StreamOrDevice s) {
  return a.dtype() == complex64 ? unary(UnaryOp::Imag, a, s) : zeros_like(a, s);
}

// ---- binary arithmetic ----------------------------------------------------------------

array add(const array& a, const array& b, StreamOrDevice s) {
  return promoted("add", BinaryOp::Add, a, b, s);
}
array subtract(const array& a, const array& b, StreamOrDevice s) {
  return promoted("subtract", BinaryOp::Subtract, a, b, s);
}
array multiply(const array& a, const array& b, StreamOrDevice s) {
  return promoted("multiply", BinaryOp::Multiply, a, b, s);
}
array divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = float_result_type(promote_types(a.dtype(), b.dtype()));
  return binary("divide", BinaryOp::Divide, a, b, t, s);
}
array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  return binary("floor_divide", BinaryOp::FloorDivide, a, b, real_promoted("floor_divide", a, b), s);
}
array remainder(const array& a, const array& b, StreamOrDevice s) {
  return binary("remainder", BinaryOp::Remainder, a, b, real_promoted("remainder", a, b), s);
}
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = real_promoted("divmod", a, b);
  Shape shape = common_shape("divmod", {a, b});
  array x = broadcast_to(cast(a, t, s), shape, s);
  array y = broadcast_to(cast(b, t, s), shape, s);
  return array::make_arrays({shape, shape}, {t, t}, std::make_shared<DivMod>(to_stream(s)),
                            {x, y});
}
array power(const array& a, const array& b, StreamOrDevice s) {
  return promoted("power", BinaryOp::Power, a, b, s);
}
array maximum(const array& a, const array& b, StreamOrDevice s) {
  return promoted("maximum", BinaryOp::Maximum, a, b, s);
}
array minimum(const array& a, const array& b, StreamOrDevice s) {
  return promoted("minimum", BinaryOp::Minimum, a, b, s);
}
array logaddexp(const array& a, const array& b, StreamOrDevice s) {
  // Complex inputs are accepted, as MLX (NumPy has no complex logaddexp).
  return binary("logaddexp", BinaryOp::LogAddExp, a, b,
                float_result_type(promote_types(a.dtype(), b.dtype())), s);
}
array arctan2(const array& a, const array& b, StreamOrDevice s) {
  return float_binary("arctan2", BinaryOp::ArcTan2, a, b, s);
}

// ---- logical and bitwise --------------------------------------------------------------

array logical_and(const array& a, const array& b, StreamOrDevice s) {
  return binary("logical_and", BinaryOp::LogicalAnd, a, b, bool_, s);
}
array logical_or(const array& a, const array& b, StreamOrDevice s) {
  return binary("logical_or", BinaryOp::LogicalOr, a, b, bool_, s);
}
array logical_xor(const array& a, const array& b, StreamOrDevice s) {
  return not_equal(astype(a, bool_, s), astype(b, bool_, s), s);
}
array bitwise_and(const array& a, const array& b, StreamOrDevice s) {
  return binary("bitwise_and", BinaryOp::BitwiseAnd, a, b, integer_promoted("bitwise_and", a, b), s);
}
array bitwise_or(const array& a, const array& b, StreamOrDevice s) {
  return binary("bitwise_or", BinaryOp::BitwiseOr, a, b, integer_promoted("bitwise_or", a, b), s);
}
array bitwise_xor(const array& a, const array& b, StreamOrDevice s) {
  return binary("bitwise_xor", BinaryOp::BitwiseXor, a, b, integer_promoted("bitwise_xor", a, b), s);
}
// Shifts of bools shift their uint8 values (MLX).
array left_shift(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = integer_promoted("left_shift", a, b);
  return binary("left_shift", BinaryOp::LeftShift, a, b, t == bool_ ? uint8 : t, s);
}
array right_shift(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = integer_promoted("right_shift", a, b);
  return binary("right_shift", BinaryOp::RightShift, a, b, t == bool_ ? uint8 : t, s);
}
array bitwise_invert(const array& a, StreamOrDevice s) {
  if (is_inexact(a.dtype())) {
    throw_invalid_argument("bitwise_invert", "input must be integer or bool; got ", a.dtype(), ".");
  }
  return unary(UnaryOp::BitwiseInvert, a, s);
}

// ---- operators ------------------------------------------------------------------------

array operator-(const array& a) { return negative(a); }
array operator!(const array& a) { return logical_not(a); }
array operator~(const array& a) { return bitwise_invert(a); }
array operator+(const array& a, const array& b) { return add(a, b); }
array operator-(const array& a, const array& b) { return subtract(a, b); }
array operator*(const array& a, const array& b) { return multiply(a, b); }
array operator/(const array& a, const array& b) { return divide(a, b); }
array operator%(const array& a, const array& b) { return remainder(a, b); }
array operator==(const array& a, const array& b) { return equal(a, b); }
array operator!=(const array& a, const array& b) { return not_equal(a, b); }
array operator<(const array& a, const array& b) { return less(a, b); }
array operator<=(const array& a, const array& b) { return less_equal(a, b); }
array operator>(const array& a, const array& b) { return greater(a, b); }
array operator>=(const array& a, const array& b) { return greater_equal(a, b); }
array operator&&(const array& a, const array& b) { return logical_and(a, b); }
array operator||(const array& a, const array& b) { return logical_or(a, b); }
array operator&(const array& a, const array& b) { return bitwise_and(a, b); }
array operator|(const array& a, const array& b) { return bitwise_or(a, b); }
array operator^(const array& a, const array& b) { return bitwise_xor(a, b); }
array operator<<(const array& a, const array& b) { return left_shift(a, b); }
array operator>>(const array& a, const array& b) { return right_shift(a, b); }

// ---- array-API additions ----------------------------------------------------------------

array positive(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) {
    throw_invalid_argument("positive", "input must be numeric; got bool.");
  }
  return copy(a, s);
}

array trunc(const array& a, StreamOrDevice s) {
  if (a.dtype() == complex64) {
    throw_invalid_argument("trunc", "input must be real; got complex64.");
  }
  if (!is_inexact(a.dtype())) return a;
  // Toward zero: floor above zero, ceil below (NaN and infinities pass through both).
  return where(less(a, zeros({}, a.dtype(), s), s), ceil(a, s), floor(a, s), s);
}

} // namespace nuvec
