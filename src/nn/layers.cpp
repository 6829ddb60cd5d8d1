// nuvec::nn: Linear, convolutions, Embedding, normalisation, Dropout, Sequential and the
// activation modules. Shapes, defaults and initialisation from MLX's python/mlx/nn/layers.
#include <cmath>

#include "core/errors.h"
#include "nuvec/nn/activations.h"
#include "nuvec/nn/init.h"
#include "nuvec/fast.h"
#include "nuvec/nn/layers.h"
#include "nuvec/ops.h"
#include "nuvec/utils.h"

namespace nuvec::nn {

namespace {

array scalar(double v, const array& x) {
  return array(v, issubdtype(x.dtype(), floating) ? x.dtype() : float32);
}

void check_positive(const char* op, const char* what, int v) {
  if (v <= 0) throw_invalid_argument(op, what, " must be positive; got ", v, ".");
}

void check_last_dim(const char* op, const array& x, int dims) {
  if (x.ndim() == 0 || x.shape(-1) != dims) {
    throw_invalid_argument(op, "input's last dimension must be ", dims, "; got shape ", x.shape(), ".");
  }
}

} // namespace

// ---------------------------------------------------------------------------------------
// Linear

Linear::Linear(int input_dims, int output_dims, bool bias) {
  check_positive("nn.Linear", "input_dims", input_dims);
  check_positive("nn.Linear", "output_dims", output_dims);
  // MLX: scale = math.sqrt(1.0 / input_dims); weight, then bias, from the default sequence.
  const double scale = std::sqrt(1.0 / static_cast<double>(input_dims));
  register_parameter("weight", init::uniform({output_dims, input_dims}, -scale, scale));
  if (bias) register_parameter("bias", init::uniform({output_dims}, -scale, scale));
}

array Linear::forward(const array& x) {
  const array& w = param("weight");
  check_last_dim("nn.Linear", x, w.shape(1));
  if (has_param("bias")) {
    if (x.ndim() == 2) return addmm(param("bias"), x, transpose(w));
    return matmul(x, transpose(w)) + param("bias");
  }
  return matmul(x, transpose(w));
}

// ---------------------------------------------------------------------------------------
// Convolutions

Conv1d::Conv1d(
    int in_channels,
    int out_channels,
    int kernel_size,
    int stride,
    int padding,
    int dilation,
    int groups,
    bool bias)
    : in_channels_(in_channels), stride_(stride), padding_(padding), dilation_(dilation), groups_(groups) {
  const char* op = "nn.Conv1d";
  check_positive(op, "in_channels", in_channels);
  check_positive(op, "out_channels", out_channels);
  check_positive(op, "kernel_size", kernel_size);
  check_positive(op, "stride", stride);
  check_positive(op, "dilation", dilation);
  check_positive(op, "groups", groups);
  if (padding < 0) throw_invalid_argument(op, "padding must be non-negative; got ", padding, ".");
  if (in_channels % groups != 0 || out_channels % groups != 0) {
    throw_invalid_argument(
        op, "in_channels and out_channels must be divisible by groups ", groups, "; got ", in_channels, " and ",
        out_channels, ".");
  }
  const double scale = std::sqrt(1.0 / (static_cast<double>(in_channels) * kernel_size));
  register_parameter("weight", init::uniform({out_channels, kernel_size, in_channels / groups}, -scale, scale));
  if (bias) register_parameter("bias", zeros({out_channels}));
}

array Conv1d::forward(const array& x) {
  if (x.ndim() != 3 || x.shape(-1) != in_channels_) {
    throw_invalid_argument(
        "nn.Conv1d", "input must be (N, L, ", in_channels_, "); got shape ", x.shape(), ".");
  }
  auto y = conv1d(x, param("weight"), stride_, padding_, dilation_, groups_);
  return has_param("bias") ? y + param("bias") : y;
}

Conv2d::Conv2d(
    int in_channels,
    int out_channels,
    std::pair<int, int> kernel_size,
    std::pair<int, int> stride,
    std::pair<int, int> padding,
    std::pair<int, int> dilation,
    int groups,
    bool bias)
    : in_channels_(in_channels), groups_(groups), stride_(stride), padding_(padding), dilation_(dilation) {
  const char* op = "nn.Conv2d";
  check_positive(op, "in_channels", in_channels);
  check_positive(op, "out_channels", out_channels);
  check_positive(op, "kernel_size", std::min(kernel_size.first, kernel_size.second));
  check_positive(op, "stride", std::min(stride.first, stride.second));
  check_positive(op, "dilation", std::min(dilation.first, dilation.second));
  check_positive(op, "groups", groups);
  if (padding.first < 0 || padding.second < 0) {
    throw_invalid_argument(op, "padding must be non-negative; got (", padding.first, ", ", padding.second, ").");
  }
  if (in_channels % groups != 0 || out_channels % groups != 0) {
    throw_invalid_argument(
        op, "in_channels and out_channels must be divisible by groups ", groups, "; got ", in_channels, " and ",
        out_channels, ".");
  }
  const double scale =
      std::sqrt(1.0 / (static_cast<double>(in_channels) * kernel_size.first * kernel_size.second));
  register_parameter(
      "weight",
      init::uniform({out_channels, kernel_size.first, kernel_size.second, in_channels / groups}, -scale, scale));
  if (bias) register_parameter("bias", zeros({out_channels}));
}

Conv2d::Conv2d(
    int in_channels,
    int out_channels,
    int kernel_size,
    int stride,
    int padding,
    int dilation,
    int groups,
    bool bias)
    : Conv2d(
          in_channels,
          out_channels,
          {kernel_size, kernel_size},
          {stride, stride},
          {padding, padding},
          {dilation, dilation},
          groups,
          bias) {}

array Conv2d::forward(const array& x) {
  if (x.ndim() != 4 || x.shape(-1) != in_channels_) {
    throw_invalid_argument(
        "nn.Conv2d", "input must be (N, H, W, ", in_channels_, "); got shape ", x.shape(), ".");
  }
  auto y = conv2d(x, param("weight"), stride_, padding_, dilation_, groups_);
  return has_param("bias") ? y + param("bias") : y;
}

// ---------------------------------------------------------------------------------------
// Embedding

Embedding::Embedding(int num_embeddings, int dims) {
  check_positive("nn.Embedding", "num_embeddings", num_embeddings);
  check_positive("nn.Embedding", "dims", dims);
  register_parameter("weight", init::normal({num_embeddings, dims}, 0.0, std::sqrt(1.0 / dims)));
}

array Embedding::forward(const array& x) {
  if (!issubdtype(x.dtype(), integer)) {
    throw_invalid_argument("nn.Embedding", "indices must have an integer dtype; got ", x.dtype(), ".");
  }
  const array& w = param("weight");
  const int dims = w.shape(1);
  auto idx = reshape(x, {-1, 1});
  auto rows = take_along_axis(w, broadcast_to(idx, {idx.shape(0), dims}), 0);
  Shape out = x.shape();
  out.push_back(dims);
  return reshape(rows, out);
}

array Embedding::as_linear(const array& x) const {
  const array& w = param("weight");
  check_last_dim("nn.Embedding", x, w.shape(1));
  return matmul(x, transpose(w));
}

// ---------------------------------------------------------------------------------------
// Normalisation

namespace {
// MLX's guard (test_norm_eps_validation): eps is added under a square root, so a negative one
// gives NaN for rows of small variance and 0 gives NaN for rows of none.
void check_eps(const char* op, float eps) {
  if (!(eps > 0.0f)) throw_invalid_argument(op, "eps must be positive; got ", eps, ".");
}
} // namespace

RMSNorm::RMSNorm(int dims, float eps) : dims_(dims), eps_(eps) {
  check_positive("nn.RMSNorm", "dims", dims);
  check_eps("nn.RMSNorm", eps);
  register_parameter("weight", ones({dims}));
}

array RMSNorm::forward(const array& x) {
  check_last_dim("nn.RMSNorm", x, dims_);
  return fast::rms_norm(x, param("weight"), eps_); // the fused RmsNorm kernel, as MLX's nn.RMSNorm
}

RoPE::RoPE(int dims, bool traditional, float base, float scale)
    : dims_(dims), traditional_(traditional), base_(base), scale_(scale) {
  check_positive("nn.RoPE", "dims", dims);
}

array RoPE::forward(const array& x, int offset) {
  return fast::rope(x, dims_, traditional_, base_, scale_, offset);
}

LayerNorm::LayerNorm(int dims, float eps, bool affine, bool bias) : dims_(dims), eps_(eps) {
  check_positive("nn.LayerNorm", "dims", dims);
  check_eps("nn.LayerNorm", eps);
  if (affine) {
    register_parameter("weight", ones({dims}));
    if (bias) register_parameter("bias", zeros({dims}));
  }
}

array LayerNorm::forward(const array& x) {
  check_last_dim("nn.LayerNorm", x, dims_);
  // The fused LayerNorm kernel, as MLX's nn.LayerNorm.
  std::optional<array> w, b;
  if (has_param("weight")) w = param("weight");
  if (has_param("bias")) b = param("bias");
  return fast::layer_norm(x, w, b, eps_);
}

BatchNorm::BatchNorm(int num_features, float eps, float momentum, bool affine, bool track_running_stats)
    : num_features_(num_features), eps_(eps), momentum_(momentum), track_(track_running_stats) {
  check_positive("nn.BatchNorm", "num_features", num_features);
  check_eps("nn.BatchNorm", eps);
  if (affine) {
    register_parameter("weight", ones({num_features}));
    register_parameter("bias", zeros({num_features}));
  }
  if (track_running_stats) {
    register_buffer("running_mean", zeros({num_features}));
    register_buffer("running_var", ones({num_features}));
  }
}

array BatchNorm::forward(const array& x) {
  if (x.ndim() < 2 || x.ndim() > 4 || x.shape(-1) != num_features_) {
    throw_invalid_argument(
        "nn.BatchNorm", "input must be (N, ..., ", num_features_, ") with 2 to 4 dimensions; got shape ",
        x.shape(), ".");
  }
  std::vector<int> axes;
  for (int i = 0; i + 1 < static_cast<int>(x.ndim()); ++i) axes.push_back(i);
  array mu = array(0.0f), v = array(1.0f);
  if (training() || !track_) {
    mu = mean(x, axes);
    v = var(x, axes);
    if (training() && track_) {
      // The running variance takes the unbiased batch variance (n / (n − 1), as MLX and
      // PyTorch), which a single value per feature does not have.
      const int64_t n = static_cast<int64_t>(x.size() / static_cast<size_t>(num_features_));
      if (n < 2) {
        throw_invalid_argument("nn.BatchNorm", "training needs more than one value per feature; got shape ", x.shape(),
                               ".");
      }
      const array& rm = param("running_mean");
      const array& rv = param("running_var");
      auto m = scalar(momentum_, rm), keep = scalar(1.0 - momentum_, rm);
      const array unbiased = v * scalar(double(n) / double(n - 1), v);
      set_param("running_mean", keep * rm + m * stop_gradient(astype(mu, rm.dtype())));
      set_param("running_var", keep * rv + m * stop_gradient(astype(unbiased, rv.dtype())));
    }
  } else {
    mu = param("running_mean");
    v = param("running_var");
  }
  auto y = (x - mu) * rsqrt(v + scalar(eps_, x));
  if (has_param("weight")) y = y * param("weight") + param("bias");
  return y;
}

// ---------------------------------------------------------------------------------------
// Dropout

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0 && p < 1)) throw_invalid_argument("nn.Dropout", "p must be in [0, 1); got ", p, ".");
}

array Dropout::forward(const array& x) {
  if (!training() || p_ == 0) return x;
  auto mask = init::bernoulli_mask(x.shape(), 1.0 - p_, x.dtype());
  return x * mask * scalar(1.0 / (1.0 - p_), x);
}

// ---------------------------------------------------------------------------------------
// Containers and activation modules

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& l : layers) append(std::move(l));
}

void Sequential::append(std::shared_ptr<Module> layer) {
  if (!layer) throw_invalid_argument("nn.Sequential", "layers must not be null; got null at ", layers_.size(), ".");
  register_module("layers." + std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

Module& Sequential::operator[](size_t i) const {
  if (i >= layers_.size()) {
    throw_out_of_range("nn.Sequential", "index must be below ", layers_.size(), "; got ", i, ".");
  }
  return *layers_[i];
}

array Sequential::forward(const array& x) {
  array y = x;
  for (auto& l : layers_) y = l->forward(y);
  return y;
}

Lambda::Lambda(std::function<array(const array&)> fn, std::string name)
    : fn_(std::move(fn)), name_(std::move(name)) {
  if (!fn_) throw_invalid_argument("nn.Lambda", "fn must be callable; got an empty function.");
}

std::shared_ptr<Module> ReLU() {
  return std::make_shared<Lambda>([](const array& x) { return relu(x); }, "ReLU");
}

std::shared_ptr<Module> GELU(const std::string& approx) {
  if (approx == "none") return std::make_shared<Lambda>([](const array& x) { return gelu(x); }, "GELU");
  if (approx == "precise" || approx == "tanh") {
    return std::make_shared<Lambda>([](const array& x) { return gelu_approx(x); }, "GELU");
  }
  if (approx == "fast") return std::make_shared<Lambda>([](const array& x) { return gelu_fast_approx(x); }, "GELU");
  throw_invalid_argument("nn.GELU", "approx must be \"none\", \"precise\", \"tanh\" or \"fast\"; got \"", approx, "\".");
}

std::shared_ptr<Module> SiLU() {
  return std::make_shared<Lambda>([](const array& x) { return silu(x); }, "SiLU");
}

std::shared_ptr<Module> Sigmoid() {
  return std::make_shared<Lambda>([](const array& x) { return nn::sigmoid(x); }, "Sigmoid");
}

std::shared_ptr<Module> Tanh() {
  return std::make_shared<Lambda>([](const array& x) { return nn::tanh(x); }, "Tanh");
}

std::shared_ptr<Module> Flatten() {
  return std::make_shared<Lambda>(
      [](const array& x) {
        if (x.ndim() < 1) throw_invalid_argument("nn.Flatten", "input must have a batch axis; got a scalar.");
        return reshape(x, {x.shape(0), -1});
      },
      "Flatten");
}

} // namespace nuvec::nn
