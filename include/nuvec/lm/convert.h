// nuvec-lm convert: a model directory rewritten with other dtypes and/or quantized weights,
// in mlx-lm's layout (mlx_lm/convert.py), which both nuvec and MLX load.
#pragma once

#include <optional>
#include <string>

#include "nuvec/dtype.h"
#include "nuvec/lm/config.h"

namespace nuvec::lm {

/// Reads the model at `src_dir` and writes it to `dst_dir`: floating weights cast to `dtype`
/// when given; with `quantize`, every linear and embedding module whose input size is a
/// multiple of the group size (mlx-lm's default predicate) replaced by quantize()'s
/// {weight (uint32), scales, biases} and config.json given mlx-lm's "quantization" and
/// "quantization_config" blocks (other config fields kept as they were). Experts are written
/// stacked ("mlp.switch_mlp.*", mlx-lm's names). The tokenizer and generation files are
/// copied. Throws as Model::load does, std::invalid_argument for a spec quantize() rejects,
/// std::runtime_error when dst_dir cannot be written or is src_dir.
void convert(const std::string& src_dir, const std::string& dst_dir, std::optional<QuantizationSpec> quantize,
             std::optional<Dtype> dtype = std::nullopt);

} // namespace nuvec::lm
