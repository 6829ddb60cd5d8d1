// nuvec::nn: data- and tensor-parallel helpers over a distributed::Group (MLX's
// nn.average_gradients from python/mlx/nn/utils.py, and sum_gradients, AllToShardedLinear,
// ShardedToAllLinear, shard_linear from python/mlx/nn/layers/distributed.py; semantics, not
// code). Every function takes the group to work over (default: distributed::init()); with a
// group of one process no communication happens and the layers equal nn::Linear.
//
// Gradient convention (MLX's, see src/distributed/primitives.h): every process's loss is its
// own and all_sum passes the cotangent through, so when the downstream computation is
// replicated (every process computes the same loss from the all_sum'ed activations), the
// gradients of a shard equal the matching slice of the single-process model's gradients.
//
// Collective order: every process of the group must make the same calls with the same
// arguments (same keys, shapes and dtypes, same layers), as every collective must be run by
// all of its processes in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "nuvec/array.h"
#include "nuvec/distributed/distributed.h"
#include "nuvec/dtype.h"
#include "nuvec/nn/layers.h"
#include "nuvec/nn/module.h"

namespace nuvec::nn {

/// The mean over the group's N processes of each gradient: result[k] = (sum over processes p
/// of gradients_p[k]) / N, with gradients[k]'s shape and dtype. Keys are kept exactly. Every
/// process must pass the same keys with the same shapes and dtypes.
///
/// A group of one process returns `gradients` unchanged (the same arrays, no node added).
/// Otherwise the gradients are bucketed, in key order, one bucket list per gradient dtype
/// (gradients of different dtypes are never concatenated): a bucket takes gradients while
/// their total size in the communication dtype (communication_type, else the gradients')
/// stays at most all_reduce_size bytes, and a gradient larger than that is a bucket of its
/// own. Each bucket is flattened and concatenated, cast to communication_type (when given),
/// summed with one distributed::all_sum, cast back to the gradients' dtype, divided by N
/// (in that dtype), then split and reshaped back. all_reduce_size <= 0 disables bucketing:
/// one all_sum per gradient. communication_type trades precision for traffic (bfloat16 halves
/// the bytes of float32 gradients; the result is then only bfloat16-accurate). Gradients are
/// expected to be floating (an integer gradient's mean is truncated to its dtype).
/// Throws std::invalid_argument from distributed::all_sum (a group nuvec cannot communicate
/// over) or, when evaluated, when the processes disagree on shapes or dtypes.
/// Source: MLX nn.average_gradients (python/mlx/nn/utils.py); MLX's buckets grow until they
/// reach all_reduce_size (so may pass it) and it falls back to one all_sum per gradient when
/// dtypes are mixed; here buckets stay under the size and are made per dtype.
ParamMap average_gradients(
    const ParamMap& gradients,
    std::optional<distributed::Group> group = std::nullopt,
    int64_t all_reduce_size = 32 * 1024 * 1024,
    std::optional<Dtype> communication_type = std::nullopt);

/// A function f with f(x) = x (x's shape and dtype) whose vjp is distributed::all_sum of the
/// cotangent over `group` (default: init()): the input of a layer whose output is sharded
/// collects the gradient that each process's shard contributes. The jvp passes the tangent
/// through. For a group of one process f is the plain identity (no node added). Built with
/// custom_vjp (transforms.h). Source: MLX sum_gradients (python/mlx/nn/layers/distributed.py).
std::function<array(const array&)> sum_gradients(std::optional<distributed::Group> group = std::nullopt);

/// What the two tensor-parallel Linear layers share: the group their features are split
/// over, the full (unsharded) sizes, and their construction: dims checked under the layer's
/// name (positive; the split one divisible by N), the local weight then the local bias drawn
/// as Linear's, float32 uniform(-1/sqrt(input_dims), 1/sqrt(input_dims)) with the full
/// input_dims (every process draws the same values).
class ShardedLinear : public Module {
 public:
  /// The full (unsharded) input and output sizes.
  int input_dims() const { return input_dims_; }
  int output_dims() const { return output_dims_; }
  /// The group the features are split over.
  const distributed::Group& group() const { return group_; }

 protected:
  /// split_output: the output features are split (weight rows, bias sliced) rather than the
  /// input features (weight columns, bias whole).
  ShardedLinear(
      const char* op,
      int input_dims,
      int output_dims,
      bool bias,
      std::optional<distributed::Group> group,
      bool split_output);
  /// Replaces the weight and bias by this process's slices of linear's (copied, contiguous).
  void take_shard(const Linear& linear);
  /// A Layer holding this process's shard of `linear`: Layer's constructor runs first (as
  /// MLX's from_linear), so the nn generator advances by its draws.
  template <class Layer>
  static std::shared_ptr<Layer> shard_of(const Linear& linear, std::optional<distributed::Group> group) {
    const ParamMap params = linear.parameters();
    const array& w = params.at("weight");
    auto layer = std::make_shared<Layer>(w.shape(1), w.shape(0), params.count("bias") > 0, std::move(group));
    layer->take_shard(linear);
    return layer;
  }

  distributed::Group group_;
  int input_dims_, output_dims_;
  bool split_output_;
};

/// Linear whose output features are split over the group's N processes: process r holds
/// rows [r * output_dims / N, (r + 1) * output_dims / N) of the full weight, as "weight"
/// (output_dims / N, input_dims), and the same slice of the bias, "bias" (output_dims / N).
/// forward(x) = sum_gradients(group)(x) @ weight.T + bias: x (..., input_dims), replicated on
/// every process -> (..., output_dims / N), this process's shard of the features (the
/// concatenation over ranks is the full Linear's output). dtype: matmul's of x and weight.
/// Initialisation as Linear's: float32 uniform(-1/sqrt(input_dims), 1/sqrt(input_dims)), the
/// weight then the bias drawn from the nn generator with the local shapes (every process
/// draws the same values). Throws std::invalid_argument ("[nn.AllToShardedLinear] ...") for
/// non-positive dims, output_dims not divisible by N, or an input whose last dimension is
/// not input_dims. Source: MLX nn.AllToShardedLinear.
class AllToShardedLinear : public ShardedLinear {
 public:
  AllToShardedLinear(
      int input_dims,
      int output_dims,
      bool bias = true,
      std::optional<distributed::Group> group = std::nullopt);

  /// This process's shard of `linear`: rows of its weight and bias (copied, contiguous),
  /// trainable whether or not linear's were frozen. Runs the constructor first (as MLX's
  /// from_linear), so the nn generator advances by its draws. Throws as the constructor.
  static std::shared_ptr<AllToShardedLinear> from_linear(
      const Linear& linear,
      std::optional<distributed::Group> group = std::nullopt);

  std::string name() const override { return "AllToShardedLinear"; }
  /// sum_gradients(group)(x) @ weight.T + bias (see the class comment).
  array forward(const array& x) override;

 private:
  std::function<array(const array&)> sum_gradients_;
};

/// Linear whose input features are split over the group's N processes: process r holds
/// columns [r * input_dims / N, (r + 1) * input_dims / N) of the full weight, as "weight"
/// (output_dims, input_dims / N), and the whole bias, "bias" (output_dims).
/// forward(x) = distributed::all_sum(x @ weight.T) + bias: x (..., input_dims / N), this
/// process's shard of the features -> (..., output_dims), the same on every process (the
/// full Linear's output on the concatenated input). dtype: matmul's of x and weight.
/// Initialisation: float32 uniform(-1/sqrt(input_dims), 1/sqrt(input_dims)) (the full
/// input_dims), weight then bias from the nn generator. Throws std::invalid_argument
/// ("[nn.ShardedToAllLinear] ...") for non-positive dims, input_dims not divisible by N, or
/// an input whose last dimension is not input_dims / N. Source: MLX nn.ShardedToAllLinear.
class ShardedToAllLinear : public ShardedLinear {
 public:
  ShardedToAllLinear(
      int input_dims,
      int output_dims,
      bool bias = true,
      std::optional<distributed::Group> group = std::nullopt);

  /// This process's shard of `linear`: columns of its weight (copied, contiguous) and its
  /// whole bias, trainable. Runs the constructor first (as MLX's from_linear). Throws as the
  /// constructor.
  static std::shared_ptr<ShardedToAllLinear> from_linear(
      const Linear& linear,
      std::optional<distributed::Group> group = std::nullopt);

  std::string name() const override { return "ShardedToAllLinear"; }
  /// all_sum(x @ weight.T) + bias (see the class comment).
  array forward(const array& x) override;
};

/// A new layer holding this process's shard of `linear` (which is left unchanged):
/// sharding "all-to-sharded" gives AllToShardedLinear::from_linear (rows of the weight and
/// bias), "sharded-to-all" ShardedToAllLinear::from_linear (columns of the weight, the whole
/// bias). all-to-sharded then sharded-to-all on the same group is the Megatron MLP split: one
/// all_sum forward (in the second layer) and one backward (sum_gradients in the first).
/// Throws std::invalid_argument ("[nn.shard_linear] ...") naming the string for any other
/// sharding, and as the layers' constructors (a dimension not divisible by the group size).
/// Source: MLX nn.shard_linear (segments and uneven sizes are not supported).
std::shared_ptr<Module> shard_linear(
    const Linear& linear,
    const std::string& sharding,
    std::optional<distributed::Group> group = std::nullopt);

/// Replaces, in `model`, each Linear named by a module path of `shardings` ("layers.0",
/// "mlp.up") by shard_linear(that Linear, its sharding, group), through
/// Module::replace_child on its parent (as nn::quantize swaps layers); the new layer keeps
/// the old one's training mode. A Linear shared under several listed paths with the same
/// sharding becomes one shared sharded layer. Every path is checked before anything is
/// swapped, and a refused swap puts back the ones already made, so on an error the model is
/// unchanged. Throws std::invalid_argument ("[nn.shard_inplace] ...") naming the path when it
/// is not a module path of the model, is the model itself, names something other than a
/// Linear, or its parent refuses the replacement (a parent that does not override
/// child_replaced); and as shard_linear for a bad sharding or dimension.
/// Source: MLX python/mlx/nn/layers/distributed.py (MLX's shard_inplace instead shards the
/// parameters of layers that communicate by themselves; this one swaps in the sharded
/// layers, as MLX's shard_linear plus update_modules).
void shard_inplace(
    Module& model,
    const std::map<std::string, std::string>& shardings,
    std::optional<distributed::Group> group = std::nullopt);

} // namespace nuvec::nn
