// The linear-attention layer of Qwen3-Next (Gated DeltaNet, Yang et al. 2024), as
// transformers' Qwen3NextGatedDeltaNet: in_proj_qkvz and in_proj_ba (grouped per key head,
// fix_query_key_value_ordering), a causal depthwise conv1d over [q, k, v] with SiLU, the decay
// g = exp(−exp(A_log) · softplus(a + dt_bias)) and β = sigmoid(b), q and k L2-normalised
// (eps 1e-6) with q scaled by Dk^−1/2, then fast::gated_delta (each key head serving Hv/Hk
// consecutive value heads, as transformers' repeat_interleave), the gated RMS norm
// (norm(y) · silu(z)) and out_proj. With a cache, the conv's last K−1 inputs and the
// recurrent state are carried (fast::causal_conv1d_step for single-token steps).
#include <cmath>

#include "layers.h"
#include "nuvec/nn/activations.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

array linear_attention(const ModelConfig& c, const WeightMap& w, int layer, const array& x, int B, int L,
                       Cache* cache) {
  const std::string path = layer_path(layer) + ".linear_attn";
  const int Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int Dk = c.linear_key_head_dim, Dv = c.linear_value_head_dim, r = Hv / Hk;
  const int key_dim = Hk * Dk, value_dim = Hv * Dv, conv_dim = 2 * key_dim + value_dim;

  // [B, L, Hk, 2 Dk + 2 r Dv]: per key head its q, k, then its r value heads' v and z.
  array qkvz = reshape(linear(c, w, path + ".in_proj_qkvz", x), {B, L, Hk, 2 * Dk + 2 * r * Dv});
  auto part = [&](const array& a, int from, int to) {
    return slice(a, {0, 0, 0, from}, {B, L, Hk, to});
  };
  array q = part(qkvz, 0, Dk), k = part(qkvz, Dk, 2 * Dk);
  array v = part(qkvz, 2 * Dk, 2 * Dk + r * Dv);
  array z = reshape(part(qkvz, 2 * Dk + r * Dv, 2 * Dk + 2 * r * Dv), {B, L, Hv, Dv});
  array ba = reshape(linear(c, w, path + ".in_proj_ba", x), {B, L, Hk, 2 * r});
  array b = reshape(part(ba, 0, r), {B, L, Hv});
  array a = reshape(part(ba, r, 2 * r), {B, L, Hv});

  array mixed = concatenate({reshape(q, {B, L, key_dim}), reshape(k, {B, L, key_dim}), reshape(v, {B, L, value_dim})}, -1);
  const array& conv_w = w.at(path + ".conv1d.weight"); // [C, 1, K], PyTorch's layout
  const int K = conv_w.shape(2);
  array weight = astype(reshape(conv_w, {conv_dim, K, 1}), mixed.dtype());
  if (cache && L == 1) {
    auto [y, state] = fast::causal_conv1d_step(mixed, weight, cache->layers[layer].conv_state);
    cache->layers[layer].conv_state = state;
    mixed = y;
  } else if (cache) {
    array window = concatenate({astype(cache->layers[layer].conv_state, mixed.dtype()), mixed}, 1);
    cache->layers[layer].conv_state = slice(window, {0, L, 0}, {B, L + K - 1, conv_dim});
    mixed = conv1d(window, weight, 1, 0, 1, conv_dim);
  } else {
    mixed = slice(conv1d(mixed, weight, 1, K - 1, 1, conv_dim), {0, 0, 0}, {B, L, conv_dim});
  }
  mixed = nn::silu(mixed);
  q = reshape(slice(mixed, {0, 0, 0}, {B, L, key_dim}), {B, L, Hk, Dk});
  k = reshape(slice(mixed, {0, 0, key_dim}, {B, L, 2 * key_dim}), {B, L, Hk, Dk});
  v = reshape(slice(mixed, {0, 0, 2 * key_dim}, {B, L, conv_dim}), {B, L, Hv, Dv});

  auto l2norm = [](const array& t) {
    return multiply(t, rsqrt(add(sum(square(t), -1, true), array(1e-6f, t.dtype()))));
  };
  q = multiply(l2norm(q), array(1.0f / std::sqrt(float(Dk)), q.dtype()));
  k = l2norm(k);
  array beta = sigmoid(b);
  array softplus = logaddexp(add(astype(a, float32), astype(w.at(path + ".dt_bias"), float32)), array(0.0f));
  array g = exp(multiply(negative(exp(astype(w.at(path + ".A_log"), float32))), softplus));

  array state = cache ? cache->layers[layer].recurrent_state : zeros({B, Hv, Dv, Dk}, float32);
  auto [y, final_state] = fast::gated_delta(q, k, v, g, beta, state);
  if (cache) {
    cache->layers[layer].recurrent_state = final_state;
  }
  // Qwen3NextRMSNormGated: weight · rms_norm(y) · silu(z).
  y = fast::rms_norm(y, w.at(path + ".norm.weight"), c.rms_norm_eps);
  y = astype(multiply(y, nn::silu(astype(z, float32))), x.dtype());
  return linear(c, w, path + ".out_proj", reshape(y, {B * L, value_dim}));
}

} // namespace nuvec::lm::detail
