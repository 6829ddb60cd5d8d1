// nuvec: the normalisation fused primitives (shared/seeds/001: RmsNorm, AddRmsNorm, RmsNormVjp,
// LayerNorm, LayerNormVjp). Ops, fallback graphs and rules in src/fast/norms.cpp; kernels in
// src/backend/cpu/fast/norms.cpp and src/backend/cuda/fast/norms.cu, tested against the
// fallbacks in float64 (tests/fast_norms_test.cpp).
//
// Inputs are in the op's dtype already (real floating). The parameters w and b are 1-d of the
// last axis's size D, or 0-d (no weight: scale 1; no bias: 0). Statistics are computed in
// float32 for float16/bfloat16/float32 rows (float64 for float64); the normalised value is
// rounded to the dtype before the weight multiplies it and the bias is added, each rounding
// once, as the fallback graph does.
#pragma once

#include "fast/fast_primitive.h"

namespace nuvec {

namespace fast {

/// x / sqrt(mean(x², -1) + eps) · w (the RmsNorm fallback; w 0-d means no weight).
array rms_norm_graph(const array& x, const array& w, float eps, StreamOrDevice s);
/// (x - mean) / sqrt(var + eps) · w + b over the last axis (the LayerNorm fallback).
array layer_norm_graph(const array& x, const array& w, const array& b, float eps, StreamOrDevice s);

} // namespace fast

/// (x, w) -> y = rms_norm. vjp: RmsNormVjp (dedicated kernel); jvp: the fallback's; vmap
/// keeps the kernel when w is unbatched.
class RmsNorm : public fast::FastPrimitive {
 public:
  RmsNorm(Stream stream, float eps);
  /// The parameters, in constructor order (MLX's state(); read by export).
  float state() const { return eps_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  float eps_;
};

/// (x, w, g) -> (dx, dw): the gradients of RmsNorm for the cotangent g. With
/// n = 1 / sqrt(mean(x²) + eps): dx = g·w·n − x·mean(g·w·x)·n³, dw = Σ_rows g·x·n (0 when w is
/// 0-d), summed in a fixed order (deterministic). Its own rules come from its fallback
/// (second derivatives of rms_norm).
class RmsNormVjp : public fast::FastPrimitive {
 public:
  RmsNormVjp(Stream stream, float eps);
  float state() const { return eps_; }

  NUVEC_FAST_PRIMITIVE()

 private:
  float eps_;
};

/// (x, r, w) -> (h, y): h = x + r (rounded to the dtype), y = rms_norm(h, w) in one pass.
/// vjp: from the output h (not recomputed), dh = ḡ_h + RmsNormVjp(h, w, ḡ_y).dx, which is
/// both dx and dr, and dw from the same RmsNormVjp node; a cotangent of h known to be zero
/// (is_known_zeros: h unused) is not added. jvp and vmap from the fallback, whose rms_norm
/// is an RmsNorm node.
class AddRmsNorm : public fast::FastPrimitive {
 public:
  AddRmsNorm(Stream stream, float eps);
  float state() const { return eps_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()

 private:
  float eps_;
};

/// (x, w, b) -> y = layer_norm. vjp: LayerNormVjp (dedicated kernel); jvp: the fallback's;
/// vmap keeps the kernel when w and b are unbatched.
class LayerNorm : public fast::FastPrimitive {
 public:
  LayerNorm(Stream stream, float eps);
  float state() const { return eps_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()

 private:
  float eps_;
};

/// (x, w, b, g) -> (dx, dw, db): the gradients of LayerNorm. With xc = x − mean(x),
/// n = 1 / sqrt(mean(xc²) + eps), wg = w·g: dx = (wg − mean(wg))·n − xc·mean(wg·xc)·n³,
/// dw = Σ_rows g·xc·n, db = Σ_rows g (0 for a 0-d w or b), summed in a fixed order.
class LayerNormVjp : public fast::FastPrimitive {
 public:
  LayerNormVjp(Stream stream, float eps);
  float state() const { return eps_; }

  NUVEC_FAST_PRIMITIVE()

 private:
  float eps_;
};

} // namespace nuvec
