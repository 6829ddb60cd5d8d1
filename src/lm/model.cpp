// Model: loading, checking and stacking a checkpoint's tensors, and the decoder's forward
// pass (include/nuvec/lm/model.h; the layers are in attention.cpp and feed_forward.cpp).
#include "nuvec/lm/model.h"

#include <sstream>
#include <stdexcept>

#include "layers.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"
#include "nuvec/transforms.h"

namespace nuvec::lm {

namespace {

using detail::layer_path;

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.Model] " + what);
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) {
    os << (i ? ", " : "") << s[i];
  }
  os << ")";
  return os.str();
}

enum class Kind { Linear, Embedding, Norm, Bias };

struct Expected {
  std::string name; // the module path for Linear/Embedding ("...q_proj"), the tensor otherwise
  Shape shape;      // [out, in] (stacked: [E, out, in]) or the tensor's
  Kind kind;
};

// Every tensor of an unquantized model of `c`, in transformers' names (experts stacked).
std::vector<Expected> expected_tensors(const ModelConfig& c) {
  const int H = c.hidden_size, D = c.head_dim;
  const int Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  std::vector<Expected> out;
  out.push_back({"model.embed_tokens", {c.vocab_size, H}, Kind::Embedding});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    std::string l = layer_path(i);
    out.push_back({l + ".input_layernorm.weight", {H}, Kind::Norm});
    out.push_back({l + ".post_attention_layernorm.weight", {H}, Kind::Norm});
    if (c.is_linear_layer(i)) {
      // Qwen3-Next's Gated DeltaNet.
      const int Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
      const int Dk = c.linear_key_head_dim, Dv = c.linear_value_head_dim;
      std::string g = l + ".linear_attn";
      out.push_back({g + ".in_proj_qkvz", {2 * Hk * Dk + 2 * Hv * Dv, H}, Kind::Linear});
      out.push_back({g + ".in_proj_ba", {2 * Hv, H}, Kind::Linear});
      out.push_back({g + ".conv1d.weight", {2 * Hk * Dk + Hv * Dv, 1, c.linear_conv_kernel_dim}, Kind::Norm});
      out.push_back({g + ".A_log", {Hv}, Kind::Norm});
      out.push_back({g + ".dt_bias", {Hv}, Kind::Norm});
      out.push_back({g + ".norm.weight", {Dv}, Kind::Norm});
      out.push_back({g + ".out_proj", {H, Hv * Dv}, Kind::Linear});
    } else {
    std::string a = l + ".self_attn";
    out.push_back({a + ".q_proj", {Hq * D * (c.attention_output_gate ? 2 : 1), H}, Kind::Linear});
    out.push_back({a + ".k_proj", {Hkv * D, H}, Kind::Linear});
    out.push_back({a + ".v_proj", {Hkv * D, H}, Kind::Linear});
    out.push_back({a + ".o_proj", {H, Hq * D}, Kind::Linear});
    if (c.attention_bias) {
      out.push_back({a + ".q_proj.bias", {Hq * D}, Kind::Bias});
      out.push_back({a + ".k_proj.bias", {Hkv * D}, Kind::Bias});
      out.push_back({a + ".v_proj.bias", {Hkv * D}, Kind::Bias});
    }
    if (c.gpt_oss) {
      out.push_back({a + ".o_proj.bias", {H}, Kind::Bias});
      out.push_back({a + ".sinks", {Hq}, Kind::Bias});
    }
    if (c.qk_norm) {
      out.push_back({a + ".q_norm.weight", {D}, Kind::Norm});
      out.push_back({a + ".k_norm.weight", {D}, Kind::Norm});
    }
    }
    std::string m = l + ".mlp";
    if (c.is_sparse_layer(i)) {
      const int E = c.num_experts, I = c.moe_intermediate_size;
      out.push_back({m + (c.gpt_oss ? ".router" : ".gate"), {E, H}, Kind::Linear});
      out.push_back({m + ".switch_mlp.gate_proj", {E, I, H}, Kind::Linear});
      out.push_back({m + ".switch_mlp.up_proj", {E, I, H}, Kind::Linear});
      out.push_back({m + ".switch_mlp.down_proj", {E, H, I}, Kind::Linear});
      if (c.gpt_oss) {
        out.push_back({m + ".router.bias", {E}, Kind::Bias});
        out.push_back({m + ".switch_mlp.gate_proj.bias", {E, I}, Kind::Bias});
        out.push_back({m + ".switch_mlp.up_proj.bias", {E, I}, Kind::Bias});
        out.push_back({m + ".switch_mlp.down_proj.bias", {E, H}, Kind::Bias});
      }
      if (const int S = c.shared_expert_intermediate_size; S > 0) {
        out.push_back({m + ".shared_expert.gate_proj", {S, H}, Kind::Linear});
        out.push_back({m + ".shared_expert.up_proj", {S, H}, Kind::Linear});
        out.push_back({m + ".shared_expert.down_proj", {H, S}, Kind::Linear});
        out.push_back({m + ".shared_expert_gate", {1, H}, Kind::Linear});
      }
    } else {
      const int I = c.intermediate_size;
      out.push_back({m + ".gate_proj", {I, H}, Kind::Linear});
      out.push_back({m + ".up_proj", {I, H}, Kind::Linear});
      out.push_back({m + ".down_proj", {H, I}, Kind::Linear});
    }
  }
  out.push_back({"model.norm.weight", {H}, Kind::Norm});
  if (!c.tie_word_embeddings) {
    out.push_back({"lm_head", {c.vocab_size, H}, Kind::Linear});
  }
  return out;
}

// transformers stores experts one module each ("mlp.experts.<e>.gate_proj.weight");
// transformers 5 may fuse them ("mlp.experts.gate_up_proj" [E, 2I, H] and
// "mlp.experts.down_proj" [E, H, I]). Both become mlx-lm's stacked "mlp.switch_mlp.*".
void stack_experts(const ModelConfig& c, WeightMap& w) {
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (!c.is_sparse_layer(i)) {
      continue;
    }
    std::string m = layer_path(i) + ".mlp";
    if (w.count(m + ".switch_mlp.gate_proj.weight")) {
      continue;
    }
    if (c.gpt_oss && w.count(m + ".experts.gate_up_proj")) {
      // transformers' GptOssExperts: gate_up_proj [E, H, 2I] with gate and up interleaved
      // (columns 0::2 and 1::2), down_proj [E, I, H]; biases [E, 2I] and [E, H].
      array gate_up = w.at(m + ".experts.gate_up_proj");
      array gate_up_bias = w.at(m + ".experts.gate_up_proj_bias");
      const int E = gate_up.shape(0), H = gate_up.shape(1), I2 = gate_up.shape(2);
      for (int part = 0; part < 2; ++part) {
        std::string name = m + (part == 0 ? ".switch_mlp.gate_proj" : ".switch_mlp.up_proj");
        w.insert_or_assign(name + ".weight", swapaxes(slice(gate_up, {0, 0, part}, {E, H, I2}, {1, 1, 2}), 1, 2));
        w.insert_or_assign(name + ".bias", slice(gate_up_bias, {0, part}, {E, I2}, {1, 2}));
      }
      w.insert_or_assign(m + ".switch_mlp.down_proj.weight", swapaxes(w.at(m + ".experts.down_proj"), 1, 2));
      w.insert_or_assign(m + ".switch_mlp.down_proj.bias", w.at(m + ".experts.down_proj_bias"));
      for (const char* name : {".experts.gate_up_proj", ".experts.gate_up_proj_bias", ".experts.down_proj",
                               ".experts.down_proj_bias"}) {
        w.erase(m + name);
      }
      continue;
    }
    if (auto it = w.find(m + ".experts.gate_up_proj"); it != w.end()) {
      array gate_up = it->second;
      int I = gate_up.shape(1) / 2;
      w.insert_or_assign(m + ".switch_mlp.gate_proj.weight", slice(gate_up, {0, 0, 0}, {gate_up.shape(0), I, gate_up.shape(2)}));
      w.insert_or_assign(m + ".switch_mlp.up_proj.weight", slice(gate_up, {0, I, 0}, {gate_up.shape(0), 2 * I, gate_up.shape(2)}));
      w.insert_or_assign(m + ".switch_mlp.down_proj.weight", w.at(m + ".experts.down_proj"));
      w.erase(it);
      w.erase(m + ".experts.down_proj");
      continue;
    }
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      std::vector<array> parts;
      for (int e = 0; e < c.num_experts; ++e) {
        std::string name = m + ".experts." + std::to_string(e) + "." + proj + ".weight";
        auto it = w.find(name);
        if (it == w.end()) {
          fail("missing tensor '" + name + "'");
        }
        parts.push_back(it->second);
        w.erase(it);
      }
      w.insert_or_assign(m + ".switch_mlp." + proj + ".weight", stack(parts, 0));
    }
  }
}

void check_tensor(const WeightMap& w, const std::string& name, const Shape& shape) {
  auto it = w.find(name);
  if (it == w.end()) {
    fail("missing tensor '" + name + "' of shape " + shape_str(shape));
  }
  if (it->second.shape() != shape) {
    fail("tensor '" + name + "' has shape " + shape_str(it->second.shape()) + ", the config implies " +
         shape_str(shape));
  }
}

void check_tensors(const ModelConfig& c, const WeightMap& w) {
  for (auto& e : expected_tensors(c)) {
    if (e.kind == Kind::Norm || e.kind == Kind::Bias) {
      check_tensor(w, e.name, e.shape);
      continue;
    }
    if (!detail::is_quantized(w, e.name)) {
      check_tensor(w, e.name + ".weight", e.shape);
      continue;
    }
    auto spec = c.quantization_for(e.name);
    if (!spec) {
      fail("module '" + e.name + "' is quantized but config.json has no quantization for it");
    }
    const int in = e.shape.back();
    if (in % spec->group_size != 0 || (in * spec->bits) % 32 != 0) {
      fail("module '" + e.name + "' has " + std::to_string(in) + " inputs, which do not split into groups of " +
           std::to_string(spec->group_size) + " at " + std::to_string(spec->bits) + " bits");
    }
    Shape packed = e.shape, groups = e.shape;
    packed.back() = in * spec->bits / 32;
    groups.back() = in / spec->group_size;
    check_tensor(w, e.name + ".weight", packed);
    check_tensor(w, e.name + ".scales", groups);
    if (spec->mode == "affine") {
      check_tensor(w, e.name + ".biases", groups);
    }
  }
}

// Grows every layer's buffers to hold `needed` positions (in steps of 256, as mlx-lm's
// KVCache), keeping what they hold.
void reserve(Cache& cache, int needed, int kv_heads, int head_dim, Dtype dtype) {
  if (needed <= cache.capacity && cache.capacity > 0) {
    return;
  }
  int capacity = std::max(cache.capacity, ((needed + 255) / 256) * 256);
  for (auto& layer : cache.layers) {
    if (layer.recurrent_state.ndim() > 0) {
      continue; // a Gated DeltaNet layer: its state does not grow
    }
    for (array* buffer : {&layer.keys, &layer.values}) {
      array grown = zeros({cache.batch, kv_heads, capacity, head_dim}, dtype);
      if (buffer->ndim() == 4 && cache.offset > 0) {
        array kept = slice(*buffer, {0, 0, 0, 0}, {cache.batch, kv_heads, cache.offset, head_dim});
        grown = slice_update(grown, kept, {0, 0, 0, 0}, {cache.batch, kv_heads, cache.offset, head_dim});
      }
      *buffer = grown;
    }
  }
  cache.capacity = capacity;
}

Dtype compute_dtype(const WeightMap& w) {
  for (const char* name : {"model.norm.weight", "model.embed_tokens.scales", "model.embed_tokens.weight"}) {
    auto it = w.find(name);
    if (it != w.end() && issubdtype(it->second.dtype(), floating)) {
      return it->second.dtype();
    }
  }
  return float32;
}

} // namespace

Model::Model(ModelConfig config, WeightMap weights) : config_(std::move(config)), weights_(std::move(weights)) {
  stack_experts(config_, weights_);
  check_tensors(config_, weights_);
  run_weights_ = weights_;
  for (auto& [name, a] : weights_) {
    const bool dense_weight = a.ndim() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
        !detail::is_quantized(weights_, name.substr(0, name.size() - 7));
    if (dense_weight) {
      run_weights_.insert_or_assign(name + "@T", transpose(a));
    }
  }
  // Projections that read the same rows run as one product (detail::linears).
  for (int i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string layer = detail::layer_path(i);
    if (!config_.is_linear_layer(i)) {
      detail::fuse_linears(config_, weights_, run_weights_, layer + ".self_attn", {"q_proj", "k_proj", "v_proj"});
    }
    if (!config_.is_sparse_layer(i)) {
      detail::fuse_linears(config_, weights_, run_weights_, layer + ".mlp", {"gate_proj", "up_proj"});
    } else if (config_.shared_expert_intermediate_size > 0) {
      detail::fuse_linears(config_, weights_, run_weights_, layer + ".mlp.shared_expert", {"gate_proj", "up_proj"});
    }
  }
  // The checkpoint's tensors that became rows of a concatenation are those views here too, so
  // that each weight is held once.
  for (auto& [name, a] : weights_) {
    const array& r = run_weights_.at(name);
    if (r.id() != a.id()) a = r;
  }
}

Model Model::load(const std::string& dir, std::optional<Dtype> dtype) {
  ModelConfig config = ModelConfig::from_dir(dir);
  WeightMap weights = load_weights(dir);
  if (dtype) {
    for (auto& [name, a] : weights) {
      bool packed = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
          weights.count(name.substr(0, name.size() - 7) + ".scales");
      bool quant_aux = name.size() > 7 && (name.compare(name.size() - 7, 7, ".scales") == 0 ||
                                           name.compare(name.size() - 7, 7, ".biases") == 0);
      if (!packed && !quant_aux && issubdtype(a.dtype(), floating)) {
        a = astype(a, *dtype);
      }
    }
  }
  Model model(std::move(config), std::move(weights));
  std::vector<array> all;
  for (auto& [name, a] : model.weights_) {
    all.push_back(a);
  }
  eval(all);
  return model;
}

Dtype Model::dtype() const {
  return compute_dtype(weights_);
}

Cache Model::make_cache(int batch, int capacity) const {
  if (batch <= 0) {
    fail("make_cache needs a positive batch (got " + std::to_string(batch) + ")");
  }
  Cache cache;
  cache.batch = batch;
  cache.layers.resize(config_.num_hidden_layers);
  const ModelConfig& c = config_;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_linear_layer(i)) {
      cache.layers[i].conv_state = zeros(detail::conv_state_shape(c, batch), dtype());
      cache.layers[i].recurrent_state = zeros(detail::recurrent_state_shape(c, batch), float32);
    }
  }
  reserve(cache, std::max(capacity, 1), config_.num_key_value_heads, config_.head_dim, dtype());
  return cache;
}

array Model::operator()(const array& tokens, Cache* cache) const {
  return forward(config_, run_weights_, tokens, cache);
}

array Model::forward(const ModelConfig& c, const WeightMap& w, const array& tokens, Cache* cache) {
  if (tokens.ndim() != 2 || !issubdtype(tokens.dtype(), integer)) {
    fail("tokens must be a 2-d integer array [batch, length]; got shape " + shape_str(tokens.shape()));
  }
  const int B = tokens.shape(0), L = tokens.shape(1);
  const int start = cache ? cache->offset : 0;
  if (start + L > c.max_position_embeddings) {
    fail("positions " + std::to_string(start) + " to " + std::to_string(start + L) +
         " exceed the model's context of max_position_embeddings = " + std::to_string(c.max_position_embeddings));
  }
  if (cache) {
    if (cache->batch != B || int(cache->layers.size()) != c.num_hidden_layers) {
      fail("the cache holds " + std::to_string(cache->batch) + " sequences of " +
           std::to_string(cache->layers.size()) + " layers; tokens have batch " + std::to_string(B));
    }
    reserve(*cache, start + L, c.num_key_value_heads, c.head_dim, compute_dtype(w));
  }
  const float eps = c.rms_norm_eps;
  // The residual stream runs as rows [B·L, hidden]: linear layers are then single matmuls,
  // with no reshape around each (a decode step's graph stays small).
  array h = detail::embedding(c, w, "model.embed_tokens", reshape(tokens, {B * L}));
  auto norm = [&](const std::string& name) { return detail::norm_weight(c, w, name); };
  array y = fast::rms_norm(h, norm(layer_path(0) + ".input_layernorm.weight"), eps);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    array a = c.is_linear_layer(i) ? detail::linear_attention(c, w, i, y, B, L, cache)
                                   : detail::attention(c, w, i, y, B, L, cache);
    std::tie(h, y) = fast::add_rms_norm(a, h, norm(layer_path(i) + ".post_attention_layernorm.weight"), eps);
    array m = detail::feed_forward(c, w, i, y, B, L);
    const std::string next = i + 1 < c.num_hidden_layers ? layer_path(i + 1) + ".input_layernorm.weight"
                                                           : std::string("model.norm.weight");
    std::tie(h, y) = fast::add_rms_norm(m, h, norm(next), eps);
  }
  if (cache) {
    cache->offset += L;
  }
  array logits = detail::linear(c, w, c.tie_word_embeddings ? "model.embed_tokens" : "lm_head", y);
  return reshape(logits, {B, L, logits.shape(-1)});
}

WeightMap init_weights(const ModelConfig& config, Dtype dtype, float initializer_range, std::optional<array> key) {
  array k = key ? *key : random::key(0);
  WeightMap w;
  for (auto& e : expected_tensors(config)) {
    switch (e.kind) {
      case Kind::Norm:
        w.insert_or_assign(e.name, ones(e.shape, dtype));
        break;
      case Kind::Bias:
        w.insert_or_assign(e.name, zeros(e.shape, dtype));
        break;
      default: {
        auto [next, sub] = random::split(k);
        k = next;
        w.insert_or_assign(e.name + ".weight", random::normal(e.shape, dtype, 0.0f, initializer_range, sub));
      }
    }
  }
  return w;
}

} // namespace nuvec::lm
