// nuvec: the argument checks and index handling the quantized and gathered products share
// (MLX's validate_quantized_input / extract_quantized_matmul_dims and gather_mm's index
// broadcasting), and the graphs their fallbacks are made of.
#pragma once

#include <optional>

#include "nuvec/array.h"
#include "quantized/quant_spec.h"

namespace nuvec::quant {

/// The dequantized matrix of a packed weight: rows = w.shape(-2), cols = w.shape(-1) * 32 /
/// bits (the packed axis unpacked).
struct WeightDims {
  int rows = 0;
  int cols = 0;
};

/// Checks a packed weight and its scales (and biases) for `spec`: w uint32 with at least 2
/// dimensions, scales (and biases) of w's shape but the last axis, one entry per group of
/// the unpacked axis, affine scales/biases floating and biases given, fp scales uint8 and
/// no biases. Throws std::invalid_argument naming `op` otherwise.
WeightDims check_weight(
    const char* op,
    const QuantSpec& spec,
    const array& w,
    const array& scales,
    const std::optional<array>& biases);

/// The dtype of a quantized product: promote(x, scales, biases) for affine, x's for the fp
/// modes; float64 runs in float32 (MLX has no float64 kernels; the caller casts the result
/// back). Throws std::invalid_argument naming `op` unless it is real floating.
Dtype product_dtype(const char* op, const QuantSpec& spec, const array& x, const array& scales, const std::optional<array>& biases);

/// Batch indices of a gathered product: lhs and rhs (each operand's own batch positions when
/// absent) broadcast together, flattened to uint32 vectors of `count` entries; `batch` is the
/// broadcast shape. Throws std::invalid_argument naming `op` for non-integer or
/// non-broadcasting indices.
struct GatherIndices {
  array lhs;
  array rhs;
  Shape batch;
  int count = 0;
};
GatherIndices gather_indices(
    const char* op,
    const array& a,
    const array& b,
    const std::optional<array>& lhs_indices,
    const std::optional<array>& rhs_indices,
    StreamOrDevice s);

/// x's batch axes flattened: (..., M, K) -> (A, M, K).
array flat_batches(const array& x, StreamOrDevice s);

/// The dequantized weight for a product in `dtype` (ordinary ops: the fallbacks' meaning).
array dequantized(
    const QuantSpec& spec,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    Dtype dtype,
    StreamOrDevice s);

/// x @ dequantized(w).T (transpose) or x @ dequantized(w), in x's dtype (the graph).
array quantized_product_graph(
    const QuantSpec& spec,
    bool transpose,
    const array& x,
    const array& w,
    const array& scales,
    const std::optional<array>& biases,
    StreamOrDevice s);

} // namespace nuvec::quant
