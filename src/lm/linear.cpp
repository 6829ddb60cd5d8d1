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

namespace {

std::string fused_name(const std::string& parent, const std::vector<std::string>& names) {
  std::string fused = parent + ".";
  for (size_t i = 0; i < names.size(); ++i) fused += (i ? "+" : "") + names[i];
  return fused;
}

// Where each module's output rows end in their concatenation, all but the last (split's
// indices): the running sum of the modules' weight rows.
Shape row_bounds(const WeightMap& weights, const std::string& parent, const std::vector<std::string>& names) {
  Shape bounds;
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    bounds.push_back((bounds.empty() ? 0 : bounds.back()) + tensor(weights, parent + "." + names[i] + ".weight").shape(0));
  }
  return bounds;
}

bool same_spec(const std::optional<QuantizationSpec>& a, const std::optional<QuantizationSpec>& b) {
  return a.has_value() == b.has_value() &&
      (!a || (a->group_size == b->group_size && a->bits == b->bits && a->mode == b->mode));
}

} // namespace

std::vector<array> linears(const ModelConfig& config, const WeightMap& weights, const std::string& parent,
                           const std::vector<std::string>& names, const array& x) {
  const std::string fused = fused_name(parent, names);
  std::vector<array> out;
  if (!weights.count(fused + ".weight")) {
    for (auto& n : names) out.push_back(linear(config, weights, parent + "." + n, x));
    return out;
  }
  return split(linear(config, weights, fused, x), row_bounds(weights, parent, names), -1);
}

void fuse_linears(const ModelConfig& config, const WeightMap& weights, WeightMap& run, const std::string& parent,
                  const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (auto& n : names) paths.push_back(parent + "." + n);
  const std::string fused = fused_name(parent, names);
  const bool quantized = is_quantized(weights, paths[0]);
  const auto spec = quantized ? config.quantization_for(paths[0]) : std::nullopt;
  if (quantized && !same_spec(spec, config.quantization_for(fused))) return;
  // The parts the fused module concatenates (each present in every module or in none).
  std::vector<std::string> parts = {".weight"};
  if (quantized) parts.push_back(".scales");
  for (const char* opt : {".biases", ".bias"}) {
    if (weights.count(paths[0] + opt)) parts.push_back(opt);
  }
  for (auto& p : paths) {
    if (!weights.count(p + ".weight") || is_quantized(weights, p) != quantized) return;
    if (quantized && !same_spec(spec, config.quantization_for(p))) return;
    for (const char* opt : {".biases", ".bias"}) {
      if (weights.count(p + opt) != weights.count(paths[0] + opt)) return;
    }
  }
  // Every part of every module checked before anything is added: a fused module missing a
  // part (its bias, its scales) would run as another module.
  for (auto& part : parts) {
    const array& first = weights.at(paths[0] + part);
    for (auto& p : paths) {
      const array& a = weights.at(p + part);
      if (a.dtype() != first.dtype() || a.ndim() != first.ndim() || a.ndim() < 1 ||
          (a.ndim() == 2 && a.shape(1) != first.shape(1)) || a.shape(0) != weights.at(p + ".weight").shape(0)) {
        return;
      }
    }
  }
  for (auto& part : parts) {
    std::vector<array> pieces;
    for (auto& p : paths) pieces.push_back(weights.at(p + part));
    run.insert_or_assign(fused + part, concatenate(pieces, 0));
  }
  if (!quantized) run.insert_or_assign(fused + ".weight@T", transpose(run.at(fused + ".weight")));
  // The separate modules read their rows of the concatenation (views: no second copy).
  const Shape bounds = row_bounds(weights, parent, names);
  for (auto& part : parts) {
    const auto rows = split(run.at(fused + part), bounds, 0);
    for (size_t i = 0; i < paths.size(); ++i) {
      run.insert_or_assign(paths[i] + part, rows[i]);
      if (part == ".weight" && !quantized) run.insert_or_assign(paths[i] + ".weight@T", transpose(rows[i]));
    }
  }
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
