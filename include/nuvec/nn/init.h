// nuvec::nn: the draws of the nn layers (initial weights, Dropout masks). Every draw is a
// nuvec::random op without a key, so it takes the next key of the default key sequence:
// random::seed(s) (or nn::seed(s)) followed by the same construction and calls gives the same
// weights and masks, and the same numbers as MLX's Python nn (its layers' init formulas, with
// Python floats passed as float32 arrays). Implemented in src/nn/random.cpp.
#pragma once

#include <cstdint>

#include "nuvec/array.h"

namespace nuvec::nn {

/// random::seed(s): restarts the default key sequence, which the initialisers and Dropout
/// draw from (kept for code written before nn used nuvec::random).
void seed(uint64_t s);

namespace init {
/// random::uniform(array(float(low)), array(float(high)), shape, dtype): samples of
/// uniform[low, high) as dtype (floating), one key of the default sequence. MLX's Python
/// `mx.random.uniform(low=low, high=high, shape=shape, dtype=dtype)`.
/// Throws std::invalid_argument ("[nn.init.uniform] ...") when low > high, before drawing.
array uniform(const Shape& shape, double low, double high, Dtype dtype = float32);
/// random::normal(shape, dtype, float(mean), float(std)): samples of normal(mean, std^2) as
/// dtype (floating), one key of the default sequence. MLX's Python
/// `mx.random.normal(shape=shape, dtype=dtype, loc=mean, scale=std)`.
/// Throws std::invalid_argument ("[nn.init.normal] ...") when std < 0, before drawing.
array normal(const Shape& shape, double mean = 0.0, double std = 1.0, Dtype dtype = float32);
/// astype(random::bernoulli(array(float(keep_prob)), shape), dtype): 1 with probability
/// keep_prob, else 0, one key of the default sequence (MLX's Dropout mask,
/// `mx.random.bernoulli(1 - p, x.shape)`). Throws std::invalid_argument when keep_prob is
/// outside [0, 1].
array bernoulli_mask(const Shape& shape, double keep_prob, Dtype dtype = float32);
} // namespace init

} // namespace nuvec::nn
