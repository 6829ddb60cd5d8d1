// Choosing the next token from a model's logits: greedy or sampled, with the logits
// processors of transformers' generate (generation/logits_process.py) applied in its order:
// repetition penalty, then temperature, top-k, top-p and min-p.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nuvec/array.h"

namespace nuvec::lm {

/// Sampling parameters (the names and meanings of transformers' GenerationConfig; 0 or 1
/// disables a processor as there).
struct SamplingOptions {
  float temperature = 0.0f;        ///< 0: greedy (argmax); else logits / temperature.
  int top_k = 0;                   ///< Keep the k largest logits (0: all).
  float top_p = 1.0f;              ///< Keep the smallest set of tokens whose probability reaches top_p.
  float min_p = 0.0f;              ///< Drop tokens below min_p · (the top token's probability).
  float repetition_penalty = 1.0f; ///< CTRL's penalty of tokens already in the context (> 0).
  std::optional<uint64_t> seed;    ///< The random stream's seed (absent: nuvec's global stream).
};

/// Draws next tokens. Stateful only through its random key (each call splits it), so that a
/// seeded sampler gives the same tokens on every run.
class Sampler {
 public:
  /// Throws std::invalid_argument ("[lm.Sampler] ...") for a negative temperature or top_k,
  /// top_p outside (0, 1], min_p outside [0, 1], or a repetition_penalty <= 0.
  explicit Sampler(SamplingOptions options = {});

  const SamplingOptions& options() const { return options_; }

  /// The next token of each row of logits [B, V] (any floating dtype; computed in float32):
  /// the penalty applied to the tokens of `context` [B, n] (int32, may be empty) as
  /// transformers' RepetitionPenaltyLogitsProcessor (a positive logit divided by the penalty,
  /// a negative one multiplied), then greedy argmax when temperature is 0, else the filtered
  /// softmax sampled by random::categorical. Returns int32 [B]; lazy.
  array operator()(const array& logits, const std::optional<array>& context = std::nullopt);

  /// The processed log-probabilities the sampler draws from ([B, V] float32, -inf for the
  /// filtered tokens); exposed for tests and for returning log-probabilities.
  array filtered_logits(const array& logits, const std::optional<array>& context = std::nullopt) const;

 private:
  SamplingOptions options_;
  std::optional<array> key_;
};

} // namespace nuvec::lm
