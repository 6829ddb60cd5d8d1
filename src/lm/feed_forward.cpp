// The feed-forward block of a decoder layer (src/lm/layers.h): SwiGLU
// (down(silu(gate(x)) · up(x)), transformers' LlamaMLP) or, in sparse layers, Qwen3-MoE's
// block: a softmax router in float32 over the experts, the top num_experts_per_tok (their
// weights renormalised to sum 1 when norm_topk_prob), and the chosen experts' SwiGLU summed
// with those weights (transformers' Qwen3MoeSparseMoeBlock). The experts run as gather_mm
// (gather_qmm when quantized) over the stacked [E, out, in] weights; with 64 or more
// (token, expert) pairs the pairs are sorted by expert first so that each expert's weights are
// read once (sorted_indices; mlx-lm's SwitchGLU does the same). GPT-OSS (GptOssMLP): the
// router's top-k logits softmaxed, experts with biases and a clamped GLU.
#include "layers.h"
#include "nuvec/nn/activations.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

namespace {

// x [..., 1, in] times expert `indices`' matrices of the stacked module `path` → [..., 1, out].
array expert_linear(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x,
                    const array& indices, bool sorted) {
  const array& w = weights.at(path + ".weight");
  // GPT-OSS's experts have biases [E, out]: each row adds its expert's.
  auto with_bias = [&](const array& y) {
    auto it = weights.find(path + ".bias");
    return it == weights.end() ? y : add(y, expand_dims(take(it->second, indices, 0), -2));
  };
  if (is_quantized(weights, path)) {
    auto spec = config.quantization_for(path);
    if (!spec) {
      throw std::invalid_argument("[lm.Model] module '" + path + "' is quantized but the config's quantization does not cover it");
    }
    std::optional<array> biases;
    if (auto it = weights.find(path + ".biases"); it != weights.end()) {
      biases = it->second;
    }
    return with_bias(gather_qmm(x, w, weights.at(path + ".scales"), biases, std::nullopt, indices, true,
                                spec->group_size, spec->bits, spec->mode, sorted));
  }
  return with_bias(gather_mm(x, swapaxes(w, -1, -2), std::nullopt, indices, sorted));
}

array switch_glu(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x,
                 const array& indices) {
  // x [B, L, H], indices [B, L, k] → [B, L, k, H]
  const int B = x.shape(0), L = x.shape(1), H = x.shape(2), k = indices.shape(2);
  auto glu = [&](const array& xs, const array& idx, bool sorted) {
    array g = expert_linear(config, weights, path + ".gate_proj", xs, idx, sorted);
    array u = expert_linear(config, weights, path + ".up_proj", xs, idx, sorted);
    array h = array(0.0f);
    if (config.gpt_oss) {
      // GptOssExperts: gate clamped above, up on both sides, (up + 1) · gate · σ(1.702 gate).
      array limit(config.swiglu_limit, g.dtype());
      g = minimum(g, limit);
      u = clip(u, negative(limit), limit);
      h = multiply(add(u, array(1.0f, u.dtype())), multiply(g, sigmoid(multiply(g, array(1.702f, g.dtype())))));
    } else {
      h = multiply(nn::silu(g), u);
    }
    return expert_linear(config, weights, path + ".down_proj", h, idx, sorted);
  };
  if (indices.size() < 64) {
    array y = glu(reshape(x, {B, L, 1, 1, H}), indices, false); // [B, L, k, 1, H]
    return squeeze(y, 3);
  }
  array flat = flatten(indices);
  array order = argsort(flat);
  array inverse = argsort(order);
  array rows = floor_divide(order, array(k, order.dtype()));
  array xs = take(reshape(x, {B * L, 1, H}), rows, 0); // [B·L·k, 1, H], grouped by expert
  array y = glu(xs, take(flat, order), true);          // [B·L·k, 1, H]
  return reshape(take(y, inverse, 0), {B, L, k, H});
}

} // namespace

array feed_forward(const ModelConfig& config, const WeightMap& weights, int layer, const array& rows, int B, int L) {
  const std::string path = layer_path(layer) + ".mlp";
  if (!config.is_sparse_layer(layer)) {
    const auto gu = linears(config, weights, path, {"gate_proj", "up_proj"}, rows);
    return linear(config, weights, path + ".down_proj", multiply(nn::silu(gu[0]), gu[1]));
  }
  // The router and the experts see the tokens as [B, L, hidden].
  const int hidden = rows.shape(-1);
  const array x = reshape(rows, {B, L, hidden});
  const int k = config.num_experts_per_tok;
  auto top_k = [&](const array& values) {
    return slice(argpartition(negative(values), k - 1, -1), {0, 0, 0}, {values.shape(0), values.shape(1), k});
  };
  array indices = array(0), scores = array(0.0f);
  if (config.gpt_oss) {
    // GptOssTopKRouter: the top-k logits (with the router's bias), softmaxed among themselves.
    array logits = linear(config, weights, path + ".router", x);
    indices = top_k(logits);
    scores = softmax(take_along_axis(logits, indices, -1), -1, true);
  } else {
    array probs = softmax(astype(linear(config, weights, path + ".gate", x), float32), -1, /*precise=*/true);
    indices = top_k(probs);
    scores = take_along_axis(probs, indices, -1);
    if (config.norm_topk_prob) {
      scores = divide(scores, sum(scores, -1, true));
    }
  }
  scores = astype(scores, x.dtype());
  array y = switch_glu(config, weights, path + ".switch_mlp", x, indices); // [B, L, k, H]
  array out = sum(multiply(y, expand_dims(scores, -1)), -2);
  if (config.shared_expert_intermediate_size > 0) {
    // Qwen3-Next: + sigmoid(shared_expert_gate(x)) · SwiGLU_shared(x).
    const std::string s = path + ".shared_expert";
    const auto gu = linears(config, weights, s, {"gate_proj", "up_proj"}, x);
    array shared = linear(config, weights, s + ".down_proj", multiply(nn::silu(gu[0]), gu[1]));
    out = add(out, multiply(sigmoid(linear(config, weights, path + ".shared_expert_gate", x)), shared));
  }
  return reshape(out, {B * L, hidden});
}

} // namespace nuvec::lm::detail
