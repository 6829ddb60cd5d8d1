// nuvec tests: the pieces every attention test shares (tests/fast_attention*_test.cpp,
// tests/fast_paged_attention_test.cpp), written once so that each kernel is checked against
// the same inputs, the same meaning and the same rules: one configuration (Case), its random
// inputs (every mask kind the op takes, sinks, strided views), the meaning (fast::attention_graph
// evaluated in float64 on the CPU, src/fast/attention.cpp), a ScaledDotProductAttention node
// recorded directly on a device (no planner), the kernels' output tolerance, the lse of rows
// that see no key (src/backend/common/attention.h), the mask variants every kernel test
// sweeps, and the skip for tests that need a GPU.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

/// Skips a test that runs a GPU kernel where there is no GPU.
#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

namespace nuvec::testing::attn {

inline const Device kCpu{Device::cpu};

/// The array mask of a case. Values are drawn in the call's dtype, so the reference's float64
/// copy holds the same numbers the kernel reads.
enum class Mask {
  none,
  /// bool [B, Hq, Lq, Lk], about 70% true; in batch 0, head 0 the first, a middle (Lq / 2)
  /// and the last query row are all false (rows that see no key, in different query tiles).
  boolean,
  /// additive [1, 1, Lq, Lk]: normal values times 2.
  additive_rows,
  /// the same with the last query row −inf everywhere when Lq > 1 (out NaN and lse −inf; with
  /// a sink out 0 and lse the sink).
  additive_rows_inf,
  /// additive [B, 1, 1, Lk] (a key-padding bias): uniform in [−3, 1).
  additive_batch,
};

/// How an input [B, H, L, D] lies in memory (kernels read it through its strides).
enum class Layout {
  contiguous,
  /// rows 2 .. L + 1 of a [B, L + 4, H, D] buffer seen as [B, H, L, D] (a slice of a sequence-
  /// major projection): strides (L + 4)·H·D, D, H·D, 1; rows 16-byte aligned when H·D is a
  /// multiple of 8 elements, so the GPU kernels read it in place.
  sequence_major,
  /// positions 2 .. L + 1 of a [B, H, D, L + 4] buffer seen as [B, H, L, D]: the last axis is
  /// strided (a kernel copies it first).
  strided_last,
};

/// One attention configuration: q [b, hq, lq, d], k [b, hkv, lk, d], v [b, hkv, lk, dv]; the
/// defaults are a small GQA case.
struct Case {
  int b = 2, hq = 4, hkv = 2, lq = 3, lk = 7, d = 64, dv = 64;
  bool causal = false;
  int window = 0; // with causal only
  Mask mask = Mask::none;
  bool sinks = false;
  Layout q_layout = Layout::contiguous, k_layout = Layout::contiguous, v_layout = Layout::contiguous;

  std::string name(Dtype dt) const {
    static const char* masks[] = {"", " bool", " add[1,1,Lq,Lk]", " add[1,1,Lq,Lk] -inf row", " add[B,1,1,Lk]"};
    static const char* layouts[] = {"contiguous", "sequence-major", "strided-last"};
    std::string s = std::string(dtype_name(dt)) + " B" + std::to_string(b) + " Hq" + std::to_string(hq) + " Hkv" +
        std::to_string(hkv) + " Lq" + std::to_string(lq) + " Lk" + std::to_string(lk) + " D" + std::to_string(d) +
        " Dv" + std::to_string(dv) + (causal ? " causal" : "") +
        (window ? " window " + std::to_string(window) : std::string()) + masks[static_cast<int>(mask)] +
        (sinks ? " sinks" : "");
    const Layout ls[] = {q_layout, k_layout, v_layout};
    for (int i = 0; i < 3; ++i) {
      if (ls[i] != Layout::contiguous) s += std::string(" ") + "qkv"[i] + " " + layouts[static_cast<int>(ls[i])];
    }
    return s;
  }
};

/// The usual softmax scale 1 / √D.
inline float standard_scale(const Case& c) {
  return 1.0f / std::sqrt(static_cast<float>(c.d));
}

/// The node's parameters for a case (passes 0: the tiled kernel on the GPU, the CPU loop).
inline fast::AttentionParams params_of(const Case& c, float scale) {
  fast::AttentionParams p;
  p.scale = scale;
  p.causal = c.causal;
  p.window = c.window;
  p.has_mask = c.mask != Mask::none;
  p.has_sinks = c.sinks;
  return p;
}

/// A case's inputs. make_inputs draws them on the CPU and evaluates them, so that a node
/// under test on the GPU is the only GPU work.
struct Inputs {
  array q, k, v;
  std::optional<array> mask;  ///< in its own shape, as the public op takes it
  std::optional<array> sinks; ///< [Hq]

  /// {q, k, v[, mask][, sinks]} as the primitives take them: the mask broadcast to
  /// [B, Hq, Lq, Lk] (stride 0 along the broadcast axes).
  std::vector<array> list() const {
    std::vector<array> xs{q, k, v};
    if (mask) {
      xs.push_back(broadcast_to(*mask, {q.shape(0), q.shape(1), q.shape(2), k.shape(2)}, kCpu));
      eval(xs.back());
    }
    if (sinks) xs.push_back(*sinks);
    return xs;
  }
};

/// Normal(0, 1) samples in dtype from nuvec's generator on the CPU (far quicker than
/// test_utils' randn for the millions of elements of long contexts), keyed from the test
/// process's seed so that a failure replays.
inline array normal_of(const Shape& shape, Dtype dt) {
  return random::normal(shape, dt, std::nullopt, std::nullopt, random::key(rng()()), kCpu);
}

/// A [b, h, l, d] input of normal values laid out as asked.
inline array input_of(int b, int h, int l, int d, Dtype dt, Layout layout) {
  StreamContext cpu(kCpu);
  switch (layout) {
    case Layout::contiguous: return normal_of({b, h, l, d}, dt);
    case Layout::sequence_major: return swapaxes(slice(normal_of({b, l + 4, h, d}, dt), {0, 2, 0, 0}, {b, l + 2, h, d}), 1, 2);
    case Layout::strided_last: return swapaxes(slice(normal_of({b, h, d, l + 4}, dt), {0, 0, 0, 2}, {b, h, d, l + 2}), 2, 3);
  }
  throw std::logic_error("input_of: unknown layout");
}

/// q, k and v of a case (no mask, no sinks), evaluated.
inline Inputs make_qkv(const Case& c, Dtype dt) {
  Inputs in{
      input_of(c.b, c.hq, c.lq, c.d, dt, c.q_layout), input_of(c.b, c.hkv, c.lk, c.d, dt, c.k_layout),
      input_of(c.b, c.hkv, c.lk, c.dv, dt, c.v_layout), std::nullopt, std::nullopt};
  eval({in.q, in.k, in.v});
  return in;
}

/// The inputs of a case on the given q, k and v (so that the variants of a shape can share
/// them): its mask (see Mask) and sinks (normal values times 2) drawn, evaluated.
inline Inputs make_inputs(const Case& c, Dtype dt, Inputs in) {
  StreamContext cpu(kCpu);
  in.mask.reset();
  in.sinks.reset();
  const array rows = reshape(arange(0, c.lq, 1), {1, 1, c.lq, 1});
  switch (c.mask) {
    case Mask::none: break;
    case Mask::boolean: {
      const Shape full{c.b, c.hq, c.lq, c.lk};
      array keep = less(random::uniform(full, float32, random::key(rng()())), array(0.7f));
      array empty = logical_or(
          logical_or(equal(rows, array(0, int32)), equal(rows, array(c.lq / 2, int32))),
          equal(rows, array(c.lq - 1, int32)));
      array bh0 = reshape(equal(arange(0, c.b * c.hq, 1), array(0, int32)), {c.b, c.hq, 1, 1});
      in.mask = logical_and(keep, logical_not(logical_and(empty, bh0)));
      break;
    }
    case Mask::additive_rows:
    case Mask::additive_rows_inf: {
      array m = multiply(normal_of({1, 1, c.lq, c.lk}, dt), array(2.0, dt));
      if (c.mask == Mask::additive_rows_inf && c.lq > 1) {
        m = where(equal(rows, array(c.lq - 1, int32)), array(-std::numeric_limits<float>::infinity(), dt), m);
      }
      in.mask = m;
      break;
    }
    case Mask::additive_batch:
      in.mask = random::uniform(-3.0, 1.0, {c.b, 1, 1, c.lk}, dt, random::key(rng()()));
      break;
  }
  if (c.sinks) in.sinks = multiply(normal_of({c.hq}, dt), array(2.0, dt));
  if (in.mask) eval(*in.mask);
  if (in.sinks) eval(*in.sinks);
  return in;
}

/// The inputs of a case, freshly drawn.
inline Inputs make_inputs(const Case& c, Dtype dt) {
  return make_inputs(c, dt, make_qkv(c, dt));
}

/// Float64 copies on the CPU (a bool mask stays bool).
inline Inputs as_float64(const Inputs& in) {
  StreamContext cpu(kCpu);
  auto f64 = [](const array& x) { return x.dtype() == bool_ ? x : astype(x, float64); };
  Inputs out{f64(in.q), f64(in.k), f64(in.v), std::nullopt, std::nullopt};
  if (in.mask) out.mask = f64(*in.mask);
  if (in.sinks) out.sinks = f64(*in.sinks);
  return out;
}

/// What one attention evaluation gives: out [B, Hq, Lq, Dv] and lse [B, Hq, Lq].
struct Outputs {
  array out, lse;
};

/// The meaning: fast::attention_graph (the op's fallback) on float64 copies of the inputs,
/// evaluated on the CPU.
inline Outputs reference(const Case& c, const Inputs& in, float scale) {
  auto outs = fast::attention_graph(as_float64(in).list(), params_of(c, scale), std::nullopt, kCpu);
  eval(outs);
  return {outs[0], outs[1]};
}

/// A ScaledDotProductAttention node recorded directly on the device's default stream (the
/// kernel that params name, no planner), evaluated.
inline Outputs record_attention(const Inputs& in, const fast::AttentionParams& p, Device device) {
  const Shape& q = in.q.shape();
  auto outs = array::make_arrays(
      {{q[0], q[1], q[2], in.v.shape(3)}, {q[0], q[1], q[2]}}, {in.q.dtype(), float32},
      std::make_shared<ScaledDotProductAttention>(default_stream(device), p), in.list());
  eval(outs);
  return {outs[0], outs[1]};
}

/// Output tolerance (relative and absolute, for values of order 1) of a fused kernel that
/// accumulates in float32 and rounds its result to dt: float32 the sums' rounding; float16 and
/// bfloat16 a few units of the dtype's rounding (2^-11, 2^-8), which P takes too where a kernel
/// rounds it to the dtype before P·V.
inline double tol_of(Dtype dt) {
  return dt == float32 ? 2e-5 : dt == float16 ? 2e-3 : 1.6e-2;
}

/// The float64 graph's lse as a kernel of dtype dt must give it: a row that sees no key (and
/// has no sink) has lse = lowest(dt) + log Lk in float32 (src/backend/common/attention.h),
/// where the float64 graph's is float64's lowest + log Lk (finite, below −1e300).
inline std::vector<double> lse_by_the_rule(const array& lse64, Dtype dt, int lk) {
  std::vector<double> lse = to_vector(lse64);
  const float lowest = static_cast<float>(finfo(dt).min);
  for (double& x : lse) {
    if (std::isfinite(x) && x < -1e300) x = static_cast<double>(lowest + std::log(static_cast<float>(lk)));
  }
  return lse;
}

/// Records the node on device with params p and asserts its outputs' dtypes and values
/// against the float64 reference: out within out_tol (relative and absolute), lse (by the
/// rule) within lse_tol relative and 10 lse_tol absolute (lse is of order log Lk plus the
/// largest score).
inline void check_kernel(const Case& c, Dtype dt, const Inputs& in, const fast::AttentionParams& p, Device device,
                         double out_tol, double lse_tol) {
  const Outputs got = record_attention(in, p, device);
  const Outputs ref = reference(c, in, p.scale);
  ASSERT_EQ(got.out.dtype(), dt);
  ASSERT_EQ(got.lse.dtype(), float32);
  expect_allclose(got.out, ref.out, out_tol, out_tol);
  expect_close(got.lse, ref.lse.shape(), lse_by_the_rule(ref.lse, dt, c.lk), lse_tol, 10 * lse_tol);
}

/// The mask variants of a shape (its sizes and layouts): everything the kernels tell apart.
/// No mask; causal, alone, with windows of 3 and 5 keys, and with a window of 70 and sinks
/// (with Lq > Lk causal rows see no key); each array mask kind (a bool row all false, an
/// additive row all −inf, a key bias); sinks alone, with causal and with the two row masks.
inline std::vector<Case> variants(const Case& shape) {
  struct Variant {
    bool causal;
    int window;
    Mask mask;
    bool sinks;
  };
  static const Variant table[] = {
      {false, 0, Mask::none, false},    {true, 0, Mask::none, false},
      {true, 3, Mask::none, false},     {true, 5, Mask::none, false},
      {true, 70, Mask::none, true},     {false, 0, Mask::boolean, false},
      {false, 0, Mask::additive_rows_inf, false},
      {false, 0, Mask::additive_batch, false},
      {false, 0, Mask::none, true},     {true, 0, Mask::none, true},
      {false, 0, Mask::boolean, true},  {false, 0, Mask::additive_rows_inf, true},
  };
  std::vector<Case> v;
  for (const Variant& t : table) {
    Case c = shape;
    c.causal = t.causal;
    c.window = t.window;
    c.mask = t.mask;
    c.sinks = t.sinks;
    v.push_back(c);
  }
  return v;
}

} // namespace nuvec::testing::attn
