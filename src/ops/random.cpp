// nuvec: the nuvec::random ops (MLX's mlx/random.cpp semantics and formulas: uniform from
// uint32 bits / (2^32 - 1), normal by erfinv, randint by an integer-space reduction, the
// Gumbel-max categorical). Each op validates, then composes public ops over RandomBits.
#include "nuvec/random.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "backend/common/threefry.h"
#include "nuvec/linalg.h"
#include "ops/ops_common.h"
#include "primitives/random.h"

namespace nuvec::random {

namespace {

threefry::Words words_of(uint64_t seed) {
  return {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
}

void check_key(const std::optional<array>& key, const char* op) {
  if (!key) return;
  if (key->dtype() != uint32) {
    throw_invalid_argument(op, "key must have dtype uint32; got ", key->dtype(), ".");
  }
  if (key->shape() != Shape{2}) {
    throw_invalid_argument(op, "key must have shape (2); got ", key->shape(), ".");
  }
}

void check_floating(Dtype dtype, const char* op) {
  if (!issubdtype(dtype, floating)) {
    throw_invalid_argument(op, "dtype must be a real floating type; got ", dtype, ".");
  }
}

// Throws unless `param` and `shape` broadcast together (NumPy rule, two-sided).
void check_broadcastable(const Shape& param, const Shape& shape, const char* op, const char* what) {
  for (size_t i = 0; i < std::min(param.size(), shape.size()); ++i) {
    int32_t p = param[param.size() - 1 - i], d = shape[shape.size() - 1 - i];
    if (p != 1 && d != 1 && p != d) {
      throw_invalid_argument(op, what, " must broadcast with the requested shape ", shape,
                             "; got ", param, ".");
    }
  }
}

// Throws unless `param` broadcasts to exactly `shape` (NumPy rule, one-sided).
void check_broadcasts_to(const Shape& param, const Shape& shape, const char* op, const char* what) {
  bool ok = param.size() <= shape.size();
  for (size_t i = 0; ok && i < param.size(); ++i) {
    int32_t p = param[param.size() - 1 - i], d = shape[shape.size() - 1 - i];
    ok = p == 1 || p == d;
  }
  if (!ok) {
    throw_invalid_argument(op, what, " must broadcast to the requested shape ", shape, "; got ",
                           param, ".");
  }
}

// Largest float32 value below 1 at dtype's precision (0.99951171875 for float16,
// 0.99609375 for bfloat16): the clamp keeping uniform samples below high.
float below_one(Dtype dtype) {
  if (dtype == float16) return 1.0f - 1.0f / 2048.0f;
  if (dtype == bfloat16) return 1.0f - 1.0f / 256.0f;
  return std::nextafter(1.0f, 0.0f);
}

} // namespace

// ---------------------------------------------------------------------------------------
// KeySequence: the key is kept as host words and split on the host (threefry::split2 gives
// the words of MLX's split(key)), so a draw never waits on, or shares, a graph.

KeySequence::KeySequence(uint64_t seed) {
  auto w = words_of(seed);
  k0_ = w.x0;
  k1_ = w.x1;
}

KeySequence::KeySequence(const KeySequence& other) {
  std::lock_guard<std::mutex> lock(other.mutex_);
  k0_ = other.k0_;
  k1_ = other.k1_;
}

KeySequence& KeySequence::operator=(const KeySequence& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mutex_, other.mutex_);
  k0_ = other.k0_;
  k1_ = other.k1_;
  return *this;
}

void KeySequence::seed(uint64_t seed) {
  auto w = words_of(seed);
  std::lock_guard<std::mutex> lock(mutex_);
  k0_ = w.x0;
  k1_ = w.x1;
}

array KeySequence::next() {
  threefry::Words sub;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [carry, subkey] = threefry::split2({k0_, k1_});
    k0_ = carry.x0;
    k1_ = carry.x1;
    sub = subkey;
  }
  return array({sub.x0, sub.x1});
}

KeySequence& KeySequence::default_() {
  static KeySequence ks(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count()));
  return ks;
}

array key(uint64_t seed) {
  auto w = words_of(seed);
  return array({w.x0, w.x1});
}

void seed(uint64_t seed) {
  KeySequence::default_().seed(seed);
}

array bits(const Shape& shape, int width, const std::optional<array>& key_, StreamOrDevice s) {
  // MLX takes the default sequence's key before any check.
  array k = key_ ? *key_ : KeySequence::default_().next();
  check_key(k, "bits");
  if (width != 1 && width != 2 && width != 4) {
    throw_invalid_argument("bits", "width must be 1, 2 or 4 bytes; got ", width, ".");
  }
  for (auto d : shape) {
    if (d < 0) throw_invalid_argument("bits", "shape must have no negative dimension; got ", shape, ".");
  }
  Dtype t = width == 1 ? uint8 : width == 2 ? uint16 : uint32;
  return array(shape, t, std::make_shared<RandomBits>(to_stream(s), shape, width), {k});
}

std::pair<array, array> split(const array& key, StreamOrDevice s) {
  auto keys = random::split(key, 2, s);
  auto rows = nuvec::split(keys, 2, 0, s);
  return {reshape(rows[0], {2}, s), reshape(rows[1], {2}, s)};
}

array split(const array& key, int num, StreamOrDevice s) {
  check_key(key, "split");
  if (num < 0) throw_invalid_argument("split", "num must be non-negative; got ", num, ".");
  return bits({num, 2}, 4, key, s);
}

array uniform(
    const array& low,
    const array& high,
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key,
    StreamOrDevice s) {
  check_floating(dtype, "uniform");
  check_key(key, "uniform");
  check_broadcasts_to(low.shape(), shape, "uniform", "low");
  check_broadcasts_to(high.shape(), shape, "uniform", "high");
  array lo = astype(low, dtype, s);
  array range = subtract(astype(high, dtype, s), lo, s);
  // MLX: float32(b) / float32(2^32 - 1), clamped below 1, then cast.
  array u = divide(
      astype(bits(shape, 4, key, s), float32, s),
      array(static_cast<float>(std::numeric_limits<uint32_t>::max()), float32), s);
  u = astype(minimum(u, array(below_one(dtype), float32), s), dtype, s);
  return add(multiply(range, u, s), lo, s);
}

array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  check_floating(dtype, "uniform");
  return uniform(array(0.0, dtype), array(1.0, dtype), shape, dtype, key, s);
}

array normal(
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& loc,
    const std::optional<array>& scale,
    const std::optional<array>& key,
    StreamOrDevice s) {
  if (dtype != complex64 && !issubdtype(dtype, floating)) {
    throw_invalid_argument("normal", "dtype must be a real floating type or complex64; got ", dtype, ".");
  }
  check_key(key, "normal");
  array low(std::nextafter(-1.0f, 0.0f), float32);
  array high(1.0f, float32);
  // MLX checks loc and scale only when it combines them with the samples (the key is drawn).
  auto check_params = [&] {
    if (loc) check_broadcastable(loc->shape(), shape, "normal", "loc");
    if (scale) check_broadcastable(scale->shape(), shape, "normal", "scale");
    if (loc && scale) check_broadcastable(loc->shape(), scale->shape(), "normal", "loc (with scale)");
  };
  if (dtype == complex64) {
    // erfinv of a uniform on (-1, 1) has variance 1/2: one draw per part, paired along a
    // trailing axis of 2 and read as (real, imaginary), so E|z|^2 = 1.
    Shape parts = shape;
    parts.push_back(2);
    array z = erfinv(uniform(low, high, parts, float32, key, s), s);
    check_params();
    z = squeeze(view(z, complex64, s), -1, s);
    if (scale) z = multiply(*scale, z, s);
    if (loc) z = add(*loc, z, s);
    return z;
  }
  array u = uniform(low, high, shape, float32, key, s);
  check_params();
  array applied_scale(std::sqrt(2.0), dtype);
  if (scale) applied_scale = multiply(applied_scale, astype(*scale, dtype, s), s);
  array out = multiply(applied_scale, astype(erfinv(u, s), dtype, s), s);
  if (loc) out = add(astype(*loc, dtype, s), out, s);
  return out;
}

array multivariate_normal(
    const array& mean,
    const array& cov,
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key,
    StreamOrDevice s) {
  const char* op = "multivariate_normal";
  if (dtype != float32) throw_invalid_argument(op, "dtype must be float32; got ", dtype, ".");
  check_key(key, op);
  if (mean.ndim() < 1) throw_invalid_argument(op, "mean must have at least 1 dimension; got ", mean.shape(), ".");
  if (cov.ndim() < 2) throw_invalid_argument(op, "cov must have at least 2 dimensions; got ", cov.shape(), ".");
  const int n = mean.shape().back();
  if (cov.shape(-1) != cov.shape(-2)) {
    throw_invalid_argument(op, "cov must be square in its last two axes; got ", cov.shape(), ".");
  }
  if (cov.shape(-1) != n) {
    throw_invalid_argument(op, "mean and cov must have the same last dimension; got ", mean.shape(),
                           " and ", cov.shape(), ".");
  }
  Shape out_shape;
  try {
    out_shape = broadcast_shapes(Shape(cov.shape().begin(), cov.shape().end() - 2),
                                 Shape(mean.shape().begin(), mean.shape().end() - 1));
    out_shape = broadcast_shapes(out_shape, shape);
  } catch (const std::invalid_argument&) {
    throw_invalid_argument(op, "the batch shapes of mean ", mean.shape(), ", cov ", cov.shape(),
                           " and shape must broadcast; got shape ", shape, ".");
  }
  out_shape.push_back(n);
  // MLX's factor: (U * sqrt(S)) @ Vt, the SVD in float32.
  auto usv = linalg::svd(astype(cov, float32, s), true, s);
  array factor = astype(
      matmul(multiply(usv[0], expand_dims(sqrt(usv[1], s), -2, s), s), usv[2], s), dtype, s);
  array z = normal(out_shape, dtype, 0.0f, 1.0f, key, s);
  array scaled = squeeze(matmul(expand_dims(z, -2, s), factor, s), -2, s);
  return add(mean, scaled, s);
}

array randint(
    const array& low,
    const array& high,
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key,
    StreamOrDevice s) {
  if (issubdtype(dtype, inexact)) {
    throw_invalid_argument("randint", "dtype must be an integer type or bool; got ", dtype, ".");
  }
  check_key(key, "randint");
  check_broadcasts_to(low.shape(), shape, "randint", "low");
  check_broadcasts_to(high.shape(), shape, "randint", "high");
  array lo = astype(low, int64, s);
  array range = subtract(astype(high, int64, s), lo, s);
  // Compare in the output's signedness so a uint64 interval past 2^63 is not read as empty;
  // the wrapped int64 difference is the right width once read as uint64.
  Dtype cmp = issubdtype(dtype, unsignedinteger) ? uint64 : int64;
  array empty = less_equal(astype(high, cmp, s), astype(low, cmp, s), s);
  array safe_range = where(empty, array(uint64_t{1}), astype(range, uint64, s), s);
  array raw(uint64_t{0});
  if (dtype == int64 || dtype == uint64) {
    // Two independent draws: the halves of a split caller key, or two global subkeys.
    std::optional<array> k1, k2;
    if (key) std::tie(k1, k2) = random::split(*key, s);
    array lo_bits = bits(shape, 4, k1, s);
    array hi_bits = bits(shape, 4, k2, s);
    raw = bitwise_or(
        left_shift(astype(hi_bits, uint64, s), array(uint64_t{32}), s),
        astype(lo_bits, uint64, s), s);
  } else {
    raw = astype(bits(shape, 4, key, s), uint64, s);
  }
  array offset = remainder(raw, safe_range, s);
  return astype(add(astype(lo, uint64, s), offset, s), dtype, s);
}

array bernoulli(const array& p, const Shape& shape, const std::optional<array>& key, StreamOrDevice s) {
  if (!issubdtype(p.dtype(), floating)) {
    throw_invalid_argument("bernoulli", "p must have a floating dtype; got ", p.dtype(), ".");
  }
  check_key(key, "bernoulli");
  // p scaled to [0, next float above 2^32 - 1], so p >= 1 is always true and p <= 0 never.
  array upper(std::nextafter(static_cast<float>(std::numeric_limits<uint32_t>::max()),
                             std::numeric_limits<float>::max()),
              float32);
  array b = bits(shape, 4, key, s);
  // MLX checks the shape on the result, after the key is drawn.
  check_broadcasts_to(p.shape(), shape, "bernoulli", "p");
  return less(b, multiply(p, upper, s), s);
}

array bernoulli(const array& p, const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(p, p.shape(), key, s);
}

array bernoulli(const std::optional<array>& key, StreamOrDevice s) {
  return bernoulli(array(0.5f), key, s);
}

array truncated_normal(
    const array& lower,
    const array& upper,
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key,
    StreamOrDevice s) {
  check_floating(dtype, "truncated_normal");
  check_key(key, "truncated_normal");
  check_broadcasts_to(lower.shape(), shape, "truncated_normal", "lower");
  check_broadcasts_to(upper.shape(), shape, "truncated_normal", "upper");
  array sqrt2(std::sqrt(2.0), dtype);
  array lo = astype(lower, dtype, s);
  array hi = astype(upper, dtype, s);
  array a = erf(divide(lo, sqrt2, s), s);
  array b = erf(divide(hi, sqrt2, s), s);
  array out = multiply(sqrt2, erfinv(uniform(a, b, shape, dtype, key, s), s), s);
  return maximum(minimum(hi, out, s), lo, s);
}

array truncated_normal(
    const array& lower,
    const array& upper,
    Dtype dtype,
    const std::optional<array>& key,
    StreamOrDevice s) {
  Shape shape;
  try {
    shape = broadcast_shapes(lower.shape(), upper.shape());
  } catch (const std::invalid_argument&) {
    throw_invalid_argument("truncated_normal", "lower and upper must broadcast; got ",
                           lower.shape(), " and ", upper.shape(), ".");
  }
  return truncated_normal(lower, upper, shape, dtype, key, s);
}

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  check_floating(dtype, "gumbel");
  check_key(key, "gumbel");
  return negative(log(negative(log(uniform(shape, dtype, key, s), s), s), s), s);
}

namespace {

int categorical_axis(int axis, const array& logits) {
  int nd = static_cast<int>(logits.ndim());
  if (axis < -nd || axis >= nd) {
    throw_invalid_argument("categorical", "axis must be in [", -nd, ", ", nd, "); got ", axis, ".");
  }
  return axis < 0 ? axis + nd : axis;
}

// argmax over the category axis of logits + gumbel noise, the noise of `shape` with the
// category axis inserted where it lines up with logits' axis under broadcasting.
array categorical_impl(
    const array& logits,
    int axis,
    const Shape& shape,
    const std::optional<array>& key,
    StreamOrDevice s) {
  Shape gshape = shape;
  int offset = axis + static_cast<int>(shape.size()) - static_cast<int>(logits.ndim()) + 1;
  gshape.insert(gshape.begin() + offset, logits.shape(axis));
  array g = gumbel(gshape, float32, key, s);
  return argmax(add(g, logits, s), offset, false, s);
}

} // namespace

array categorical(
    const array& logits,
    int axis,
    const Shape& shape,
    const std::optional<array>& key,
    StreamOrDevice s) {
  axis = categorical_axis(axis, logits);
  check_key(key, "categorical");
  Shape reduced = logits.shape();
  reduced.erase(reduced.begin() + axis);
  check_broadcasts_to(reduced, shape, "categorical", "logits without axis");
  return categorical_impl(logits, axis, shape, key, s);
}

array categorical(
    const array& logits,
    int axis,
    int num_samples,
    const std::optional<array>& key,
    StreamOrDevice s) {
  axis = categorical_axis(axis, logits);
  check_key(key, "categorical");
  if (num_samples < 0) {
    throw_invalid_argument("categorical", "num_samples must be non-negative; got ", num_samples, ".");
  }
  array l = expand_dims(logits, -1, s);
  Shape shape = l.shape();
  shape.erase(shape.begin() + axis);
  shape.back() = num_samples;
  return categorical_impl(l, axis, shape, key, s);
}

array categorical(const array& logits, int axis, const std::optional<array>& key, StreamOrDevice s) {
  axis = categorical_axis(axis, logits);
  check_key(key, "categorical");
  Shape shape = logits.shape();
  shape.erase(shape.begin() + axis);
  return categorical_impl(logits, axis, shape, key, s);
}

array laplace(
    const Shape& shape,
    Dtype dtype,
    const float loc,
    const float scale,
    const std::optional<array>& key,
    StreamOrDevice s) {
  check_floating(dtype, "laplace");
  check_key(key, "laplace");
  array u = uniform(array(std::nextafter(-1.0f, 0.0f), float32), array(1.0f, float32), shape,
                    float32, key, s);
  // Inverse CDF: sign(u) log(1 - |u|) is Laplace(0, 1) for u uniform on (-1, 1).
  array out = multiply(sign(u, s), log1p(multiply(array(-1.0f, dtype), abs(u, s), s), s), s);
  out = astype(out, dtype, s);
  if (scale != 1.0f) out = multiply(array(scale, dtype), out, s);
  if (loc != 0.0f) out = add(array(loc, dtype), out, s);
  return out;
}

array permutation(const array& x, int axis, const std::optional<array>& key, StreamOrDevice s) {
  // MLX reads x.shape(axis), which throws std::out_of_range for an axis out of range.
  const int nd = static_cast<int>(x.ndim());
  if (axis < -nd || axis >= nd) {
    throw std::out_of_range(
        "[permutation] axis " + std::to_string(axis) + " is out of bounds for an array with " +
        std::to_string(nd) + " dimensions.");
  }
  const int ax = axis < 0 ? axis + nd : axis;
  check_key(key, "permutation");
  return take(x, permutation(x.shape(ax), key, s), ax, s);
}

array permutation(int x, const std::optional<array>& key, StreamOrDevice s) {
  if (x < 0) throw_invalid_argument("permutation", "x must be non-negative; got ", x, ".");
  check_key(key, "permutation");
  return argsort(bits({x}, 4, key, s), s);
}

} // namespace nuvec::random
