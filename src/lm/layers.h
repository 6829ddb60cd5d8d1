// The pieces of a decoder layer (internal to src/lm): each takes the config, the weights and
// the module's path in the checkpoint's names, so that the same code serves loaded models and
// training (Model::forward with the optimiser's weights).
#pragma once

#include <functional>
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

/// Qwen3-Next's q_proj output [N, Hq · 2D] (per head, D query features then D gate features)
/// split into the queries [N, Hq, D] and the output gate [N, Hq · D]: the attention output
/// is multiplied by sigmoid(gate) before o_proj.
std::pair<array, array> split_query_gate(const ModelConfig& config, const array& q_proj);

/// What a layer adds to its attention's causal mask: GPT-OSS's sinks (the layer's "sinks"
/// tensor, [Hq]) and, on its sliding layers, the window of sliding_window keys; neither for
/// other architectures.
struct LayerAttentionOptions {
  std::optional<array> sinks;
  std::optional<int> window;
};
LayerAttentionOptions layer_attention_options(const ModelConfig& config, const WeightMap& weights, int layer);

/// Self-attention of layer `layer` on the rows x [B·L, hidden] (already normalised) of B
/// sequences of L tokens → [B·L, hidden], writing the layer's keys and values into
/// cache->layers[layer] at cache->offset when a cache is given.
array attention(const ModelConfig& config, const WeightMap& weights, int layer, const array& x, int B, int L,
                Cache* cache);

/// The two parts of a Gated DeltaNet layer that run along each sequence (the rest acts on
/// every token alone). conv: the rows mixed [N, conv_dim] (q, k, v before the short
/// convolution) and the conv weight [conv_dim, K, 1] in their dtype → the convolved rows
/// [N, conv_dim] (before SiLU), each sequence's conv continuing from its last K − 1 inputs.
/// recurrence: q, k [N, Hk, Dk], v [N, Hv, Dv], g, beta [N, Hv] → y [N, Hv, Dv] by the gated
/// delta rule from each sequence's state. The dense path (B sequences of L tokens, a Cache)
/// and the serving engine (a ragged batch, state pools) each give their own.
struct DeltaSequenceOps {
  std::function<array(const array& mixed, const array& weight)> conv;
  std::function<array(const array& q, const array& k, const array& v, const array& g, const array& beta)> recurrence;
};

/// Rows [from, from + B·L) of t [N, ...] as [B, L, ...]: B sequences of L tokens.
array sequence_rows(const array& t, int from, int B, int L);

/// A state pool [P, H, R, D] (a Gated DeltaNet layer's conv or recurrent pool, rows as blocks)
/// with row `to` replaced by row `from` (the serving engine's prefix-state snapshots). Row
/// `from` is read (and evaluated) first, so that the write may update the pool in place.
array copy_pool_row(const array& pool, int from, int to);

/// The state of n sequences in a Gated DeltaNet layer: the conv's last K − 1 inputs
/// [n, K − 1, conv_dim] (in the model's dtype) and the recurrent state [n, Hv, Dv, Dk]
/// (float32).
Shape conv_state_shape(const ModelConfig& config, int n);
Shape recurrent_state_shape(const ModelConfig& config, int n);

/// The Gated DeltaNet layer `layer` (Qwen3-Next's linear attention) on the rows x
/// [N, hidden] → [N, hidden], with the per-sequence parts from `ops`.
array gated_deltanet(const ModelConfig& config, const WeightMap& weights, int layer, const array& x,
                     const DeltaSequenceOps& ops);

/// gated_deltanet on the rows x [B·L, hidden] of B sequences of L tokens → [B·L, hidden],
/// carrying the conv and recurrent state in cache->layers[layer] when a cache is given
/// (fast::causal_conv1d_step for single-token steps); from zeros without one.
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
///
/// Models with Gated DeltaNet layers also need state_slots [T]: the row of each token's
/// sequence in the layers' state pools (paged_forward), distinct between sequences (padding
/// rows get rows no sequence holds, distinct: gated_delta_slots refuses a row named twice); and
/// state_chunks (host side): the tokens that are not one-token continuations of a sequence,
/// as ranges {first row, rows, fresh} in row order, every row before the first range being a
/// one-token continuation of its own sequence (decodes first). A fresh range starts its
/// sequence (zero conv and recurrent state, whatever its pool row holds); the others continue
/// from their pool rows.
struct PagedBatch {
  struct StateChunk {
    int row = 0, len = 0;
    bool fresh = false;
  };
  array tokens = array(0);
  array positions = array(0);
  array slots = array(0);
  array tables = array(0);
  array lengths = array(0);
  array sample_rows = array(0);
  std::vector<std::pair<int, int>> fresh;
  array state_slots = array(0);
  std::vector<StateChunk> state_chunks;
};

/// Layer `layer`'s pair of zeroed pools for the paged forward pass, dense buffers: an
/// attention layer's key and value pools [blocks, Hkv, block_size, head_dim] in `dtype`; a
/// Gated DeltaNet layer's state pools of state_rows rows: the conv's last K − 1 inputs
/// [state_rows, 1, K − 1, conv_dim] in `dtype` and the recurrent state
/// [state_rows, Hv, Dv, Dk] in float32. fast::paged_write stores into them as paged pools
/// whose blocks are the rows (a state's positions being its K − 1 inputs, its Dv rows), and
/// gated_delta_slots updates the recurrent rows it reads: both in place when nothing else
/// refers to the pool.
std::pair<array, array> make_layer_pools(const ModelConfig& config, int layer, int blocks, int block_size,
                                         int state_rows, Dtype dtype);

/// Bytes of layer `layer`'s pools per KV block (attention layers) and per state row (Gated
/// DeltaNet layers); the other is 0.
std::pair<double, double> layer_pool_bytes(const ModelConfig& config, int layer, int block_size, Dtype dtype);

/// The Gated DeltaNet layer `layer` over the ragged batch's rows x [T, hidden] → [T, hidden]
/// (gated_deltanet): the one-token continuations together (fast::causal_conv1d_step and
/// fast::gated_delta_slots over their pool rows), each other range alone (conv1d over its
/// window; fast::gated_delta from zeros when fresh, else gated_delta_slots), their new states
/// written into conv_pool and state_pool (make_layer_pools' layouts), which are replaced by the
/// updated ones.
array paged_linear_attention(const ModelConfig& config, const WeightMap& weights, int layer, const array& x,
                             const PagedBatch& batch, array& conv_pool, array& state_pool);

/// The logits [S, vocab] of batch.sample_rows after the forward pass over batch's tokens.
/// k_pools[i], v_pools[i] are layer i's pools (make_layer_pools), replaced by the updated
/// ones: an attention layer's keys and values, written by fast::paged_write and read by
/// fast::paged_attention; a Gated DeltaNet layer's conv and recurrent states
/// (paged_linear_attention). Lazy.
array paged_forward(const ModelConfig& config, const WeightMap& weights, const PagedBatch& batch,
                    std::vector<array>& k_pools, std::vector<array>& v_pools);

} // namespace nuvec::lm::detail
