// Rotary frequencies of the config's rope type (src/lm/layers.h). The llama3 and yarn rules
// are transformers' _compute_llama3_parameters and _compute_yarn_parameters
// (modeling_rope_utils.py; YaRN: Peng et al. 2023), in float32 as there, so that the angles
// match transformers' to the last bit where possible.
#include <algorithm>
#include <cmath>
#include <vector>

#include "layers.h"

namespace nuvec::lm::detail {

fast::Rotation rotation(const ModelConfig& config) {
  const RopeConfig& rope = config.rope;
  int dims = int(config.head_dim * rope.partial_rotary_factor);
  fast::Rotation r{dims, /*traditional=*/false, rope.theta, 1.0f, std::nullopt};
  if (rope.type == "linear") {
    r.scale = 1.0f / rope.factor; // transformers divides the positions by the factor
  } else if (rope.type == "llama3") {
    const float pi = 3.14159265358979323846f;
    float old_len = float(rope.original_max_position_embeddings);
    float low_freq_wavelen = old_len / rope.low_freq_factor;
    float high_freq_wavelen = old_len / rope.high_freq_factor;
    std::vector<float> periods(dims / 2);
    for (int i = 0; i < dims / 2; ++i) {
      float inv_freq = 1.0f / std::pow(rope.theta, float(2 * i) / float(dims));
      float wavelen = 2 * pi / inv_freq;
      float scaled = wavelen > low_freq_wavelen ? inv_freq / rope.factor : inv_freq;
      bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      if (medium) {
        float smooth = (old_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
        scaled = (1 - smooth) * scaled / rope.factor + smooth * scaled;
      }
      periods[i] = 1.0f / scaled;
    }
    r.base = std::nullopt;
    r.freqs = array(periods.data(), {dims / 2}, float32);
  } else if (rope.type == "yarn") {
    const double pi = 3.14159265358979323846;
    const double base = rope.theta;
    const double orig = rope.original_max_position_embeddings > 0 ? rope.original_max_position_embeddings
                                                                   : config.max_position_embeddings;
    auto correction_dim = [&](double rotations) {
      return dims * std::log(orig / (rotations * 2 * pi)) / (2 * std::log(base));
    };
    double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(dims - 1));
    if (low == high) {
      high += 0.001;
    }
    std::vector<float> periods(dims / 2);
    for (int i = 0; i < dims / 2; ++i) {
      float pos_freq = std::pow(rope.theta, float(2 * i) / float(dims));
      float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (rope.factor * pos_freq);
      float ramp = std::clamp(float((i - low) / (high - low)), 0.0f, 1.0f);
      float extrapolation_factor = 1.0f - ramp;
      float inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
      periods[i] = 1.0f / inv_freq;
    }
    r.base = std::nullopt;
    r.freqs = array(periods.data(), {dims / 2}, float32);
  }
  return r;
}

float rope_attention_factor(const ModelConfig& config) {
  const RopeConfig& rope = config.rope;
  if (rope.type != "yarn") {
    return 1.0f;
  }
  if (rope.attention_factor) {
    return *rope.attention_factor;
  }
  return rope.factor <= 1.0f ? 1.0f : 0.1f * std::log(rope.factor) + 1.0f;
}

} // namespace nuvec::lm::detail
