// nuvec::nn: quantized layers and model quantization (MLX's nn.QuantizedLinear,
// nn.QuantizedEmbedding and nn.quantize). The weights are stored packed by nuvec::quantize
// (uint32 words, per-group scales and, for "affine", biases; see ops.h) and used through
// quantized_matmul / dequantize without materialising a float matrix. As in MLX, the packed
// weight, scales and biases are frozen: value_and_grad and the optimizers leave them alone.
// The packed weight has no gradient, so it is a buffer (saved and loaded with the
// parameters, listed by parameters(), frozen through unfreeze()); so are the fp modes' uint8
// scales. Affine scales and biases have gradients (quantized_matmul's rule) and are frozen
// parameters: unfreeze() or unfreeze({"scales", "biases"}) makes them trainable, as in MLX
// (mlx-lm's DWQ trains them that way).
// Source: MLX python/mlx/nn/layers/quantized.py (semantics, not code).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nuvec/nn/layers.h"
#include "nuvec/nn/module.h"

namespace nuvec::nn {

/// What QuantizedLinear and QuantizedEmbedding share: the format of their packed weight and
/// how its parts are registered (see the header comment).
class QuantizedModule : public Module {
 public:
  /// Values per scale (and bias).
  int group_size() const { return group_size_; }
  /// Bits per code.
  int bits() const { return bits_; }
  /// The quantization mode ("affine", "mxfp4", "mxfp8", "nvfp4").
  const std::string& mode() const { return mode_; }

 protected:
  /// Registers quantize's {weight, scales[, biases]}: the packed words (and the fp modes'
  /// scale codes) as buffers, affine scales and biases as parameters.
  void register_quantized(const std::vector<array>& q);
  /// The packed biases ("affine") or none (fp modes), read without walking the tree.
  std::optional<array> packed_biases() const {
    return has_param("biases") ? std::optional<array>(param("biases")) : std::nullopt;
  }

  int group_size_ = 0, bits_ = 0;
  std::string mode_;
};

/// y = quantized_matmul(x, weight, scales, biases, transpose = true) + bias: Linear with a
/// quantized weight. Parameters: "weight" uint32 (output_dims, input_dims * bits / 32),
/// "scales" (output_dims, input_dims / group_size) (the float dtype of the quantized matrix
/// for "affine", uint8 codes for the fp modes), "biases" (same shape; "affine" only), and
/// "bias" (output_dims) when the layer has one. group_size / bits default to the mode's
/// (MLX's: affine 64/4, mxfp4 32/4, mxfp8 32/8, nvfp4 16/4). x: (..., input_dims) floating
/// -> (..., output_dims) (a 1-d x gives a 1-d result).
/// Throws std::invalid_argument ("[nn.QuantizedLinear] ...") for non-positive dims, an
/// unknown mode, a group size or bit width the mode does not take, input_dims not divisible
/// by the group size, or an input whose last dimension is not input_dims.
class QuantizedLinear : public QuantizedModule {
 public:
  /// A layer with MLX's initial weight (uniform(-1/sqrt(input_dims), 1/sqrt(input_dims)),
  /// one key of the default sequence) quantized, and a zero bias. Every parameter, bias
  /// included, is frozen (MLX's constructor freezes the whole layer).
  QuantizedLinear(
      int input_dims,
      int output_dims,
      bool bias = true,
      std::optional<int> group_size = std::nullopt,
      std::optional<int> bits = std::nullopt,
      const std::string& mode = "affine");

  /// The quantized equivalent of `linear`: its weight quantized with the given format; its
  /// bias (if any) shared, and trainable as in MLX's from_linear (only the quantized
  /// parameters are frozen). Like MLX, it first runs the constructor, so the default key
  /// sequence advances by one draw. Throws as the constructor.
  static std::shared_ptr<QuantizedLinear> from_linear(
      const Linear& linear,
      std::optional<int> group_size = std::nullopt,
      std::optional<int> bits = std::nullopt,
      const std::string& mode = "affine");

  std::string name() const override { return "QuantizedLinear"; }
  /// quantized_matmul(x, weight, scales, biases) (+ bias): (..., input_dims) ->
  /// (..., output_dims) in the product's dtype (see quantized_matmul).
  array forward(const array& x) override;

  /// The unquantized input size (the packed weight's codes per row).
  int input_dims() const;
  /// The output size (the packed weight's rows).
  int output_dims() const;
};

/// Embedding with a quantized table. forward(x) dequantizes the rows x of the table: integer
/// x of any shape -> x.shape + (dims,), dtype: the scales' for "affine", bfloat16 for the fp
/// modes (dequantize's defaults, as MLX). Parameters "weight" uint32 (num_embeddings, dims *
/// bits / 32), "scales", "biases" ("affine" only), all frozen (the header comment says which
/// unfreeze). Indices follow take's rule
/// (as Embedding): negative ones count from the end, and one outside [-num_embeddings,
/// num_embeddings) raises std::out_of_range ("[take] ...") when evaluated. Throws
/// std::invalid_argument ("[nn.QuantizedEmbedding]
/// ...") for non-positive sizes, a format the mode does not take, dims not divisible by the
/// group size, non-integer indices.
class QuantizedEmbedding : public QuantizedModule {
 public:
  /// MLX's initial table (normal(0, 1/sqrt(dims)), one key of the default sequence)
  /// quantized; frozen.
  QuantizedEmbedding(
      int num_embeddings,
      int dims,
      std::optional<int> group_size = std::nullopt,
      std::optional<int> bits = std::nullopt,
      const std::string& mode = "affine");

  /// The quantized equivalent of `embedding` (its table quantized; frozen). Runs the
  /// constructor first, as MLX. Throws as the constructor.
  static std::shared_ptr<QuantizedEmbedding> from_embedding(
      const Embedding& embedding,
      std::optional<int> group_size = std::nullopt,
      std::optional<int> bits = std::nullopt,
      const std::string& mode = "affine");

  std::string name() const override { return "QuantizedEmbedding"; }
  /// The dequantized rows x of the table (see the class comment).
  array forward(const array& x) override;
  /// quantized_matmul(x, weight, scales, biases, transpose = true): the table as an output
  /// projection (tied embeddings), (..., dims) -> (..., num_embeddings). Throws
  /// std::invalid_argument when the last axis of x is not dims.
  array as_linear(const array& x) const;

  /// The table's rows.
  int num_embeddings() const;
  /// The unquantized row size.
  int dims() const;
};

/// Which layers nn::quantize converts: called with the layer's dotted path ("layers.0") and
/// the layer, for Linear and Embedding layers only.
using QuantizePredicate = std::function<bool(const std::string& path, const Module& module)>;

/// Converts, in place, every Linear into a QuantizedLinear and every Embedding into a
/// QuantizedEmbedding (from_linear / from_embedding with this format) when the predicate
/// (default: every such layer) accepts it and the last axis of its weight is divisible by the
/// group size; other layers are left as they are (mlx-lm's rule: MLX's bare nn.quantize
/// would throw on an indivisible layer). Unlike MLX, the predicate is only asked about
/// Linear and Embedding layers (MLX throws when it accepts anything else). A layer shared
/// by several parents becomes one shared quantized layer; each new layer takes the old
/// one's training mode. The root module itself is never replaced.
/// Throws std::invalid_argument for an unknown mode or a group size / bit width the mode
/// does not take (before changing anything), and ("[nn.Module.replace_child] ...") when a
/// parent of a layer to convert does not accept replacements (see Module::child_replaced);
/// then the layers already converted are put back, so the model is unchanged.
/// Source: MLX nn.quantize (class_predicate).
void quantize(
    Module& model,
    std::optional<int> group_size = std::nullopt,
    std::optional<int> bits = std::nullopt,
    const std::string& mode = "affine",
    const QuantizePredicate& predicate = nullptr);

} // namespace nuvec::nn
