// nuvec::optimizers: MLX's optimizers (SGD, Adam, AdamW, Adagrad, RMSprop, Lion), learning
// rate schedules and gradient clipping, over nn's flattened parameter trees. Update formulas
// and defaults follow MLX's python/mlx/optimizers; built on the public API only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nuvec/nn/module.h"

namespace nuvec::optimizers {

using nn::ParamMap;

/// A learning-rate schedule: the rate to use at a step (0 for the first update).
using Schedule = std::function<double(int64_t step)>;

/// A constant learning rate or a Schedule (so each optimizer takes either).
struct LearningRate {
  /// A constant rate.
  LearningRate(double value) : fn([value](int64_t) { return value; }) {}
  /// A schedule: any callable taking the step and returning the rate.
  template <class F>
    requires std::is_invocable_r_v<double, F, int64_t> && (!std::is_arithmetic_v<F>)
  LearningRate(F f) : fn(std::move(f)) {}
  Schedule fn;
};

/// rate(step) = init * decay_rate^step. Source: MLX exponential_decay.
Schedule exponential_decay(double init, double decay_rate);
/// rate(step) = init * decay_rate^floor(step / step_size). Throws std::invalid_argument
/// ("[step_decay] ...") for step_size <= 0. Source: MLX step_decay.
Schedule step_decay(double init, double decay_rate, int64_t step_size);
/// rate(step) = end + (init - end) (1 + cos(pi min(step, decay_steps) / decay_steps)) / 2.
/// Throws std::invalid_argument ("[cosine_decay] ...") for decay_steps <= 0.
/// Source: MLX cosine_decay.
Schedule cosine_decay(double init, int64_t decay_steps, double end = 0.0);
/// rate(step) = init + (end - init) min(step, steps) / steps (warm-up). Throws
/// std::invalid_argument ("[linear_schedule] ...") for steps <= 0. Source: MLX linear_schedule.
Schedule linear_schedule(double init, double end, int64_t steps);
/// schedules[0] before boundaries[0], then schedules[i + 1](step - boundaries[i]) from
/// boundaries[i] on. Throws std::invalid_argument ("[join_schedules] ...") unless there is
/// one boundary fewer than schedules, at least one schedule, and boundaries increase.
/// Source: MLX join_schedules.
Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries);

/// Scales every gradient by min(max_norm / (norm + 1e-6), 1), where norm is the global L2
/// norm sqrt(sum over leaves of sum(g^2)). Returns the clipped tree (same keys) and norm
/// (0-d, the gradients' dtype). Throws std::invalid_argument ("[clip_grad_norm] ...") for
/// max_norm < 0. Source: MLX clip_grad_norm.
std::pair<ParamMap, array> clip_grad_norm(const ParamMap& grads, double max_norm);

/// The optimizer base (MLX's Optimizer): a step counter and a state tree keyed
/// "<parameter path>.<slot>" (e.g. "layers.0.weight.m"), created on a parameter's first
/// update. Updates are lazy graphs: evaluate the model's parameters and state() after a step.
class Optimizer {
 public:
  explicit Optimizer(LearningRate lr) : lr_(std::move(lr.fn)) {}
  virtual ~Optimizer() = default;

  /// The optimizer's name for messages ("Adam", ...).
  virtual std::string name() const = 0;

  /// The new parameters: for every path in grads, params[path] updated by the rule. Uses the
  /// learning rate at step(), then increments step() (as MLX). Throws std::invalid_argument
  /// ("[Adam.update] ...") when a gradient has no parameter or their shapes differ.
  ParamMap apply_gradients(const ParamMap& grads, const ParamMap& params);
  /// model.update(apply_gradients(grads, model.parameters())).
  void update(nn::Module& model, const ParamMap& grads);

  /// The number of updates applied so far.
  int64_t step() const { return step_; }
  /// The learning rate the next update will use.
  double learning_rate() const { return lr_(step_); }
  /// The state tree (without the step).
  const ParamMap& state() const { return state_; }
  /// The state's arrays, for eval(...).
  std::vector<array> state_arrays() const { return nn::tree_leaves(state_); }
  /// Replaces the state and the step (for restoring).
  void set_state(ParamMap state, int64_t step);

  /// Saves the state and the step ("step", an int64 0-d array; metadata "optimizer" and
  /// "step") as safetensors. See save_safetensors for errors.
  void save_state(const std::string& file) const;
  /// Loads a file written by save_state. Throws std::invalid_argument
  /// ("[Adam.load_state] ...") when it lacks "step" or was written by another optimizer;
  /// std::runtime_error for a corrupt file.
  void load_state(const std::string& file);

 protected:
  /// The updated parameter for one gradient at `path` with learning rate lr (of the
  /// parameter's dtype); `step` is the 1-based count including this update.
  virtual array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) = 0;
  /// The state slot "<path>.<slot>", created as zeros_like(like) when absent.
  array& slot(const std::string& path, const std::string& slot, const array& like);

 private:
  Schedule lr_;
  int64_t step_ = 0;
  ParamMap state_;
};

/// SGD with momentum mu, dampening tau, weight decay wd, Nesterov (MLX's form):
/// g += wd p; without momentum p -= lr g; else v = mu v + (1 - tau) g (v starts at 0; no
/// dampening factor when tau = 0), update = g + mu v (Nesterov) or v, p -= lr update.
/// Throws std::invalid_argument ("[SGD] ...") for nesterov without momentum > 0 and
/// dampening 0, or negative values. Source: MLX optimizers.SGD.
class SGD : public Optimizer {
 public:
  explicit SGD(
      LearningRate lr,
      double momentum = 0.0,
      double weight_decay = 0.0,
      double dampening = 0.0,
      bool nesterov = false);
  std::string name() const override { return "SGD"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double momentum_, weight_decay_, dampening_;
  bool nesterov_;
};

/// Adam: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2; p -= lr m / (sqrt(v) + eps), or with
/// bias_correction p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
/// Defaults betas (0.9, 0.999), eps 1e-8, bias_correction false (MLX).
/// Source: MLX optimizers.Adam (Kingma & Ba, 2015).
class Adam : public Optimizer {
 public:
  explicit Adam(
      LearningRate lr,
      std::pair<double, double> betas = {0.9, 0.999},
      double eps = 1e-8,
      bool bias_correction = false);
  std::string name() const override { return "Adam"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double b1_, b2_, eps_;
  bool bias_correction_;
};

/// AdamW: p *= (1 - lr wd), then the Adam update. Default weight decay 0.01.
/// Source: MLX optimizers.AdamW (Loshchilov & Hutter, 2019).
class AdamW : public Adam {
 public:
  explicit AdamW(
      LearningRate lr,
      std::pair<double, double> betas = {0.9, 0.999},
      double eps = 1e-8,
      double weight_decay = 0.01,
      bool bias_correction = false);
  std::string name() const override { return "AdamW"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double weight_decay_;
};

/// Adagrad: v += g^2; p -= lr g / (sqrt(v) + eps). Default eps 1e-8.
/// Source: MLX optimizers.Adagrad (Duchi et al., 2011).
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(LearningRate lr, double eps = 1e-8);
  std::string name() const override { return "Adagrad"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double eps_;
};

/// RMSprop: v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps). Defaults alpha 0.99,
/// eps 1e-8. Throws std::invalid_argument ("[RMSprop] ...") for alpha or eps < 0.
/// Source: MLX optimizers.RMSprop (Tieleman & Hinton, 2012).
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(LearningRate lr, double alpha = 0.99, double eps = 1e-8);
  std::string name() const override { return "RMSprop"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double alpha_, eps_;
};

/// Lion: c = b1 m + (1 - b1) g; m = b2 m + (1 - b2) g; p *= (1 - lr wd) when wd > 0;
/// p -= lr sign(c). Defaults betas (0.9, 0.99), weight decay 0.
/// Source: MLX optimizers.Lion (Chen et al., 2023).
class Lion : public Optimizer {
 public:
  explicit Lion(LearningRate lr, std::pair<double, double> betas = {0.9, 0.99}, double weight_decay = 0.0);
  std::string name() const override { return "Lion"; }

 protected:
  array apply_single(const std::string& path, const array& g, const array& p, const array& lr, int64_t step) override;

 private:
  double b1_, b2_, weight_decay_;
};

} // namespace nuvec::optimizers
