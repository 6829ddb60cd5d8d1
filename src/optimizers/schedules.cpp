// nuvec::optimizers: learning-rate schedules and clipping by global norm; formulas from MLX's
// python/mlx/optimizers/schedulers.py and optimizers.py (clip_grad_norm).
#include <cmath>

#include "core/errors.h"
#include "nuvec/ops.h"
#include "nuvec/optimizers.h"

namespace nuvec::optimizers {

Schedule exponential_decay(double init, double decay_rate) {
  return [=](int64_t step) { return init * std::pow(decay_rate, static_cast<double>(step)); };
}

Schedule step_decay(double init, double decay_rate, int64_t step_size) {
  if (step_size <= 0) throw_invalid_argument("step_decay", "step_size must be positive; got ", step_size, ".");
  return [=](int64_t step) { return init * std::pow(decay_rate, static_cast<double>(step / step_size)); };
}

Schedule cosine_decay(double init, int64_t decay_steps, double end) {
  if (decay_steps <= 0) throw_invalid_argument("cosine_decay", "decay_steps must be positive; got ", decay_steps, ".");
  return [=](int64_t step) {
    double s = static_cast<double>(std::min(step, decay_steps));
    double decay = 0.5 * (1.0 + std::cos(M_PI * s / static_cast<double>(decay_steps)));
    return end + decay * (init - end);
  };
}

Schedule linear_schedule(double init, double end, int64_t steps) {
  if (steps <= 0) throw_invalid_argument("linear_schedule", "steps must be positive; got ", steps, ".");
  return [=](int64_t step) {
    double s = static_cast<double>(std::min(step, steps));
    return init + s * (end - init) / static_cast<double>(steps);
  };
}

Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries) {
  if (schedules.empty()) throw_invalid_argument("join_schedules", "schedules must not be empty; got none.");
  if (boundaries.size() + 1 != schedules.size()) {
    throw_invalid_argument(
        "join_schedules", "boundaries must number one fewer than schedules (", schedules.size() - 1, "); got ",
        boundaries.size(), ".");
  }
  for (size_t i = 0; i < schedules.size(); ++i) {
    if (!schedules[i]) throw_invalid_argument("join_schedules", "schedules must be callable; got an empty one at ", i, ".");
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      throw_invalid_argument(
          "join_schedules", "boundaries must increase; got ", boundaries[i - 1], " then ", boundaries[i], ".");
    }
  }
  return [schedules = std::move(schedules), boundaries = std::move(boundaries)](int64_t step) {
    size_t i = 0;
    while (i < boundaries.size() && step >= boundaries[i]) ++i;
    return i == 0 ? schedules[0](step) : schedules[i](step - boundaries[i - 1]);
  };
}

std::pair<ParamMap, array> clip_grad_norm(const ParamMap& grads, double max_norm) {
  if (!(max_norm >= 0)) throw_invalid_argument("clip_grad_norm", "max_norm must be >= 0; got ", max_norm, ".");
  if (grads.empty()) return {grads, array(0.0f)};
  Dtype dt = grads.begin()->second.dtype();
  array total = array(0.0, dt);
  for (auto& [k, g] : grads) total = total + sum(square(g));
  array norm = sqrt(total);
  array scale = minimum(array(max_norm, dt) / (norm + array(1e-6, dt)), array(1.0, dt));
  ParamMap out;
  for (auto& [k, g] : grads) out.insert_or_assign(k, g * astype(scale, g.dtype()));
  return {std::move(out), norm};
}

} // namespace nuvec::optimizers
