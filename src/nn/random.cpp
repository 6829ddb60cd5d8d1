// nuvec::nn: the draws of the nn layers, each a key-less nuvec::random op (one key of the
// default key sequence per call), with the arguments MLX's Python layers pass: Python floats
// become float32 arrays before the op sees them.
#include "core/errors.h"
#include "nuvec/nn/init.h"
#include "nuvec/ops.h"
#include "nuvec/random.h"

namespace nuvec::nn {

void seed(uint64_t s) {
  random::seed(s);
}

namespace init {

array uniform(const Shape& shape, double low, double high, Dtype dtype) {
  if (!(low <= high)) {
    throw_invalid_argument("nn.init.uniform", "low must be <= high; got ", low, " and ", high, ".");
  }
  return random::uniform(
      array(static_cast<float>(low)), array(static_cast<float>(high)), shape, dtype);
}

array normal(const Shape& shape, double mean, double std, Dtype dtype) {
  if (!(std >= 0)) throw_invalid_argument("nn.init.normal", "std must be >= 0; got ", std, ".");
  return random::normal(shape, dtype, static_cast<float>(mean), static_cast<float>(std));
}

array bernoulli_mask(const Shape& shape, double keep_prob, Dtype dtype) {
  if (!(keep_prob >= 0 && keep_prob <= 1)) {
    throw_invalid_argument("nn.init.bernoulli_mask", "keep_prob must be in [0, 1]; got ", keep_prob, ".");
  }
  return astype(random::bernoulli(array(static_cast<float>(keep_prob)), shape), dtype);
}

} // namespace init
} // namespace nuvec::nn
