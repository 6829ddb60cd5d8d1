// nuvec: scaled_dot_product_attention (MLX's signature and checks, shared/seeds/001's routes
// and options), plan_attention, paged_attention and paged_write: their validation, fallback
// graphs (the meaning every kernel is tested against) and the rules of the attention
// primitives. The planner's decisions: attention_plan.cpp; the kernels: attention.h.
#include "fast/attention.h"
#include "fast/int32_indices.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "fast/attention_plan.h"
#include "fast/last_writer.h"
#include "nuvec/fast.h"
#include "nuvec/transforms.h"
#include "nuvec/backend/gpu/device_info.h"
#include "nuvec/utils.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

bool on_gpu(const Stream& s) {
  return s.device == Device::gpu;
}

// Which mask a call has, from mask_mode and the array (MLX's rules: "" with an array is an
// array mask; "causal" takes no array).
struct MaskChoice {
  bool causal = false;
  const array* mask = nullptr;
};

MaskChoice choose_mask(const fast::AttentionOptions& o) {
  MaskChoice m;
  if (o.mask_mode == "causal") {
    if (o.mask) throw_invalid_argument(kOp, "mask_mode 'causal' takes no mask array.");
    m.causal = true;
  } else if (o.mask_mode == "array") {
    if (!o.mask) throw_invalid_argument(kOp, "mask_mode 'array' needs a mask array.");
    m.mask = &*o.mask;
  } else if (o.mask_mode.empty()) {
    if (o.mask) m.mask = &*o.mask;
  } else {
    throw_invalid_argument(kOp, "unknown mask_mode '", o.mask_mode, "'; it must be 'causal', 'array' or ''.");
  }
  return m;
}

// The checks of the op on shapes and dtypes (shared by the op and plan_attention); returns
// the routing key for the stream.
fast::RouteKey attention_key(
    const Shape& q,
    const Shape& k,
    const Shape& v,
    Dtype dtype,
    const fast::AttentionOptions& o,
    const Stream& stream) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) {
    throw_invalid_argument(kOp, "q, k and v must be 4-D [B, H, L, D]; got ", q, ", ", k, " and ", v, ".");
  }
  if (k[0] != q[0] || v[0] != q[0]) {
    throw_invalid_argument(kOp, "q, k and v must have one batch size; got ", q, ", ", k, " and ", v, ".");
  }
  if (q[3] != k[3]) {
    throw_invalid_argument(kOp, "q and k must have the same head size D; got ", q, " and ", k, ".");
  }
  if (k[1] != v[1] || k[2] != v[2]) {
    throw_invalid_argument(kOp, "k and v must have the same heads and length; got ", k, " and ", v, ".");
  }
  if (k[1] == 0 || q[1] % k[1] != 0) {
    throw_invalid_argument(
        kOp, "the query heads (", q[1], ") must be a multiple of the key heads (", k[1], "); got ", q, " and ", k,
        ".");
  }
  if (!issubdtype(dtype, floating)) throw_invalid_argument(kOp, "q, k and v must be real floating; got ", dtype, ".");
  const MaskChoice m = choose_mask(o);
  fast::RouteKey key;
  key.b = q[0];
  key.hq = q[1];
  key.hkv = k[1];
  key.lq = q[2];
  key.lk = k[2];
  key.d = q[3];
  key.dv = v[3];
  key.dtype = dtype;
  key.causal = m.causal;
  if (m.mask) {
    const array& a = *m.mask;
    if (a.ndim() > 4) throw_invalid_argument(kOp, "the mask must have at most 4 dimensions; got ", a.shape(), ".");
    const Shape full{q[0], q[1], q[2], k[2]};
    for (size_t i = 0; i < a.ndim(); ++i) {
      const int got = a.shape(static_cast<int>(a.ndim() - 1 - i));
      if (got != 1 && got != full[3 - i]) {
        throw_invalid_argument(kOp, "the mask ", a.shape(), " does not broadcast to ", full, ".");
      }
    }
    if (a.dtype() != bool_ && promote_types(a.dtype(), dtype) != dtype) {
      throw_invalid_argument(kOp, "a ", a.dtype(), " mask does not promote to ", dtype, ".");
    }
    key.has_mask = true;
    key.bool_mask = a.dtype() == bool_;
  }
  if (o.sinks) {
    const array& sk = *o.sinks;
    if (sk.ndim() != 1 || sk.shape(0) != q[1] || promote_types(sk.dtype(), dtype) != dtype) {
      throw_invalid_argument(
          kOp, "sinks must be [", q[1], "] of a type promoting to ", dtype, "; got ", sk.dtype(), " ", sk.shape(), ".");
    }
    key.has_sinks = true;
  }
  if (o.window) {
    if (*o.window < 1) throw_invalid_argument(kOp, "the window must be at least 1; got ", *o.window, ".");
    if (!m.causal) throw_invalid_argument(kOp, "a window needs mask_mode 'causal'.");
    key.window = *o.window;
  }
  if (o.max_score_bytes) {
    key.cap = *o.max_score_bytes;
    key.cap_given = true;
  }
  key.gpu = on_gpu(stream);
  if (key.gpu) {
    const auto& info = gpu::device_info(stream.device.index);
    auto it = info.find("multiprocessor_count");
    key.sm_count = it == info.end() ? 0 : static_cast<int>(std::get<size_t>(it->second));
    auto major = info.find("compute_capability_major");
    key.hopper = major != info.end() && std::get<size_t>(major->second) == 9 && fast::hopper_forward_enabled();
  }
  return key;
}

// The fallback's value for hidden scores: the dtype's lowest (MLX: finfo(dtype).min).
array lowest_of(Dtype dt) {
  return array(finfo(dt).min, dt);
}

} // namespace

namespace fast {

Dtype attention_lse_dtype(Dtype dt) {
  return dt == float64 ? float64 : float32;
}

std::vector<array> attention_graph(
    const std::vector<array>& in,
    const AttentionParams& p,
    std::optional<int> offset,
    StreamOrDevice s) {
  const array& q0 = in[0];
  const Dtype dt = q0.dtype();
  const int b = q0.shape(0), hq = q0.shape(1), lq = q0.shape(2), d = q0.shape(3);
  const int hkv = in[1].shape(1), lk = in[1].shape(2), dv = in[2].shape(3);
  const int rep = hq / hkv;
  const Dtype acc = attention_lse_dtype(dt);
  array q = multiply(q0, array(p.scale, dt), s);
  array k = in[1], v = in[2];
  if (rep > 1) {
    q = reshape(q, {b, hkv, rep, lq, d}, s);
    k = expand_dims(k, 2, s);
    v = expand_dims(v, 2, s);
  }
  array scores = matmul(q, swapaxes(k, -1, -2, s), s);
  std::optional<array> mask;
  if (p.causal) {
    const int off = offset.value_or(lk - lq);
    array qi = expand_dims(arange(off, off + lq, 1, s), 1, s);
    array ki = expand_dims(arange(0, lk, 1, s), 0, s);
    array seen = greater_equal(qi, ki, s);
    if (p.window > 0) seen = logical_and(seen, greater(ki, subtract(qi, array(p.window, int32), s), s), s);
    mask = seen;
  } else if (p.has_mask) {
    mask = rep > 1 ? reshape(in[3], {b, hkv, rep, lq, lk}, s) : in[3];
  }
  if (mask) {
    scores = mask->dtype() == bool_ ? where(*mask, scores, lowest_of(dt), s) : add(scores, *mask, s);
  }
  array sf = astype(scores, acc, s);
  if (p.has_sinks) {
    array sink = astype(in.back(), acc, s);
    sink = rep > 1 ? reshape(sink, {1, hkv, rep, 1, 1}, s) : reshape(sink, {1, hq, 1, 1}, s);
    Shape col = sf.shape();
    col.back() = 1;
    sf = concatenate({broadcast_to(sink, col, s), sf}, -1, s);
  }
  array probs = softmax(sf, -1, false, s);
  array lse = logsumexp(sf, -1, false, s);
  if (p.has_sinks) {
    Shape start(probs.ndim(), 0), stop = probs.shape();
    start.back() = 1;
    probs = slice(probs, start, stop, s);
  }
  array out = matmul(astype(probs, dt, s), v, s);
  if (rep > 1) {
    out = reshape(out, {b, hq, lq, dv}, s);
    lse = reshape(lse, {b, hq, lq}, s);
  }
  return {out, lse};
}

attention::Geometry attention_geometry(const std::vector<array>& in, const AttentionParams& p) {
  attention::Geometry g;
  const array &q = in[0], &k = in[1], &v = in[2];
  g.b = q.shape(0);
  g.hq = q.shape(1);
  g.lq = q.shape(2);
  g.d = q.shape(3);
  g.hkv = k.shape(1);
  g.lk = k.shape(2);
  g.dv = v.shape(3);
  for (int i = 0; i < 3; ++i) {
    g.q_stride[i] = q.strides()[i];
    g.k_stride[i] = k.strides()[i];
    g.v_stride[i] = v.strides()[i];
  }
  g.has_mask = p.has_mask;
  if (p.has_mask) {
    const array& m = in[3];
    g.bool_mask = m.dtype() == bool_;
    for (int i = 0; i < 4; ++i) g.mask_stride[i] = m.shape(i) == 1 ? 0 : m.strides()[i];
  }
  g.has_sinks = p.has_sinks;
  g.causal = p.causal;
  g.window = p.window;
  g.scale = p.scale;
  return g;
}

} // namespace fast

// ---- ScaledDotProductAttention ---------------------------------------------------------

ScaledDotProductAttention::ScaledDotProductAttention(Stream stream, fast::AttentionParams params)
    : FastPrimitive(
          stream,
          [stream, params](const std::vector<array>& in) {
            return fast::attention_graph(in, params, std::nullopt, stream);
          }),
      params_(params) {}

const char* ScaledDotProductAttention::name() const {
  return "ScaledDotProductAttention";
}

std::vector<Shape> ScaledDotProductAttention::output_shapes(const std::vector<array>& in) {
  const Shape& q = in[0].shape();
  return {{q[0], q[1], q[2], in[2].shape(3)}, {q[0], q[1], q[2]}};
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& other) const {
  auto* o = same_type<ScaledDotProductAttention>(other);
  return o && o->params_ == params_;
}

std::vector<array> ScaledDotProductAttention::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // An additive mask's gradient (the scores' gradient, summed over its broadcast axes) comes
  // from the fallback's rule; the kernels give q, k, v and sinks.
  const int mask_at = params_.has_mask ? 3 : -1;
  std::vector<int> kernel_args, mask_args;
  for (int a : argnums) (a == mask_at ? mask_args : kernel_args).push_back(a);
  if (!mask_args.empty()) {
    std::vector<array> mask_grad = FastPrimitive::vjp(primals, cotangents, mask_args, outputs);
    std::vector<array> rest = kernel_args.empty() ? std::vector<array>{} : vjp(primals, cotangents, kernel_args, outputs);
    std::vector<array> out;
    size_t r = 0;
    for (int a : argnums) out.push_back(a == mask_at ? mask_grad[0] : rest[r++]);
    return out;
  }
  const Dtype dt = primals[0].dtype();
  if (!on_gpu(stream()) || dt == float64) return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
  // The backward kernel, from the saved lse (the lse's own cotangent is dropped: nothing
  // outside this primitive reads that output).
  std::vector<array> in = primals;
  in.push_back(outputs[0]);
  in.push_back(outputs[1]);
  in.push_back(astype(cotangents[0], dt, stream()));
  std::vector<Shape> shapes{primals[0].shape(), primals[1].shape(), primals[2].shape()};
  std::vector<Dtype> dtypes{dt, dt, dt};
  if (params_.has_sinks) {
    shapes.push_back(primals.back().shape());
    dtypes.push_back(dt);
  }
  auto grads = array::make_arrays(
      shapes, dtypes, std::make_shared<ScaledDotProductAttentionVjp>(stream(), params_), in);
  std::vector<array> out;
  for (int a : argnums) out.push_back(a < 3 ? grads[a] : grads[3]);
  return out;
}

std::pair<std::vector<array>, std::vector<int>> ScaledDotProductAttention::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // Sinks are per head: a batch of them cannot fold into B; the fallback batches instead.
  if (params_.has_sinks && axes.back() >= 0) return FastPrimitive::vmap(inputs, axes);
  int n = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] >= 0) n = inputs[i].shape(axes[i]);
  }
  const int core = params_.has_mask ? 4 : 3; // q, k, v[, mask] carry the batch B
  std::vector<array> folded;
  for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
    const array& x = inputs[i];
    if (i >= core) {
      folded.push_back(x);
      continue;
    }
    array a = axes[i] >= 0 ? moveaxis(x, axes[i], 0, stream()) : [&] {
      Shape shape = x.shape();
      shape.insert(shape.begin(), n);
      return broadcast_to(expand_dims(x, 0, stream()), shape, stream());
    }();
    folded.push_back(flatten(a, 0, 1, stream()));
  }
  const Shape& q = folded[0].shape();
  auto outs = array::make_arrays(
      {{q[0], q[1], q[2], folded[2].shape(3)}, {q[0], q[1], q[2]}},
      {folded[0].dtype(), fast::attention_lse_dtype(folded[0].dtype())},
      std::make_shared<ScaledDotProductAttention>(stream(), params_), folded);
  for (auto& o : outs) o = unflatten(o, 0, {n, o.shape(0) / n}, stream());
  return {outs, {0, 0}};
}

// ---- ScaledDotProductAttentionVjp ------------------------------------------------------

ScaledDotProductAttentionVjp::ScaledDotProductAttentionVjp(Stream stream, fast::AttentionParams params)
    : FastPrimitive(
          stream,
          [stream, params](const std::vector<array>& in) {
            // in: q, k, v[, mask][, sinks], out, lse, dout. The gradients of the forward's
            // graph for q, k, v[, sinks], the lse's cotangent zero.
            const size_t n = in.size() - 3;
            std::vector<array> primals(in.begin(), in.begin() + static_cast<long>(n));
            std::vector<int> wanted{0, 1, 2};
            if (params.has_sinks) wanted.push_back(static_cast<int>(n) - 1);
            auto f = [&](const std::vector<array>& xs) { return fast::attention_graph(xs, params, std::nullopt, stream); };
            const array& lse = in[n + 1];
            auto grads = detail::vjp(f, primals, {in[n + 2], zeros_like(lse, stream)}, wanted).second;
            return grads;
          }),
      params_(params) {}

const char* ScaledDotProductAttentionVjp::name() const {
  return "ScaledDotProductAttentionVjp";
}

std::vector<Shape> ScaledDotProductAttentionVjp::output_shapes(const std::vector<array>& in) {
  std::vector<Shape> shapes{in[0].shape(), in[1].shape(), in[2].shape()};
  if (params_.has_sinks) shapes.push_back(in[in.size() - 4].shape());
  return shapes;
}

bool ScaledDotProductAttentionVjp::is_equivalent(const Primitive& other) const {
  auto* o = same_type<ScaledDotProductAttentionVjp>(other);
  return o && o->params_ == params_;
}

// ---- the op ------------------------------------------------------------------------------

namespace fast {

namespace {

// One validated call, ready to run parts of.
struct Call {
  const RouteKey& key;
  float scale;
  array q, k, v;
  std::optional<array> mask; // broadcast to [B, Hq, Lq, Lk]
  std::optional<array> sinks;
  Stream stream;

  AttentionParams params() const {
    AttentionParams p;
    p.scale = scale;
    p.causal = key.causal;
    p.window = key.window;
    p.has_mask = mask.has_value();
    p.has_sinks = sinks.has_value();
    return p;
  }

  std::vector<array> inputs(array qq, array kk, array vv, std::optional<array> m) const {
    std::vector<array> in{std::move(qq), std::move(kk), std::move(vv)};
    if (m) in.push_back(*m);
    if (sinks) in.push_back(*sinks);
    return in;
  }

  array fused(int passes, int key_blocks, bool hopper = false) const {
    AttentionParams p = params();
    p.passes = passes;
    p.key_blocks = key_blocks;
    p.hopper = hopper;
    auto in = inputs(q, k, v, mask);
    const Shape& qs = q.shape();
    return array::make_arrays(
        {{qs[0], qs[1], qs[2], v.shape(3)}, {qs[0], qs[1], qs[2]}}, {q.dtype(), attention_lse_dtype(q.dtype())},
        std::make_shared<ScaledDotProductAttention>(stream, p), in)[0];
  }

  // The composition over query rows [start, end), with only the keys those rows see when
  // every one of them sees some (a row that sees none attends to all Lk keys, so its block
  // keeps them all), evaluated after `after` when given.
  array composed(int start, int end, const std::optional<array>& after) const {
    const int lq = static_cast<int>(key.lq), lk = static_cast<int>(key.lk);
    int lo = 0, hi = lk;
    if (key.causal && start + lk - lq >= 0) {
      hi = std::min(lk, end + lk - lq);
      if (key.window > 0) lo = std::max(0, start + lk - lq - key.window + 1);
    }
    const int off = start + lk - lq - lo;
    const int b = q.shape(0);
    array qq = (start == 0 && end == lq) ? q : slice(q, {0, 0, start, 0}, {b, q.shape(1), end, q.shape(3)}, stream);
    array kk = k, vv = v;
    if (lo != 0 || hi != lk) {
      kk = slice(k, {0, 0, lo, 0}, {b, k.shape(1), hi, k.shape(3)}, stream);
      vv = slice(v, {0, 0, lo, 0}, {b, v.shape(1), hi, v.shape(3)}, stream);
    }
    std::optional<array> m;
    if (mask) m = slice(*mask, {0, 0, start, lo}, {b, static_cast<int>(key.hq), end, hi}, stream);
    if (after) qq = depends({qq}, {*after})[0];
    return attention_graph(inputs(qq, kk, vv, m), params(), off, stream)[0];
  }
};

// force_fused's refusal, the op's and plan_attention's: no fused kernel covers the call.
void check_force_fused(const char* op, const AttentionOptions& options, const AttentionPlan& plan, const Shape& q,
                       const Shape& k, const Shape& v, Dtype dt) {
  if (options.force_fused && plan.route == AttentionRoute::Composed) {
    throw_invalid_argument(op, "force_fused: no fused kernel covers q ", q, ", k ", k, ", v ", v, " in ", dt,
                           " on this device.");
  }
}

array sdpa(
    const array& queries,
    const array& keys,
    const array& values,
    float scale,
    const AttentionOptions& options,
    StreamOrDevice s) {
  for (const array* a : {&queries, &keys, &values}) {
    if (a->ndim() != 4) {
      throw_invalid_argument(
          kOp, "q, k and v must be 4-D [B, H, L, D]; got ", queries.shape(), ", ", keys.shape(), " and ",
          values.shape(), ".");
    }
  }
  const Stream stream = to_stream(s);
  const Dtype dt = promote_types(promote_types(queries.dtype(), keys.dtype()), values.dtype());
  const RouteKey key = attention_key(queries.shape(), keys.shape(), values.shape(), dt, options, stream);
  const AttentionPlan plan = fast::plan(key);
  const MaskChoice m = choose_mask(options);
  Call call{key, scale, astype(queries, dt, stream), astype(keys, dt, stream), astype(values, dt, stream), {}, {}, stream};
  if (m.mask) {
    array mk = m.mask->dtype() == bool_ ? *m.mask : astype(*m.mask, dt, stream);
    call.mask = broadcast_to(mk, {queries.shape(0), queries.shape(1), queries.shape(2), keys.shape(2)}, stream);
  }
  if (options.sinks) call.sinks = astype(*options.sinks, dt, stream);
  check_force_fused(kOp, options, plan, queries.shape(), keys.shape(), values.shape(), dt);
  // An empty output, or no key to attend to: the composed graph's answer is empty, or zeros
  // (MLX's fallback: a softmax over no scores times no values, and sinks carry no values),
  // without a node (its log-sum-exp over no keys would throw at eval). A head size of 0 with
  // keys is not this case: every score is 0 and the output is the mean of v.
  const Shape out_shape{queries.shape(0), queries.shape(1), queries.shape(2), values.shape(3)};
  const bool empty_out = out_shape[0] == 0 || out_shape[1] == 0 || out_shape[2] == 0 || out_shape[3] == 0;
  if (empty_out || keys.shape(2) == 0) return zeros(out_shape, dt, stream);
  switch (plan.route) {
    case AttentionRoute::Vector:
      return call.fused(plan.passes, plan.key_blocks);
    case AttentionRoute::Tiled:
      return call.fused(0, 1, plan.warp_specialized);
    case AttentionRoute::Composed:
      break;
  }
  const int lq = static_cast<int>(key.lq);
  const int rows = std::max(plan.query_rows, 1);
  if (rows >= lq) return call.composed(0, lq, std::nullopt);
  // Each block's queries wait for the previous block's output, so one block's scores are
  // live at a time.
  std::vector<array> outs;
  for (int start = 0; start < lq; start += rows) {
    std::optional<array> after;
    if (!outs.empty()) after = outs.back();
    outs.push_back(call.composed(start, std::min(start + rows, lq), after));
  }
  return concatenate(outs, 2, stream);
}

} // namespace

array scaled_dot_product_attention(
    const array& queries,
    const array& keys,
    const array& values,
    float scale,
    const AttentionOptions& options,
    StreamOrDevice s) {
  return sdpa(queries, keys, values, scale, options, s);
}

array scaled_dot_product_attention(
    const array& queries,
    const array& keys,
    const array& values,
    float scale,
    const std::string& mask_mode,
    std::optional<array> mask_arr,
    const std::optional<array>& sinks,
    StreamOrDevice s) {
  AttentionOptions o;
  o.mask_mode = mask_mode;
  o.mask = std::move(mask_arr);
  o.sinks = sinks;
  return sdpa(queries, keys, values, scale, o, s);
}

AttentionPlan plan_attention(
    const Shape& q,
    const Shape& k,
    const Shape& v,
    Dtype dtype,
    const AttentionOptions& options,
    StreamOrDevice s) {
  for (const Shape* sh : {&q, &k, &v}) {
    for (int d : *sh) {
      if (d < 0) throw_invalid_argument("plan_attention", "dimensions must not be negative; got ", *sh, ".");
    }
  }
  const AttentionPlan plan = fast::plan(attention_key(q, k, v, dtype, options, to_stream(s)));
  check_force_fused("plan_attention", options, plan, q, k, v, dtype);
  return plan;
}

// ---- paged attention -------------------------------------------------------------------

namespace {

bool is_integer(const array& a) {
  return issubdtype(a.dtype(), integer);
}

// The keys of every listed block per sequence, [B, Hkv, max_blocks · block_size, D]; block
// ids clamped to [0, blocks), as the kernels do.
array paged_keys(const array& cache, const array& tables, StreamOrDevice s) {
  const int b = tables.shape(0), mb = tables.shape(1);
  const int blocks = cache.shape(0), hkv = cache.shape(1), bs = cache.shape(2), d = cache.shape(3);
  array ids = minimum(maximum(reshape(tables, {-1}, s), array(0, int32), s), array(blocks - 1, int32), s);
  array g = take(cache, ids, 0, s); // [B·M, Hkv, bs, D]
  g = transpose(reshape(g, {b, mb, hkv, bs, d}, s), {0, 2, 1, 3, 4}, s);
  return reshape(g, {b, hkv, mb * bs, d}, s);
}

// paged_attention's meaning: the listed blocks gathered, then attention with a mask of each
// query's visible positions (those before its end, and with a window its last `window`), and
// the sinks' logits in its softmax.
array paged_attention_graph(const std::vector<array>& in, float scale, const std::optional<array>& sinks,
                            std::optional<int> window, Stream s) {
  const array &q = in[0], &tables = in[3];
  const int b = q.shape(0), lq = q.shape(2);
  array k = paged_keys(in[1], tables, s), v = paged_keys(in[2], tables, s);
  const int cap = k.shape(2);
  array len = minimum(maximum(in[4], array(0, int32), s), array(cap, int32), s);
  array pos = reshape(arange(0, cap, 1, s), {1, 1, 1, cap}, s);
  array qi = reshape(arange(0, lq, 1, s), {1, 1, lq, 1}, s);
  array end = add(reshape(len, {b, 1, 1, 1}, s), subtract(qi, array(lq - 1, int32), s), s);
  AttentionOptions o;
  o.mask = less(pos, end, s);
  if (window) {
    o.mask = logical_and(*o.mask, greater_equal(pos, subtract(end, array(*window, int32), s), s), s);
  }
  o.sinks = sinks;
  return scaled_dot_product_attention(q, k, v, scale, o, s);
}

// paged_write's meaning: the cache as one row per slot, the rows of `slots` replaced; of rows
// naming one slot the last lands (last_writer.h). Out-of-range slots and overwritten rows
// write a scratch row past the end, dropped after.
array paged_write_graph(const std::vector<array>& in, Stream s) {
  const array &cache = in[0], &values = in[1];
  const int blocks = cache.shape(0), hkv = cache.shape(1), bs = cache.shape(2), d = cache.shape(3);
  const int end = blocks * bs;
  array rows = reshape(transpose(cache, {0, 2, 1, 3}, s), {end, hkv, d}, s);
  array sl = in[2];
  sl = where(logical_or(less(sl, array(0, int32), s), greater_equal(sl, array(end, int32), s), s), array(end, int32), sl, s);
  sl = detail::last_writer_targets(sl, end, end, s);
  rows = concatenate({rows, zeros({1, hkv, d}, rows.dtype(), s)}, 0, s);
  array at = broadcast_to(reshape(sl, {-1, 1, 1}, s), values.shape(), s);
  rows = put_along_axis(rows, at, values, 0, s);
  rows = slice(rows, {0, 0, 0}, {end, hkv, d}, s);
  return transpose(reshape(rows, {blocks, bs, hkv, d}, s), {0, 2, 1, 3}, s);
}

bool power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

} // namespace

array paged_attention(
    const array& q,
    const array& k_cache,
    const array& v_cache,
    const array& block_tables,
    const array& lengths,
    float scale,
    StreamOrDevice s) {
  return paged_attention(q, k_cache, v_cache, block_tables, lengths, scale, std::nullopt, std::nullopt, s);
}

array paged_attention(
    const array& q,
    const array& k_cache,
    const array& v_cache,
    const array& block_tables,
    const array& lengths,
    float scale,
    const std::optional<array>& sinks,
    std::optional<int> window,
    StreamOrDevice s) {
  const char* op = "paged_attention";
  if (q.ndim() != 4 || k_cache.ndim() != 4 || k_cache.shape() != v_cache.shape()) {
    throw_invalid_argument(
        op, "q must be [B, Hq, L, D] and the caches [blocks, Hkv, block_size, D] alike; got ", q.shape(), ", ",
        k_cache.shape(), " and ", v_cache.shape(), ".");
  }
  const int b = q.shape(0), hq = q.shape(1), d = q.shape(3), hkv = k_cache.shape(1);
  if (k_cache.shape(3) != d || hkv == 0 || hq % hkv != 0) {
    throw_invalid_argument(
        op, "q's heads (", hq, ") must be a multiple of the caches' (", hkv, "), with head size ", d, "; got ",
        q.shape(), " and ", k_cache.shape(), ".");
  }
  const Dtype dt = q.dtype();
  if (!issubdtype(dt, floating)) throw_invalid_argument(op, "q must be real floating; got ", dt, ".");
  if (block_tables.ndim() != 2 || block_tables.shape(0) != b || !is_integer(block_tables)) {
    throw_invalid_argument(
        op, "block_tables must be [", b, ", max_blocks] integers; got ", block_tables.dtype(), " ",
        block_tables.shape(), ".");
  }
  if (lengths.ndim() != 1 || lengths.shape(0) != b || !is_integer(lengths)) {
    throw_invalid_argument(op, "lengths must be [", b, "] integers; got ", lengths.dtype(), " ", lengths.shape(), ".");
  }
  if (k_cache.shape(0) == 0 || block_tables.shape(1) == 0) {
    throw_invalid_argument(op, "the caches and the block tables must hold at least one block; got ", k_cache.shape(),
                           " and ", block_tables.shape(), ".");
  }
  if (k_cache.shape(2) == 0) {
    throw_invalid_argument(op, "the block size (k_cache.shape(2)) must be positive; got caches ", k_cache.shape(), ".");
  }
  if (sinks && (sinks->ndim() != 1 || sinks->shape(0) != hq || !issubdtype(sinks->dtype(), floating))) {
    throw_invalid_argument(op, "sinks must be [", hq, "] floating; got ", sinks->dtype(), " ", sinks->shape(), ".");
  }
  if (window && *window < 1) throw_invalid_argument(op, "window must be at least 1; got ", *window, ".");
  const Stream stream = to_stream(s);
  // No query (no sequence, head or position, or head size 0): an empty result, without a node.
  if (q.size() == 0) return zeros(q.shape(), dt, stream);
  std::vector<array> in{
      q, astype(k_cache, dt, stream), astype(v_cache, dt, stream), fast::detail::saturate_to_int32(block_tables, stream),
      fast::detail::saturate_to_int32(lengths, stream)};
  const bool covers = on_gpu(stream) && (dt == float16 || dt == bfloat16 || dt == float32) &&
      (d == 64 || d == 128 || d == 256) && power_of_two(k_cache.shape(2)) &&
      k_cache.size() < std::numeric_limits<uint32_t>::max() && q.size() > 0;
  if (sinks || window) {
    // Sinks and windows are in the tensor-core decode kernel only (float16 / bfloat16, at most
    // kPagedDecodeRows query rows a key head, as the serving engine's one-token rows are);
    // elsewhere the graph itself.
    const bool decode = covers &&
        paged_decode_covers(dt, d, int64_t(hq / hkv) * q.shape(2), int64_t(block_tables.shape(1)) * k_cache.shape(2));
    std::optional<array> sk;
    if (sinks) sk = astype(*sinks, dt, stream);
    if (!decode) return paged_attention_graph(in, scale, sk, window, stream);
    if (sk) in.push_back(*sk);
    auto prim = std::make_shared<PagedAttention>(stream, scale, window.value_or(0), sk.has_value());
    return record_or_fallback(true, prim, {q.shape()}, {dt}, in)[0];
  }
  auto prim = std::make_shared<PagedAttention>(stream, scale);
  return record_or_fallback(covers, prim, {q.shape()}, {dt}, in)[0];
}

array paged_write(const array& cache, const array& values, const array& slots, StreamOrDevice s) {
  const char* op = "paged_write";
  const bool fits = cache.ndim() == 4 && values.ndim() == 3 && values.shape(1) == cache.shape(1) &&
      values.shape(2) == cache.shape(3);
  if (!fits || slots.ndim() != 1 || slots.shape(0) != values.shape(0)) {
    throw_invalid_argument(
        op, "cache must be [blocks, Hkv, block_size, D], values [N, Hkv, D] and slots [N]; got ", cache.shape(), ", ",
        values.shape(), " and ", slots.shape(), ".");
  }
  if (!is_integer(slots)) throw_invalid_argument(op, "slots must be integers; got ", slots.dtype(), ".");
  if (int64_t(cache.shape(0)) * cache.shape(2) > std::numeric_limits<int32_t>::max()) {
    throw_invalid_argument(op, "the cache holds more than 2^31 - 1 slots: ", cache.shape(), ".");
  }
  const Stream stream = to_stream(s);
  // Slots the int32 kernels cannot hold are out of range anyway: mapped to -1 first.
  array sl = slots;
  if (sl.dtype() != int32 && size_of(sl.dtype()) >= 4) {
    const Dtype st = sl.dtype();
    array big = astype(array(int64_t(std::numeric_limits<int32_t>::max()), int64), st, stream);
    sl = where(greater(sl, big, stream), astype(array(-1, int32), st, stream), sl, stream);
    if (issubdtype(st, signedinteger)) {
      array small = astype(array(int64_t(std::numeric_limits<int32_t>::min()), int64), st, stream);
      sl = where(less(sl, small, stream), astype(array(-1, int32), st, stream), sl, stream);
    }
  }
  std::vector<array> in{cache, astype(values, cache.dtype(), stream), astype(sl, int32, stream)};
  auto prim = std::make_shared<PagedWrite>(stream);
  return record_or_fallback(cache.size() > 0 && values.size() > 0, prim, {cache.shape()}, {cache.dtype()}, in)[0];
}

} // namespace fast

// ---- PagedAttention, PagedWrite ----------------------------------------------------------

PagedAttention::PagedAttention(Stream stream, float scale, int window, bool has_sinks)
    : FastPrimitive(
          stream,
          [stream, scale, window, has_sinks](const std::vector<array>& in) {
            const std::vector<array> base(in.begin(), in.begin() + 5);
            return std::vector<array>{fast::paged_attention_graph(
                base, scale, has_sinks ? std::optional<array>(in[5]) : std::nullopt,
                window > 0 ? std::optional<int>(window) : std::nullopt, stream)};
          }),
      scale_(scale),
      window_(window),
      has_sinks_(has_sinks) {}

const char* PagedAttention::name() const {
  return "PagedAttention";
}

std::vector<Shape> PagedAttention::output_shapes(const std::vector<array>& in) {
  return {in[0].shape()};
}

bool PagedAttention::is_equivalent(const Primitive& other) const {
  auto* o = same_type<PagedAttention>(other);
  return o && o->scale_ == scale_ && o->window_ == window_ && o->has_sinks_ == has_sinks_;
}

PagedWrite::PagedWrite(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        return std::vector<array>{fast::paged_write_graph(in, stream)};
      }) {}

const char* PagedWrite::name() const {
  return "PagedWrite";
}

std::vector<Shape> PagedWrite::output_shapes(const std::vector<array>& in) {
  return {in[0].shape()};
}

bool PagedWrite::is_equivalent(const Primitive& other) const {
  return same_type<PagedWrite>(other) != nullptr;
}

} // namespace nuvec
