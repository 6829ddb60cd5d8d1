// nuvec tests: compile (src/compile/): simplification (constant merging, no-op removal,
// CSE), fusion boundaries, the trace cache, shapeless replay, compiled functions under
// grad and vmap, the Compiled primitive's own rules, and results equal to the uncompiled
// function on random inputs of odd sizes.
#include <gtest/gtest.h>

#include <typeinfo>

#include "test_utils.h"

namespace nuvec {
namespace {

using testing::expect_allclose;
using testing::randn;
using Fn = std::function<std::vector<array>(const std::vector<array>&)>;

// Sets a compile mode for one scope.
struct ModeScope {
  explicit ModeScope(CompileMode m) { set_compile_mode(m); }
  ~ModeScope() { set_compile_mode(CompileMode::enabled); }
};

bool is_compiled(const array& a) {
  return a.has_primitive() && typeid(a.primitive()) == typeid(Compiled);
}

TEST(Compile, MergesEqualScalarConstants) {
  ModeScope mode(CompileMode::no_fuse);
  Fn f = [](const std::vector<array>& x) {
    return std::vector<array>{x[0] * array(3.0f) + x[0] * array(3.0f), x[0] - array(2.0f)};
  };
  auto out = compile(f)({array({1.0f, 2.0f})});
  // Both products read the one merged 3 (through one merged broadcast), so they merge too.
  auto& sum = out[0];
  EXPECT_EQ(sum.inputs()[0].id(), sum.inputs()[1].id());
  expect_allclose(out[0], array({6.0f, 12.0f}));
  expect_allclose(out[1], array({-1.0f, 0.0f}));
}

TEST(Compile, DoesNotMergeDifferentConstantsOrDtypes) {
  ModeScope mode(CompileMode::no_fuse);
  Fn f = [](const std::vector<array>&) {
    return std::vector<array>{abs(array(1.0f)), abs(array(2.0f)), abs(array(1, int32))};
  };
  auto out = compile(f)({});
  EXPECT_NE(out[0].inputs()[0].id(), out[1].inputs()[0].id());
  EXPECT_NE(out[0].inputs()[0].id(), out[2].inputs()[0].id());
}

TEST(Compile, RemovesNoOps) {
  ModeScope mode(CompileMode::no_fuse);
  Fn f = [](const std::vector<array>& x) {
    return std::vector<array>{copy(stop_gradient(sin(copy(x[0]))))};
  };
  auto a = array({0.5f, 1.5f});
  auto out = compile(f)({a})[0];
  EXPECT_EQ(std::string(out.primitive().name()), "Sin");
  EXPECT_EQ(out.inputs()[0].id(), a.id());
  expect_allclose(out, sin(a));
}

TEST(Compile, CommonSubexpressionsMergeIncludingMultiOutput) {
  ModeScope mode(CompileMode::no_fuse);
  Fn f = [](const std::vector<array>& x) {
    auto q1 = divmod(x[0], x[1]);
    auto q2 = divmod(x[0], x[1]);
    return std::vector<array>{q1[1] - q2[1], q1[0] * q2[0]};
  };
  auto a = array({7.0f, -5.0f});
  auto b = array({2.0f, 3.0f});
  auto out = compile(f)({a, b});
  EXPECT_EQ(out[0].inputs()[0].id(), out[0].inputs()[1].id());
  EXPECT_EQ(out[1].inputs()[0].id(), out[1].inputs()[1].id());
  // The merged node keeps its outputs in order: remainder feeds the first, quotient the second.
  EXPECT_EQ(out[0].inputs()[0].id(), out[1].inputs()[0].siblings()[0].id());
  auto d = divmod(a, b);
  expect_allclose(out[1], d[0] * d[0]);
  expect_allclose(out[0], zeros({2}));
}

TEST(Compile, NoSimplifyKeepsDuplicates) {
  ModeScope mode(CompileMode::no_simplify);
  Fn f = [](const std::vector<array>& x) { return std::vector<array>{exp(x[0]) + exp(x[0])}; };
  // no_simplify still fuses: one Compiled node holding both exps.
  auto out = compile(f)({array({1.0f})})[0];
  ASSERT_TRUE(is_compiled(out));
  EXPECT_EQ(static_cast<Compiled&>(out.primitive()).tape().size(), 3u);
}

TEST(Compile, FusionStopsAtReductionsAndSharedProducers) {
  Fn f = [](const std::vector<array>& x) {
    auto e = exp(x[0]); // read by two sections: computed once, outside both
    return std::vector<array>{abs(negative(e)), sum(e * cos(x[0]), true)};
  };
  auto x = array({0.1f, 0.2f, 0.3f});
  auto out = compile(f)({x});
  ASSERT_TRUE(is_compiled(out[0]));
  EXPECT_EQ(static_cast<Compiled&>(out[0].primitive()).tape().size(), 2u);
  EXPECT_EQ(typeid(out[0].inputs()[0].primitive()), typeid(Exp));
  EXPECT_EQ(typeid(out[1].primitive()), typeid(Reduce));
  auto inner = out[1].inputs()[0];
  ASSERT_TRUE(is_compiled(inner));
  ASSERT_EQ(inner.inputs().size(), 2u);
  EXPECT_EQ(inner.inputs()[0].id(), out[0].inputs()[0].id());
  EXPECT_EQ(inner.inputs()[1].id(), x.id());
  auto expected = f({x});
  expect_allclose(out[0], expected[0]);
  expect_allclose(out[1], expected[1]);
}

TEST(Compile, SingleOpIsNotFused) {
  Fn f = [](const std::vector<array>& x) { return std::vector<array>{x[0] * x[1]}; };
  auto out = compile(f)({array(2.0f), array(3.0f)})[0];
  EXPECT_EQ(typeid(out.primitive()), typeid(Multiply));
  EXPECT_EQ(out.item<float>(), 6.0f);
}

TEST(Compile, CacheHitsAndRetracesOnNewSignatures) {
  int traces = 0;
  Fn f = [&traces](const std::vector<array>& x) {
    ++traces;
    return std::vector<array>{tanh(x[0]) * 2.0f};
  };
  auto cf = compile(f);
  cf({array({1.0f, 2.0f})});
  cf({array({3.0f, 4.0f})});
  EXPECT_EQ(traces, 1);
  cf({array({1.0f, 2.0f, 3.0f})}); // new shape
  EXPECT_EQ(traces, 2);
  cf({array({1.0, 2.0}, float64)}); // new dtype
  EXPECT_EQ(traces, 3);
  cf({array({5.0f, 6.0f})});
  EXPECT_EQ(traces, 3);
  // A new default stream is a new signature too.
  StreamContext ctx(new_stream(default_device()));
  auto out = cf({array({5.0f, 6.0f})})[0];
  EXPECT_EQ(traces, 4);
  EXPECT_EQ(out.primitive().stream(), default_stream(default_device()));
}

TEST(Compile, ShapelessReusesTheTraceForNewShapes) {
  int traces = 0;
  Fn f = [&traces](const std::vector<array>& x) {
    ++traces;
    return std::vector<array>{exp(x[0]) + x[1] * array(0.5f)};
  };
  auto cf = compile(f, /* shapeless */ true);
  for (auto n : {3, 17, 5}) {
    auto a = randn({2, n}, float32);
    auto b = randn({1, n}, float32);
    auto out = cf({a, b})[0];
    EXPECT_EQ(out.shape(), (Shape{2, n}));
    expect_allclose(out, exp(a) + b * 0.5f, 1e-5, 1e-5);
  }
  EXPECT_EQ(traces, 1);
  cf({randn({4}, float32), randn({4}, float32)}); // new ndim
  EXPECT_EQ(traces, 2);
}

TEST(Compile, ShapelessReshapeToAFixedShapeThrows) {
  Fn f = [](const std::vector<array>& x) { return std::vector<array>{reshape(x[0], {2, 3})}; };
  auto cf = compile(f, true);
  EXPECT_EQ(cf({array({1, 2, 3, 4, 5, 6})})[0].shape(), (Shape{2, 3}));
  EXPECT_THROW(cf({array({1, 2, 3, 4})}), std::invalid_argument);
}

// The traced shapes live on in a Broadcast to a fixed shape outside a fused node, or in a
// constant made from a shape (mean's 1 / N): such a shapeless function traces again for new
// shapes rather than replaying with stale ones.
TEST(Compile, ShapelessRetracesWhatCannotFollowNewShapes) {
  int traces = 0;
  Fn bmm = [&traces](const std::vector<array>& x) {
    ++traces;
    return std::vector<array>{matmul(x[0], x[1])}; // batch broadcast outside any fusion
  };
  auto cb = compile(bmm, true);
  EXPECT_EQ(cb({ones({1, 2, 3}), ones({4, 3, 5})})[0].shape(), (Shape{4, 2, 5}));
  auto r = cb({ones({1, 2, 3}), ones({2, 3, 5})})[0];
  EXPECT_EQ(r.shape(), (Shape{2, 2, 5}));
  expect_allclose(r, full({2, 2, 5}, 3.0f), 0, 0);
  EXPECT_EQ(traces, 2);

  Fn center = [](const std::vector<array>& x) {
    return std::vector<array>{x[0] - mean(x[0], -1, true), var(x[0], -1)};
  };
  auto cc = compile(center, true);
  cc({reshape(arange(6.0f), {2, 3})});
  auto x = reshape(arange(8.0f), {2, 4});
  auto got = cc({x});
  expect_allclose(got[0], x - mean(x, -1, true), 1e-6, 1e-6);
  expect_allclose(got[1], var(x, -1), 1e-6, 1e-6);

  // A broadcast with a stale target: traced (1, 3) + (4, 3), called with (1, 3) + (1, 3).
  Fn add = [](const std::vector<array>& x) { return std::vector<array>{x[0] + x[1]}; };
  set_compile_mode(CompileMode::no_fuse);
  auto ca = compile(add, true);
  ca({ones({1, 3}), ones({4, 3})});
  EXPECT_EQ(ca({ones({1, 3}), ones({1, 3})})[0].shape(), (Shape{1, 3}));
  enable_compile();
}

// Two fused sections merge only when they do the same work on the same inputs: the same
// primitives wired differently (x - exp(x) and exp(x) - x), or with other outputs, differ.
TEST(Compile, FusedSectionsMergeOnlyWhenTheyAreTheSameWork) {
  array c = array({1.0f, 2.0f, 3.0f});
  auto f1 = compile([](const std::vector<array>& v) { return std::vector<array>{v[0] - exp(v[0])}; });
  auto f2 = compile([](const std::vector<array>& v) { return std::vector<array>{exp(v[0]) - v[0]}; });
  Fn g = [&](const std::vector<array>& v) {
    return std::vector<array>{f1({c})[0] + v[0], f2({c})[0] + v[0]};
  };
  auto got = compile(g)({array(0.0f)});
  auto want = g({array(0.0f)});
  expect_allclose(got[0], want[0], 1e-6, 1e-6);
  expect_allclose(got[1], want[1], 1e-6, 1e-6);

  auto h1 = compile([](const std::vector<array>& v) { return std::vector<array>{exp(v[0]) * v[0]}; });
  auto h2 = compile([](const std::vector<array>& v) {
    auto e = exp(v[0]);
    return std::vector<array>{e, e * v[0]};
  });
  Fn h = [&](const std::vector<array>& v) {
    auto a = h1({c});
    auto b = h2({c});
    return std::vector<array>{a[0] + v[0], b[0] + v[0], b[1] + v[0]};
  };
  auto hg = compile(h)({array(0.0f)});
  auto hw = h({array(0.0f)});
  for (int i = 0; i < 3; ++i) expect_allclose(hg[i], hw[i], 1e-6, 1e-6);
}

TEST(Compile, ThrowingTraceLeavesNoCacheEntry) {
  bool fail = true;
  Fn f = [&fail](const std::vector<array>& x) {
    if (fail) throw std::runtime_error("trace");
    return std::vector<array>{x[0] + 1.0f};
  };
  auto cf = compile(f);
  EXPECT_THROW(cf({array(1.0f)}), std::runtime_error);
  EXPECT_THROW(cf({array(1.0f)}), std::runtime_error);
  fail = false;
  EXPECT_EQ(cf({array(1.0f)})[0].item<float>(), 2.0f);
}

TEST(Compile, DisabledCompileCallsTheFunction) {
  EXPECT_THROW(compile(nullptr), std::invalid_argument);
  disable_compile();
  Fn f = [](const std::vector<array>& x) { return std::vector<array>{abs(negative(x[0]))}; };
  auto out = compile(f)({array({-2.0f})})[0];
  enable_compile();
  EXPECT_EQ(typeid(out.primitive()), typeid(Abs));
  EXPECT_FALSE(is_compiled(out));
}

// gelu with broadcasting against a row and constants: the fused path on odd sizes.
std::vector<array> chain(const std::vector<array>& x) {
  auto y = x[0] * (1.0f + erf(x[0] / 1.4142135f)) / 2.0f;
  return {where(greater(y, x[1]), y - x[1], sigmoid(y) * x[1]), abs(y)};
}

TEST(Compile, MatchesUncompiledOnRandomOddSizes) {
  auto cf = compile(chain);
  for (auto [r, c] : {std::pair{1, 1}, {7, 13}, {3, 31}, {129, 5}}) {
    auto a = randn({r, c}, float32);
    auto b = randn({c}, float32);
    auto got = cf({a, b});
    auto want = chain({a, b});
    // y feeds two outputs: it is one fused node, the select chain another, abs(y) alone.
    ASSERT_TRUE(is_compiled(got[0]));
    EXPECT_TRUE(is_compiled(got[0].inputs()[0]));
    EXPECT_EQ(typeid(got[1].primitive()), typeid(Abs));
    expect_allclose(got[0], want[0], 1e-5, 1e-6);
    expect_allclose(got[1], want[1], 1e-5, 1e-6);
  }
}

TEST(Compile, KernelNameIsStableAcrossShapes) {
  auto cf = compile(chain);
  auto a = cf({randn({3, 4}, float32), randn({4}, float32)})[0];
  auto b = cf({randn({5, 6}, float32), randn({6}, float32)})[0];
  auto c = cf({randn({5, 6}, float64), randn({6}, float64)})[0];
  auto name = [](const array& x) { return static_cast<Compiled&>(x.primitive()).lib_name(); };
  EXPECT_FALSE(name(a).empty());
  EXPECT_EQ(name(a), name(b));
  EXPECT_NE(name(a), name(c));
  // Equivalence is per trace shape (a Broadcast inside records its target shape).
  auto d = compile(Fn(chain))({randn({3, 4}, float32), randn({4}, float32)})[0];
  EXPECT_TRUE(a.primitive().is_equivalent(d.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(b.primitive()));
}

TEST(Compile, UnderGradAndVmap) {
  auto loss = [](const std::vector<array>& x) {
    return std::vector<array>{sum(chain(x)[0])};
  };
  auto closs = compile(Fn(loss));
  auto a = randn({5, 3}, float32);
  auto b = randn({3}, float32);
  auto g = value_and_grad(closs, std::vector<int>{0, 1})({a, b});
  auto w = value_and_grad(Fn(loss), std::vector<int>{0, 1})({a, b});
  expect_allclose(g.first[0], w.first[0], 1e-5, 1e-5);
  expect_allclose(g.second[0], w.second[0], 1e-5, 1e-5);
  expect_allclose(g.second[1], w.second[1], 1e-5, 1e-5);

  auto cv = vmap(compile(chain), {0, -1})({a, b});
  auto wv = chain({a, b});
  expect_allclose(cv[0], wv[0], 1e-5, 1e-6);
  // grad of a function that compiles inside: the outer compile fuses value and gradient.
  Fn outer = [](const std::vector<array>& x) {
    auto [v, gr] = value_and_grad(compile(Fn([](const std::vector<array>& y) {
      return std::vector<array>{exp(sin(y[0]))};
    })))(x);
    return std::vector<array>{v[0], gr[0]};
  };
  auto outs = compile(outer)({array(0.3f)});
  ASSERT_TRUE(is_compiled(outs[0]));
  EXPECT_EQ(outs[0].siblings()[0].id(), outs[1].id());
  EXPECT_NEAR(outs[1].item<float>(), std::exp(std::sin(0.3f)) * std::cos(0.3f), 1e-6);
}

TEST(Compile, CompiledPrimitiveRulesFollowTheTape) {
  Fn f = [](const std::vector<array>& x) { return std::vector<array>{sin(x[0]) * exp(x[1])}; };
  auto a = randn({4, 3}, float32);
  auto b = randn({3}, float32);
  auto out = compile(f)({a, b})[0];
  ASSERT_TRUE(is_compiled(out));
  auto& p = out.primitive();
  auto ct = randn({4, 3}, float32);

  auto vjps = p.vjp(out.inputs(), {ct}, {0, 1}, {out});
  auto want = vjp(f, {a, b}, {ct}).second;
  expect_allclose(vjps[0], want[0], 1e-5, 1e-5);
  expect_allclose(vjps[1], want[1], 1e-5, 1e-5);

  auto ta = randn({4, 3}, float32);
  auto jvps = p.jvp(out.inputs(), {ta}, {0});
  auto wantj = jvp(f, {a, b}, {ta, zeros_like(b)}).second;
  expect_allclose(jvps[0], wantj[0], 1e-5, 1e-5);

  auto batched = randn({2, 4, 3}, float32);
  auto [vouts, vaxes] = p.vmap({batched, b}, {0, -1});
  EXPECT_EQ(vaxes[0], 0);
  expect_allclose(vouts[0], sin(batched) * exp(b), 1e-5, 1e-5);
}

// A shapeless replay at new shapes re-checks what the trace checked: nodes whose parameters
// or checks hold the traced shapes (slices, slice updates, fused ops) and products whose
// inputs' equal dims no longer agree trace again at the new shapes, so a call gives what the
// uncompiled function gives — its answer, or its exception — never a read past a buffer.
TEST(Compile, ShapelessReplayRechecksWhatTheTraceChecked) {
  // rms_norm: a weight that no longer matches x's last axis throws the op's own error.
  auto norm = compile(Fn([](const std::vector<array>& a) { return std::vector<array>{fast::rms_norm(a[0], a[1], 1e-5f)}; }),
                      true);
  const array x4 = randn({2, 4}), w4 = randn({4});
  expect_allclose(norm({x4, w4})[0], fast::rms_norm(x4, w4, 1e-5f), 1e-6, 1e-6);
  EXPECT_THROW(eval(norm({randn({2, 6}), w4})), std::invalid_argument);
  const array x6 = randn({3, 6}), w6 = randn({6});
  expect_allclose(norm({x6, w6})[0], fast::rms_norm(x6, w6, 1e-5f), 1e-6, 1e-6);

  // norm_rope into a cache too small for the new rows: the op's error, not a write past it.
  fast::Rotation rot{4, false, 10000.0f, 1.0f, std::nullopt};
  auto rope = compile(Fn([rot](const std::vector<array>& a) {
                        return std::vector<array>{fast::norm_rope(a[0], std::nullopt, 1e-5f, rot, 3, a[1])};
                      }),
                      true);
  eval(rope({randn({1, 2, 2, 16}), randn({1, 2, 8, 16})}));
  EXPECT_THROW(eval(rope({randn({1, 2, 40, 16}), randn({1, 2, 4, 16})})), std::invalid_argument);

  // slice_update of fixed bounds: new shapes give the uncompiled answer or its error.
  auto update = compile(
      Fn([](const std::vector<array>& a) { return std::vector<array>{slice_update(a[0], a[1], {1, 0}, {3, 2})}; }), true);
  const array base = randn({4, 5}), patch = randn({2, 2});
  expect_allclose(update({base, patch})[0], slice_update(base, patch, {1, 0}, {3, 2}), 0, 0);
  const array base2 = randn({6, 3});
  expect_allclose(update({base2, patch})[0], slice_update(base2, patch, {1, 0}, {3, 2}), 0, 0);
  EXPECT_THROW(eval(update({randn({6, 3}), randn({5, 2})})), std::invalid_argument);

  // A product whose K no longer agrees: matmul's error.
  auto mm = compile(Fn([](const std::vector<array>& a) { return std::vector<array>{matmul(a[0], a[1])}; }), true);
  eval(mm({randn({2, 3}), randn({3, 4})}));
  EXPECT_THROW(eval(mm({randn({2, 5}), randn({3, 4})})), std::invalid_argument);
  const array a7 = randn({5, 7}), b7 = randn({7, 2});
  expect_allclose(mm({a7, b7})[0], matmul(a7, b7), 1e-5, 1e-5);
}

} // namespace
} // namespace nuvec
