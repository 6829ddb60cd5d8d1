// nuvec::nn: the nn generator, until nuvec's random module exists. Initialisers draw on the
// host from one std::mt19937_64; Dropout masks come from a counter-based hash (splitmix64
// over (key, call counter, element index)), isolated in src/nn/random.cpp so that the random
// module can replace both without touching the layers.
#pragma once

#include <cstdint>

#include "nuvec/array.h"

namespace nuvec::nn {

/// Reseeds the nn generator: the initialisers' std::mt19937_64 and the Dropout key (the
/// Dropout call counter restarts at 0). Same seed, same construction order: same weights and
/// masks. The initial seed is 0.
void seed(uint64_t s);

namespace init {
/// Samples of uniform[low, high) of `shape`, drawn on the host, as dtype (floating).
/// Throws std::invalid_argument ("[nn.init.uniform] ...") when low > high.
array uniform(const Shape& shape, double low, double high, Dtype dtype = float32);
/// Samples of normal(mean, std^2), drawn on the host, as dtype (floating).
/// Throws std::invalid_argument ("[nn.init.normal] ...") when std < 0.
array normal(const Shape& shape, double mean = 0.0, double std = 1.0, Dtype dtype = float32);
/// A mask of `shape` whose elements are 1 with probability keep_prob and 0 otherwise, from
/// the counter-based generator (each call advances the counter). Dtype: dtype.
/// Throws std::invalid_argument when keep_prob is outside [0, 1].
array bernoulli_mask(const Shape& shape, double keep_prob, Dtype dtype = float32);
} // namespace init

} // namespace nuvec::nn
