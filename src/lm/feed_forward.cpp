// The feed-forward block of a decoder layer (src/lm/layers.h): SwiGLU
// (down(silu(gate(x)) · up(x)), transformers' LlamaMLP) or, in sparse layers, Qwen3-MoE's
// block: a softmax router in float32 over the experts, the top num_experts_per_tok (their
// weights renormalised to sum 1 when norm_topk_prob), and the chosen experts' SwiGLU summed
// with those weights (transformers' Qwen3MoeSparseMoeBlock). The experts run as gather_mm
// (gather_qmm when quantized) over the stacked [E, out, in] weights; with 64 or more
// (token, expert) pairs the pairs are sorted by expert first so that each expert's weights are
// read once (sorted_indices; mlx-lm's SwitchGLU does the same).
#include "layers.h"
#include "nuvec/nn/activations.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

namespace {

// x [..., 1, in] times expert `indices`' matrices of the stacked module `path` → [..., 1, out].
array expert_linear(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x,
                    const array& indices, bool sorted) {
  const array& w = weights.at(path + ".weight");
  if (is_quantized(weights, path)) {
    auto spec = config.quantization_for(path);
    if (!spec) {
      throw std::invalid_argument("[lm.Model] module '" + path + "' is quantized but the config's quantization does not cover it");
    }
    std::optional<array> biases;
    if (auto it = weights.find(path + ".biases"); it != weights.end()) {
      biases = it->second;
    }
    return gather_qmm(x, w, weights.at(path + ".scales"), biases, std::nullopt, indices, true, spec->group_size,
                      spec->bits, spec->mode, sorted);
  }
  return gather_mm(x, swapaxes(w, -1, -2), std::nullopt, indices, sorted);
}

array switch_glu(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x,
                 const array& indices) {
  // x [B, L, H], indices [B, L, k] → [B, L, k, H]
  const int B = x.shape(0), L = x.shape(1), H = x.shape(2), k = indices.shape(2);
  auto glu = [&](const array& xs, const array& idx, bool sorted) {
    array g = expert_linear(config, weights, path + ".gate_proj", xs, idx, sorted);
    array u = expert_linear(config, weights, path + ".up_proj", xs, idx, sorted);
    return expert_linear(config, weights, path + ".down_proj", multiply(nn::silu(g), u), idx, sorted);
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

array feed_forward(const ModelConfig& config, const WeightMap& weights, int layer, const array& x) {
  const std::string path = layer_path(layer) + ".mlp";
  if (!config.is_sparse_layer(layer)) {
    array g = linear(config, weights, path + ".gate_proj", x);
    array u = linear(config, weights, path + ".up_proj", x);
    return linear(config, weights, path + ".down_proj", multiply(nn::silu(g), u));
  }
  const int k = config.num_experts_per_tok;
  array router = linear(config, weights, path + ".gate", x);
  array probs = softmax(astype(router, float32), -1, /*precise=*/true);
  array indices = slice(argpartition(negative(probs), k - 1, -1), {0, 0, 0},
                        {probs.shape(0), probs.shape(1), k});
  array scores = take_along_axis(probs, indices, -1);
  if (config.norm_topk_prob) {
    scores = divide(scores, sum(scores, -1, true));
  }
  scores = astype(scores, x.dtype());
  array y = switch_glu(config, weights, path + ".switch_mlp", x, indices); // [B, L, k, H]
  array out = sum(multiply(y, expand_dims(scores, -1)), -2);
  if (config.shared_expert_intermediate_size > 0) {
    // Qwen3-Next: + sigmoid(shared_expert_gate(x)) · SwiGLU_shared(x).
    const std::string s = path + ".shared_expert";
    array g = linear(config, weights, s + ".gate_proj", x);
    array u = linear(config, weights, s + ".up_proj", x);
    array shared = linear(config, weights, s + ".down_proj", multiply(nn::silu(g), u));
    out = add(out, multiply(sigmoid(linear(config, weights, path + ".shared_expert_gate", x)), shared));
  }
  return out;
}

} // namespace nuvec::lm::detail
