// The forward pass of the serving engine (include/nuvec/lm/engine.h) over a ragged batch: the
// tokens of many sequences as rows [T, hidden], each attention layer writing its keys and
// values into the paged pools (fast::paged_write) and attending through its sequence's block
// table (fast::paged_attention, every token a query row of its own with its own length, so
// prefill chunks and decode tokens share one call). The projections, norms, MLP and MoE are
// the dense path's (src/lm/layers.h); the rotation is the same rope, applied per token at its
// position. Gated DeltaNet layers (Qwen3-Next) keep per-sequence states in pools of their own
// (paged_gated_deltanet.cpp). Source: vLLM's model runner (flattened tokens with per-token
// slots).
#include <cmath>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "layers.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

std::pair<array, array> make_layer_pools(const ModelConfig& c, int layer, int blocks, int block_size, int state_rows,
                                         Dtype dtype) {
  auto zeroed = [](const Shape& shape, Dtype t) { return contiguous(zeros(shape, t)); };
  if (c.is_linear_layer(layer)) {
    Shape conv = conv_state_shape(c, state_rows);
    conv.insert(conv.begin() + 1, 1); // [rows, 1, K − 1, C]: a paged pool of one head
    return {zeroed(conv, dtype), zeroed(recurrent_state_shape(c, state_rows), float32)};
  }
  const Shape kv = {blocks, c.num_key_value_heads, block_size, c.head_dim};
  return {zeroed(kv, dtype), zeroed(kv, dtype)};
}

std::pair<double, double> layer_pool_bytes(const ModelConfig& c, int layer, int block_size, Dtype dtype) {
  if (c.is_linear_layer(layer)) {
    auto elements = [](const Shape& s) {
      return double(std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>()));
    };
    return {0.0, elements(conv_state_shape(c, 1)) * size_of(dtype) +
                     elements(recurrent_state_shape(c, 1)) * size_of(float32)};
  }
  return {2.0 * c.num_key_value_heads * block_size * c.head_dim * size_of(dtype), 0.0};
}

namespace {

// Attention of a batch with fresh prefill segments: each segment's rows attend causally among
// themselves through scaled_dot_product_attention (q, k, v as [T, H, 1, D] rows: the keys and
// values just written to the pools); the rows between segments through paged_attention.
// The pieces are joined in row order.
array mixed_attention(const array& q, const array& k, const array& v, const array& k_pool, const array& v_pool,
                      const PagedBatch& b, float scale, const LayerAttentionOptions& lo) {
  const int T = q.shape(0), Hq = q.shape(1), D = q.shape(3), W = b.tables.shape(1);
  std::vector<array> pieces;
  auto paged_rows = [&](int a, int e) {
    if (a >= e) return;
    pieces.push_back(fast::paged_attention(slice(q, {a, 0, 0, 0}, {e, Hq, 1, D}), k_pool, v_pool,
                                           slice(b.tables, {a, 0}, {e, W}), slice(b.lengths, {a}, {e}), scale,
                                           lo.sinks, lo.window));
  };
  fast::AttentionOptions causal;
  causal.mask_mode = "causal";
  causal.sinks = lo.sinks;
  causal.window = lo.window;
  // Rows [a, a + L) of x [T, H, 1, D] as [1, H, L, D].
  auto as_heads = [](const array& x, int a, int L) {
    const int H = x.shape(1), Dx = x.shape(3);
    return transpose(reshape(slice(x, {a, 0, 0, 0}, {a + L, H, 1, Dx}), {1, L, H, Dx}), {0, 2, 1, 3});
  };
  int row = 0;
  for (auto [a, L] : b.fresh) {
    paged_rows(row, a);
    array o = fast::scaled_dot_product_attention(as_heads(q, a, L), as_heads(k, a, L), as_heads(v, a, L), scale,
                                                 causal);
    pieces.push_back(reshape(transpose(o, {0, 2, 1, 3}), {L, Hq, 1, D}));
    row = a + L;
  }
  paged_rows(row, T);
  return pieces.size() == 1 ? pieces[0] : concatenate(pieces, 0);
}

array paged_attention_layer(const ModelConfig& c, const WeightMap& w, int layer, const array& x,
                            const PagedBatch& b, array& k_pool, array& v_pool) {
  const std::string path = layer_path(layer) + ".self_attn";
  const int T = x.shape(0), D = c.head_dim;
  const int Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  // [T, H, 1, D]: each token is a batch row of its own (its own position and length).
  const auto qkv = linears(c, w, path, {"q_proj", "k_proj", "v_proj"}, x);
  array k = reshape(qkv[1], {T, Hkv, 1, D}), v = reshape(qkv[2], {T, Hkv, 1, D});
  array q = qkv[0];
  std::optional<array> gate;
  if (c.attention_output_gate) {
    auto [qs, g] = split_query_gate(c, q);
    q = qs;
    gate = g;
  }
  q = reshape(q, {T, Hq, 1, D});
  // Normalised (Qwen3) and rotated at each token's position in one norm_rope node each.
  std::optional<float> eps;
  std::optional<array> q_norm, k_norm;
  if (c.qk_norm) {
    eps = c.rms_norm_eps;
    q_norm = norm_weight(c, w, path + ".q_norm.weight");
    k_norm = norm_weight(c, w, path + ".k_norm.weight");
  }
  const fast::Rotation rot = rotation(c);
  q = fast::norm_rope(q, q_norm, eps, rot, b.positions);
  k = fast::norm_rope(k, k_norm, eps, rot, b.positions);
  k_pool = fast::paged_write(k_pool, reshape(k, {T, Hkv, D}), b.slots);
  v_pool = fast::paged_write(v_pool, reshape(v, {T, Hkv, D}), b.slots);
  const float m = rope_attention_factor(c);
  const float scale = m * m / std::sqrt(float(D));
  const LayerAttentionOptions lo = layer_attention_options(c, w, layer);
  array o = b.fresh.empty() ? fast::paged_attention(q, k_pool, v_pool, b.tables, b.lengths, scale, lo.sinks, lo.window)
                            : mixed_attention(q, k, v, k_pool, v_pool, b, scale, lo);
  o = reshape(o, {T, Hq * D});
  if (gate) {
    o = multiply(o, sigmoid(*gate));
  }
  return linear(c, w, path + ".o_proj", o);
}

} // namespace

array paged_forward(const ModelConfig& c, const WeightMap& w, const PagedBatch& b, std::vector<array>& k_pools,
                    std::vector<array>& v_pools) {
  const int T = b.tokens.shape(0);
  const float eps = c.rms_norm_eps;
  if (c.has_linear_layers()) {
    // The ranges must follow the one-token rows, one after another, to the end of the batch
    // (layers.h, PagedBatch).
    int row = b.state_chunks.empty() ? T : b.state_chunks.front().row;
    bool ok = b.state_slots.ndim() == 1 && b.state_slots.shape(0) == T;
    for (const auto& ch : b.state_chunks) {
      ok = ok && ch.row == row && ch.len > 0;
      row += ch.len;
    }
    if (!ok || row != T) {
      throw std::logic_error("[lm.paged_forward] state_slots and state_chunks do not describe the batch's rows");
    }
  }
  auto norm = [&](const std::string& name) { return norm_weight(c, w, name); };
  array h = embedding(c, w, "model.embed_tokens", b.tokens);
  array y = fast::rms_norm(h, norm(layer_path(0) + ".input_layernorm.weight"), eps);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    array a = c.is_linear_layer(i) ? paged_linear_attention(c, w, i, y, b, k_pools[i], v_pools[i])
                                   : paged_attention_layer(c, w, i, y, b, k_pools[i], v_pools[i]);
    std::tie(h, y) = fast::add_rms_norm(a, h, norm(layer_path(i) + ".post_attention_layernorm.weight"), eps);
    array mlp = feed_forward(c, w, i, y, 1, T);
    const std::string next = i + 1 < c.num_hidden_layers ? layer_path(i + 1) + ".input_layernorm.weight"
                                                           : std::string("model.norm.weight");
    std::tie(h, y) = fast::add_rms_norm(mlp, h, norm(next), eps);
  }
  // Only the rows that are sampled go through the output projection.
  return linear(c, w, c.tie_word_embeddings ? "model.embed_tokens" : "lm_head", take(y, b.sample_rows, 0));
}

} // namespace nuvec::lm::detail
