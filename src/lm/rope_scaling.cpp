// Rotary frequencies of the config's rope type (src/lm/layers.h). The llama3 rule is
// transformers' _compute_llama3_parameters (modeling_rope_utils.py), in float32 as there, so
// that the angles match transformers' to the last bit where possible.
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
  }
  return r;
}

} // namespace nuvec::lm::detail
