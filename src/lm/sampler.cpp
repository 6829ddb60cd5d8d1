// Next-token selection (include/nuvec/lm/sampler.h). Each processor follows transformers'
// generation/logits_process.py: RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper (ascending sort, drop the tokens whose cumulative
// probability stays <= 1 - top_p, always keep the most likely) and MinPLogitsWarper.
#include "nuvec/lm/sampler.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "nuvec/ops.h"
#include "nuvec/random.h"

namespace nuvec::lm {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[lm.Sampler] " + what);
}

} // namespace

Sampler::Sampler(SamplingOptions options) : options_(options) {
  const auto& o = options_;
  if (!(o.temperature >= 0.0f)) {
    fail("temperature must be >= 0 (got " + std::to_string(o.temperature) + ")");
  }
  if (o.top_k < 0) {
    fail("top_k must be >= 0 (got " + std::to_string(o.top_k) + ")");
  }
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    fail("top_p must be in (0, 1] (got " + std::to_string(o.top_p) + ")");
  }
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) {
    fail("min_p must be in [0, 1] (got " + std::to_string(o.min_p) + ")");
  }
  if (!(o.repetition_penalty > 0.0f)) {
    fail("repetition_penalty must be > 0 (got " + std::to_string(o.repetition_penalty) + ")");
  }
  if (o.seed) {
    key_ = random::key(*o.seed);
  }
}

array Sampler::filtered_logits(const array& logits, const std::optional<array>& context) const {
  if (logits.ndim() != 2 || !issubdtype(logits.dtype(), floating)) {
    fail("logits must be floating [batch, vocab]");
  }
  const auto& o = options_;
  const int V = logits.shape(1);
  array x = astype(logits, float32);
  if (o.repetition_penalty != 1.0f && context && context->size() > 0) {
    array ids = astype(*context, int32);
    array seen = take_along_axis(x, ids, -1);
    array p(o.repetition_penalty);
    seen = where(less(seen, array(0.0f)), multiply(seen, p), divide(seen, p));
    x = put_along_axis(x, ids, seen, -1);
  }
  if (o.temperature == 0.0f) {
    return x;
  }
  const array neg_inf(-std::numeric_limits<float>::infinity());
  x = divide(x, array(o.temperature));
  if (o.top_k > 0 && o.top_k < V) {
    array kth = slice(sort(x, -1), {0, V - o.top_k}, {x.shape(0), V - o.top_k + 1});
    x = where(less(x, kth), neg_inf, x);
  }
  if (o.top_p < 1.0f) {
    array order = argsort(x, -1);
    array cumulative = cumsum(softmax(take_along_axis(x, order, -1), -1, true), -1);
    array remove = less_equal(cumulative, array(1.0f - o.top_p));
    remove = slice_update(remove, zeros({x.shape(0), 1}, bool_), {0, V - 1}, {x.shape(0), V});
    x = where(put_along_axis(zeros(x.shape(), bool_), order, remove, -1), neg_inf, x);
  }
  if (o.min_p > 0.0f) {
    array probs = softmax(x, -1, true);
    array threshold = multiply(max(probs, -1, true), array(o.min_p));
    x = where(less(probs, threshold), neg_inf, x);
  }
  return x;
}

array Sampler::operator()(const array& logits, const std::optional<array>& context) {
  array x = filtered_logits(logits, context);
  if (options_.temperature == 0.0f) {
    return astype(argmax(x, -1), int32);
  }
  std::optional<array> sub;
  if (key_) {
    auto [next, draw] = random::split(*key_);
    key_ = next;
    sub = draw;
  }
  return astype(random::categorical(x, -1, sub), int32);
}

} // namespace nuvec::lm
