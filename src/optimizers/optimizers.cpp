// nuvec::optimizers: the Optimizer base (step counter, state tree, save/load) and MLX's
// update rules (python/mlx/optimizers/optimizers.py), as lazy graphs of public ops.
#include <cmath>

#include "core/errors.h"
#include "nuvec/io.h"
#include "nuvec/ops.h"
#include "nuvec/optimizers.h"
#include "nuvec/utils.h"

namespace nuvec::optimizers {

namespace {
array scalar(double v, const array& like) {
  return array(v, like.dtype());
}
} // namespace

array& Optimizer::slot(const std::string& path, const std::string& slot, const array& like) {
  auto key = path + "." + slot;
  auto it = state_.find(key);
  if (it == state_.end()) it = state_.emplace(key, zeros_like(like)).first;
  return it->second;
}

ParamMap Optimizer::apply_gradients(const ParamMap& grads, const ParamMap& params) {
  const std::string op = name() + ".update";
  for (auto& [path, g] : grads) {
    auto it = params.find(path);
    if (it == params.end()) {
      throw_invalid_argument(op.c_str(), "gradients must have a parameter of the same path; got '", path, "'.");
    }
    if (it->second.shape() != g.shape()) {
      throw_invalid_argument(
          op.c_str(), "gradient '", path, "' must have its parameter's shape ", it->second.shape(), "; got ",
          g.shape(), ".");
    }
  }
  const double lr = lr_(step_);
  ++step_;
  ParamMap out;
  for (auto& [path, g] : grads) {
    const array& p = params.at(path);
    out.insert_or_assign(path, apply_single(path, astype(g, p.dtype()), p, scalar(lr, p), step_));
  }
  return out;
}

void Optimizer::update(nn::Module& model, const ParamMap& grads) {
  model.update(apply_gradients(grads, model.parameters()));
}

void Optimizer::set_state(ParamMap state, int64_t step) {
  if (step < 0) throw_invalid_argument((name() + ".set_state").c_str(), "step must be >= 0; got ", step, ".");
  state_ = std::move(state);
  step_ = step;
}

void Optimizer::save_state(const std::string& file) const {
  std::unordered_map<std::string, array> flat(state_.begin(), state_.end());
  flat.insert_or_assign("step", array(static_cast<int64_t>(step_), int64));
  save_safetensors(file, std::move(flat), {{"optimizer", name()}, {"step", std::to_string(step_)}});
}

void Optimizer::load_state(const std::string& file) {
  const std::string op = name() + ".load_state";
  auto [flat, metadata] = load_safetensors(file);
  auto who = metadata.find("optimizer");
  if (who != metadata.end() && who->second != name()) {
    throw_invalid_argument(op.c_str(), "the file must hold a ", name(), " state; got a ", who->second, " state.");
  }
  auto it = flat.find("step");
  if (it == flat.end() || it->second.size() != 1) {
    throw_invalid_argument(op.c_str(), "the file must hold a scalar \"step\"; it does not.");
  }
  int64_t step = it->second.item<int64_t>();
  flat.erase(it);
  set_state(ParamMap(flat.begin(), flat.end()), step);
}

// ---------------------------------------------------------------------------------------
// SGD

SGD::SGD(LearningRate lr, double momentum, double weight_decay, double dampening, bool nesterov)
    : Optimizer(std::move(lr)),
      momentum_(momentum),
      weight_decay_(weight_decay),
      dampening_(dampening),
      nesterov_(nesterov) {
  if (momentum < 0 || weight_decay < 0 || dampening < 0) {
    throw_invalid_argument(
        "SGD", "momentum, weight_decay and dampening must be >= 0; got ", momentum, ", ", weight_decay, ", ",
        dampening, ".");
  }
  if (nesterov && (momentum <= 0 || dampening != 0)) {
    throw_invalid_argument(
        "SGD", "nesterov must have momentum > 0 and dampening 0; got momentum ", momentum, " and dampening ",
        dampening, ".");
  }
}

array SGD::apply_single(const std::string& path, const array& g0, const array& p, const array& lr, int64_t) {
  array g = g0;
  if (weight_decay_ != 0) g = g + scalar(weight_decay_, p) * p;
  if (momentum_ <= 0) return p - lr * g;
  array& v = slot(path, "v", p);
  array nv = scalar(momentum_, p) * v;
  nv = dampening_ > 0 ? nv + scalar(1.0 - dampening_, p) * g : nv + g;
  v = nv;
  array update = nesterov_ ? g + scalar(momentum_, p) * nv : nv;
  return p - lr * update;
}

// ---------------------------------------------------------------------------------------
// Adam, AdamW

Adam::Adam(LearningRate lr, std::pair<double, double> betas, double eps, bool bias_correction)
    : Optimizer(std::move(lr)), b1_(betas.first), b2_(betas.second), eps_(eps), bias_correction_(bias_correction) {
  if (!(b1_ >= 0 && b1_ < 1 && b2_ >= 0 && b2_ < 1)) {
    throw_invalid_argument("Adam", "betas must be in [0, 1); got (", b1_, ", ", b2_, ").");
  }
  if (eps < 0) throw_invalid_argument("Adam", "eps must be >= 0; got ", eps, ".");
}

array Adam::apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) {
  array& m = slot(path, "m", p);
  m = scalar(b1_, p) * m + scalar(1.0 - b1_, p) * g;
  array& v = slot(path, "v", p);
  v = scalar(b2_, p) * v + scalar(1.0 - b2_, p) * square(g);
  if (bias_correction_) {
    double c1 = 1.0 / (1.0 - std::pow(b1_, static_cast<double>(step)));
    double c2 = 1.0 / std::sqrt(1.0 - std::pow(b2_, static_cast<double>(step)));
    return p - lr * scalar(c1, p) * m / (sqrt(v) * scalar(c2, p) + scalar(eps_, p));
  }
  return p - lr * m / (sqrt(v) + scalar(eps_, p));
}

AdamW::AdamW(LearningRate lr, std::pair<double, double> betas, double eps, double weight_decay, bool bias_correction)
    : Adam(std::move(lr), betas, eps, bias_correction), weight_decay_(weight_decay) {
  if (weight_decay < 0) throw_invalid_argument("AdamW", "weight_decay must be >= 0; got ", weight_decay, ".");
}

array AdamW::apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) {
  array decayed = p * (scalar(1.0, p) - lr * scalar(weight_decay_, p));
  return Adam::apply_single(path, g, decayed, lr, step);
}

// ---------------------------------------------------------------------------------------
// Adagrad, RMSprop, Lion

Adagrad::Adagrad(LearningRate lr, double eps) : Optimizer(std::move(lr)), eps_(eps) {
  if (eps < 0) throw_invalid_argument("Adagrad", "eps must be >= 0; got ", eps, ".");
}

array Adagrad::apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t) {
  array& v = slot(path, "v", p);
  v = v + square(g);
  return p - lr * g / (sqrt(v) + scalar(eps_, p));
}

RMSprop::RMSprop(LearningRate lr, double alpha, double eps) : Optimizer(std::move(lr)), alpha_(alpha), eps_(eps) {
  if (alpha < 0 || eps < 0) {
    throw_invalid_argument("RMSprop", "alpha and eps must be >= 0; got ", alpha, " and ", eps, ".");
  }
}

array RMSprop::apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t) {
  array& v = slot(path, "v", p);
  v = scalar(alpha_, p) * v + scalar(1.0 - alpha_, p) * square(g);
  return p - lr * g / (sqrt(v) + scalar(eps_, p));
}

Lion::Lion(LearningRate lr, std::pair<double, double> betas, double weight_decay)
    : Optimizer(std::move(lr)), b1_(betas.first), b2_(betas.second), weight_decay_(weight_decay) {
  if (!(b1_ >= 0 && b1_ <= 1 && b2_ >= 0 && b2_ <= 1)) {
    throw_invalid_argument("Lion", "betas must be in [0, 1]; got (", b1_, ", ", b2_, ").");
  }
  if (weight_decay < 0) throw_invalid_argument("Lion", "weight_decay must be >= 0; got ", weight_decay, ".");
}

array Lion::apply_single(const std::string& path, const array& g, const array& p0, const array& lr, int64_t) {
  array& m = slot(path, "m", p0);
  array c = scalar(b1_, p0) * m + scalar(1.0 - b1_, p0) * g;
  m = scalar(b2_, p0) * m + scalar(1.0 - b2_, p0) * g;
  array p = p0;
  if (weight_decay_ > 0) p = (scalar(1.0, p0) - lr * scalar(weight_decay_, p0)) * p0;
  return p - lr * sign(c);
}

} // namespace nuvec::optimizers
