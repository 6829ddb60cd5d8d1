// nuvec: the quantization formats (MLX 0.32's QuantizationMode and its per-mode parameters),
// shared by the ops (src/ops/quantized.cpp, src/quantized/), the primitives and the kernels.
// Host and device code both include it (an enum and two ints: nothing host-only).
#pragma once

#include <optional>
#include <string>

namespace nuvec {

/// How a group of values is stored: "affine" (integer codes q with scale * q + bias),
/// "mxfp4" (E2M1 codes, E8M0 scales), "mxfp8" (E4M3 codes, E8M0 scales), "nvfp4" (E2M1
/// codes, E4M3 scales). Source: MLX's QuantizationMode.
enum class QuantMode : int { Affine = 0, Mxfp4 = 1, Mxfp8 = 2, Nvfp4 = 3 };

/// A quantization format: the mode, values per scale (group_size) and bits per value.
struct QuantSpec {
  QuantMode mode = QuantMode::Affine;
  int group_size = 64;
  int bits = 4;
  bool operator==(const QuantSpec&) const = default;
  /// Whether each group has a bias (affine only).
  bool has_biases() const { return mode == QuantMode::Affine; }
};

/// "affine", "mxfp4", "mxfp8" or "nvfp4".
const char* quant_mode_name(QuantMode mode);

/// The mode named `mode`. Throws std::invalid_argument naming `op` for any other string.
QuantMode parse_quant_mode(const std::string& mode, const char* op);

/// The format of `mode` with MLX's defaults (affine 64/4, mxfp4 32/4, mxfp8 32/8, nvfp4
/// 16/4) for the parameters not given. Throws std::invalid_argument naming `op` for a
/// group size or bit width the mode does not take (affine: groups 32, 64, 128 and bits 2,
/// 3, 4, 5, 6, 8; the fp modes only their defaults).
QuantSpec resolve_quant_spec(
    const std::string& mode,
    std::optional<int> group_size,
    std::optional<int> bits,
    const char* op);

} // namespace nuvec
