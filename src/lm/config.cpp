// config.json of Hugging Face checkpoints (see include/nuvec/lm/config.h for the sources).
#include "nuvec/lm/config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace nuvec::lm {

using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.config] " + what);
}

template <class T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail(std::string("field '") + key + "' has the wrong type: " + it->dump());
  }
}

std::vector<int> id_list(const json& j) {
  if (j.is_number_integer()) {
    return {j.get<int>()};
  }
  std::vector<int> out;
  if (j.is_array()) {
    for (auto& v : j) {
      if (v.is_number_integer()) {
        out.push_back(v.get<int>());
      }
    }
  }
  return out;
}

QuantizationSpec read_spec(const json& j, const QuantizationSpec& base) {
  QuantizationSpec q = base;
  q.group_size = get_or(j, "group_size", q.group_size);
  q.bits = get_or(j, "bits", q.bits);
  q.mode = get_or(j, "mode", q.mode);
  return q;
}

void read_rope(const json& j, RopeConfig& rope) {
  // transformers 5: rope_parameters {"rope_type", "rope_theta", ...}; earlier: rope_theta at
  // the top level and rope_scaling {"rope_type" (or "type"), ...} or null.
  rope.theta = get_or(j, "rope_theta", rope.theta);
  rope.partial_rotary_factor = get_or(j, "partial_rotary_factor", rope.partial_rotary_factor);
  const json* params = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_object()) {
      params = &*it;
      break;
    }
  }
  if (!params) {
    return;
  }
  const json& p = *params;
  rope.theta = get_or(p, "rope_theta", rope.theta);
  rope.partial_rotary_factor = get_or(p, "partial_rotary_factor", rope.partial_rotary_factor);
  rope.type = get_or(p, "rope_type", get_or<std::string>(p, "type", "default"));
  rope.factor = get_or(p, "factor", rope.factor);
  rope.low_freq_factor = get_or(p, "low_freq_factor", rope.low_freq_factor);
  rope.high_freq_factor = get_or(p, "high_freq_factor", rope.high_freq_factor);
  rope.original_max_position_embeddings =
      get_or(p, "original_max_position_embeddings", rope.original_max_position_embeddings);
  rope.beta_fast = get_or(p, "beta_fast", rope.beta_fast);
  rope.beta_slow = get_or(p, "beta_slow", rope.beta_slow);
  rope.truncate = get_or(p, "truncate", rope.truncate);
  if (p.contains("attention_factor") && p["attention_factor"].is_number()) {
    rope.attention_factor = p["attention_factor"].get<float>();
  }
  static const std::vector<std::string> known = {"default", "linear", "llama3", "yarn"};
  if (std::find(known.begin(), known.end(), rope.type) == known.end()) {
    fail("unsupported rope type '" + rope.type + "' (supported: default, linear, llama3, yarn)");
  }
  if (rope.type == "llama3" && rope.original_max_position_embeddings <= 0) {
    fail("rope type llama3 needs original_max_position_embeddings");
  }
}

} // namespace

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"llama", "mistral", "qwen2", "qwen3",
                                                 "qwen3_moe", "qwen3_next", "gpt_oss"};
  return types;
}

bool ModelConfig::is_sparse_layer(int i) const {
  return num_experts > 0 && (i + 1) % std::max(decoder_sparse_step, 1) == 0 &&
      std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end();
}

bool ModelConfig::is_linear_layer(int i) const {
  return i >= 0 && i < int(layer_types.size()) && layer_types[i] == "linear_attention";
}

bool ModelConfig::is_sliding_layer(int i) const {
  return i >= 0 && i < int(layer_types.size()) && layer_types[i] == "sliding_attention";
}

bool ModelConfig::has_linear_layers() const {
  for (int i = 0; i < num_hidden_layers; ++i) {
    if (is_linear_layer(i)) return true;
  }
  return false;
}

int ModelConfig::linear_conv_dim() const {
  return 2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads * linear_value_head_dim;
}

std::optional<QuantizationSpec> ModelConfig::quantization_for(const std::string& path) const {
  auto it = quantization_overrides.find(path);
  if (it != quantization_overrides.end()) {
    return it->second;
  }
  return quantization;
}

ModelConfig ModelConfig::from_json_string(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(std::string("config.json is not JSON: ") + e.what());
  }
  if (!j.is_object()) {
    fail("config.json is not a JSON object");
  }
  ModelConfig c;
  c.model_type = get_or<std::string>(j, "model_type", "");
  const auto& types = supported_model_types();
  if (std::find(types.begin(), types.end(), c.model_type) == types.end()) {
    std::string list;
    for (auto& t : types) {
      list += (list.empty() ? "" : ", ") + t;
    }
    std::string arch = j.contains("architectures") ? " (architectures " + j["architectures"].dump() + ")" : "";
    fail("unsupported model_type '" + c.model_type + "'" + arch + "; supported: " + list);
  }
  c.vocab_size = get_or(j, "vocab_size", 0);
  c.hidden_size = get_or(j, "hidden_size", 0);
  c.intermediate_size = get_or(j, "intermediate_size", 0);
  c.num_hidden_layers = get_or(j, "num_hidden_layers", 0);
  c.num_attention_heads = get_or(j, "num_attention_heads", 0);
  c.num_key_value_heads = get_or(j, "num_key_value_heads", c.num_attention_heads);
  for (auto [name, v] : {std::pair<const char*, int>{"vocab_size", c.vocab_size},
                         {"hidden_size", c.hidden_size},
                         {"num_hidden_layers", c.num_hidden_layers},
                         {"num_attention_heads", c.num_attention_heads},
                         {"num_key_value_heads", c.num_key_value_heads}}) {
    if (v <= 0) {
      fail(std::string("config.json needs a positive '") + name + "' (got " + std::to_string(v) + ")");
    }
  }
  c.head_dim = get_or(j, "head_dim", 0);
  if (c.head_dim <= 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      fail("hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
           std::to_string(c.num_attention_heads) + " and head_dim is not given");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("num_attention_heads " + std::to_string(c.num_attention_heads) +
         " is not a multiple of num_key_value_heads " + std::to_string(c.num_key_value_heads));
  }
  c.rms_norm_eps = get_or(j, "rms_norm_eps", c.rms_norm_eps);
  c.max_position_embeddings = get_or(j, "max_position_embeddings", c.max_position_embeddings);
  c.tie_word_embeddings = get_or(j, "tie_word_embeddings", false);
  // Qwen2 always has q/k/v biases (its config has no attention_bias field).
  c.attention_bias = get_or(j, "attention_bias", c.model_type == "qwen2");
  c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe" || c.model_type == "qwen3_next";
  c.attention_output_gate = c.model_type == "qwen3_next";
  c.norm_plus_one = c.model_type == "qwen3_next";
  c.gpt_oss = c.model_type == "gpt_oss";
  read_rope(j, c.rope);
  if (int(c.head_dim * c.rope.partial_rotary_factor) % 2 != 0) {
    fail("the rotated part of head_dim must be even");
  }

  c.num_experts = get_or(j, "num_experts", get_or(j, "num_local_experts", 0));
  c.num_experts_per_tok = get_or(j, "num_experts_per_tok", 0);
  c.moe_intermediate_size = get_or(j, "moe_intermediate_size", 0);
  if (c.gpt_oss && c.moe_intermediate_size == 0) {
    c.moe_intermediate_size = c.intermediate_size; // GPT-OSS's experts use intermediate_size
  }
  c.decoder_sparse_step = get_or(j, "decoder_sparse_step", 1);
  c.norm_topk_prob = get_or(j, "norm_topk_prob", false);
  c.mlp_only_layers = get_or(j, "mlp_only_layers", std::vector<int>{});
  c.shared_expert_intermediate_size = get_or(j, "shared_expert_intermediate_size", 0);
  if (c.gpt_oss) {
    c.sliding_window = get_or(j, "sliding_window", 128);
    c.swiglu_limit = get_or(j, "swiglu_limit", 7.0f);
    c.layer_types = get_or(j, "layer_types", std::vector<std::string>{});
    if (c.layer_types.empty()) {
      for (int i = 0; i < c.num_hidden_layers; ++i) {
        c.layer_types.push_back((i + 1) % 2 ? "sliding_attention" : "full_attention");
      }
    }
    if (int(c.layer_types.size()) != c.num_hidden_layers || c.sliding_window <= 0) {
      fail("gpt_oss needs one layer_types entry per layer and a positive sliding_window");
    }
    for (auto& t : c.layer_types) {
      if (t != "sliding_attention" && t != "full_attention") {
        fail("unsupported layer type '" + t + "' (sliding_attention, full_attention)");
      }
    }
  }
  if (c.model_type == "qwen3_next") {
    c.layer_types = get_or(j, "layer_types", std::vector<std::string>{});
    if (c.layer_types.empty()) {
      // transformers' Qwen3NextConfig: every full_attention_interval-th layer is full.
      int interval = get_or(j, "full_attention_interval", 4);
      for (int i = 0; i < c.num_hidden_layers; ++i) {
        c.layer_types.push_back((i + 1) % interval ? "linear_attention" : "full_attention");
      }
    }
    if (int(c.layer_types.size()) != c.num_hidden_layers) {
      fail("layer_types has " + std::to_string(c.layer_types.size()) + " entries for " +
           std::to_string(c.num_hidden_layers) + " layers");
    }
    for (auto& t : c.layer_types) {
      if (t != "linear_attention" && t != "full_attention") {
        fail("unsupported layer type '" + t + "' (linear_attention, full_attention)");
      }
    }
    c.linear_num_key_heads = get_or(j, "linear_num_key_heads", 0);
    c.linear_num_value_heads = get_or(j, "linear_num_value_heads", 0);
    c.linear_key_head_dim = get_or(j, "linear_key_head_dim", 0);
    c.linear_value_head_dim = get_or(j, "linear_value_head_dim", 0);
    c.linear_conv_kernel_dim = get_or(j, "linear_conv_kernel_dim", 4);
    if (c.linear_num_key_heads <= 0 || c.linear_num_value_heads <= 0 || c.linear_key_head_dim <= 0 ||
        c.linear_value_head_dim <= 0 || c.linear_conv_kernel_dim <= 0 ||
        c.linear_num_value_heads % c.linear_num_key_heads != 0) {
      fail("the linear attention needs positive linear_* sizes with linear_num_value_heads a multiple of "
           "linear_num_key_heads");
    }
  }
  if (c.num_experts > 0 &&
      (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts || c.moe_intermediate_size <= 0)) {
    fail("a mixture of experts needs 0 < num_experts_per_tok <= num_experts and a positive "
         "moe_intermediate_size");
  }
  bool any_dense = false;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    any_dense = any_dense || !c.is_sparse_layer(i);
  }
  if (any_dense && c.intermediate_size <= 0) {
    fail("config.json needs a positive 'intermediate_size'");
  }

  if (j.contains("eos_token_id")) {
    c.eos_token_ids = id_list(j["eos_token_id"]);
  }
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) {
    c.bos_token_id = j["bos_token_id"].get<int>();
  }
  c.torch_dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", "float32"));

  for (const char* key : {"quantization", "quantization_config"}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_object() || !it->contains("bits")) {
      continue;
    }
    c.quantization = read_spec(*it, QuantizationSpec{});
    for (auto& [name, v] : it->items()) {
      if (v.is_object()) {
        c.quantization_overrides[name] = read_spec(v, *c.quantization);
      } else if (v.is_boolean() && !v.get<bool>()) {
        c.quantization_overrides[name] = std::nullopt;
      }
    }
    break;
  }
  return c;
}

ModelConfig ModelConfig::from_dir(const std::string& dir) {
  auto read = [](const std::string& path, bool required) -> std::optional<std::string> {
    std::ifstream f(path);
    if (!f) {
      if (required) {
        throw std::runtime_error("[lm.config] cannot read " + path);
      }
      return std::nullopt;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  ModelConfig c = from_json_string(*read(dir + "/config.json", true));
  if (auto gen = read(dir + "/generation_config.json", false)) {
    json g = json::parse(*gen, nullptr, false);
    if (g.is_object() && g.contains("eos_token_id")) {
      auto ids = id_list(g["eos_token_id"]);
      if (!ids.empty()) {
        c.eos_token_ids = ids;
      }
    }
  }
  return c;
}

std::string ModelConfig::to_json_string() const {
  static const std::map<std::string, std::string> arch = {
      {"llama", "LlamaForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"},
      {"qwen3", "Qwen3ForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"}};
  auto it = arch.find(model_type);
  if (it == arch.end()) {
    fail("to_json_string writes llama, mistral, qwen2, qwen3 and qwen3_moe configs, not '" + model_type + "'");
  }
  json j;
  j["architectures"] = {it->second};
  j["hidden_act"] = "silu";
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  // The shortest decimal that reads back as the float (1e-05, not 9.999999747378752e-06).
  char eps[32];
  auto end = std::to_chars(eps, eps + sizeof(eps), rms_norm_eps).ptr;
  j["rms_norm_eps"] = std::stod(std::string(eps, end));
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_bias"] = attention_bias;
  j["rope_theta"] = rope.theta;
  if (rope.type != "default") {
    json s = {{"rope_type", rope.type}, {"factor", rope.factor}};
    if (rope.type == "llama3") {
      s["low_freq_factor"] = rope.low_freq_factor;
      s["high_freq_factor"] = rope.high_freq_factor;
      s["original_max_position_embeddings"] = rope.original_max_position_embeddings;
    }
    j["rope_scaling"] = s;
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (num_experts > 0) {
    j["num_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["norm_topk_prob"] = norm_topk_prob;
    j["mlp_only_layers"] = mlp_only_layers;
  }
  if (bos_token_id) {
    j["bos_token_id"] = *bos_token_id;
  }
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else if (!eos_token_ids.empty()) {
    j["eos_token_id"] = eos_token_ids;
  }
  j["torch_dtype"] = torch_dtype;
  j["dtype"] = torch_dtype; // transformers 5's name
  if (quantization) {
    json q = {{"group_size", quantization->group_size}, {"bits", quantization->bits},
              {"mode", quantization->mode}};
    for (auto& [name, spec] : quantization_overrides) {
      if (spec) {
        q[name] = {{"group_size", spec->group_size}, {"bits", spec->bits}, {"mode", spec->mode}};
      } else {
        q[name] = false;
      }
    }
    j["quantization"] = q;
    j["quantization_config"] = q;
  }
  return j.dump(2);
}

} // namespace nuvec::lm
