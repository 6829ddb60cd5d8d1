// nuvec::nn: average_gradients, sum_gradients, the tensor-parallel Linear layers and
// shard_linear / shard_inplace. Semantics from MLX's python/mlx/nn/utils.py and
// python/mlx/nn/layers/distributed.py (see nuvec/nn/distributed.h for the differences).
#include "nuvec/nn/distributed.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "nuvec/distributed/ops.h"
#include "nuvec/nn/init.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::nn {

namespace {

distributed::Group resolve(const std::optional<distributed::Group>& group) {
  return group ? *group : distributed::init();
}

// ---- average_gradients ----------------------------------------------------------------

// The sum over the group of x (cast to `comm` for the transfer), back in `dt`, divided by n.
array mean_over_group(const array& x, Dtype dt, std::optional<Dtype> comm, const distributed::Group& g) {
  const bool cast = comm && *comm != x.dtype();
  array s = distributed::all_sum(cast ? astype(x, *comm) : x, g);
  if (s.dtype() != dt) s = astype(s, dt);
  array mean = divide(s, array(static_cast<double>(g.size()), dt));
  return mean.dtype() == dt ? mean : astype(mean, dt);
}

// ---- the sharded layers ---------------------------------------------------------------

void check_positive(const char* op, const char* what, int v) {
  if (v <= 0) throw_invalid_argument(op, what, " must be positive; got ", v, ".");
}

void check_divisible(const char* op, const char* what, int v, int n) {
  if (v % n != 0) {
    throw_invalid_argument(
        op, what, " must be divisible by the group size ", n, "; got ", v, ".");
  }
}

void check_last_dim(const char* op, const array& x, int dims) {
  if (x.ndim() == 0 || x.shape(-1) != dims) {
    throw_invalid_argument(op, "input's last dimension must be ", dims, "; got shape ", x.shape(), ".");
  }
}

// x @ w.T + b (b optional), addmm for matrices as Linear does.
array affine(const array& x, const array& w, const std::optional<array>& b) {
  if (!b) return matmul(x, transpose(w));
  if (x.ndim() == 2) return addmm(*b, x, transpose(w));
  return matmul(x, transpose(w)) + *b;
}

void check_sharding(const char* op, const std::string& sharding) {
  if (sharding != "all-to-sharded" && sharding != "sharded-to-all") {
    throw_invalid_argument(
        op, "sharding must be \"all-to-sharded\" or \"sharded-to-all\"; got \"", sharding, "\".");
  }
}

} // namespace

ParamMap average_gradients(
    const ParamMap& gradients,
    std::optional<distributed::Group> group,
    int64_t all_reduce_size,
    std::optional<Dtype> communication_type) {
  const distributed::Group g = resolve(group);
  if (g.size() == 1 || gradients.empty()) return gradients;

  ParamMap out;
  if (all_reduce_size <= 0) {
    for (auto& [key, grad] : gradients) out.emplace(key, mean_over_group(grad, grad.dtype(), communication_type, g));
    return out;
  }

  // Buckets in key order, one list per dtype (dtypes in order of first appearance), each
  // holding gradients whose bytes in the communication dtype sum to at most all_reduce_size.
  struct Bucket {
    Dtype dtype;
    std::vector<const ParamMap::value_type*> items;
    int64_t bytes = 0;
  };
  std::vector<Dtype> dtypes;
  for (auto& kv : gradients) {
    bool seen = false;
    for (auto& d : dtypes) seen = seen || d == kv.second.dtype();
    if (!seen) dtypes.push_back(kv.second.dtype());
  }
  std::vector<Bucket> buckets;
  for (Dtype dt : dtypes) {
    const int64_t itemsize = communication_type ? communication_type->size() : dt.size();
    Bucket current{dt, {}, 0};
    for (auto& kv : gradients) {
      if (kv.second.dtype() != dt) continue;
      const int64_t bytes = static_cast<int64_t>(kv.second.size()) * itemsize;
      if (!current.items.empty() && current.bytes + bytes > all_reduce_size) {
        buckets.push_back(std::move(current));
        current = Bucket{dt, {}, 0};
      }
      current.items.push_back(&kv);
      current.bytes += bytes;
    }
    if (!current.items.empty()) buckets.push_back(std::move(current));
  }

  // Concatenate, reduce, split.
  for (auto& b : buckets) {
    if (b.items.size() == 1) {
      auto& [key, grad] = *b.items[0];
      out.emplace(key, mean_over_group(grad, b.dtype, communication_type, g));
      continue;
    }
    std::vector<array> flat;
    flat.reserve(b.items.size());
    for (auto* kv : b.items) flat.push_back(reshape(kv->second, {-1}));
    const array mean = mean_over_group(concatenate(std::move(flat), 0), b.dtype, communication_type, g);
    int offset = 0;
    for (auto* kv : b.items) {
      const int n = static_cast<int>(kv->second.size());
      out.emplace(kv->first, reshape(slice(mean, {offset}, {offset + n}), kv->second.shape()));
      offset += n;
    }
  }
  return out;
}

std::function<array(const array&)> sum_gradients(std::optional<distributed::Group> group) {
  const distributed::Group g = resolve(group);
  if (g.size() == 1) return [](const array& x) { return x; };
  auto f = custom_vjp(
      [](const std::vector<array>& xs) { return std::vector<array>{xs[0]}; },
      [g](const std::vector<array>&, const std::vector<array>& cotangents, const std::vector<array>&) {
        return std::vector<array>{distributed::all_sum(cotangents[0], g)};
      });
  return [f](const array& x) { return f({x})[0]; };
}

// ---------------------------------------------------------------------------------------
// ShardedLinear, AllToShardedLinear

ShardedLinear::ShardedLinear(
    const char* op,
    int input_dims,
    int output_dims,
    bool bias,
    std::optional<distributed::Group> group,
    bool split_output)
    : group_(resolve(group)), input_dims_(input_dims), output_dims_(output_dims), split_output_(split_output) {
  check_positive(op, "input_dims", input_dims);
  check_positive(op, "output_dims", output_dims);
  const int n = group_.size();
  check_divisible(op, split_output ? "output_dims" : "input_dims", split_output ? output_dims : input_dims, n);
  // MLX: scale = math.sqrt(1.0 / input_dims) (the full input_dims); the local weight, then the
  // local bias.
  const double scale = std::sqrt(1.0 / static_cast<double>(input_dims));
  const int rows = split_output ? output_dims / n : output_dims, cols = split_output ? input_dims : input_dims / n;
  register_parameter("weight", init::uniform({rows, cols}, -scale, scale));
  if (bias) register_parameter("bias", init::uniform({rows}, -scale, scale));
}

void ShardedLinear::take_shard(const Linear& linear) {
  const ParamMap params = linear.parameters();
  const array& w = params.at("weight");
  const auto bias = params.find("bias");
  const int r = group_.rank(), n = group_.size();
  if (split_output_) {
    const int rows = w.shape(0) / n;
    set_param("weight", contiguous(slice(w, {r * rows, 0}, {(r + 1) * rows, w.shape(1)})));
    if (bias != params.end()) set_param("bias", contiguous(slice(bias->second, {r * rows}, {(r + 1) * rows})));
  } else {
    const int cols = w.shape(1) / n;
    set_param("weight", contiguous(slice(w, {0, r * cols}, {w.shape(0), (r + 1) * cols})));
    if (bias != params.end()) set_param("bias", bias->second);
  }
}

AllToShardedLinear::AllToShardedLinear(
    int input_dims,
    int output_dims,
    bool bias,
    std::optional<distributed::Group> group)
    : ShardedLinear("nn.AllToShardedLinear", input_dims, output_dims, bias, std::move(group), /*split_output=*/true),
      sum_gradients_(sum_gradients(group_)) {}

std::shared_ptr<AllToShardedLinear> AllToShardedLinear::from_linear(
    const Linear& linear,
    std::optional<distributed::Group> group) {
  return shard_of<AllToShardedLinear>(linear, std::move(group));
}

array AllToShardedLinear::forward(const array& x) {
  check_last_dim("nn.AllToShardedLinear", x, input_dims_);
  const array xs = sum_gradients_(x);
  return affine(xs, param("weight"), has_param("bias") ? std::optional<array>(param("bias")) : std::nullopt);
}

// ---------------------------------------------------------------------------------------
// ShardedToAllLinear

ShardedToAllLinear::ShardedToAllLinear(
    int input_dims,
    int output_dims,
    bool bias,
    std::optional<distributed::Group> group)
    : ShardedLinear("nn.ShardedToAllLinear", input_dims, output_dims, bias, std::move(group), /*split_output=*/false) {}

std::shared_ptr<ShardedToAllLinear> ShardedToAllLinear::from_linear(
    const Linear& linear,
    std::optional<distributed::Group> group) {
  return shard_of<ShardedToAllLinear>(linear, std::move(group));
}

array ShardedToAllLinear::forward(const array& x) {
  check_last_dim("nn.ShardedToAllLinear", x, input_dims_ / group_.size());
  array y = distributed::all_sum(matmul(x, transpose(param("weight"))), group_);
  if (has_param("bias")) y = y + param("bias");
  return y;
}

// ---------------------------------------------------------------------------------------
// shard_linear, shard_inplace

std::shared_ptr<Module> shard_linear(
    const Linear& linear,
    const std::string& sharding,
    std::optional<distributed::Group> group) {
  check_sharding("nn.shard_linear", sharding);
  if (sharding == "all-to-sharded") return AllToShardedLinear::from_linear(linear, std::move(group));
  return ShardedToAllLinear::from_linear(linear, std::move(group));
}

void shard_inplace(
    Module& model,
    const std::map<std::string, std::string>& shardings,
    std::optional<distributed::Group> group) {
  const char* op = "nn.shard_inplace";
  if (shardings.empty()) return;
  struct Swap {
    std::string path;
    Module* parent;
    std::string name;
    std::shared_ptr<Module> old_child, new_child;
  };
  // Every module path of the tree -> (path, parent, local name, child).
  std::map<std::string, Swap> index;
  for (auto& [prefix, m] : model.named_modules()) {
    for (auto& [name, child] : m->children()) {
      const std::string path = prefix.empty() ? name : prefix + "." + name;
      index.emplace(path, Swap{path, m, name, child, nullptr});
    }
  }
  // Plan (and build the sharded layers) before swapping anything.
  const distributed::Group g = resolve(group);
  std::map<std::pair<Module*, std::string>, std::shared_ptr<Module>> done;
  std::vector<Swap> swaps;
  for (auto& [path, sharding] : shardings) {
    auto it = index.find(path);
    if (it == index.end()) {
      throw_invalid_argument(op, "paths must name sub-modules of the model; got '", path, "'.");
    }
    auto* linear = dynamic_cast<Linear*>(it->second.old_child.get());
    if (!linear) {
      throw_invalid_argument(
          op, "the module at '", path, "' must be a Linear; it is a ", it->second.old_child->name(), ".");
    }
    if (sharding != "all-to-sharded" && sharding != "sharded-to-all") {
      throw_invalid_argument(
          op, "the sharding of '", path, "' must be \"all-to-sharded\" or \"sharded-to-all\"; got \"", sharding,
          "\".");
    }
    auto key = std::make_pair(it->second.old_child.get(), sharding);
    auto d = done.find(key);
    if (d == done.end()) {
      auto sharded = shard_linear(*linear, sharding, g);
      sharded->train(linear->training());
      d = done.emplace(key, std::move(sharded)).first;
    }
    Swap s = it->second;
    s.new_child = d->second;
    swaps.push_back(std::move(s));
  }
  // Swap; on a refusal put back what was swapped, so the model is left as it was.
  size_t applied = 0;
  try {
    for (; applied < swaps.size(); ++applied) {
      swaps[applied].parent->replace_child(swaps[applied].name, swaps[applied].new_child);
    }
  } catch (const std::invalid_argument& e) {
    const std::string path = swaps[applied].path;
    while (applied > 0) {
      --applied;
      swaps[applied].parent->replace_child(swaps[applied].name, swaps[applied].old_child);
    }
    throw_invalid_argument(op, "the parent of '", path, "' must accept a replacement child; ", e.what());
  }
}

} // namespace nuvec::nn
