// nuvec::random: counter-based random sampling with MLX's API (mlx/random.h). A key is a
// uint32 array of shape (2,); the same key gives the same bits (Threefry-2x32, 20 rounds, in
// MLX's counter layout, which is JAX's), so samples are reproducible and splittable. Without
// a key, ops draw the next subkey of the default KeySequence (seed()). Every op builds the
// same graph of ops as MLX 0.32's mlx/random.cpp, so a key (or a seed) gives MLX's numbers.
// Every op is lazy and differentiable in its float parameters (low/high/loc/scale/mean);
// the bits themselves have zero derivative. Errors name the op: "[uniform] ...".
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "nuvec/array.h"
#include "nuvec/ops.h"
#include "nuvec/stream.h"

namespace nuvec::random {

/// A sequence of keys (MLX's random::KeySequence): holds a key k, initially key(seed);
/// next() replaces k by split(k).first and returns split(k).second. The key-less ops draw
/// from default_(), so seed(s) followed by the same calls gives the same numbers as MLX.
/// The split is computed on the host (the same words as the lazy split MLX builds). Unlike
/// MLX's, next() and seed() are thread-safe (a mutex per sequence): concurrent draws take
/// distinct keys of the sequence, in some order.
class KeySequence {
 public:
  /// The sequence starting at key(seed).
  explicit KeySequence(uint64_t seed);
  KeySequence(const KeySequence& other);
  KeySequence& operator=(const KeySequence& other);

  /// Restarts the sequence at key(seed).
  void seed(uint64_t seed);
  /// The next subkey: uint32, shape (2,).
  array next();

  /// The process-wide sequence of the key-less ops, seeded at first use with the current
  /// time in milliseconds since the epoch (as MLX).
  static KeySequence& default_();

 private:
  uint32_t k0_, k1_;
  mutable std::mutex mutex_;
};

/// The key of a seed: [seed >> 32, seed & 0xffffffff] as uint32, shape (2,).
/// Source: MLX's random::key (key(0) = [0, 0], key(2^32 + 1) = [1, 1]).
array key(uint64_t seed);

/// Restarts the default key sequence at key(seed): KeySequence::default_().seed(seed).
void seed(uint64_t seed);

/// Threefry-2x32 bits of `shape`: uint32 (width 4), uint16 (2) or uint8 (1). Per key the
/// output bytes are m = ceil(size * width / 4) little-endian words, (w[j], w[j + h + m%2]) =
/// threefry(key, (j, j + h + m%2)) for j < h = m/2 and, for odd m, w[h] = threefry(key,
/// (h, 0)).x0 (MLX's RandomBits). Without a key, the next key of KeySequence::default_() is
/// taken first (before any check, as MLX). Throws std::invalid_argument ("[bits]") for a
/// width not in {1, 2, 4}, a key that is not uint32 or not of shape (2,), or a negative
/// dimension.
array bits(
    const Shape& shape,
    int width,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// bits with width 4 (uint32).
inline array bits(
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return bits(shape, 4, key, s);
}

/// The two keys of split(key, 2): rows 0 and 1 of bits({2, 2}, 4, key). Shapes (2,), (2,).
/// Throws as bits does (naming "bits").
std::pair<array, array> split(const array& key, StreamOrDevice s = {});
/// `num` new keys, shape (num, 2): bits({num, 2}, 4, key). Source: MLX's random::split.
array split(const array& key, int num, StreamOrDevice s = {});

/// Samples in [low, high): low + (high - low) * u with u = min(float32(b) / float32(2^32 - 1),
/// below_one(dtype)) cast to dtype, b the uint32 bits of `shape` (MLX's formula; below_one is
/// the largest value below 1 of dtype, taken as float32 for float16 and bfloat16).
/// Shapes: low and high broadcast to `shape`. Dtypes: float16, bfloat16, float32, float64
/// (float64 samples carry the float32 draw's value, clamped below 1: a nuvec addition, where
/// MLX 0.32 throws std::runtime_error). Throws std::invalid_argument ("[uniform]") for a
/// non-floating dtype or when the broadcast of low and high does not broadcast to `shape`,
/// and as bits for a bad key. Differentiable in low and high.
array uniform(
    const array& low,
    const array& high,
    const Shape& shape,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// uniform with scalar bounds (converted to arrays, then to dtype).
template <typename T, typename U>
array uniform(
    T low,
    U high,
    const Shape& shape,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return uniform(array(low), array(high), shape, dtype, key, s);
}
/// uniform on [0, 1).
array uniform(
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// uniform on [0, 1), float32.
inline array uniform(
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return uniform(shape, float32, key, s);
}

/// Normal samples loc + scale * sqrt(2) * erfinv(u), u = uniform(nextafter(-1, 0), 1, shape,
/// float32, key) (MLX's inverse-CDF formula; erfinv in float32, then cast to dtype; loc and
/// scale cast to dtype). For complex64: loc + scale * z with z = erfinv(u) for u of shape
/// `shape` + (2,), the pairs read as (real, imaginary): both parts normal with variance 1/2,
/// so E|z|^2 = 1; loc and scale (real or complex) are not cast, their promotion with
/// complex64 gives the dtype (MLX's complex_normal, same bits as MLX for a key).
/// Shapes: loc and scale (absent: 0 and 1) broadcast with the samples of `shape`, as in MLX
/// (a loc or scale of a larger broadcast shape gives that larger shape). Dtypes: floating or
/// complex64. Throws std::invalid_argument ("[normal]") for another dtype, a bad key, or
/// loc/scale that do not broadcast with shape (after the key is drawn, as MLX).
/// Differentiable in loc and scale.
array normal(
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& loc,
    const std::optional<array>& scale,
    const std::optional<array>& key,
    StreamOrDevice s = {});
/// normal in float32.
inline array normal(
    const Shape& shape,
    const std::optional<array>& loc,
    const std::optional<array>& scale,
    const std::optional<array>& key,
    StreamOrDevice s = {}) {
  return normal(shape, float32, loc, scale, key, s);
}
/// Standard normal of dtype.
inline array normal(
    const Shape& shape,
    Dtype dtype,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return normal(shape, dtype, std::nullopt, std::nullopt, key, s);
}
/// Standard normal, float32.
inline array normal(
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return normal(shape, float32, std::nullopt, std::nullopt, key, s);
}
/// normal with scalar loc and scale, as arrays of dtype; loc = 0 and scale = 1 are passed as
/// absent (MLX's overload), so they add no node.
inline array normal(
    const Shape& shape,
    Dtype dtype,
    const float loc,
    const float scale,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  auto loc_ = loc == 0 ? std::nullopt : std::make_optional(array(loc, dtype));
  auto scale_ = scale == 1 ? std::nullopt : std::make_optional(array(scale, dtype));
  return normal(shape, dtype, loc_, scale_, key, s);
}
/// normal with scalar loc and scale, float32.
inline array normal(
    const Shape& shape,
    const float loc,
    const float scale,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return normal(shape, float32, loc, scale, key, s);
}

/// Samples of N(mean, cov): mean + z @ A with z = normal(out_shape + (n,), dtype, key) and
/// A = (U * sqrt(S)) @ Vt from linalg::svd(float32 cov) (MLX's factor and graph; for a
/// symmetric PSD cov, its symmetric square root). Shapes: mean (..., n), cov (..., n, n); the
/// output is broadcast(cov batch, mean batch, shape) + (n,). Dtypes: float32 only (as MLX).
/// Throws std::invalid_argument ("[multivariate_normal]") for another dtype, mean with no
/// dimension, cov with fewer than two, a non-square cov, n mismatched or batch shapes that
/// do not broadcast. Differentiable in mean, and in cov through svd's derivative.
array multivariate_normal(
    const array& mean,
    const array& cov,
    const Shape& shape,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});

/// Integers uniform on [low, high): low + (b mod (high - low)) computed in uint64 (bounds
/// cast to int64, the range read as uint64), with b = bits(shape, key) as uint64; for int64
/// and uint64, b = (bits(shape, k2) << 32) | bits(shape, k1) where (k1, k2) = split(key), or
/// two keys of the default sequence (k1 first). Where high <= low (compared in int64, or in
/// uint64 for an unsigned dtype) the result is low (MLX: no error).
/// Shapes: low and high broadcast to `shape`. Dtypes: integer types and bool (default int32).
/// Throws std::invalid_argument ("[randint]") for a floating dtype or bounds that do not
/// broadcast to shape. Source: MLX's randint (integer-space reduction).
array randint(
    const array& low,
    const array& high,
    const Shape& shape,
    Dtype dtype = int32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// randint with scalar bounds.
template <typename T, typename U>
array randint(
    T low,
    U high,
    const Shape& shape,
    Dtype dtype = int32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return randint(array(low), array(high), shape, dtype, key, s);
}

/// Bool samples, true with probability p: b < p * nextafter(float32(2^32 - 1), inf) with b
/// uint32 bits (MLX's formula: p <= 0 never, p >= 1 always). Shapes: p broadcasts to
/// `shape` (default p's shape). Throws std::invalid_argument ("[bernoulli]") for a
/// non-floating p, or (after the key is drawn, as MLX) for p that does not broadcast to shape.
array bernoulli(
    const array& p,
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// bernoulli of p's shape.
array bernoulli(
    const array& p,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// bernoulli with p = 0.5, a scalar.
array bernoulli(const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
/// bernoulli with a scalar p as array(p) (MLX: a double or float p is float32; an integer p
/// is an integer array and throws), a scalar result.
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
array bernoulli(T p, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return bernoulli(array(p), key, s);
}
/// bernoulli with a scalar p as array(p) (as above) of `shape`.
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
array bernoulli(
    T p,
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return bernoulli(array(p), shape, key, s);
}

/// Standard normal restricted to [lower, upper]: sqrt(2) erfinv(u), u uniform on
/// [erf(lower / sqrt 2), erf(upper / sqrt 2)), clipped to the bounds (MLX, after JAX).
/// Shapes: bounds broadcast to `shape` (default: their broadcast shape). Dtypes: floating.
/// Throws std::invalid_argument ("[truncated_normal]") for a non-floating dtype.
array truncated_normal(
    const array& lower,
    const array& upper,
    const Shape& shape,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// truncated_normal of the broadcast shape of lower and upper.
array truncated_normal(
    const array& lower,
    const array& upper,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});

/// Standard Gumbel samples: -log(-log(uniform(shape, dtype, key))). Throws as uniform
/// (naming "uniform").
array gumbel(
    const Shape& shape,
    Dtype dtype = float32,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});

/// Category indices (uint32) along `axis` with probabilities softmax(logits, axis), by the
/// Gumbel-max trick: argmax(logits + gumbel) (MLX). Shapes: `shape` must be a broadcast of
/// logits' shape without axis; with num_samples, the output is that shape + (num_samples,);
/// without either, logits' shape without axis. Throws std::invalid_argument
/// ("[categorical]") for an axis out of range or a shape that does not broadcast.
array categorical(
    const array& logits,
    int axis,
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// num_samples draws per distribution: logits' shape without axis, then (num_samples,).
array categorical(
    const array& logits,
    int axis,
    int num_samples,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// One draw per distribution: logits' shape without axis.
array categorical(
    const array& logits,
    int axis = -1,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});

/// Laplace samples loc + scale * sign(u) * log1p(-|u|), u = uniform(nextafter(-1, 0), 1,
/// shape, float32, key) (MLX's inverse CDF). Dtypes: floating. Throws
/// std::invalid_argument ("[laplace]") for a non-floating dtype.
array laplace(
    const Shape& shape,
    Dtype dtype,
    const float loc,
    const float scale,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// laplace in float32.
inline array laplace(
    const Shape& shape,
    const float loc,
    const float scale,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return laplace(shape, float32, loc, scale, key, s);
}
/// Standard laplace (loc 0, scale 1) of dtype.
inline array laplace(
    const Shape& shape,
    const Dtype dtype,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return laplace(shape, dtype, 0.0f, 1.0f, key, s);
}
/// Standard laplace in float32.
inline array laplace(
    const Shape& shape,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {}) {
  return laplace(shape, float32, 0.0f, 1.0f, key, s);
}

/// x with its slices along `axis` shuffled: take(x, permutation(x.shape(axis), key), axis)
/// (MLX). Throws std::out_of_range ("[permutation]") for an axis out of range.
array permutation(
    const array& x,
    int axis = 0,
    const std::optional<array>& key = std::nullopt,
    StreamOrDevice s = {});
/// A random permutation of 0..x-1 (uint32): argsort(bits({x}, key)). Throws
/// std::invalid_argument ("[permutation]") for negative x.
array permutation(int x, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

} // namespace nuvec::random
