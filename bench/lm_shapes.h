// Random-initialised language models shaped like real ones, for the LM benchmarks
// (nuvec-lm-timings, nuvec-lm-serve-timings; bench/lm_compare.py builds the same shapes in
// transformers).
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

#include "nuvec/lm/lm.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"
#include "nuvec/transforms.h"

namespace nuvec::bench {

namespace lm = nuvec::lm;

inline lm::ModelConfig shape_config(const std::string& shape) {
  std::string json;
  if (shape == "llama-3.2-1b") {
    json = R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": true, "rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}})";
  } else if (shape == "qwen3-0.6b") {
    json = R"({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
      "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "rope_theta": 1000000.0})";
  } else if (shape == "qwen3-8b") {
    json = R"({"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
      "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "rope_theta": 1000000.0})";
  } else if (shape == "qwen3-tiny") {
    // Qwen3-0.6B's layers and ops at widths where the kernels cost next to nothing: its decode
    // time is the host's cost per step (graph building, scheduling, launches).
    json = R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 28, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "rope_theta": 1000000.0})";
  } else if (shape == "qwen3-next-8l") {
    // Qwen3-Next-80B-A3B's widths with 8 of its 48 layers (6 Gated DeltaNet, 2 attention):
    // the hybrid serving path (state rows beside the paged KV cache) at the real sizes.
    json = R"({"model_type": "qwen3_next", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5120,
      "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
      "max_position_embeddings": 262144, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
      "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "full_attention_interval": 4,
      "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
      "linear_num_value_heads": 32, "linear_value_head_dim": 128, "num_experts": 512, "num_experts_per_tok": 10,
      "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
      "norm_topk_prob": true, "mlp_only_layers": []})";
  } else {
    std::cerr << "unknown shape " << shape << " (llama-3.2-1b, qwen3-0.6b, qwen3-8b, qwen3-tiny, qwen3-next-8l)\n";
    std::exit(1);
  }
  return lm::ModelConfig::from_json_string(json);
}

/// The model of `shape` with bf16 weights drawn as transformers' init (seed 0); with bits > 0
/// every 2-d weight quantized (affine, group 64), as mlx-lm's quantize. Evaluated.
inline lm::Model random_model(const std::string& shape, int bits) {
  lm::ModelConfig config = shape_config(shape);
  lm::WeightMap weights = lm::init_weights(config, bfloat16, 0.02f, random::key(0));
  if (bits > 0) {
    config.quantization = lm::QuantizationSpec{64, bits, "affine"};
    lm::WeightMap q;
    for (auto& [name, w] : weights) {
      if (w.ndim() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
        auto parts = quantize(w, 64, bits);
        std::string module = name.substr(0, name.size() - 7);
        q.insert_or_assign(module + ".weight", parts[0]);
        q.insert_or_assign(module + ".scales", parts[1]);
        q.insert_or_assign(module + ".biases", parts[2]);
      } else {
        q.insert_or_assign(name, w);
      }
    }
    weights = std::move(q);
  }
  std::vector<array> all;
  for (auto& [name, w] : weights) all.push_back(w);
  eval(all);
  return lm::Model(config, weights);
}

/// The bytes one decode step reads besides the KV cache: every weight but the embedding rows
/// it does not look up (a tied table is read whole by the output projection).
inline size_t decode_weight_bytes(const lm::Model& model) {
  size_t bytes = 0;
  for (auto& [name, w] : model.weights()) {
    const bool table = name.rfind("model.embed_tokens", 0) == 0;
    if (!table || model.config().tie_word_embeddings) bytes += w.nbytes();
  }
  return bytes;
}

/// The KV-cache bytes one cached position adds (keys and values of every attention layer,
/// 2-byte dtype; Gated DeltaNet layers keep a state of fixed size instead).
inline size_t kv_bytes_per_token(const lm::ModelConfig& c) {
  size_t layers = 0;
  for (int i = 0; i < c.num_hidden_layers; ++i) layers += !c.is_linear_layer(i);
  return size_t(2) * layers * c.num_key_value_heads * c.head_dim * 2;
}

} // namespace nuvec::bench
