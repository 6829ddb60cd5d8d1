// nuvec::nn: QuantizedLinear, QuantizedEmbedding and nn::quantize. Semantics from MLX's
// python/mlx/nn/layers/quantized.py: constructors draw MLX's initial weights and quantize
// them, freeze the layer; from_linear / from_embedding run the constructor, then put the
// quantized source weights in place; nn::quantize swaps layers through Module::replace_child.
#include "nuvec/nn/quantized.h"

#include <cmath>
#include <map>
#include <vector>

#include "core/errors.h"
#include "nuvec/nn/init.h"
#include "nuvec/ops.h"
#include "quantized/quant_spec.h"

namespace nuvec::nn {

namespace {

void check_positive(const char* op, const char* what, int v) {
  if (v <= 0) throw_invalid_argument(op, what, " must be positive; got ", v, ".");
}

// The format with the mode's defaults filled in, checked for a matrix whose rows hold
// `dims` values (the quantized axis).
QuantSpec layer_spec(
    const char* op,
    const std::string& mode,
    std::optional<int> group_size,
    std::optional<int> bits,
    int dims) {
  QuantSpec p = resolve_quant_spec(mode, group_size, bits, op);
  if (dims % p.group_size != 0) {
    throw_invalid_argument(
        op, "the quantized dimension must be divisible by the group size ", p.group_size, "; got ", dims, ".");
  }
  return p;
}

void check_input(const char* op, const array& x, int dims) {
  if (x.ndim() == 0 || x.shape(-1) != dims) {
    throw_invalid_argument(op, "input's last dimension must be ", dims, "; got shape ", x.shape(), ".");
  }
}

} // namespace

// ---------------------------------------------------------------------------------------
// QuantizedLinear

QuantizedLinear::QuantizedLinear(
    int input_dims,
    int output_dims,
    bool bias,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode) {
  const char* op = "nn.QuantizedLinear";
  check_positive(op, "input_dims", input_dims);
  check_positive(op, "output_dims", output_dims);
  QuantSpec p = layer_spec(op, mode, group_size, bits, input_dims);
  group_size_ = p.group_size;
  bits_ = p.bits;
  mode_ = mode;
  // MLX: scale = math.sqrt(1 / input_dims); weight = uniform(-scale, scale), quantized.
  const double scale = std::sqrt(1.0 / static_cast<double>(input_dims));
  auto q = nuvec::quantize(init::uniform({output_dims, input_dims}, -scale, scale), p.group_size, p.bits, mode);
  register_quantized(q);
  if (bias) register_parameter("bias", zeros({output_dims}));
  freeze();
}

std::shared_ptr<QuantizedLinear> QuantizedLinear::from_linear(
    const Linear& linear,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode) {
  auto params = linear.parameters();
  const array& w = params.at("weight");
  auto ql = std::make_shared<QuantizedLinear>(w.shape(1), w.shape(0), false, group_size, bits, mode);
  auto q = nuvec::quantize(w, ql->group_size_, ql->bits_, mode);
  ql->set_param("weight", q[0]);
  ql->set_param("scales", q[1]);
  if (q.size() > 2) ql->set_param("biases", q[2]);
  // Registered after the constructor's freeze, so trainable: MLX's from_linear assigns the
  // bias after freezing, and its freeze is by name.
  if (auto it = params.find("bias"); it != params.end()) ql->register_parameter("bias", it->second);
  return ql;
}

int QuantizedLinear::input_dims() const {
  return param("weight").shape(1) * 32 / bits_;
}

int QuantizedLinear::output_dims() const {
  return param("weight").shape(0);
}

array QuantizedLinear::forward(const array& x) {
  check_input("nn.QuantizedLinear", x, input_dims());
  auto y = quantized_matmul(x, param("weight"), param("scales"), packed_biases(), true, group_size_, bits_, mode_);
  if (has_param("bias")) y = y + param("bias");
  return y;
}

// ---------------------------------------------------------------------------------------
// QuantizedModule

void QuantizedModule::register_quantized(const std::vector<array>& q) {
  register_buffer("weight", q[0]);
  if (q.size() > 2) {
    register_parameter("scales", q[1]);
    register_parameter("biases", q[2]);
  } else {
    register_buffer("scales", q[1]); // uint8 codes: no gradient
  }
}

// ---------------------------------------------------------------------------------------
// QuantizedEmbedding

QuantizedEmbedding::QuantizedEmbedding(
    int num_embeddings,
    int dims,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode) {
  const char* op = "nn.QuantizedEmbedding";
  check_positive(op, "num_embeddings", num_embeddings);
  check_positive(op, "dims", dims);
  QuantSpec p = layer_spec(op, mode, group_size, bits, dims);
  group_size_ = p.group_size;
  bits_ = p.bits;
  mode_ = mode;
  // MLX: weight = normal(0, sqrt(1 / dims)), quantized.
  auto q = nuvec::quantize(init::normal({num_embeddings, dims}, 0.0, std::sqrt(1.0 / dims)), p.group_size, p.bits, mode);
  register_quantized(q);
  freeze();
}

std::shared_ptr<QuantizedEmbedding> QuantizedEmbedding::from_embedding(
    const Embedding& embedding,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode) {
  const array w = embedding.parameters().at("weight");
  auto qe = std::make_shared<QuantizedEmbedding>(w.shape(0), w.shape(1), group_size, bits, mode);
  auto q = nuvec::quantize(w, qe->group_size_, qe->bits_, mode);
  qe->set_param("weight", q[0]);
  qe->set_param("scales", q[1]);
  if (q.size() > 2) qe->set_param("biases", q[2]);
  return qe;
}

int QuantizedEmbedding::num_embeddings() const {
  return param("weight").shape(0);
}

int QuantizedEmbedding::dims() const {
  return param("weight").shape(1) * 32 / bits_;
}

array QuantizedEmbedding::forward(const array& x) {
  if (!issubdtype(x.dtype(), integer)) {
    throw_invalid_argument("nn.QuantizedEmbedding", "indices must have an integer dtype; got ", x.dtype(), ".");
  }
  // Gather the packed rows and their scales (and biases), then dequantize only those.
  auto idx = reshape(x, {-1});
  auto b = packed_biases();
  auto rows = dequantize(
      take(param("weight"), idx, 0), take(param("scales"), idx, 0),
      b ? std::optional<array>(take(*b, idx, 0)) : std::nullopt, group_size_, bits_, mode_);
  Shape out = x.shape();
  out.push_back(dims());
  return reshape(rows, out);
}

array QuantizedEmbedding::as_linear(const array& x) const {
  check_input("nn.QuantizedEmbedding", x, dims());
  return quantized_matmul(x, param("weight"), param("scales"), packed_biases(), true, group_size_, bits_, mode_);
}

// ---------------------------------------------------------------------------------------
// nn::quantize

namespace {

struct Swap {
  Module* parent;
  std::string name;
  std::shared_ptr<Module> old_child, new_child;
};

// Collects the conversions under `m` (depth first, children in registration order). A
// module reached twice (shared) is converted once: `done` maps it to its replacement.
void plan_swaps(
    Module& m,
    const std::string& prefix,
    const QuantSpec& p,
    const std::string& mode,
    const QuantizePredicate& predicate,
    std::map<Module*, std::shared_ptr<Module>>& done,
    std::vector<Swap>& swaps) {
  for (auto& [name, child] : m.children()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    auto* linear = dynamic_cast<Linear*>(child.get());
    auto* embedding = dynamic_cast<Embedding*>(child.get());
    if (!linear && !embedding) {
      plan_swaps(*child, path, p, mode, predicate, done, swaps);
      continue;
    }
    if (predicate && !predicate(path, *child)) continue;
    auto it = done.find(child.get());
    if (it == done.end()) {
      const int dims = child->parameters().at("weight").shape(-1);
      if (dims % p.group_size != 0) continue;
      std::shared_ptr<Module> q;
      if (linear) {
        q = QuantizedLinear::from_linear(*linear, p.group_size, p.bits, mode);
      } else {
        q = QuantizedEmbedding::from_embedding(*embedding, p.group_size, p.bits, mode);
      }
      q->train(child->training());
      it = done.emplace(child.get(), std::move(q)).first;
    }
    swaps.push_back({&m, name, child, it->second});
  }
}

} // namespace

void quantize(
    Module& model,
    std::optional<int> group_size,
    std::optional<int> bits,
    const std::string& mode,
    const QuantizePredicate& predicate) {
  QuantSpec p = resolve_quant_spec(mode, group_size, bits, "nn.quantize");
  std::map<Module*, std::shared_ptr<Module>> done;
  std::vector<Swap> swaps;
  plan_swaps(model, "", p, mode, predicate, done, swaps);
  // Swap only after planning (children() is not modified while it is walked); on a refusal
  // put back what was swapped so the model is left as it was.
  size_t applied = 0;
  try {
    for (; applied < swaps.size(); ++applied) {
      swaps[applied].parent->replace_child(swaps[applied].name, swaps[applied].new_child);
    }
  } catch (...) {
    while (applied > 0) {
      --applied;
      swaps[applied].parent->replace_child(swaps[applied].name, swaps[applied].old_child);
    }
    throw;
  }
}

} // namespace nuvec::nn
