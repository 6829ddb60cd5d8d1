// The tensors of a Hugging Face model directory: `model.safetensors`, or the shards named by
// `model.safetensors.index.json` (its "weight_map" from tensor name to shard file), as
// transformers' save_pretrained and mlx-lm write them.
#pragma once

#include <map>
#include <string>

#include "nuvec/array.h"

namespace nuvec::lm {

/// Tensor name → array, in the checkpoint's names ("model.layers.0.self_attn.q_proj.weight").
using WeightMap = std::map<std::string, array>;

/// Reads every tensor of the model directory `dir`. With an index file, every shard it names
/// is read and every tensor it lists must be in its shard; without one, `model.safetensors`
/// (or, failing that, every `*.safetensors` file of the directory except the ones whose name
/// starts with "reference" or "optimizer"). Arrays are evaluated, in the checkpoint's dtypes.
/// Throws std::runtime_error ("[lm.load_weights] ...") naming the file for a missing shard,
/// a truncated or corrupt file (from load_safetensors), a tensor the index lists but its
/// shard lacks, a tensor present in two shards, or a directory with no safetensors file.
WeightMap load_weights(const std::string& dir);

/// Writes `weights` to `dir` as transformers does: one `model.safetensors` when the total is
/// at most `max_shard_bytes`, else shards `model-0000i-of-0000n.safetensors` and a
/// `model.safetensors.index.json`; every file gets the metadata {"format": "pt"} (what
/// transformers checks when loading). Throws std::runtime_error when a file cannot be written.
void save_weights(const std::string& dir, const WeightMap& weights,
                  size_t max_shard_bytes = size_t(5) << 30);

} // namespace nuvec::lm
