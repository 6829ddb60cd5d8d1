// Linear and embedding modules of checkpoints, plain or mlx-lm quantized (src/lm/layers.h).
#include <stdexcept>

#include "layers.h"
#include "nuvec/ops.h"

namespace nuvec::lm::detail {

namespace {

const array& tensor(const WeightMap& weights, const std::string& name) {
  auto it = weights.find(name);
  if (it == weights.end()) {
    throw std::invalid_argument("[lm.Model] missing tensor '" + name + "'");
  }
  return it->second;
}

std::optional<array> optional_tensor(const WeightMap& weights, const std::string& name) {
  auto it = weights.find(name);
  return it == weights.end() ? std::nullopt : std::optional<array>(it->second);
}

QuantizationSpec spec_of(const ModelConfig& config, const std::string& path) {
  auto spec = config.quantization_for(path);
  if (!spec) {
    throw std::invalid_argument("[lm.Model] module '" + path +
                                "' has quantized tensors but the config's quantization does not cover it");
  }
  return *spec;
}

} // namespace

bool is_quantized(const WeightMap& weights, const std::string& path) {
  return weights.count(path + ".scales") > 0;
}

array linear(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& x) {
  const array& w = tensor(weights, path + ".weight");
  array y = array(0.0f);
  if (is_quantized(weights, path)) {
    auto spec = spec_of(config, path);
    y = quantized_matmul(x, w, tensor(weights, path + ".scales"), optional_tensor(weights, path + ".biases"),
                         true, spec.group_size, spec.bits, spec.mode);
  } else if (auto t = weights.find(path + ".weight@T"); t != weights.end()) {
    y = matmul(x, t->second);
  } else {
    y = matmul(x, transpose(w));
  }
  if (auto b = optional_tensor(weights, path + ".bias")) {
    y = add(y, *b);
  }
  return y;
}

array embedding(const ModelConfig& config, const WeightMap& weights, const std::string& path, const array& tokens) {
  const array& w = tensor(weights, path + ".weight");
  if (!is_quantized(weights, path)) {
    return take(w, tokens, 0);
  }
  auto spec = spec_of(config, path);
  auto biases = optional_tensor(weights, path + ".biases");
  std::optional<array> rows_biases;
  if (biases) {
    rows_biases = take(*biases, tokens, 0);
  }
  return dequantize(take(w, tokens, 0), take(tensor(weights, path + ".scales"), tokens, 0), rows_biases,
                    spec.group_size, spec.bits, spec.mode);
}

} // namespace nuvec::lm::detail
