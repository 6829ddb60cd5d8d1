// nuvec::nn: the Module tree (paths, freezing, modes, weights) and value_and_grad over a
// module's trainable parameters. Semantics follow MLX's nn.Module and nn.value_and_grad.
#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "nuvec/io.h"
#include "nuvec/nn/module.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"

namespace nuvec::nn {

std::vector<array> tree_leaves(const ParamMap& tree) {
  std::vector<array> out;
  out.reserve(tree.size());
  for (auto& [k, v] : tree) out.push_back(v);
  return out;
}

array Module::forward(const array&) {
  throw_invalid_argument("nn.Module", name(), " has no single-input forward; call its own methods.");
}

void Module::register_parameter(const std::string& name, array value) {
  if (name.empty() || name.find('.') != std::string::npos) {
    throw_invalid_argument("nn.Module", "parameter names must be non-empty without dots; got '", name, "'.");
  }
  if (find_entry(name)) {
    throw_invalid_argument("nn.Module", "parameter names must be unique; got '", name, "' twice.");
  }
  params_.push_back({name, std::move(value), false, false});
}

void Module::register_buffer(const std::string& name, array value) {
  register_parameter(name, std::move(value));
  params_.back().frozen = true;
  params_.back().buffer = true;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  if (!child) throw_invalid_argument("nn.Module", "child '", name, "' must not be null.");
  if (name.empty()) throw_invalid_argument("nn.Module", "child names must be non-empty; got ''.");
  for (auto& [n, c] : children_) {
    if (n == name) throw_invalid_argument("nn.Module", "child names must be unique; got '", name, "' twice.");
  }
  children_.emplace_back(name, std::move(child));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> child) {
  if (!child) throw_invalid_argument("nn.Module.replace_child", "child '", name, "' must not be null.");
  auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  if (it == children_.end()) {
    throw_invalid_argument("nn.Module.replace_child", this->name(), " must have a child '", name, "'; it does not.");
  }
  std::shared_ptr<Module> old = std::exchange(it->second, child);
  bool taken = false;
  try {
    taken = child_replaced(name, child);
  } catch (...) {
    it->second = std::move(old);
    throw;
  }
  if (!taken) {
    it->second = std::move(old);
    throw_invalid_argument(
        "nn.Module.replace_child", this->name(), " must override child_replaced to take a new child '", name,
        "' (it calls its children through members replace_child cannot see).");
  }
}

bool Module::child_replaced(const std::string&, const std::shared_ptr<Module>&) {
  return false;
}

Module::Entry* Module::find_entry(const std::string& name) {
  for (auto& e : params_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const Module::Entry* Module::find_entry(const std::string& name) const {
  return const_cast<Module*>(this)->find_entry(name);
}

const array& Module::param(const std::string& name) const {
  auto* e = find_entry(name);
  if (!e) throw_invalid_argument("nn.Module", this->name(), " must have parameter '", name, "'; it does not.");
  return e->value;
}

void Module::set_param(const std::string& name, array value) {
  auto* e = find_entry(name);
  if (!e) throw_invalid_argument("nn.Module", this->name(), " must have parameter '", name, "'; it does not.");
  e->value = std::move(value);
}

bool Module::has_param(const std::string& name) const {
  return find_entry(name) != nullptr;
}

void Module::collect(const std::string& prefix, ParamMap& out, bool trainable_only) const {
  for (auto& e : params_) {
    if (trainable_only && e.frozen) continue;
    out.insert_or_assign(prefix + e.name, e.value);
  }
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", out, trainable_only);
}

ParamMap Module::parameters() const {
  ParamMap out;
  collect("", out, false);
  return out;
}

ParamMap Module::trainable_parameters() const {
  ParamMap out;
  collect("", out, true);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  // Breadth by index over a growing list: parents always precede their children.
  for (size_t i = 0; i < out.size(); ++i) {
    auto [path, m] = out[i];
    for (auto& [n, c] : m->children_) out.emplace_back(path.empty() ? n : path + "." + n, c.get());
  }
  return out;
}

void Module::update(const ParamMap& params, bool strict) {
  // Resolve every path before writing anything, so a bad map leaves the tree untouched.
  std::map<std::string, Entry*> index;
  for (auto& [path, m] : named_modules()) {
    for (auto& e : m->params_) index[path.empty() ? e.name : path + "." + e.name] = &e;
  }
  std::vector<std::pair<Entry*, const array*>> writes;
  for (auto& [path, value] : params) {
    auto it = index.find(path);
    if (it == index.end()) {
      throw_invalid_argument("nn.Module.update", "paths must name parameters of the module; got '", path, "'.");
    }
    if (strict && it->second->value.shape() != value.shape()) {
      throw_invalid_argument(
          "nn.Module.update", "'", path, "' must keep its shape ", it->second->value.shape(), "; got ",
          value.shape(), ".");
    }
    writes.emplace_back(it->second, &value);
  }
  for (auto& [e, v] : writes) e->value = *v;
}

void Module::freeze() {
  for (auto& [p, m] : named_modules()) {
    for (auto& e : m->params_) e.frozen = true;
  }
}

void Module::unfreeze() {
  for (auto& [p, m] : named_modules()) {
    for (auto& e : m->params_) e.frozen = e.buffer;
  }
}

void Module::set_frozen(const std::vector<std::string>& paths, bool frozen, const char* op) {
  auto modules = named_modules();
  std::map<std::string, Entry*> params;
  std::map<std::string, Module*> mods;
  // Every module's entries by local name: MLX's freeze(keys=...) names local parameters and
  // applies them in every module of the tree ("bias": every bias).
  std::multimap<std::string, Entry*> local;
  for (auto& [path, m] : modules) {
    mods[path] = m;
    for (auto& e : m->params_) {
      params[path.empty() ? e.name : path + "." + e.name] = &e;
      local.emplace(e.name, &e);
    }
  }
  // Validate all first so a bad path changes nothing.
  for (auto& p : paths) {
    if (!params.count(p) && (p.empty() || !mods.count(p)) && !local.count(p)) {
      throw_invalid_argument(op, "paths must name a parameter, a submodule or a parameter name of some module; got '",
                             p, "'.");
    }
  }
  auto set = [&](Entry* e) { e->frozen = frozen || e->buffer; };
  for (auto& p : paths) {
    if (auto it = params.find(p); it != params.end()) {
      set(it->second);
    } else if (auto m = mods.find(p); m != mods.end() && !p.empty()) {
      frozen ? m->second->freeze() : m->second->unfreeze();
    } else {
      for (auto [it, end] = local.equal_range(p); it != end; ++it) set(it->second);
    }
  }
}

void Module::freeze(const std::vector<std::string>& paths) {
  set_frozen(paths, true, "nn.Module.freeze");
}

void Module::unfreeze(const std::vector<std::string>& paths) {
  set_frozen(paths, false, "nn.Module.unfreeze");
}

void Module::train(bool mode) {
  for (auto& [p, m] : named_modules()) m->training_ = mode;
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

void Module::save_weights(const std::string& file) const {
  if (!ends_with(file, ".safetensors")) {
    throw_invalid_argument("nn.Module.save_weights", "file must end in .safetensors; got '", file, "'.");
  }
  auto params = parameters();
  std::unordered_map<std::string, array> flat(params.begin(), params.end());
  save_safetensors(file, std::move(flat));
}

void Module::load_weights(const std::string& file, bool strict) {
  auto [loaded, metadata] = load_safetensors(file);
  auto current = parameters();
  ParamMap updates;
  for (auto& [path, value] : loaded) {
    auto it = current.find(path);
    if (it == current.end()) {
      if (strict) {
        throw_invalid_argument(
            "nn.Module.load_weights", "the file's arrays must be parameters of ", name(), "; got '", path, "'.");
      }
      continue;
    }
    if (it->second.shape() != value.shape()) {
      throw_invalid_argument(
          "nn.Module.load_weights", "'", path, "' must have shape ", it->second.shape(), "; got ",
          value.shape(), ".");
    }
    updates.insert_or_assign(path, value);
  }
  if (strict) {
    for (auto& [path, value] : current) {
      if (!loaded.count(path)) {
        throw_invalid_argument("nn.Module.load_weights", "the file must hold '", path, "'; it does not.");
      }
    }
  }
  update(updates);
}

std::function<std::pair<array, ParamMap>(const std::vector<array>&)> value_and_grad(
    Module& model,
    ModuleLossFn loss_fn) {
  return [&model, loss_fn = std::move(loss_fn)](const std::vector<array>& args) {
    ParamMap saved = model.trainable_parameters();
    if (saved.empty()) {
      throw_invalid_argument("nn.value_and_grad", "the model must have trainable parameters; got none.");
    }
    std::vector<std::string> keys;
    std::vector<array> primals;
    for (auto& [k, v] : saved) {
      keys.push_back(k);
      primals.push_back(v);
    }
    const size_t n = keys.size();
    primals.insert(primals.end(), args.begin(), args.end());
    auto inner = [&](const std::vector<array>& xs) {
      ParamMap p;
      for (size_t i = 0; i < n; ++i) p.insert_or_assign(keys[i], xs[i]);
      model.update(p, false);
      array loss = loss_fn(std::vector<array>(xs.begin() + n, xs.end()));
      if (loss.ndim() != 0 && loss.size() != 1) {
        throw_invalid_argument("nn.value_and_grad", "the loss must be a scalar; got shape ", loss.shape(), ".");
      }
      return std::vector<array>{loss};
    };
    std::vector<int> argnums(n);
    std::iota(argnums.begin(), argnums.end(), 0);
    std::pair<std::vector<array>, std::vector<array>> result;
    try {
      result = nuvec::value_and_grad(inner, argnums)(primals);
    } catch (...) {
      model.update(saved, false);
      throw;
    }
    model.update(saved, false);
    ParamMap grads;
    for (size_t i = 0; i < n; ++i) grads.insert_or_assign(keys[i], result.second[i]);
    return std::pair<array, ParamMap>{result.first[0], std::move(grads)};
  };
}

} // namespace nuvec::nn
