// nuvec: the element rules of rotary position embeddings (Rope, NormRope), one text for the
// CPU loop (src/backend/cpu/fast/rope.cpp) and the CUDA kernels (src/backend/cuda/fast/rope.cu):
// the angle of a pair, its cos and sin, the rotation, and NormRope's RMS step, each computed
// and rounded as the fallback graphs compute them (src/fast/rope.cpp's rope_graph, the seed's;
// fast::rms_norm_graph), with the functors the fallback's nodes run on the same backend.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/common/math/cast.h"
#include "backend/common/math/unary.h"

NUVEC_MATH_BEGIN

/// ln(base) / (dims / 2) in float32: the factor of the inverse frequencies (the fallback's
/// scalar `log(base) / half`).
NUVEC_HD inline float rope_log_base_over_half(float base, int half) {
  return math::log(base) / static_cast<float>(half);
}

/// The position of a row in float32: (t + offset) · scale (the fallback's arange + offset,
/// times scale).
NUVEC_HD inline float rope_position(int64_t t, int32_t offset, float scale) {
  return (static_cast<float>(t) + static_cast<float>(offset)) * scale;
}

/// inv_freq_i in float32: 1 / freqs[i] when frequencies are given, else
/// exp(−i · ln(base) / half) (the fallback's exp of arange(0, −half, −1) times the factor).
NUVEC_HD inline float rope_inv_freq(int i, float log_base_over_half, const float* freqs) {
  return freqs ? 1.0f / freqs[i] : Exp{}(static_cast<float>(-i) * log_base_over_half);
}

/// cos and sin of a pair's angle, rounded to the element type T.
template <typename T>
struct RopeCosSin {
  T c, s;
};

/// cos(θ) and sin(θ) of θ = position · inv_freq (float32), rounded to T (the fallback's
/// astype of cos(theta) and sin(theta)).
template <typename T>
NUVEC_HD RopeCosSin<T> rope_cos_sin(float position, float inv_freq) {
  const float theta = position * inv_freq;
  return {cast_to<T>(Cos{}(theta)), cast_to<T>(Sin{}(theta))};
}

/// a · b rounded to T (one multiply node of the fallback). On the device the product is an
/// explicitly rounded multiply, so that the compiler cannot fuse it into a following add
/// (the fallback rounds each product before the sum).
template <typename T>
NUVEC_HD T rounded_product(T a, T b) {
  using A = compute_t<T>;
#if NUVEC_MATH_DEVICE
  A p;
  if constexpr (std::is_same_v<A, float>) p = __fmul_rn(static_cast<A>(a), static_cast<A>(b));
  else p = __dmul_rn(static_cast<A>(a), static_cast<A>(b));
#else
  const A p = static_cast<A>(a) * static_cast<A>(b);
#endif
  return cast_to<T>(p);
}

/// Rotates the pair (x1, x2) in place by the angle whose rounded cos and sin are `cs`:
/// forward (x1·c − x2·s, x1·s + x2·c), else the inverse (x2·s + x1·c, x2·c − x1·s); each
/// product rounded to T, then each sum, as the fallback graph rounds them.
template <typename T>
NUVEC_HD void rope_rotate(T& x1, T& x2, RopeCosSin<T> cs, bool forward) {
  using A = compute_t<T>;
  const A x1c = static_cast<A>(rounded_product(x1, cs.c)), x2s = static_cast<A>(rounded_product(x2, cs.s));
  const A x1s = static_cast<A>(rounded_product(x1, cs.s)), x2c = static_cast<A>(rounded_product(x2, cs.c));
  if (forward) {
    x1 = cast_to<T>(x1c - x2s);
    x2 = cast_to<T>(x1s + x2c);
  } else {
    x1 = cast_to<T>(x2s + x1c);
    x2 = cast_to<T>(x2c - x1s);
  }
}

/// 1 / sqrt(sum_sq / n + eps) in A: the RMS factor of a row of n elements whose squares sum
/// to sum_sq (the RmsNorm kernels' statistic; A is double on the CPU, the compute type on the
/// GPU, as theirs).
template <typename A>
NUVEC_HD A rms_inverse(A sum_sq, int64_t n, float eps) {
  return A(1) / math::sqrt(sum_sq / static_cast<A>(n) + static_cast<A>(eps));
}

/// One normalised element of the RmsNorm fallback: x · inv rounded to T, then (`weighted`)
/// times the weight w, rounded to T.
template <typename T>
NUVEC_HD T rms_normalised(T x, compute_t<T> inv, T w, bool weighted) {
  const T v = cast_to<T>(static_cast<compute_t<T>>(x) * inv);
  return weighted ? rounded_product(v, w) : v;
}

NUVEC_MATH_END
