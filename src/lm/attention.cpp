// The self-attention block of a decoder layer (src/lm/layers.h): q/k/v projections (one
// product when the weights hold their concatenation, detail::linears), q/k
// normalised (Qwen3) and rotated by fast::norm_rope (k written straight into the KV cache),
// fast::scaled_dot_product_attention with grouped-query heads, the output projection.
// transformers' LlamaAttention / Qwen3Attention (scale head_dim^-1/2, causal mask aligned at
// the end of the keys, which is sdpa's "causal").
#include <cmath>

#include "layers.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

std::string layer_path(int i) {
  return "model.layers." + std::to_string(i);
}

array norm_weight(const ModelConfig& config, const WeightMap& weights, const std::string& name) {
  const array& w = weights.at(name);
  return config.norm_plus_one ? add(w, array(1.0f, w.dtype())) : w;
}

std::pair<array, array> split_query_gate(const ModelConfig& config, const array& q_proj) {
  const int N = q_proj.shape(0), Hq = config.num_attention_heads, D = config.head_dim;
  array qg = reshape(q_proj, {N, Hq, 2 * D});
  return {slice(qg, {0, 0, 0}, {N, Hq, D}), reshape(slice(qg, {0, 0, D}, {N, Hq, 2 * D}), {N, Hq * D})};
}

LayerAttentionOptions layer_attention_options(const ModelConfig& config, const WeightMap& weights, int layer) {
  LayerAttentionOptions o;
  if (config.gpt_oss) {
    o.sinks = weights.at(layer_path(layer) + ".self_attn.sinks");
    if (config.is_sliding_layer(layer)) o.window = config.sliding_window;
  }
  return o;
}

array attention(const ModelConfig& config, const WeightMap& weights, int layer, const array& x, int B, int L,
                Cache* cache) {
  const std::string path = layer_path(layer) + ".self_attn";
  const int D = config.head_dim;
  const int Hq = config.num_attention_heads, Hkv = config.num_key_value_heads;
  const auto qkv = linears(config, weights, path, {"q_proj", "k_proj", "v_proj"}, x);
  auto heads = [&](const array& y, int h) { return transpose(reshape(y, {B, L, h, D}), {0, 2, 1, 3}); };
  array k = heads(qkv[1], Hkv), v = heads(qkv[2], Hkv);
  array q = array(0.0f);
  std::optional<array> gate;
  if (config.attention_output_gate) {
    auto [qs, g] = split_query_gate(config, qkv[0]);
    q = transpose(reshape(qs, {B, L, Hq, D}), {0, 2, 1, 3});
    gate = g;
  } else {
    q = heads(qkv[0], Hq);
  }

  std::optional<float> eps;
  std::optional<array> q_norm, k_norm;
  if (config.qk_norm) {
    eps = config.rms_norm_eps;
    q_norm = norm_weight(config, weights, path + ".q_norm.weight");
    k_norm = norm_weight(config, weights, path + ".k_norm.weight");
  }
  fast::Rotation rot = rotation(config);
  const int offset = cache ? cache->offset : 0;
  q = fast::norm_rope(q, q_norm, eps, rot, offset);
  if (cache) {
    LayerCache& c = cache->layers[layer];
    c.keys = fast::norm_rope(k, k_norm, eps, rot, offset, c.keys);
    c.values = slice_update(c.values, astype(v, c.values.dtype()), {0, 0, offset, 0}, {B, Hkv, offset + L, D});
    k = slice(c.keys, {0, 0, 0, 0}, {B, Hkv, offset + L, D});
    v = slice(c.values, {0, 0, 0, 0}, {B, Hkv, offset + L, D});
  } else {
    k = fast::norm_rope(k, k_norm, eps, rot, 0);
  }
  // yarn scales cos and sin by m, so q·k by m² (rope is linear: scaling the scale is the same).
  const float m = rope_attention_factor(config);
  const float scale = m * m / std::sqrt(float(D));
  array o = array(0.0f);
  if (config.gpt_oss) {
    const LayerAttentionOptions lo = layer_attention_options(config, weights, layer);
    fast::AttentionOptions options;
    // With a window, "causal" even for one query: the window counts from the end of the keys.
    options.mask_mode = L > 1 || lo.window ? "causal" : "";
    options.sinks = lo.sinks;
    options.window = lo.window;
    o = fast::scaled_dot_product_attention(q, k, v, scale, options);
  } else {
    o = fast::scaled_dot_product_attention(q, k, v, scale, L > 1 ? "causal" : "");
  }
  o = reshape(transpose(o, {0, 2, 1, 3}), {B * L, Hq * D});
  if (gate) {
    o = multiply(o, sigmoid(*gate));
  }
  return linear(config, weights, path + ".o_proj", o);
}

} // namespace nuvec::lm::detail
