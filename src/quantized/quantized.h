// nuvec: the quantized and gathered matrix products as fused primitives (shared/seeds/001's
// GatherQmm/GatherMm, MLX's QuantizedMatmul, GatherQMM, GatherMM and QQMatmul). Each node's
// meaning is its fallback graph (dequantize, take, matmul: src/quantized/*.cpp); the ops
// (quantized_matmul, gather_qmm, gather_mm, qqmm, gather_qqmm in include/nuvec/ops.h) check
// the arguments, promote and reshape, and record a node whose inputs meet the contract
// written on each class below, so that kernels see only that. Kernels:
// src/backend/cpu/quantized/ and src/backend/cuda/quantized/.
#pragma once

#include <tuple>

#include "fast/fast_primitive.h"
#include "quantized/quant_spec.h"

namespace nuvec {

/// out = x · dequantize(w)ᵀ (transpose) or x · dequantize(w) (not transpose).
/// Inputs {x, w, scales[, biases]} (biases exactly when the mode is affine):
///   x (..., M, K) with T in {float32, float16, bfloat16}; the node treats every leading axis
///     as rows (R = size / K rows of K);
///   w uint32, 2-D, row-contiguous: (N, K * bits / 32) when transpose, else (K, N * bits / 32);
///   scales (and biases), 2-D: (N, K / group_size) or (K, N / group_size); affine: dtype T;
///     fp modes: uint8 codes.
/// Output (..., M, N) in T. Batched weights are recorded as GatherQmm.
/// Rules: vjp for x (quantized_matmul with the other transpose) and, affine, for scales and
/// biases (per group Σ dw·q and Σ dw, MLX's); std::invalid_argument for w and for fp scales.
/// jvp likewise; vmap over x keeps the kernel, other batched inputs use the fallback.
class QuantizedMatmul : public fast::FastPrimitive {
 public:
  QuantizedMatmul(Stream stream, QuantSpec spec, bool transpose);
  const QuantSpec& spec() const { return spec_; }
  bool transpose() const { return transpose_; }
  /// The constructor's parameters (export).
  std::tuple<QuantSpec, bool> state() const { return {spec_, transpose_}; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()
  NUVEC_FAST_VMAP()
  std::vector<array> jvp(
      const std::vector<array>& primals,
      const std::vector<array>& tangents,
      const std::vector<int>& argnums) override;

 private:
  QuantSpec spec_;
  bool transpose_;
};

/// out[b] = x[lhs[b]] · dequantize(w[rhs[b]])ᵀ (or without ᵀ), b over the flattened batch.
/// Inputs {x, w, scales[, biases], lhs, rhs}:
///   x (A, M, K) in T (float32, float16, bfloat16), row-contiguous or not;
///   w (E, N, K * bits / 32) when transpose, else (E, K, N * bits / 32), uint32;
///   scales (and biases) (E, N, K / group_size) or (E, K, N / group_size) (T, or uint8 codes);
///   lhs, rhs uint32 (B), indices into x's and w's first axes; a kernel raises
///     std::out_of_range (the index-error channel) for an index past A or E.
/// Output (B, M, N) in T. sorted: rhs is non-decreasing (MLX's sorted_indices hint), so rows
/// with the same weight batch are adjacent and a kernel may read each w[e] once for them.
/// Rules: vjp for x (and affine scales, biases) from the fallback; std::invalid_argument
/// for w, lhs, rhs (no derivative); jvp and vmap from the fallback.
class GatherQmm : public fast::FastPrimitive {
 public:
  GatherQmm(Stream stream, QuantSpec spec, bool transpose, bool sorted);
  const QuantSpec& spec() const { return spec_; }
  bool transpose() const { return transpose_; }
  bool sorted() const { return sorted_; }
  /// The constructor's parameters (export).
  std::tuple<QuantSpec, bool, bool> state() const { return {spec_, transpose_, sorted_}; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()

 private:
  QuantSpec spec_;
  bool transpose_;
  bool sorted_;
};

/// out[b] = a[lhs[b]] · b_[rhs[b]], b over the flattened batch.
/// Inputs {a, b, lhs, rhs}: a (A, M, K), b (E, K, N), one floating dtype T (float32, float16,
/// bfloat16, float64); lhs, rhs uint32 (B) (std::out_of_range from a kernel past A or E).
/// Output (B, M, N) in T. sorted as GatherQmm's.
/// Rules (from the fallback): vjp for a and b (scatter-added), std::invalid_argument for the
/// indices; jvp and vmap from the fallback.
class GatherMm : public fast::FastPrimitive {
 public:
  GatherMm(Stream stream, bool sorted);
  bool sorted() const { return sorted_; }
  /// The constructor's parameter (export).
  bool state() const { return sorted_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()

 private:
  bool sorted_;
};

/// out = fq(x) · fq(w)ᵀ with fq(·) the value after quantizing to the fp mode (x always,
/// along K; w unless given packed), the product in float32, output in x's dtype.
/// Inputs {x, w_q, scales}: x (R, K) in T (float32, float16, bfloat16), w_q (N, K * bits /
/// 32) uint32, scales (N, K / group_size) uint8 (the weight quantized already: the op
/// quantizes a float w first). Output (R, N) in T. Global scales (nvfp4) are not a node's
/// input: the op runs the fallback for them.
/// Rules: vjp for x as the straight-through estimator of x's rounding (g · fq(w), MLX's);
/// none for w; jvp likewise; vmap from the fallback.
class QQMatmul : public fast::FastPrimitive {
 public:
  QQMatmul(Stream stream, QuantSpec spec);
  const QuantSpec& spec() const { return spec_; }
  /// The constructor's parameter (export).
  QuantSpec state() const { return spec_; }

  NUVEC_FAST_PRIMITIVE()
  NUVEC_FAST_VJP()

 private:
  QuantSpec spec_;
};

} // namespace nuvec
