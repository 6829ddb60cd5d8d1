// Decoder-only language models of the Llama family, run with nuvec's fused ops.
//
// The layer graph is transformers' (models/llama/modeling_llama.py, models/qwen3/...,
// models/qwen3_moe/...) with the checkpoint's tensor names, so that a Hugging Face directory
// loads as it is and the logits equal transformers' (tests/lm_model_test.cpp). Each layer runs
//   h = h + o_proj(attention(norm_rope(q), norm_rope(k) → cache, v → cache))
//   h = h + mlp(rms_norm(h))
// with the residual adds fused into the next norm (fast::add_rms_norm), q/k normalised (Qwen3)
// and rotated in one fast::norm_rope call that also writes k into the KV cache, and
// fast::scaled_dot_product_attention over the cache. The MLP is SwiGLU, or for sparse layers
// (Qwen3-MoE) a softmax router over the experts with the chosen experts' SwiGLU run by
// gather_mm (gather_qmm when quantized) with sorted indices. Linear layers of an mlx-lm
// quantized checkpoint (".weight" uint32 with ".scales"/".biases") run quantized_matmul.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/lm/config.h"
#include "nuvec/lm/weights.h"

namespace nuvec::lm {

/// One layer's state. Attention layers: keys and values, [B, Hkv, capacity, head_dim]
/// buffers of which the first `Cache::offset` positions are filled. Gated DeltaNet layers
/// (Qwen3-Next): the conv's last K − 1 inputs [B, K − 1, conv channels] and the recurrent
/// state [B, Hv, Dv, Dk] (float32).
struct LayerCache {
  array keys = array(0.0f);
  array values = array(0.0f);
  array conv_state = array(0.0f);
  array recurrent_state = array(0.0f);
};

/// The state a model carries from one forward call to the next: every layer's cache and the
/// number of positions already seen (the rope offset of the next token).
struct Cache {
  std::vector<LayerCache> layers;
  int offset = 0;
  int batch = 0;
  int capacity = 0;
};

/// A loaded model: its config and weights (checkpoint names; experts stacked per layer as
/// "model.layers.i.mlp.switch_mlp.{gate,up,down}_proj.weight" [E, out, in], mlx-lm's layout,
/// whatever layout the checkpoint used).
class Model {
 public:
  /// Reads config.json, generation_config.json and the safetensors of `dir` (load_weights).
  /// `dtype` casts every floating weight (not quantized words, scales and biases stay); by
  /// default the weights keep the checkpoint's dtype. Throws as ModelConfig::from_dir and
  /// load_weights do, and as the constructor.
  static Model load(const std::string& dir, std::optional<Dtype> dtype = std::nullopt);

  /// A model from a config and its weights. Checks that every tensor the architecture needs
  /// is present with the shape the config implies (quantized modules: the packed shape of
  /// their group size and bits), and stacks per-expert or fused expert tensors. Throws
  /// std::invalid_argument ("[lm.Model] ...") naming the first missing or mis-shaped tensor.
  Model(ModelConfig config, WeightMap weights);

  const ModelConfig& config() const { return config_; }
  const WeightMap& weights() const { return weights_; }
  /// The weights the forward pass runs with: weights() plus, for each dense 2-d weight, its
  /// transpose as "<name>@T" (a view; the serving engine's forward uses them too), and each
  /// layer's q/k/v and gate/up projections concatenated along their output rows (one
  /// product each in decode; src/lm/linear.cpp's fuse_linears), whose rows weights() then
  /// holds as views, so a loaded model keeps each weight once. A model constructed from a
  /// map its caller keeps (Trainer::model()) holds those projections a second time.
  const WeightMap& run_weights() const { return run_weights_; }

  /// The floating dtype the model computes in (that of its embedding or norm weights).
  Dtype dtype() const;

  /// An empty cache for `batch` sequences of up to `capacity` positions (grown on demand).
  Cache make_cache(int batch, int capacity = 256) const;

  /// The logits [B, L, vocab] (the model's dtype) of tokens [B, L] (an integer dtype) placed
  /// after the cache's positions; the cache gets their keys and values and its offset grows
  /// by L. Without a cache the tokens start at position 0 and nothing is kept (training).
  /// Lazy: nothing is evaluated. Throws std::invalid_argument for tokens that are not 2-d
  /// integers, a batch other than the cache's, or positions beyond max_position_embeddings
  /// when the cache would exceed them.
  array operator()(const array& tokens, Cache* cache = nullptr) const;

  /// The same forward pass with other weights (same names and shapes): the function that
  /// value_and_grad differentiates in training.
  static array forward(
      const ModelConfig& config, const WeightMap& weights, const array& tokens, Cache* cache = nullptr);

 private:
  ModelConfig config_;
  WeightMap weights_;
  // weights_ plus, for each dense 2-d weight, its transpose as "<name>@T": a view made once
  // (evaluated with the first forward call, a leaf after it), so that a decode step's graph
  // has no Transpose node per linear layer.
  WeightMap run_weights_;
};

/// The float weights (names and shapes) of an unquantized model of `config`, randomly
/// initialised as transformers' _init_weights does (normal(0, initializer_range) for linear
/// and embedding weights, ones for norms, zeros for biases) with `key`'s random stream. For
/// training from scratch.
WeightMap init_weights(const ModelConfig& config, Dtype dtype, float initializer_range = 0.02f,
                       std::optional<array> key = std::nullopt);

} // namespace nuvec::lm
