// nuvec::nn: the stand-in generator until nuvec's random module lands (replace this file and
// nothing else). Initialisers: host-side std::mt19937_64. Dropout masks: counter-based,
// bit = splitmix64(key ^ splitmix64(call counter) + element index), uniform in [0, 1) from the
// top 53 bits, so a mask depends only on (seed, call number, index), never on threads.
#include <atomic>
#include <mutex>
#include <random>
#include <vector>

#include "core/errors.h"
#include "nuvec/nn/init.h"
#include "nuvec/ops.h"

namespace nuvec::nn {

namespace {

struct Generator {
  std::mutex mu;
  std::mt19937_64 engine{0};
  uint64_t key = 0;
  uint64_t counter = 0;
};

Generator& generator() {
  static Generator g;
  return g;
}

// Steele, Lea, Flood: "Fast splittable pseudorandom number generators" (SplitMix64 finaliser).
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

size_t numel(const Shape& shape, const char* op) {
  size_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw_invalid_argument(op, "shape must have non-negative dimensions; got ", shape, ".");
    n *= static_cast<size_t>(d);
  }
  return n;
}

} // namespace

void seed(uint64_t s) {
  auto& g = generator();
  std::lock_guard<std::mutex> lock(g.mu);
  g.engine.seed(s);
  g.key = splitmix64(s ^ 0x6A09E667F3BCC909ull);
  g.counter = 0;
}

namespace init {

array uniform(const Shape& shape, double low, double high, Dtype dtype) {
  if (!(low <= high)) {
    throw_invalid_argument("nn.init.uniform", "low must be <= high; got ", low, " and ", high, ".");
  }
  std::vector<double> v(numel(shape, "nn.init.uniform"));
  auto& g = generator();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    std::uniform_real_distribution<double> dist(low, high);
    for (auto& x : v) x = dist(g.engine);
  }
  return astype(array(v.begin(), shape, float64), dtype);
}

array normal(const Shape& shape, double mean, double std, Dtype dtype) {
  if (!(std >= 0)) throw_invalid_argument("nn.init.normal", "std must be >= 0; got ", std, ".");
  std::vector<double> v(numel(shape, "nn.init.normal"));
  auto& g = generator();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    std::normal_distribution<double> dist(mean, std);
    for (auto& x : v) x = dist(g.engine);
  }
  return astype(array(v.begin(), shape, float64), dtype);
}

array bernoulli_mask(const Shape& shape, double keep_prob, Dtype dtype) {
  if (!(keep_prob >= 0 && keep_prob <= 1)) {
    throw_invalid_argument("nn.init.bernoulli_mask", "keep_prob must be in [0, 1]; got ", keep_prob, ".");
  }
  size_t n = numel(shape, "nn.init.bernoulli_mask");
  uint64_t stream;
  {
    auto& g = generator();
    std::lock_guard<std::mutex> lock(g.mu);
    stream = g.key ^ splitmix64(g.counter++);
  }
  std::vector<uint8_t> bits(n);
  for (size_t i = 0; i < n; ++i) {
    double u = static_cast<double>(splitmix64(stream + i) >> 11) * 0x1.0p-53;
    bits[i] = u < keep_prob;
  }
  return astype(array(bits.begin(), shape, uint8), dtype);
}

} // namespace init
} // namespace nuvec::nn
