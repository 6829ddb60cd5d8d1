// nuvec: parsing and checking of the quantization formats (MLX 0.32's
// quantization_params_from_mode and the checks of quantize/dequantize).
#include "quantized/quant_spec.h"

#include "ops/ops_common.h"

namespace nuvec {

namespace {

QuantSpec mode_defaults(QuantMode m) {
  switch (m) {
    case QuantMode::Affine: return {m, 64, 4};
    case QuantMode::Mxfp4: return {m, 32, 4};
    case QuantMode::Mxfp8: return {m, 32, 8};
    case QuantMode::Nvfp4: return {m, 16, 4};
  }
  return {};
}

} // namespace

const char* quant_mode_name(QuantMode m) {
  switch (m) {
    case QuantMode::Affine: return "affine";
    case QuantMode::Mxfp4: return "mxfp4";
    case QuantMode::Mxfp8: return "mxfp8";
    case QuantMode::Nvfp4: return "nvfp4";
  }
  return "";
}

QuantMode parse_quant_mode(const std::string& mode, const char* op) {
  for (auto m : {QuantMode::Affine, QuantMode::Mxfp4, QuantMode::Mxfp8, QuantMode::Nvfp4}) {
    if (mode == quant_mode_name(m)) return m;
  }
  throw_invalid_argument(
      op, "mode must be one of 'affine', 'mxfp4', 'mxfp8' or 'nvfp4'; got '", mode, "'.");
}

QuantSpec resolve_quant_spec(
    const std::string& mode,
    std::optional<int> group_size,
    std::optional<int> bits,
    const char* op) {
  QuantMode m = parse_quant_mode(mode, op);
  QuantSpec d = mode_defaults(m);
  QuantSpec p{m, group_size.value_or(d.group_size), bits.value_or(d.bits)};
  if (m == QuantMode::Affine) {
    if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128) {
      throw_invalid_argument(
          op, "group_size must be 32, 64 or 128 for the 'affine' mode; got ", p.group_size, ".");
    }
    if (p.bits < 2 || p.bits > 8 || p.bits == 7) {
      throw_invalid_argument(
          op, "bits must be 2, 3, 4, 5, 6 or 8 for the 'affine' mode; got ", p.bits, ".");
    }
  } else {
    if (p.group_size != d.group_size) {
      throw_invalid_argument(
          op, "group_size must be ", d.group_size, " for the '", mode, "' mode; got ", p.group_size, ".");
    }
    if (p.bits != d.bits) {
      throw_invalid_argument(op, "bits must be ", d.bits, " for the '", mode, "' mode; got ", p.bits, ".");
    }
  }
  return p;
}

} // namespace nuvec
