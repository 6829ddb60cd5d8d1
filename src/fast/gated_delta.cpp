// nuvec: gated_delta, gated_delta_steps and gated_delta_slots (shared/seeds/001: the checks,
// the fallback graph, the rules), the GatedDelta fused primitive and its backward
// GatedDeltaVjp. The fallback is the recurrence step by step from ordinary ops (mlx-lm's
// gated_delta_ops), in float32 (float64 when an input is float64), which is the op's meaning:
// the kernels are tested against it, jvp is its derivative, and so is vjp (the final-state
// mode's through GatedDeltaVjp's kernels, whose own fallback is the graph's vjp).
#include "fast/gated_delta.h"
#include "fast/int32_indices.h"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "backend/common/math/gated_delta.h"
#include "fast/last_writer.h"
#include "core/env_switch.h"

#include "nuvec/fast.h"
#include "nuvec/transforms.h"
#include "ops/ops_common.h"

namespace nuvec {

namespace {

// The dtype the recurrence runs in: float64 when any input is, else float32.
Dtype recurrence_dtype(const std::vector<array>& xs) {
  for (const array& x : xs) {
    if (x.dtype() == float64) return float64;
  }
  return float32;
}

// y and the state(s) from (q, k, v, g, beta, state): the rule step by step.
std::vector<array> gated_delta_graph(const std::vector<array>& in, bool steps, StreamOrDevice s) {
  const array &q = in[0], &k = in[1], &v = in[2], &g = in[3], &beta = in[4], &state = in[5];
  const int b = q.shape(0), t = q.shape(1), hk = q.shape(2), dk = q.shape(3);
  const int hv = v.shape(2), dv = v.shape(3);
  const Dtype acc = recurrence_dtype(in);
  // Each key head serves Hv / Hk consecutive value heads.
  auto heads = [&](const array& x) {
    if (hv == hk) return x;
    return reshape(broadcast_to(expand_dims(x, 3, s), {b, t, hk, hv / hk, dk}, s), {b, t, hv, dk}, s);
  };
  const array qh = heads(astype(q, acc, s)), kh = heads(astype(k, acc, s));
  const array vw = astype(v, acc, s), gw = astype(g, acc, s), bw = astype(beta, acc, s);
  // Step i of x [B, T, ...]: x[:, i].
  auto at = [&](const array& x, int i) { return take(x, i, 1, s); };
  array S = astype(state, acc, s);
  std::vector<array> ys, states;
  for (int i = 0; i < t; ++i) {
    const array qt = expand_dims(at(qh, i), 2, s); // [B, Hv, 1, Dk]
    const array kt = expand_dims(at(kh, i), 2, s);
    S = multiply(S, reshape(at(gw, i), {b, hv, 1, 1}, s), s);
    const array kv_mem = sum(multiply(S, kt, s), -1, false, s); // [B, Hv, Dv]
    const array delta = multiply(subtract(at(vw, i), kv_mem, s), expand_dims(at(bw, i), -1, s), s);
    S = add(S, multiply(kt, expand_dims(delta, -1, s), s), s);
    ys.push_back(astype(sum(multiply(S, qt, s), -1, false, s), q.dtype(), s));
    if (steps) states.push_back(astype(S, state.dtype(), s));
  }
  array y = ys.empty() ? zeros({b, 0, hv, dv}, q.dtype(), s) : stack(ys, 1, s);
  if (!steps) return {y, astype(S, state.dtype(), s)};
  return {y, states.empty() ? zeros({b, 0, hv, dv, dk}, state.dtype(), s) : stack(states, 1, s)};
}

// The slots mode's fallback: the pool's rows at slots, the rule, the rows put back. Of
// sequences naming one row (which the kernels refuse) the last lands and the others' states
// get no gradient (last_writer.h): slots counted from the end made non-negative, the
// overwritten ones sent to a scratch row past the pool, dropped after.
std::vector<array> gated_delta_slots_graph(const std::vector<array>& in, StreamOrDevice s) {
  const array &pool = in[5], &slots = in[6]; // slots: int32 (saturated by the op)
  std::vector<array> args(in.begin(), in.begin() + 5);
  args.push_back(detail::take(pool, slots, 0, "gated_delta_slots", s));
  auto out = gated_delta_graph(args, false, s);
  const int p = pool.shape(0);
  array rows = where(less(slots, array(0, int32), s), add(slots, array(p, int32), s), slots, s);
  rows = fast::detail::last_writer_targets(rows, p, p, s);
  Shape one = pool.shape();
  one[0] = 1;
  const array wide = concatenate({pool, zeros(one, pool.dtype(), s)}, 0, s);
  const array at = broadcast_to(reshape(rows, {-1, 1, 1, 1}, s), out[1].shape(), s);
  Shape stop = pool.shape();
  return {out[0], slice(put_along_axis(wide, at, out[1], 0, s), Shape(pool.ndim(), 0), stop, s)};
}

void check_floating(const char* op, const char* name, const array& x) {
  if (!issubdtype(x.dtype(), floating)) {
    throw_invalid_argument(op, name, " must be real floating; got ", x.dtype(), ".");
  }
}

// The checks every mode shares; state_shape is the state's (final_state, steps) or a pool
// row's shape with the pool's slot count in front (slots).
void check_inputs(
    const char* op,
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    bool pool) {
  check_floating(op, "q", q);
  check_floating(op, "k", k);
  check_floating(op, "v", v);
  check_floating(op, "g", g);
  check_floating(op, "beta", beta);
  check_floating(op, pool ? "pool" : "state", state);
  if (q.ndim() != 4 || k.shape() != q.shape() || v.ndim() != 4) {
    throw_invalid_argument(
        op, "q and k must be [B, T, Hk, Dk] and v [B, T, Hv, Dv]; got q ", q.shape(), ", k ", k.shape(),
        ", v ", v.shape(), ".");
  }
  const int b = q.shape(0), t = q.shape(1), hk = q.shape(2), dk = q.shape(3);
  const int hv = v.shape(2), dv = v.shape(3);
  if (v.shape(0) != b || v.shape(1) != t || hk == 0 || hv % hk != 0) {
    throw_invalid_argument(
        op, "v must be [", b, ", ", t, ", Hv, Dv] with Hv a multiple of Hk = ", hk, "; got v ", v.shape(),
        " for q ", q.shape(), ".");
  }
  const Shape gate{b, t, hv};
  if (g.shape() != gate || beta.shape() != gate) {
    throw_invalid_argument(op, "g and beta must be ", gate, "; got g ", g.shape(), " and beta ", beta.shape(), ".");
  }
  if (pool) {
    if (state.ndim() != 4 || state.shape(1) != hv || state.shape(2) != dv || state.shape(3) != dk) {
      throw_invalid_argument(op, "pool must be [P, ", hv, ", ", dv, ", ", dk, "]; got ", state.shape(), ".");
    }
  } else if (state.shape() != Shape{b, hv, dv, dk}) {
    throw_invalid_argument(op, "state must be [", b, ", ", hv, ", ", dv, ", ", dk, "]; got ", state.shape(), ".");
  }
}

// Whether a kernel covers the inputs on the stream's device.
bool kernel_covers(const Stream& stream, const array& q, const array& k, const array& v, const array& g,
                   const array& beta, const array& state) {
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) return false;
  if (stream.device != Device::gpu) return true;
  for (const array* x : {&g, &beta, &state}) {
    if (x->dtype() == float64) return false;
  }
  return gated_delta_gpu_covers(q.shape(3), q.dtype());
}

std::pair<array, array> gated_delta_op(
    const char* op,
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    GatedDeltaMode mode,
    StreamOrDevice s) {
  check_inputs(op, q, k, v, g, beta, state, false);
  const Stream stream = to_stream(s);
  Shape states = state.shape();
  if (mode == GatedDeltaMode::steps) states.insert(states.begin() + 1, q.shape(1));
  Shape y_shape = v.shape();
  auto out = fast::record_or_fallback(
      kernel_covers(stream, q, k, v, g, beta, state), std::make_shared<GatedDelta>(stream, mode),
      {y_shape, states}, {q.dtype(), state.dtype()}, {q, k, v, g, beta, state});
  return {out[0], out[1]};
}

} // namespace

bool gated_delta_gpu_covers(int dk, Dtype dtype) {
  return dtype != float64 && dk > 0 && dk % math::kGatedDeltaLaneElems == 0 && dk <= math::kGatedDeltaMaxDk;
}

namespace fast {

std::pair<array, array> gated_delta(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    StreamOrDevice s) {
  return gated_delta_op("gated_delta", q, k, v, g, beta, state, GatedDeltaMode::final_state, s);
}

std::pair<array, array> gated_delta_steps(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    StreamOrDevice s) {
  return gated_delta_op("gated_delta_steps", q, k, v, g, beta, state, GatedDeltaMode::steps, s);
}

std::pair<array, array> gated_delta_slots(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& pool,
    const array& slots,
    StreamOrDevice s) {
  const char* op = "gated_delta_slots";
  check_inputs(op, q, k, v, g, beta, pool, true);
  if (slots.ndim() != 1 || slots.shape(0) != q.shape(0) || !issubdtype(slots.dtype(), integer)) {
    throw_invalid_argument(
        op, "slots must be [", q.shape(0), "] integers (one pool row per sequence); got ", slots.dtype(), " ",
        slots.shape(), ".");
  }
  if (pool.shape(0) == 0 && slots.size() > 0) {
    // Every slot is outside an empty pool. Said here, so both routes throw the same type (the
    // fallback's take would refuse the empty axis with std::invalid_argument).
    throw_out_of_range(op, "slots index an empty pool ", pool.shape(), ".");
  }
  const array sl = fast::detail::saturate_to_int32(slots, s); // out of range stays out of range
  const Stream stream = to_stream(s);
  auto out = fast::record_or_fallback(
      kernel_covers(stream, q, k, v, g, beta, pool), std::make_shared<GatedDelta>(stream, GatedDeltaMode::slots),
      {v.shape(), pool.shape()}, {q.dtype(), pool.dtype()}, {q, k, v, g, beta, pool, sl});
  return {out[0], out[1]};
}

} // namespace fast

GatedDelta::GatedDelta(Stream stream, GatedDeltaMode mode)
    : FastPrimitive(stream, [mode, stream](const std::vector<array>& in) {
        if (mode == GatedDeltaMode::slots) return gated_delta_slots_graph(in, stream);
        return gated_delta_graph(in, mode == GatedDeltaMode::steps, stream);
      }),
      mode_(mode) {}

GatedDelta::GatedDelta(Stream stream, int mode) : GatedDelta(stream, [&] {
        if (mode < 0 || mode > static_cast<int>(GatedDeltaMode::slots)) {
          throw_invalid_argument("GatedDelta", "unknown mode ", mode, ".");
        }
        return static_cast<GatedDeltaMode>(mode);
      }()) {}

const char* GatedDelta::name() const {
  switch (mode_) {
    case GatedDeltaMode::steps: return "GatedDeltaSteps";
    case GatedDeltaMode::slots: return "GatedDeltaSlots";
    default: return "GatedDelta";
  }
}

std::vector<Shape> GatedDelta::output_shapes(const std::vector<array>& inputs) {
  Shape state = inputs[5].shape();
  if (mode_ == GatedDeltaMode::steps) state.insert(state.begin() + 1, inputs[0].shape(1));
  return {inputs[2].shape(), state};
}

bool GatedDelta::is_equivalent(const Primitive& other) const {
  auto o = same_type<GatedDelta>(other);
  return o && o->mode_ == mode_;
}

std::vector<array> GatedDelta::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  // The kernel serves the final-state mode, on the CPU and on a GPU (its CUDA kernel matched
  // the CPU one on the H200; NUVEC_GATED_DELTA_VJP_GPU=0, read at each call, keeps the
  // fallback's rule there); the other modes take the fallback's rule.
  const bool enabled = stream().device != Device::gpu || env_switch("NUVEC_GATED_DELTA_VJP_GPU", true);
  if (mode_ != GatedDeltaMode::final_state || !enabled) {
    return FastPrimitive::vjp(primals, cotangents, argnums, outputs);
  }
  const Stream s = stream();
  std::vector<array> in(primals.begin(), primals.begin() + 6);
  in.push_back(astype(cotangents[0], outputs[0].dtype(), s));
  in.push_back(astype(cotangents[1], outputs[1].dtype(), s));
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  for (int i = 0; i < 6; ++i) {
    shapes.push_back(primals[i].shape());
    dtypes.push_back(primals[i].dtype());
  }
  auto grads = array::make_arrays(shapes, dtypes, std::make_shared<GatedDeltaVjp>(s), in);
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}

GatedDeltaVjp::GatedDeltaVjp(Stream stream)
    : FastPrimitive(stream, [stream](const std::vector<array>& in) {
        // The vjp of the forward graph at (q, k, v, g, beta, state) for (dy, dstate).
        std::vector<array> primals(in.begin(), in.begin() + 6);
        auto f = [&](const std::vector<array>& xs) { return gated_delta_graph(xs, false, stream); };
        return detail::vjp(f, primals, {in[6], in[7]}, {0, 1, 2, 3, 4, 5}).second;
      }) {}

const char* GatedDeltaVjp::name() const {
  return "GatedDeltaVjp";
}

std::vector<Shape> GatedDeltaVjp::output_shapes(const std::vector<array>& inputs) {
  std::vector<Shape> shapes;
  for (int i = 0; i < 6; ++i) shapes.push_back(inputs[i].shape());
  return shapes;
}

bool GatedDeltaVjp::is_equivalent(const Primitive& other) const {
  return same_type<GatedDeltaVjp>(other) != nullptr;
}

std::pair<std::vector<array>, std::vector<int>> GatedDelta::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  // The slots mode shares one pool between the mapped calls: its fallback is batched.
  bool any = false;
  int n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      any = true;
      n = inputs[i].shape(axes[i]);
    }
  }
  if (mode_ == GatedDeltaMode::slots || !any) return FastPrimitive::vmap(inputs, axes);
  // Every input has B first: the mapped axis goes in front of it and folds into it, so the
  // calls run as one of n·B sequences (an unbatched input is broadcast over the n calls).
  const Stream s = stream();
  std::vector<array> folded;
  folded.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const array& x = inputs[i];
    array front = axes[i] >= 0 ? moveaxis(x, axes[i], 0, s) : expand_dims(x, 0, s);
    Shape wide = front.shape();
    wide[0] = n;
    front = broadcast_to(front, wide, s);
    Shape shape(wide.begin() + 1, wide.end());
    shape[0] *= n;
    folded.push_back(reshape(front, shape, s));
  }
  const auto& [y, states] = mode_ == GatedDeltaMode::steps
      ? fast::gated_delta_steps(folded[0], folded[1], folded[2], folded[3], folded[4], folded[5], s)
      : fast::gated_delta(folded[0], folded[1], folded[2], folded[3], folded[4], folded[5], s);
  // Each call's B from q's folded rows, not by dividing by n: n may be 0.
  const int b = axes[0] >= 0 ? inputs[0].shape(axes[0] == 0 ? 1 : 0) : inputs[0].shape(0);
  auto unfold = [&](const array& x) {
    Shape shape = x.shape();
    shape[0] = b;
    shape.insert(shape.begin(), n);
    return reshape(x, shape, s);
  };
  return {{unfold(y), unfold(states)}, {0, 0}};
}

} // namespace nuvec
