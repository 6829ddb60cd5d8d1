// The pieces of a decoder layer (internal to src/lm): each takes the config, the weights and
// the module's path in the checkpoint's names, so that the same code serves loaded models and
// training (Model::forward with the optimiser's weights).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nuvec/fast.h"
#include "nuvec/lm/model.h"

namespace nuvec::lm::detail {

/// Whether the module `path` of `weights` is quantized (mlx-lm layout: a "scales" tensor
/// beside the uint32 "weight").
bool is_quantized(const WeightMap& weights, const std::string& path);

/// y = x Wᵀ (+ b) for the Linear module `path`: matmul (with the "<path>.weight@T" view when
/// the map has one, Model's), or quantized_matmul with the module's group size, bits and mode
/// from the config when it is quantized.
array linear(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x);

/// The Linear modules parent.<names[i]> applied to the same x, as linear() each: through one
/// product when `weights` holds their concatenation as the module "parent.<n0>+<n1>+..."
/// (fuse_linears), the outputs then being column slices of it; else one product each.
std::vector<array> linears(const ModelConfig& config, const WeightMap& weights, const std::string& parent,
                           const std::vector<std::string>& names, const array& x);

/// Adds to `run` (a copy of `weights`) the concatenation of the modules parent.<names[i]>
/// along their output rows — weight (and weight@T when dense), scales, biases, bias — as the
/// module linears() looks for, and points those modules' tensors in `run` at their rows of
/// it (views, so the weights are held once). Leaves `run` as it is unless every module is
/// present, all dense or all quantized alike (the config's spec for each and for the fused
/// name), with the same dtypes, inputs and optional parts. Decode runs one product where it
/// ran several: a Qwen3-0.6B step had 7 per layer.
void fuse_linears(const ModelConfig& config, const WeightMap& weights, WeightMap& run, const std::string& parent,
                  const std::vector<std::string>& names);

/// Rows `tokens` of the embedding `path` ([..., hidden]); quantized tables are dequantized
/// after the rows are taken.
array embedding(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& tokens);

/// The rotation of the config's rope: default or linear (rope's base and scale), llama3 or
/// yarn (frequencies as transformers' modeling_rope_utils computes them, given to rope as
/// periods).
fast::Rotation rotation(const ModelConfig& config);

/// The factor yarn multiplies cos and sin by (transformers' attention_scaling; 1 for other
/// rope types): scores grow by its square.
float rope_attention_factor(const ModelConfig& config);

/// Self-attention of layer `layer` on the rows x [B·L, hidden] (already normalised) of B
/// sequences of L tokens → [B·L, hidden], writing the layer's keys and values into
/// cache->layers[layer] at cache->offset when a cache is given.
array attention(const ModelConfig& config, const WeightMap& weights, int layer, const array& x, int B, int L,
                Cache* cache);

/// The Gated DeltaNet layer `layer` (Qwen3-Next's linear attention) on the rows x
/// [B·L, hidden] → [B·L, hidden], carrying the conv and recurrent state in
/// cache->layers[layer] when a cache is given.
array linear_attention(const ModelConfig& config, const WeightMap& weights, int layer, const array& x, int B, int L,
                       Cache* cache);

/// The weight a norm scales by: the tensor `name`, or 1 + it for configs with norm_plus_one.
array norm_weight(const ModelConfig& config, const WeightMap& weights, const std::string& name);

/// The feed-forward block of layer `layer` on the rows x [B·L, hidden] → [B·L, hidden]:
/// SwiGLU, or the sparse MoE block for the config's sparse layers.
array feed_forward(const ModelConfig& config, const WeightMap& weights, int layer, const array& x, int B, int L);

/// "model.layers.<i>".
std::string layer_path(int i);

/// A ragged batch of T tokens from several sequences for the paged forward pass (engine.h):
/// all int32. Token t is at position positions[t] of its sequence, its key and value go to
/// pool slot slots[t] (block · block_size + offset), and it attends to the first lengths[t]
/// (= positions[t] + 1) positions of its sequence through tables[t] ([T, max_blocks], its
/// sequence's block table, padded). sample_rows [S]: the tokens whose logits are wanted.
/// fresh (host side): the row ranges {first row, rows} of sequences whose first tokens these
/// are (nothing cached before them), which attend among themselves through
/// scaled_dot_product_attention (its tiled causal kernel) instead of row by row through the
/// pool (paged_attention re-reads the keys for every row: quadratic traffic in a prefill).
struct PagedBatch {
  array tokens = array(0);
  array positions = array(0);
  array slots = array(0);
  array tables = array(0);
  array lengths = array(0);
  array sample_rows = array(0);
  std::vector<std::pair<int, int>> fresh;
};

/// Whether the paged forward pass covers config's architecture; else why not.
std::optional<std::string> paged_unsupported(const ModelConfig& config);

/// The logits [S, vocab] of batch.sample_rows after the forward pass over batch's tokens,
/// whose keys and values are written into k_pools[i], v_pools[i] (layer i's pools
/// [blocks, Hkv, block_size, head_dim], replaced by the updated ones) by fast::paged_write and
/// read by fast::paged_attention. Lazy.
array paged_forward(const ModelConfig& config, const WeightMap& weights, const PagedBatch& batch,
                    std::vector<array>& k_pools, std::vector<array>& v_pools);

} // namespace nuvec::lm::detail
