// nuvec: cross_entropy (shared/seeds/001: the checks, the fallback graph, the rules), and the
// CrossEntropy and CrossEntropyVjp fused primitives.
#include "fast/cross_entropy.h"

#include "fast/logsumexp.h"
#include "nuvec/fast.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// Class indices with negative values counted from the end (the fallback's rule).
array wrap_targets(const array& t, int classes, StreamOrDevice s) {
  return where(less(t, array(0, int32), s), add(t, array(classes, int32), s), t, s);
}

// The rows' one-hot masks of (wrapped) targets y over `classes` (bool): a target outside
// [0, classes) has none.
array one_hot(const array& y, int classes, StreamOrDevice s) {
  return equal(expand_dims(y, -1, s), arange(0, classes, int32, s), s);
}

// logits[target] per row (0 where the target is out of range), in dtype acc.
array target_score(const array& xf, const array& y, StreamOrDevice s) {
  return sum(where(one_hot(y, xf.shape(-1), s), xf, zeros_like(xf, s), s), -1, false, s);
}

} // namespace

namespace fast {

Dtype cross_entropy_dtype(Dtype dt) {
  return dt == float64 ? float64 : float32;
}

array cross_entropy(const array& logits, const array& targets, StreamOrDevice s) {
  const char* op = "cross_entropy";
  if (logits.ndim() == 0) {
    throw_invalid_argument(op, "logits must have at least one dimension (the classes); got a scalar.");
  }
  Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != rows) {
    throw_invalid_argument(
        op, "targets must have the logits' shape without the last axis ", rows, "; got targets ",
        targets.shape(), " for logits ", logits.shape(), ".");
  }
  if (!issubdtype(logits.dtype(), floating)) {
    throw_invalid_argument(op, "logits must be real floating; got ", logits.dtype(), ".");
  }
  if (!issubdtype(targets.dtype(), integer)) {
    throw_invalid_argument(op, "targets must be integer class indices; got ", targets.dtype(), ".");
  }
  const Dtype out = cross_entropy_dtype(logits.dtype());
  if (logits.shape(-1) == 0) {
    // No classes: no rows is an empty loss (torch's answer); rows have no class to score.
    if (targets.size() == 0) return zeros(rows, out, s);
    throw_invalid_argument(op, "logits must have at least one class; got shape ", logits.shape(), ".");
  }
  // Targets the int32 kernels cannot hold are out of range anyway: mapped to C (which picks
  // nothing) before the cast, so that no wide value wraps into a real class.
  array t = targets;
  if (t.dtype() != int32 && size_of(t.dtype()) >= 4) {
    const int c = logits.shape(-1);
    const Dtype dt = t.dtype();
    array cc = astype(array(int64_t(c), int64), dt, s);
    array out = greater_equal(t, cc, s); // unsigned: the only way out of range
    if (issubdtype(dt, signedinteger)) out = logical_or(out, less(t, negative(cc, s), s), s);
    t = where(out, cc, t, s);
  }
  t = astype(t, int32, s);
  return record_or_fallback(
      logits.size() > 0, std::make_shared<CrossEntropy>(to_stream(s)), {rows}, {out}, {logits, t})[0];
}

} // namespace fast

// ---- CrossEntropy ----------------------------------------------------------------------

CrossEntropy::CrossEntropy(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        const array& x = in[0];
        array xf = astype(x, fast::cross_entropy_dtype(x.dtype()), stream);
        array y = wrap_targets(in[1], x.shape(-1), stream);
        // (max − x_t) + logsumexp(x − max), the kernels' order (cross_entropy_rules.h): lse −
        // x_t rounds lse at the logits' magnitude. An infinite max shifts by 0 instead (max_shift), so
        // such rows keep lse − x_t's answers (logsumexp_graph's special cases).
        array m = fast::max_shift(xf, {-1}, stream);
        array lse = squeeze(fast::logsumexp_graph(subtract(xf, m, stream), {-1}, stream), -1, stream);
        return std::vector<array>{add(subtract(squeeze(m, -1, stream), target_score(xf, y, stream), stream), lse, stream)};
      }) {}

const char* CrossEntropy::name() const {
  return "CrossEntropy";
}

std::vector<Shape> CrossEntropy::output_shapes(const std::vector<array>& inputs) {
  return {inputs[1].shape()};
}

std::vector<array> CrossEntropy::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  std::vector<array> out;
  for (int a : argnums) {
    if (a != 0) throw_invalid_argument("cross_entropy", "there is no gradient with respect to the targets.");
    const array& x = primals[0];
    array g = astype(cotangents[0], outputs[0].dtype(), stream());
    out.push_back(fast::record_or_fallback(
        true, std::make_shared<CrossEntropyVjp>(stream()), {x.shape()}, {x.dtype()},
        {x, primals[1], outputs[0], g})[0]);
  }
  return out;
}

std::pair<std::vector<array>, std::vector<int>> CrossEntropy::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // The logits' core is their last axis, the targets have none: both batch axes go to the
  // front (an unbatched input is broadcast along the batch).
  const int ax_x = axes[0], ax_t = axes[1];
  const int b = ax_x >= 0 ? inputs[0].shape(ax_x) : inputs[1].shape(ax_t);
  auto front = [&](const array& a, int ax) {
    if (ax >= 0) return moveaxis(a, ax, 0, stream());
    Shape shape = a.shape();
    shape.insert(shape.begin(), b);
    return broadcast_to(expand_dims(a, 0, stream()), shape, stream());
  };
  array x = front(inputs[0], ax_x), t = front(inputs[1], ax_t);
  return {{array(t.shape(), fast::cross_entropy_dtype(x.dtype()), std::make_shared<CrossEntropy>(stream()), {x, t})},
          {0}};
}

bool CrossEntropy::is_equivalent(const Primitive& other) const {
  return same_type<CrossEntropy>(other) != nullptr;
}

// ---- CrossEntropyVjp -------------------------------------------------------------------

CrossEntropyVjp::CrossEntropyVjp(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        const array& x = in[0];
        const int classes = x.shape(-1);
        const Dtype acc = fast::cross_entropy_dtype(x.dtype());
        array xf = astype(x, acc, stream);
        array y = wrap_targets(in[1], classes, stream);
        // exp((x − x_t) − loss), the kernels' order: lse = loss + x_t would round at the logits'
        // magnitude.
        array xt = expand_dims(target_score(xf, y, stream), -1, stream);
        array p = exp(subtract(subtract(xf, xt, stream), expand_dims(in[2], -1, stream), stream), stream);
        array onehot = astype(one_hot(y, classes, stream), acc, stream);
        array gx = multiply(expand_dims(in[3], -1, stream), subtract(p, onehot, stream), stream);
        return std::vector<array>{astype(gx, x.dtype(), stream)};
      }) {}

const char* CrossEntropyVjp::name() const {
  return "CrossEntropyVjp";
}

std::vector<Shape> CrossEntropyVjp::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

bool CrossEntropyVjp::is_equivalent(const Primitive& other) const {
  return same_type<CrossEntropyVjp>(other) != nullptr;
}

} // namespace nuvec
