// nuvec::nn: the layers (MLX's nn.Linear, Conv1d/2d, Embedding, norms, Dropout, pooling,
// Sequential and activation modules). Shapes are channels-last as in MLX. Default
// initialisation follows MLX's layers; the values come from the nn generator (nn/init.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nuvec/nn/module.h"

namespace nuvec::nn {

/// y = x @ weight.T + bias. weight (output_dims, input_dims), bias (output_dims), both
/// float32 uniform(-1/sqrt(input_dims), 1/sqrt(input_dims)). x: (..., input_dims) of a
/// floating dtype -> (..., output_dims). Throws std::invalid_argument ("[nn.Linear] ...") for
/// non-positive dims or a last input dimension other than input_dims.
/// Source: MLX nn.Linear.
class Linear : public Module {
 public:
  Linear(int input_dims, int output_dims, bool bias = true);
  std::string name() const override { return "Linear"; }
  array forward(const array& x) override;
};

/// 1-d convolution over (N, L, C_in) -> (N, L_out, C_out) through conv1d. weight
/// (C_out, kernel_size, C_in / groups) uniform(-s, s) with s = 1/sqrt(C_in * kernel_size),
/// bias (C_out) zeros (MLX's initialisation). Throws std::invalid_argument ("[nn.Conv1d] ...")
/// for non-positive sizes, channels not divisible by groups, or input that is not 3-d with
/// C_in channels. Source: MLX nn.Conv1d.
class Conv1d : public Module {
 public:
  Conv1d(
      int in_channels,
      int out_channels,
      int kernel_size,
      int stride = 1,
      int padding = 0,
      int dilation = 1,
      int groups = 1,
      bool bias = true);
  std::string name() const override { return "Conv1d"; }
  array forward(const array& x) override;

 private:
  int in_channels_, stride_, padding_, dilation_, groups_;
};

/// 2-d convolution over NHWC (N, H, W, C_in) -> (N, H_out, W_out, C_out) through conv2d.
/// weight (C_out, KH, KW, C_in / groups) uniform(-s, s) with s = 1/sqrt(C_in * KH * KW),
/// bias (C_out) zeros. Throws std::invalid_argument ("[nn.Conv2d] ...") as Conv1d, for input
/// that is not 4-d with C_in channels. Source: MLX nn.Conv2d.
class Conv2d : public Module {
 public:
  Conv2d(
      int in_channels,
      int out_channels,
      std::pair<int, int> kernel_size,
      std::pair<int, int> stride = {1, 1},
      std::pair<int, int> padding = {0, 0},
      std::pair<int, int> dilation = {1, 1},
      int groups = 1,
      bool bias = true);
  /// Square kernel, stride, padding and dilation.
  Conv2d(
      int in_channels,
      int out_channels,
      int kernel_size,
      int stride = 1,
      int padding = 0,
      int dilation = 1,
      int groups = 1,
      bool bias = true);
  std::string name() const override { return "Conv2d"; }
  array forward(const array& x) override;

 private:
  int in_channels_, groups_;
  std::pair<int, int> stride_, padding_, dilation_;
};

/// A lookup table: integer x of any shape -> x.shape + (dims,), row x of weight.
/// weight (num_embeddings, dims) float32 normal(0, 1/sqrt(dims)) (MLX). Indices follow
/// take's rule: negative ones count from the end, and one outside [-num_embeddings,
/// num_embeddings) raises std::out_of_range ("[take] ...") when evaluated (a lazy array's
/// values are unknown when the graph is built). Throws std::invalid_argument
/// ("[nn.Embedding] ...") for non-integer x or non-positive sizes. Source: MLX nn.Embedding.
class Embedding : public Module {
 public:
  Embedding(int num_embeddings, int dims);
  std::string name() const override { return "Embedding"; }
  array forward(const array& x) override;
  /// x @ weight.T: the table used as an output projection (weight tying), (..., dims) ->
  /// (..., num_embeddings).
  array as_linear(const array& x) const;
};

/// y = x * rsqrt(mean(x^2, -1) + eps) * weight; weight (dims) ones. x: (..., dims).
/// Throws std::invalid_argument ("[nn.RMSNorm] ...") for eps <= 0 (MLX) or when the last
/// axis is not dims.
/// Runs fast::rms_norm (the fused RmsNorm kernel). Source: MLX nn.RMSNorm (eps 1e-5).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int dims, float eps = 1e-5f);
  std::string name() const override { return "RMSNorm"; }
  array forward(const array& x) override;

 private:
  int dims_;
  float eps_;
};

/// Rotary position embeddings as a layer: forward(x, offset) = fast::rope(x, dims,
/// traditional, base, scale, offset) over x [B, ..., T, D] (no parameters). Throws
/// std::invalid_argument as fast::rope does. Source: MLX nn.RoPE (traditional false, base
/// 10000, scale 1).
class RoPE : public Module {
 public:
  explicit RoPE(int dims, bool traditional = false, float base = 10000.0f, float scale = 1.0f);
  std::string name() const override { return "RoPE"; }
  array forward(const array& x) override { return forward(x, 0); }
  array forward(const array& x, int offset);

 private:
  int dims_;
  bool traditional_;
  float base_;
  float scale_;
};

/// y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance);
/// weight ones, bias zeros (when affine; bias only when `bias`). x: (..., dims).
/// Throws std::invalid_argument ("[nn.LayerNorm] ...") for eps <= 0 (MLX) or when the last
/// axis is not dims.
/// Source: MLX nn.LayerNorm (eps 1e-5, affine true, bias true).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int dims, float eps = 1e-5f, bool affine = true, bool bias = true);
  std::string name() const override { return "LayerNorm"; }
  array forward(const array& x) override;

 private:
  int dims_;
  float eps_;
};

/// Batch normalisation over every axis but the last (features): x (N, C), (N, L, C) or
/// (N, H, W, C). Training: normalises by the batch mean and biased variance and, when
/// tracking, updates running_mean = (1 - momentum) running_mean + momentum mean (and
/// running_var likewise, from the unbiased batch variance, n / (n - 1) times the biased one,
/// as MLX and PyTorch; gradients do not flow into the running stats). Eval: normalises by the
/// running stats. weight ones, bias zeros (affine); running_mean zeros, running_var ones as
/// buffers (saved, never trained). Throws std::invalid_argument ("[nn.BatchNorm] ...") for
/// eps <= 0, a last axis other than num_features, fewer than 2 or more than 4 dimensions,
/// or, when training with running stats, one value per feature.
/// Source: MLX nn.BatchNorm (eps 1e-5, momentum 0.1).
class BatchNorm : public Module {
 public:
  explicit BatchNorm(
      int num_features,
      float eps = 1e-5f,
      float momentum = 0.1f,
      bool affine = true,
      bool track_running_stats = true);
  std::string name() const override { return "BatchNorm"; }
  array forward(const array& x) override;

 private:
  int num_features_;
  float eps_, momentum_;
  bool track_;
};

/// Training: x * mask / (1 - p) with mask ~ Bernoulli(1 - p) per element (drawn from the
/// nn counter-based generator, see nn/init.h); eval mode or p == 0: x. Throws
/// std::invalid_argument ("[nn.Dropout] ...") for p outside [0, 1). Source: MLX nn.Dropout.
class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f);
  std::string name() const override { return "Dropout"; }
  array forward(const array& x) override;

 private:
  float p_;
};

/// Max / average pooling over (N, L, C) (1d) or (N, H, W, C) (2d), built from strided
/// slices and a max / mean over the window (differentiable through those ops). stride
/// defaults to kernel_size; padding pads both sides with -inf (max) or 0 (avg; padded zeros
/// count in the average, as MLX). Output length (L + 2 padding - kernel) / stride + 1.
/// Any non-negative padding, as MLX (a window inside it is -inf for max, 0 for the average).
/// Throws std::invalid_argument ("[nn.MaxPool2d] ...") for non-positive sizes, negative
/// padding, wrong rank or a window larger than the padded input.
/// Source: MLX nn.MaxPool1d/2d, nn.AvgPool1d/2d.
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int kernel_size, int stride = 0, int padding = 0);
  std::string name() const override { return "MaxPool1d"; }
  array forward(const array& x) override;

 private:
  int k_, s_, p_;
};
class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int kernel_size, int stride = 0, int padding = 0);
  std::string name() const override { return "AvgPool1d"; }
  array forward(const array& x) override;

 private:
  int k_, s_, p_;
};
/// See MaxPool1d; stride {0, 0} means kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(
      std::pair<int, int> kernel_size,
      std::pair<int, int> stride = {0, 0},
      std::pair<int, int> padding = {0, 0});
  explicit MaxPool2d(int kernel_size, int stride = 0, int padding = 0)
      : MaxPool2d({kernel_size, kernel_size}, {stride, stride}, {padding, padding}) {}
  std::string name() const override { return "MaxPool2d"; }
  array forward(const array& x) override;

 private:
  std::pair<int, int> k_, s_, p_;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(
      std::pair<int, int> kernel_size,
      std::pair<int, int> stride = {0, 0},
      std::pair<int, int> padding = {0, 0});
  explicit AvgPool2d(int kernel_size, int stride = 0, int padding = 0)
      : AvgPool2d({kernel_size, kernel_size}, {stride, stride}, {padding, padding}) {}
  std::string name() const override { return "AvgPool2d"; }
  array forward(const array& x) override;

 private:
  std::pair<int, int> k_, s_, p_;
};

/// Applies its layers in order; child i is named "layers.i" (MLX's Sequential naming, so the
/// first Linear's weight is "layers.0.weight"). Throws std::invalid_argument for a null layer.
/// Source: MLX nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  std::string name() const override { return "Sequential"; }
  /// Appends a layer (named "layers.<size>").
  void append(std::shared_ptr<Module> layer);
  /// The number of layers.
  size_t size() const { return layers_.size(); }
  /// Layer i. Throws std::out_of_range.
  Module& operator[](size_t i) const;
  array forward(const array& x) override;

 protected:
  /// Points layer i at the replacement of child "layers.i" (nn::quantize, replace_child).
  bool child_replaced(const std::string& name, const std::shared_ptr<Module>& child) override {
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (name == "layers." + std::to_string(i)) {
        layers_[i] = child;
        return true;
      }
    }
    return false;
  }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

/// A parameter-free layer wrapping a function (activations, reshapes in a Sequential).
class Lambda : public Module {
 public:
  Lambda(std::function<array(const array&)> fn, std::string name = "Lambda");
  std::string name() const override { return name_; }
  array forward(const array& x) override { return fn_(x); }

 private:
  std::function<array(const array&)> fn_;
  std::string name_;
};

/// Activation layers (MLX's nn.ReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh): see the
/// functions of the same names in nn/activations.h. GELU's `approx` is "none" (the erf form),
/// "precise" or "tanh" (gelu_approx) or "fast" (gelu_fast_approx), as MLX; others throw
/// std::invalid_argument ("[nn.GELU] ...").
std::shared_ptr<Module> ReLU();
std::shared_ptr<Module> GELU(const std::string& approx = "none");
std::shared_ptr<Module> SiLU();
std::shared_ptr<Module> Sigmoid();
std::shared_ptr<Module> Tanh();
/// x reshaped to (N, prod(rest)): a helper layer between convolutions and Linear layers.
std::shared_ptr<Module> Flatten();

} // namespace nuvec::nn
