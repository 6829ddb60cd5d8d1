// The linear-attention layer of Qwen3-Next (Gated DeltaNet, Yang et al. 2024), as
// transformers' Qwen3NextGatedDeltaNet: in_proj_qkvz and in_proj_ba (grouped per key head,
// fix_query_key_value_ordering), a causal depthwise conv1d over [q, k, v] with SiLU, the decay
// g = exp(−exp(A_log) · softplus(a + dt_bias)) and β = sigmoid(b), q and k L2-normalised
// (eps 1e-6) with q scaled by Dk^−1/2, then the gated delta rule (the caller's recurrence:
// fast::gated_delta or gated_delta_slots; each key head serving Hv/Hk consecutive value
// heads, as transformers' repeat_interleave), the gated RMS norm
// (norm(y) · silu(z)) and out_proj.
//
// Everything but the conv and the recurrence acts on each token alone, so the layer is
// written over rows [N, hidden] and those two come from the caller (DeltaSequenceOps): here
// the dense path's, over B sequences of L tokens, carrying the conv's last K−1 inputs and the
// recurrent state in a Cache (fast::causal_conv1d_step for single-token steps); the serving
// engine's over a ragged batch are in paged_gated_deltanet.cpp.
#include <cmath>

#include "layers.h"
#include "nuvec/nn/activations.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

array sequence_rows(const array& t, int from, int B, int L) {
  Shape start(t.ndim(), 0), stop = t.shape(), shape = t.shape();
  start[0] = from;
  stop[0] = from + B * L;
  shape[0] = L;
  shape.insert(shape.begin(), B);
  return reshape(slice(t, start, stop), shape);
}

Shape conv_state_shape(const ModelConfig& c, int n) {
  return {n, c.linear_conv_kernel_dim - 1, c.linear_conv_dim()};
}

Shape recurrent_state_shape(const ModelConfig& c, int n) {
  return {n, c.linear_num_value_heads, c.linear_value_head_dim, c.linear_key_head_dim};
}

array gated_deltanet(const ModelConfig& c, const WeightMap& w, int layer, const array& x, const DeltaSequenceOps& ops) {
  const std::string path = layer_path(layer) + ".linear_attn";
  const int N = x.shape(0);
  const int Hk = c.linear_num_key_heads, Hv = c.linear_num_value_heads;
  const int Dk = c.linear_key_head_dim, Dv = c.linear_value_head_dim, r = Hv / Hk;
  const int key_dim = Hk * Dk, conv_dim = c.linear_conv_dim();

  // [N, Hk, 2 Dk + 2 r Dv]: per key head its q, k, then its r value heads' v and z.
  array qkvz = reshape(linear(c, w, path + ".in_proj_qkvz", x), {N, Hk, 2 * Dk + 2 * r * Dv});
  auto part = [&](const array& a, int from, int to) { return slice(a, {0, 0, from}, {N, Hk, to}); };
  array z = reshape(part(qkvz, 2 * Dk + r * Dv, 2 * Dk + 2 * r * Dv), {N, Hv, Dv});
  array ba = reshape(linear(c, w, path + ".in_proj_ba", x), {N, Hk, 2 * r});
  array b = reshape(part(ba, 0, r), {N, Hv});
  array a = reshape(part(ba, r, 2 * r), {N, Hv});

  array mixed = concatenate({reshape(part(qkvz, 0, Dk), {N, key_dim}), reshape(part(qkvz, Dk, 2 * Dk), {N, key_dim}),
                             reshape(part(qkvz, 2 * Dk, 2 * Dk + r * Dv), {N, Hv * Dv})},
                            -1);
  const array& conv_w = w.at(path + ".conv1d.weight"); // [C, 1, K], PyTorch's layout
  array weight = astype(reshape(conv_w, {conv_dim, conv_w.shape(2), 1}), mixed.dtype());
  mixed = nn::silu(ops.conv(mixed, weight));
  array q = reshape(slice(mixed, {0, 0}, {N, key_dim}), {N, Hk, Dk});
  array k = reshape(slice(mixed, {0, key_dim}, {N, 2 * key_dim}), {N, Hk, Dk});
  array v = reshape(slice(mixed, {0, 2 * key_dim}, {N, conv_dim}), {N, Hv, Dv});

  auto l2norm = [](const array& t) {
    return multiply(t, rsqrt(add(sum(square(t), -1, true), array(1e-6f, t.dtype()))));
  };
  q = multiply(l2norm(q), array(1.0f / std::sqrt(float(Dk)), q.dtype()));
  k = l2norm(k);
  array beta = sigmoid(b);
  array softplus = logaddexp(add(astype(a, float32), astype(w.at(path + ".dt_bias"), float32)), array(0.0f));
  array g = exp(multiply(negative(exp(astype(w.at(path + ".A_log"), float32))), softplus));

  array y = ops.recurrence(q, k, v, g, beta);
  // Qwen3NextRMSNormGated: weight · rms_norm(y) · silu(z).
  y = fast::rms_norm(y, w.at(path + ".norm.weight"), c.rms_norm_eps);
  y = astype(multiply(y, nn::silu(astype(z, float32))), x.dtype());
  return linear(c, w, path + ".out_proj", reshape(y, {N, Hv * Dv}));
}

array linear_attention(const ModelConfig& c, const WeightMap& w, int layer, const array& x, int B, int L,
                       Cache* cache) {
  const int Hv = c.linear_num_value_heads, Dv = c.linear_value_head_dim;
  DeltaSequenceOps ops;
  ops.conv = [&](const array& rows, const array& weight) {
    const int C = rows.shape(1), K = weight.shape(1);
    array mixed = reshape(rows, {B, L, C});
    if (cache && L == 1) {
      auto [y, state] = fast::causal_conv1d_step(mixed, weight, cache->layers[layer].conv_state);
      cache->layers[layer].conv_state = state;
      mixed = y;
    } else if (cache) {
      array window = concatenate({astype(cache->layers[layer].conv_state, mixed.dtype()), mixed}, 1);
      cache->layers[layer].conv_state = slice(window, {0, L, 0}, {B, L + K - 1, C});
      mixed = conv1d(window, weight, 1, 0, 1, C);
    } else {
      mixed = slice(conv1d(mixed, weight, 1, K - 1, 1, C), {0, 0, 0}, {B, L, C});
    }
    return reshape(mixed, {B * L, C});
  };
  ops.recurrence = [&](const array& q, const array& k, const array& v, const array& g, const array& beta) {
    auto seqs = [&](const array& t) { return sequence_rows(t, 0, B, L); };
    array state = cache ? cache->layers[layer].recurrent_state : zeros(recurrent_state_shape(c, B), float32);
    auto [y, final_state] = fast::gated_delta(seqs(q), seqs(k), seqs(v), seqs(g), seqs(beta), state);
    if (cache) {
      cache->layers[layer].recurrent_state = final_state;
    }
    return reshape(y, {B * L, Hv, Dv});
  };
  return gated_deltanet(c, w, layer, x, ops);
}

} // namespace nuvec::lm::detail
