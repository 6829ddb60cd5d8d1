// nuvec::nn: the Module tree (MLX's nn.Module): named parameters with MLX's dotted paths
// (`layers.0.weight`), freezing, train/eval mode, safetensors weights, and value_and_grad over
// a module's trainable parameters. Built on the public API only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec::nn {

/// A flattened parameter tree: dotted path (MLX's tree_flatten names, e.g. "layers.0.weight")
/// to array, ordered by path. Gradients and optimizer states use the same keys.
using ParamMap = std::map<std::string, array>;

/// The arrays of a ParamMap in path order (for eval(...)).
std::vector<array> tree_leaves(const ParamMap& tree);

/// A node of the model tree. Holds its own parameters (local names, no dots), frozen flags,
/// buffers (parameters that are saved but never trainable, e.g. BatchNorm's running stats, as
/// MLX freezes them) and named children. Modules are shared between parents through
/// std::shared_ptr and are not copyable.
/// Source: MLX python/mlx/nn/layers/base.py (semantics, not code).
class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  /// The layer's name for messages and printing ("Linear", "Sequential", ...).
  virtual std::string name() const { return "Module"; }

  /// The layer applied to x. The base class throws std::invalid_argument
  /// ("[nn.Module] ... has no single-input forward") for modules that are only containers.
  virtual array forward(const array& x);
  /// forward(x).
  array operator()(const array& x) { return forward(x); }

  /// Every parameter and buffer of the tree, keyed by dotted path (children prefix their
  /// name: "layers.0.weight").
  ParamMap parameters() const;
  /// The parameters that are not frozen (and not buffers): what value_and_grad differentiates
  /// and optimizers update.
  ParamMap trainable_parameters() const;

  /// Replaces parameters by path (a partial map is fine). Throws std::invalid_argument
  /// ("[nn.Module.update] ...") for a path the tree does not have, or when strict and the new
  /// array's shape differs from the old one's.
  void update(const ParamMap& params, bool strict = true);

  /// Freezes every parameter of the tree (buffers stay frozen).
  void freeze();
  /// Unfreezes every parameter of the tree (buffers stay frozen).
  void unfreeze();
  /// Freezes / unfreezes by path: a parameter path ("layers.0.bias"), a module path
  /// ("layers.0", every parameter under it), or a local parameter name, which applies in
  /// every module of the tree ("bias": every bias, MLX's freeze(keys=...)). Buffers stay
  /// frozen. Throws std::invalid_argument naming the path when it is none of these.
  void freeze(const std::vector<std::string>& paths);
  void unfreeze(const std::vector<std::string>& paths);

  /// Sets training mode on the whole tree (Dropout and BatchNorm read it).
  void train(bool mode = true);
  /// Sets evaluation mode on the whole tree (train(false)).
  void eval() { train(false); }
  /// Whether this module is in training mode (true after construction, as MLX).
  bool training() const { return training_; }

  /// Writes parameters() to a safetensors file. Throws std::invalid_argument
  /// ("[nn.Module.save_weights] ...") unless `file` ends in ".safetensors"; see
  /// save_safetensors for I/O errors.
  void save_weights(const std::string& file) const;
  /// Loads a safetensors file into the tree. When strict, the file must hold exactly the
  /// tree's paths with the same shapes (std::invalid_argument listing the first mismatch);
  /// otherwise matching paths are loaded and others ignored. Corrupt files throw
  /// std::runtime_error from load_safetensors.
  void load_weights(const std::string& file, bool strict = true);

  /// The direct children in registration order, with their local names ("layers.0").
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  /// Every module of the tree with its path ("" for this one), parents before children.
  std::vector<std::pair<std::string, Module*>> named_modules();

  /// Puts `child` in place of the direct child registered as `name` (how nn::quantize swaps
  /// a Linear for a QuantizedLinear, as MLX's update_modules does). Only modules that say how
  /// they reach their children take a replacement (see child_replaced): the swap is undone
  /// and std::invalid_argument ("[nn.Module.replace_child] ...") thrown when this module
  /// does not, so forward() never keeps running the old layer. Also throws when there is no
  /// child `name` or `child` is null. Other parents sharing the old child keep it.
  void replace_child(const std::string& name, std::shared_ptr<Module> child);

 protected:
  /// Run by replace_child once children() holds `child` under `name`. A module that calls
  /// its children through members of its own (Sequential's layer list, a
  /// std::shared_ptr<Module> field) points those members at `child` and returns true. The
  /// default returns false (the module has not said how it reaches its children), which
  /// makes replace_child refuse. A member typed as a concrete layer (shared_ptr<Linear>)
  /// cannot hold a QuantizedLinear: such a module should keep returning false.
  virtual bool child_replaced(const std::string& name, const std::shared_ptr<Module>& child);

  /// Adds a parameter with a local name (no dots). Throws std::invalid_argument for a
  /// duplicate or dotted name.
  void register_parameter(const std::string& name, array value);
  /// Adds a buffer: saved and loaded with the parameters, never trainable.
  void register_buffer(const std::string& name, array value);
  /// Adds a child under `name` (may be "layers.0" for list elements); returns it.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }
  /// The local parameter `name`. Throws std::invalid_argument when absent.
  const array& param(const std::string& name) const;
  /// Replaces the local parameter `name` (used for running statistics).
  void set_param(const std::string& name, array value);
  /// Whether the local parameter exists.
  bool has_param(const std::string& name) const;

 private:
  struct Entry {
    std::string name;
    array value;
    bool frozen;
    bool buffer;
  };
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  Entry* find_entry(const std::string& name);
  const Entry* find_entry(const std::string& name) const;
  void collect(const std::string& prefix, ParamMap& out, bool trainable_only) const;
  void set_frozen(const std::vector<std::string>& paths, bool frozen, const char* op);

  std::vector<Entry> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// A loss over a module: takes the call's arguments (the model is captured by the caller).
using ModuleLossFn = std::function<array(const std::vector<array>&)>;

/// A function of the loss's arguments returning (loss, gradient of the loss with respect to
/// each trainable parameter of `model`, keyed by the same paths as trainable_parameters()).
/// While it runs, the model's trainable parameters are swapped for the differentiated
/// copies; they are restored afterwards (also when loss_fn throws). Buffers written during
/// the call (BatchNorm running stats) keep their new values. `model` must outlive the
/// returned function. Throws std::invalid_argument ("[nn.value_and_grad] ...") when the model
/// has no trainable parameters or the loss is not a scalar.
/// Source: MLX nn.value_and_grad.
std::function<std::pair<array, ParamMap>(const std::vector<array>&)> value_and_grad(
    Module& model,
    ModuleLossFn loss_fn);

} // namespace nuvec::nn
