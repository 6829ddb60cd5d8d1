// The CUDA backward of scaled dot-product attention (ScaledDotProductAttentionVjp,
// src/backend/cuda/fast/attention_backward.cu), recorded directly on the GPU with out and lse
// from the forward's fallback (fast::attention_graph in float64, rounded as a forward kernel
// would return them), against the vjp of that fallback evaluated on float64 CPU copies of the
// same (rounded) inputs: dq, dk, dv and dsinks. Every dtype (float32, float16, bfloat16); D
// 64 and 128 (the tensor-core kernels for the half types), 256 (the half types' mma.sync
// kernels with NUVEC_ATTENTION_BACKWARD_D256=1) and 80 (the float32 SIMT kernels);
// Lq 1, 17, 300 against Lk 7 and 300 (tile edges, causal rows that see no key); GQA 1 and 4;
// no mask, causal, causal with a window, a bool mask with a row that sees nothing, an
// additive mask broadcast over batch and heads (with −inf entries), a broadcast key-padding
// bool mask; sinks. Also strided q, k, v (a KV cache sliced along L, padded rows, rows not
// 16-byte aligned), determinism (two evaluations give the same dk, dv, dsinks bits; dq within a
// rounding, as the Hopper kernel adds dq with atomics), and a timing report of
// the prefill shape B 4, H 32, L 4096, D 128 bfloat16 (no assertion). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fast/attention.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu(Device::cpu);
const Device kGpu(Device::gpu);

enum class MaskKind { None, Causal, Window, Bool, Additive, KeyPadding };

const char* mask_name(MaskKind m) {
  switch (m) {
    case MaskKind::None: return "none";
    case MaskKind::Causal: return "causal";
    case MaskKind::Window: return "window";
    case MaskKind::Bool: return "bool";
    case MaskKind::Additive: return "additive";
    case MaskKind::KeyPadding: return "key-padding";
  }
  return "?";
}

struct Case {
  Dtype dt = float32;
  int b = 1, hq = 4, hkv = 4, lq = 1, lk = 7, d = 64, dv = 64;
  MaskKind mask = MaskKind::None;
  bool sinks = false;

  std::string name() const {
    return std::string(dtype_name(dt)) + " B" + std::to_string(b) + " Hq" + std::to_string(hq) + " Hkv" +
        std::to_string(hkv) + " Lq" + std::to_string(lq) + " Lk" + std::to_string(lk) + " D" + std::to_string(d) +
        " Dv" + std::to_string(dv) + " mask " + mask_name(mask) + (sinks ? " sinks" : "");
  }
};

// Relative Frobenius error allowed, by dtype: float32 arithmetic throughout; the half types
// round p and ds to the dtype for the tensor-core products, and every gradient once.
double norm_tol(Dtype dt) {
  return dt == float32 ? 1e-4 : dt == float16 ? 4e-3 : 2.5e-2;
}
// Largest element error allowed, as a fraction of the reference's largest element (catches a
// few wrong elements that the norm would hide).
double elem_tol(Dtype dt) {
  return dt == float32 ? 1e-4 : dt == float16 ? 1e-2 : 5e-2;
}

// got (any dtype) against ref (float64) of the same shape: finite, close in norm and
// element-wise.
void expect_grad_close(const array& got, const array& ref, Dtype dt, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.shape(), ref.shape());
  const std::vector<double> g = to_vector(got), r = to_vector(ref);
  double num = 0, den = 0, max_ref = 0, worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << "element " << i << " is " << g[i] << " (reference " << r[i] << ")";
    const double e = std::abs(g[i] - r[i]);
    num += e * e;
    den += r[i] * r[i];
    max_ref = std::max(max_ref, std::abs(r[i]));
    if (e > worst) {
      worst = e;
      worst_at = i;
    }
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, norm_tol(dt)) << "relative error in norm";
  EXPECT_LE(worst, elem_tol(dt) * max_ref) << "at element " << worst_at << ": got " << g[worst_at] << ", reference "
                                           << r[worst_at] << " (largest reference element " << max_ref << ")";
}

// dsinks_h = −Σ_{b,i} exp(sink_h − lse_i) dout_i · out_i sums terms of either sign, so its
// error is bounded by the terms' sizes, not by the sum: the kernel reads out rounded to the
// dtype (|dout_i · ε_i| <= u ‖dout_i‖ ‖out_i‖ for out's unit roundoff u), then rounds the
// result once. Allowed: 2u Σ exp(sink_h − lse_i) ‖dout_i‖ ‖out_i‖ + 2u |dsinks_h|.
void expect_dsinks_close(const array& got, const array& ref, const array& sinks64, const array& out, const array& lse,
                         const array& dout, const Case& c) {
  SCOPED_TRACE("dsinks");
  ASSERT_EQ(got.shape(), ref.shape());
  const double u = c.dt == float32 ? 1e-6 : c.dt == float16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const std::vector<double> g = to_vector(got), r = to_vector(ref), sk = to_vector(sinks64), o = to_vector(out),
                            l = to_vector(lse), d = to_vector(dout);
  for (int h = 0; h < c.hq; ++h) {
    double bound = 0;
    for (int b = 0; b < c.b; ++b) {
      for (int i = 0; i < c.lq; ++i) {
        const size_t row = (size_t(b) * c.hq + h) * c.lq + i;
        double no = 0, nd = 0;
        for (int e = 0; e < c.dv; ++e) {
          no += o[row * c.dv + e] * o[row * c.dv + e];
          nd += d[row * c.dv + e] * d[row * c.dv + e];
        }
        bound += std::exp(sk[h] - l[row]) * std::sqrt(no * nd);
      }
    }
    EXPECT_NEAR(g[h], r[h], 2 * u * (bound + std::abs(r[h])) + 1e-6 * bound) << "head " << h;
  }
}

// Normal values (times scale) rounded to dt on the CPU, and their float64 copy.
struct Drawn {
  array x, x64;
};
Drawn draw(const Shape& shape, Dtype dt, double scale = 1.0) {
  array x = astype(multiply(randn(shape), array(scale, float64), kCpu), dt, kCpu);
  array x64 = astype(x, float64, kCpu);
  eval(x, x64);
  return {x, x64};
}

// The mask of a case (bool, or additive in dt), broadcast to [B, Hq, Lq, Lk] as the op
// records it, and its float64 (or bool) copy for the reference.
struct Masks {
  array m, m64;
};
Masks make_mask(const Case& c) {
  const Shape full{c.b, c.hq, c.lq, c.lk};
  if (c.mask == MaskKind::Bool) {
    std::vector<double> u = to_vector(uniform({c.b, c.hq, c.lq, c.lk}, 0.0, 1.0, float64));
    std::vector<bool> keep(u.size());
    for (size_t i = 0; i < u.size(); ++i) keep[i] = u[i] < 0.75;
    // Row (0, Hq − 1, Lq / 2) sees nothing; row (B − 1, 0, Lq − 1) sees only its last key.
    const size_t nothing = ((size_t(0) * c.hq + (c.hq - 1)) * c.lq + c.lq / 2) * c.lk;
    for (int j = 0; j < c.lk; ++j) keep[nothing + j] = false;
    const size_t one = ((size_t(c.b - 1) * c.hq + 0) * c.lq + (c.lq - 1)) * c.lk;
    if (one != nothing) {
      for (int j = 0; j < c.lk; ++j) keep[one + j] = j == c.lk - 1;
    }
    std::vector<uint8_t> bytes(keep.begin(), keep.end());
    array m = astype(array(bytes.begin(), full, uint8), bool_, kCpu);
    eval(m);
    return {m, m};
  }
  if (c.mask == MaskKind::KeyPadding) {
    // [B, 1, 1, Lk]: batch b hides its last b · 3 keys (at least one key left).
    std::vector<uint8_t> bytes(size_t(c.b) * c.lk);
    for (int b = 0; b < c.b; ++b) {
      for (int j = 0; j < c.lk; ++j) bytes[size_t(b) * c.lk + j] = j < std::max(1, c.lk - 3 * b) ? 1 : 0;
    }
    array m = broadcast_to(astype(array(bytes.begin(), {c.b, 1, 1, c.lk}, uint8), bool_, kCpu), full, kCpu);
    eval(m);
    return {m, m};
  }
  // Additive [1, 1, Lq, Lk] broadcast: normal values, −inf where (i + j) % 5 == 0 except in the
  // last column (every row keeps a finite score).
  std::vector<double> v = to_vector(multiply(randn({c.lq, c.lk}), array(2.0, float64), kCpu));
  for (int i = 0; i < c.lq; ++i) {
    for (int j = 0; j + 1 < c.lk; ++j) {
      if ((i + j) % 5 == 0) v[size_t(i) * c.lk + j] = -std::numeric_limits<double>::infinity();
    }
  }
  array small = astype(array(v.begin(), {1, 1, c.lq, c.lk}, float64), c.dt, kCpu);
  array m = broadcast_to(small, full, kCpu);
  array m64 = broadcast_to(astype(small, float64, kCpu), full, kCpu);
  eval(m, m64);
  return {m, m64};
}

fast::AttentionParams params_of(const Case& c) {
  fast::AttentionParams p;
  p.scale = static_cast<float>(1.0 / std::sqrt(double(c.d)));
  p.causal = c.mask == MaskKind::Causal || c.mask == MaskKind::Window;
  p.window = c.mask == MaskKind::Window ? 5 : 0;
  p.has_mask = c.mask == MaskKind::Bool || c.mask == MaskKind::Additive || c.mask == MaskKind::KeyPadding;
  p.has_sinks = c.sinks;
  return p;
}

// The inputs of one case: the node's (q, k, v as given, possibly strided views) and the
// reference's float64 copies.
struct CaseInputs {
  array q, k, v;
  array q64, k64, v64;
};

CaseInputs dense_inputs(const Case& c) {
  Drawn q = draw({c.b, c.hq, c.lq, c.d}, c.dt), k = draw({c.b, c.hkv, c.lk, c.d}, c.dt),
        v = draw({c.b, c.hkv, c.lk, c.dv}, c.dt);
  return {q.x, k.x, v.x, q.x64, k.x64, v.x64};
}

// Views: q with rows of D + pad elements, k and v sliced along L from a cache of Lk + 9 rows.
CaseInputs strided_inputs(const Case& c, int pad) {
  Drawn qb = draw({c.b, c.hq, c.lq, c.d + pad}, c.dt), kb = draw({c.b, c.hkv, c.lk + 9, c.d}, c.dt),
        vb = draw({c.b, c.hkv, c.lk + 9, c.dv}, c.dt);
  auto cut_q = [&](const array& a) { return slice(a, {0, 0, 0, 0}, {c.b, c.hq, c.lq, c.d}, kCpu); };
  auto cut_kv = [&](const array& a, int d) { return slice(a, {0, 0, 3, 0}, {c.b, c.hkv, c.lk + 3, d}, kCpu); };
  CaseInputs in{cut_q(qb.x), cut_kv(kb.x, c.d), cut_kv(vb.x, c.dv), contiguous(cut_q(qb.x64), false, kCpu),
                contiguous(cut_kv(kb.x64, c.d), false, kCpu), contiguous(cut_kv(vb.x64, c.dv), false, kCpu)};
  eval(in.q, in.k, in.v, in.q64, in.k64, in.v64);
  return in;
}

// The GPU node's gradients {dq, dk, dv[, dsinks]} for the case.
std::vector<array> run_node(const Case& c, const CaseInputs& in, const std::optional<Masks>& mask, const std::optional<Drawn>& sinks,
                            const array& out, const array& lse, const array& dout) {
  std::vector<array> node_in{in.q, in.k, in.v};
  if (mask) node_in.push_back(mask->m);
  if (sinks) node_in.push_back(sinks->x);
  node_in.push_back(out);
  node_in.push_back(lse);
  node_in.push_back(dout);
  std::vector<Shape> shapes{in.q.shape(), in.k.shape(), in.v.shape()};
  std::vector<Dtype> dtypes{c.dt, c.dt, c.dt};
  if (sinks) {
    shapes.push_back({c.hq});
    dtypes.push_back(c.dt);
  }
  auto grads = array::make_arrays(
      shapes, dtypes, std::make_shared<ScaledDotProductAttentionVjp>(default_stream(kGpu), params_of(c)), node_in);
  eval(grads);
  return grads;
}

// The reference: the fallback graph in float64 on the CPU, a function of q, k, v[, sinks].
std::function<std::vector<array>(const std::vector<array>&)> reference_graph(
    const fast::AttentionParams& p, const std::optional<Masks>& mask, const std::optional<Drawn>& sinks) {
  std::optional<array> m64;
  if (mask) m64 = mask->m64;
  const bool with_sinks = sinks.has_value();
  return [p, m64, with_sinks](const std::vector<array>& xs) {
    std::vector<array> all{xs[0], xs[1], xs[2]};
    if (m64) all.push_back(*m64);
    if (with_sinks) all.push_back(xs[3]);
    return fast::attention_graph(all, p, std::nullopt, kCpu);
  };
}

// out and lse as a forward kernel returns them (out in the dtype, lse in float32), from the
// float64 graph.
std::pair<array, array> forward_of(const Case& c,
                                   const std::function<std::vector<array>(const std::vector<array>&)>& graph,
                                   const std::vector<array>& primals) {
  const std::vector<array> fwd = graph(primals);
  array out = astype(fwd[0], c.dt, kCpu), lse = astype(fwd[1], float32, kCpu);
  eval(out, lse);
  return {out, lse};
}

// One case end to end; `in` gives q, k, v (dense by default).
void check_case(const Case& c, const CaseInputs& in) {
  SCOPED_TRACE(c.name());
  const fast::AttentionParams p = params_of(c);
  std::optional<Masks> mask;
  if (p.has_mask) mask = make_mask(c);
  std::optional<Drawn> sinks;
  if (c.sinks) sinks = draw({c.hq}, c.dt, 2.0);
  Drawn dout = draw({c.b, c.hq, c.lq, c.dv}, c.dt);

  auto graph = reference_graph(p, mask, sinks);
  std::vector<array> primals{in.q64, in.k64, in.v64};
  if (sinks) primals.push_back(sinks->x64);
  auto [out, lse] = forward_of(c, graph, primals);
  auto [outs, ref] = vjp(
      [&](const std::vector<array>& xs) { return std::vector<array>{graph(xs)[0]}; }, primals, {dout.x64});
  eval(ref);

  const std::vector<array> got = run_node(c, in, mask, sinks, out, lse, dout.x);
  ASSERT_EQ(got.size(), primals.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].dtype(), c.dt);
  expect_grad_close(got[0], ref[0], c.dt, "dq");
  expect_grad_close(got[1], ref[1], c.dt, "dk");
  expect_grad_close(got[2], ref[2], c.dt, "dv");
  if (sinks) expect_dsinks_close(got[3], ref[3], sinks->x64, out, lse, dout.x, c);
}

// Every mask kind over the sizes, for one dtype and head size. GQA alternates between 1 and
// 4; sinks join every third case (and always the bool mask's, whose empty row then gives
// nothing).
void check_dtype(Dtype dt, int d) {
  const std::vector<std::pair<int, int>> sizes{{1, 7}, {17, 300}, {300, 300}, {300, 7}};
  const std::vector<MaskKind> masks{MaskKind::None,     MaskKind::Causal,   MaskKind::Window,
                                    MaskKind::Bool,     MaskKind::Additive, MaskKind::KeyPadding};
  int n = 0;
  for (auto [lq, lk] : sizes) {
    for (MaskKind m : masks) {
      for (bool with_sinks : {false, true}) {
        if (with_sinks && n % 3 != 0 && m != MaskKind::Bool) continue;
        Case c;
        c.dt = dt;
        c.d = c.dv = d;
        c.lq = lq;
        c.lk = lk;
        c.b = int64_t(lq) * lk >= 90000 ? 1 : 2;
        c.hq = 4;
        c.hkv = n % 2 == 0 ? 4 : 1;
        c.mask = m;
        c.sinks = with_sinks;
        check_case(c, dense_inputs(c));
        ++n;
      }
    }
  }
}

TEST(AttentionBackwardGpu, Float32) {
  NUVEC_REQUIRE_GPU();
  for (int d : {64, 128, 80}) check_dtype(float32, d);
}

TEST(AttentionBackwardGpu, Float16) {
  NUVEC_REQUIRE_GPU();
  for (int d : {64, 128, 80}) check_dtype(float16, d);
}

TEST(AttentionBackwardGpu, BFloat16) {
  NUVEC_REQUIRE_GPU();
  for (int d : {64, 128, 80}) check_dtype(bfloat16, d);
}

// Head sizes the tensor-core kernels do not take: D != Dv, D 256, a small odd D.
TEST(AttentionBackwardGpu, OtherHeadSizes) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16}) {
    for (auto [d, dv] : std::vector<std::pair<int, int>>{{64, 128}, {256, 256}, {7, 5}}) {
      Case c;
      c.dt = dt;
      c.d = d;
      c.dv = dv;
      c.b = 2;
      c.hq = 4;
      c.hkv = 2;
      c.lq = 45;
      c.lk = 70;
      c.mask = MaskKind::Causal;
      check_case(c, dense_inputs(c));
      c.mask = MaskKind::Bool;
      c.sinks = true;
      check_case(c, dense_inputs(c));
    }
  }
}

// A causal bfloat16 case at D 256 (GQA 2).
Case d256_case(int lq, int lk) {
  Case c;
  c.dt = bfloat16;
  c.d = c.dv = 256;
  c.b = 1;
  c.hq = 2;
  c.hkv = 1;
  c.lq = lq;
  c.lk = lk;
  c.mask = MaskKind::Causal;
  return c;
}

// One small D 256 case on the mma.sync kernels, for compute-sanitizer
// (scripts/device/pending_checks.sh d256).
TEST(AttentionBackwardGpu, D256SmallCaseOnTensorCores) {
  NUVEC_REQUIRE_GPU();
  ScopedEnv on("NUVEC_ATTENTION_BACKWARD_D256", "1");
  const Case c = d256_case(40, 70);
  check_case(c, dense_inputs(c));
}

// The switch took effect: the mma.sync kernels round P and dS to the half type where the SIMT
// kernels keep float32, so the gradients differ in their last bits (each evaluated in its
// switch's scope).
TEST(AttentionBackwardGpu, D256SwitchSelectsTheTensorCores) {
  NUVEC_REQUIRE_GPU();
  const Case c = d256_case(40, 70);
  const CaseInputs in = dense_inputs(c);
  const fast::AttentionParams p = params_of(c);
  std::optional<Masks> mask;
  if (p.has_mask) mask = make_mask(c);
  const Drawn dout = draw({c.b, c.hq, c.lq, c.dv}, c.dt);
  auto [out, lse] = forward_of(c, reference_graph(p, mask, std::nullopt), {in.q64, in.k64, in.v64});
  std::vector<array> on;
  {
    ScopedEnv env("NUVEC_ATTENTION_BACKWARD_D256", "1");
    on = run_node(c, in, mask, std::nullopt, out, lse, dout.x);
  }
  ScopedEnv env("NUVEC_ATTENTION_BACKWARD_D256", "0");
  const std::vector<array> off = run_node(c, in, mask, std::nullopt, out, lse, dout.x);
  EXPECT_FALSE(array_equal(on[1], off[1]).item<bool>()) << "the D 256 tensor-core kernels did not run";
}

// D 256 in the half types on the mma.sync kernels (the dk/dv kernel once for dv, once for dk;
// dq with key tiles of 16), enabled by NUVEC_ATTENTION_BACKWARD_D256=1 until this test has
// passed on a GPU: every mask kind, sinks, GQA, tile edges, as check_dtype does for D 64/128.
TEST(AttentionBackwardGpu, HalfTypesD256OnTensorCores) {
  NUVEC_REQUIRE_GPU();
  ScopedEnv on("NUVEC_ATTENTION_BACKWARD_D256", "1");
  for (Dtype dt : {float16, bfloat16}) check_dtype(dt, 256);
  // Rows that are not 16-byte aligned still take the SIMT kernels (tensor_core_fits).
  const Case c = d256_case(33, 40);
  check_case(c, strided_inputs(c, 1));
}

// q, k and v as views: k and v sliced along L from a longer cache, q with padded rows (both
// still 16-byte aligned: the tensor-core kernels), and q with rows of D + 1 elements (not
// aligned: the SIMT kernels).
TEST(AttentionBackwardGpu, StridedInputs) {
  NUVEC_REQUIRE_GPU();
  for (Dtype dt : {bfloat16, float16, float32}) {
    for (int pad : {8, 1}) {
      Case c;
      c.dt = dt;
      c.d = c.dv = 64;
      c.b = 2;
      c.hq = 8;
      c.hkv = 2;
      c.lq = 70;
      c.lk = 130;
      c.mask = MaskKind::Causal;
      SCOPED_TRACE("q row padding " + std::to_string(pad));
      check_case(c, strided_inputs(c, pad));
    }
  }
}

// The same node evaluated twice gives the same dk, dv and dsinks bits (each block owns its
// keys and sums in a fixed order: no races). dq may differ by a rounding: the Hopper kernel
// adds the key blocks' float32 shares with atomics, in any order; everything else runs in a
// fixed order.
TEST(AttentionBackwardGpu, Deterministic) {
  NUVEC_REQUIRE_GPU();
  for (int d : {128, 80}) {
    Case c;
    c.dt = bfloat16;
    c.d = c.dv = d;
    c.b = 2;
    c.hq = 8;
    c.hkv = 2;
    c.lq = 300;
    c.lk = 300;
    c.mask = MaskKind::Causal;
    c.sinks = true;
    const CaseInputs in = dense_inputs(c);
    Drawn sinks = draw({c.hq}, c.dt), dout = draw({c.b, c.hq, c.lq, c.dv}, c.dt);
    Drawn out = draw({c.b, c.hq, c.lq, c.dv}, c.dt, 0.3);
    array lse = astype(add(multiply(randn({c.b, c.hq, c.lq}), array(0.5, float64), kCpu), array(3.0, float64), kCpu),
                       float32, kCpu);
    eval(lse);
    const auto a = run_node(c, in, std::nullopt, sinks, out.x, lse, dout.x);
    const auto b = run_node(c, in, std::nullopt, sinks, out.x, lse, dout.x);
    for (size_t i = 1; i < a.size(); ++i) {
      EXPECT_TRUE(array_equal(a[i], b[i], false, kCpu).item<bool>()) << "gradient " << i << " D " << d;
    }
    // dq: float32 sums of the same terms in another order, each rounded once to bfloat16.
    const std::vector<double> qa = to_vector(a[0]), qb = to_vector(b[0]);
    double top = 0;
    for (double x : qa) top = std::max(top, std::abs(x));
    for (size_t i = 0; i < qa.size(); ++i) {
      ASSERT_LE(std::abs(qa[i] - qb[i]), std::ldexp(1.0, -7) * std::max(std::abs(qa[i]), std::abs(qb[i])) + 1e-3 * top)
          << "dq element " << i << " D " << d;
    }
  }
}

// The prefill backward of the benchmark, B 4, H 32, L 4096, D 128 bfloat16, causal
// and not: milliseconds per backward node and TFLOP/s by FlashAttention's count (the
// backward as 2.5 forwards of 4 · B · H · L² · D, halved under causal). No assertion: a
// report for the lead (the inputs are random; out and lse are stand-ins, which leaves the
// work unchanged).
TEST(AttentionBackwardGpu, PrefillTiming) {
  NUVEC_REQUIRE_GPU();
  const int b = 4, h = 32, l = 4096, d = 128;
  const Shape shape{b, h, l, d};
  array q = random::normal(shape, bfloat16, std::nullopt, kGpu), k = random::normal(shape, bfloat16, std::nullopt, kGpu),
        v = random::normal(shape, bfloat16, std::nullopt, kGpu), dout = random::normal(shape, bfloat16, std::nullopt, kGpu),
        out = multiply(random::normal(shape, bfloat16, std::nullopt, kGpu), array(0.1f, bfloat16), kGpu);
  array lse = add(random::normal({b, h, l}, float32, std::nullopt, kGpu), array(9.0f), kGpu);
  eval(q, k, v, dout, out, lse);
  for (bool causal : {false, true}) {
    fast::AttentionParams p;
    p.scale = 1.0f / std::sqrt(float(d));
    p.causal = causal;
    auto node = [&] {
      return array::make_arrays(
          {shape, shape, shape}, {bfloat16, bfloat16, bfloat16},
          std::make_shared<ScaledDotProductAttentionVjp>(default_stream(kGpu), p), {q, k, v, out, lse, dout});
    };
    eval(node()); // warm-up
    synchronize(default_stream(kGpu));
    constexpr int kIters = 5;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) eval(node());
    synchronize(default_stream(kGpu));
    auto t1 = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / kIters;
    const double flops = 2.5 * 4.0 * b * h * double(l) * l * d * (causal ? 0.5 : 1.0);
    std::printf("[attention backward bf16 B4 H32 L4096 D128 %s] %.2f ms, %.0f TFLOP/s (FlashAttention's count)\n",
                causal ? "causal" : "full", ms, flops / (ms * 1e9));
  }
}

} // namespace
