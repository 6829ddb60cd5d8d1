// The configuration of a language model, read from a Hugging Face `config.json`.
//
// Field names and defaults are transformers' (models/<arch>/configuration_<arch>.py of
// transformers 4.5x and 5.x, which stores rope settings either as `rope_scaling` plus
// `rope_theta` or, from 5.0, as one `rope_parameters` object); the `quantization` block is
// mlx-lm's (mlx_lm/utils.py: a default {group_size, bits, mode} plus per-module overrides,
// an override of `false` leaving that module unquantized).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nuvec::lm {

/// How a module's weight is quantized (mlx-lm's per-module quantization entry).
struct QuantizationSpec {
  int group_size = 64;
  int bits = 4;
  std::string mode = "affine";
};

/// Rotary embedding parameters (transformers' rope_parameters / rope_scaling).
struct RopeConfig {
  float theta = 10000.0f;       ///< rope_theta.
  std::string type = "default"; ///< rope_type: "default", "linear", "llama3" or "yarn".
  float factor = 1.0f;          ///< Scaling factor ("linear", "llama3", "yarn").
  float low_freq_factor = 1.0f;  ///< llama3.
  float high_freq_factor = 4.0f; ///< llama3.
  int original_max_position_embeddings = 0; ///< llama3, yarn.
  float beta_fast = 32.0f;                   ///< yarn.
  float beta_slow = 1.0f;                    ///< yarn.
  bool truncate = true;                      ///< yarn: round the correction range outwards.
  std::optional<float> attention_factor;     ///< yarn: cos/sin scale (default 0.1 ln(factor) + 1).
  float partial_rotary_factor = 1.0f;    ///< The fraction of head_dim that is rotated.
};

/// A model's architecture and sizes.
struct ModelConfig {
  std::string model_type; ///< "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", ...
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0; ///< Defaults to num_attention_heads.
  int head_dim = 0;            ///< Defaults to hidden_size / num_attention_heads.
  float rms_norm_eps = 1e-6f;
  int max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool attention_bias = false; ///< Biases on q/k/v (and o for llama) projections.
  bool qk_norm = false;        ///< Per-head RMS norms of q and k before rope (Qwen3).
  RopeConfig rope;

  // Mixture of experts (Qwen3-MoE); num_experts 0 for a dense model.
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  int decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  std::vector<int> mlp_only_layers;
  int shared_expert_intermediate_size = 0; ///< Qwen3-Next: a shared expert beside the routed ones.

  // Per-layer kinds: "full_attention", "linear_attention" (Qwen3-Next's Gated DeltaNet; from
  // layer_types, or every full_attention_interval-th layer full) or "sliding_attention"
  // (GPT-OSS: causal attention over the last sliding_window keys); empty: all full.
  std::vector<std::string> layer_types;
  int linear_num_key_heads = 0;
  int linear_num_value_heads = 0;
  int linear_key_head_dim = 0;
  int linear_value_head_dim = 0;
  int linear_conv_kernel_dim = 4;
  /// Qwen3-Next: q_proj also gives a per-feature output gate (attention · sigmoid(gate)).
  bool attention_output_gate = false;
  /// Qwen3-Next: RMS norms scale by (1 + weight) (Qwen3NextRMSNorm; zero-initialised weights).
  bool norm_plus_one = false;
  int sliding_window = 0; ///< GPT-OSS: keys a sliding_attention layer sees.
  /// GPT-OSS: learned attention sinks, a router with a bias whose top-k logits are
  /// softmaxed, and experts with biases and the clamped GLU (limit swiglu_limit, α 1.702).
  bool gpt_oss = false;
  float swiglu_limit = 7.0f;

  std::vector<int> eos_token_ids; ///< From config.json and generation_config.json.
  std::optional<int> bos_token_id;
  std::string torch_dtype = "float32"; ///< The checkpoint's dtype ("bfloat16", ...).

  /// mlx-lm quantization: the default spec, and per-module overrides (nullopt: not quantized).
  std::optional<QuantizationSpec> quantization;
  std::map<std::string, std::optional<QuantizationSpec>> quantization_overrides;

  /// Whether layer `i` uses the sparse MoE block (transformers' Qwen3MoeDecoderLayer rule:
  /// not in mlp_only_layers, num_experts > 0 and (i + 1) % decoder_sparse_step == 0).
  bool is_sparse_layer(int i) const;

  /// Whether layer `i` is a Gated DeltaNet (linear attention) layer.
  bool is_linear_layer(int i) const;
  /// Whether any layer is (a hybrid model: Qwen3-Next).
  bool has_linear_layers() const;

  /// Whether layer `i` attends over a sliding window of sliding_window keys.
  bool is_sliding_layer(int i) const;

  /// The channels of a Gated DeltaNet layer's short convolution (its q, k and v):
  /// 2 · linear_num_key_heads · linear_key_head_dim + linear_num_value_heads · linear_value_head_dim.
  int linear_conv_dim() const;

  /// The quantization of module `path` (e.g. "model.layers.0.mlp.gate_proj"): its override
  /// when there is one, else the default (nullopt when the model is not quantized).
  std::optional<QuantizationSpec> quantization_for(const std::string& path) const;

  /// Parses the text of a config.json. Throws std::invalid_argument ("[lm.config] ...") for
  /// text that is not a JSON object, a missing or non-positive size, an unsupported
  /// model_type (the message lists the supported ones), head counts that do not divide, or
  /// an unknown rope type.
  static ModelConfig from_json_string(const std::string& text);

  /// Reads `dir`/config.json and, when present, `dir`/generation_config.json (its
  /// eos_token_id wins over config.json's, as transformers' generate). Throws
  /// std::runtime_error naming the file when config.json cannot be read; as
  /// from_json_string otherwise.
  static ModelConfig from_dir(const std::string& dir);

  /// The config.json text transformers writes for this config (used by `nuvec-lm train`).
  /// Throws std::invalid_argument for the model types it does not write (qwen3_next, gpt_oss,
  /// whose directories keep their own config.json).
  std::string to_json_string() const;
};

/// The model types ModelConfig accepts.
const std::vector<std::string>& supported_model_types();

} // namespace nuvec::lm
