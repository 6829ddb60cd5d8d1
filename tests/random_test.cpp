// nuvec tests: nuvec::random. Bits are checked against Random123's known answers for
// threefry2x32_20 and against the bits MLX documents in its own test suite (which its authors
// derived from JAX's threefry implementation), re-derived here from the counter layout;
// distributions against float64 formulas with fixed tolerances on large samples, using keys
// drawn from the test's seeded generator (NUVEC_TEST_SEED replays a run).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "backend/common/threefry.h"
#include "checker.h"
#include "test_utils.h"

namespace nuvec {
namespace {

using namespace nuvec::testing;

// A fresh key per call, from the test process's generator.
array fresh_key() {
  return random::key(rng()());
}

std::vector<uint32_t> words(const array& a) {
  auto v = to_vector(a);
  return std::vector<uint32_t>(v.begin(), v.end());
}

// The uint32 bits of `shape` for key `k`, on the host by the verified counter layout
// (threefry::fill_bits reproduces MLX's vectors in RandomBits.MatchMlxAndJax).
std::vector<uint32_t> host_bits(threefry::Words k, size_t n) {
  std::vector<uint32_t> w(n);
  threefry::fill_bits(k, w.data(), 4 * n);
  return w;
}

threefry::Words host_key(const array& k) {
  auto w = words(k);
  return {w[0], w[1]};
}

// MLX's uniform on [0, 1) in float32: min(float(b) / float(2^32 - 1), nextafter(1, 0)).
float host_unit(uint32_t b) {
  volatile float q = static_cast<float>(b) / 4294967295.0f;
  return std::min(static_cast<float>(q), std::nextafter(1.0f, 0.0f));
}

// The values of an array of T, exactly (to_vector goes through double).
template <typename T>
std::vector<T> values(array a) {
  a = contiguous(astype(a, TypeToDtype<T>()));
  a.eval();
  return std::vector<T>(a.data<T>(), a.data<T>() + a.size());
}

// sup |F_n(x) - F(x)| of the sample against the CDF F.
template <typename F>
double ks_statistic(std::vector<double> x, F&& cdf) {
  std::sort(x.begin(), x.end());
  double n = static_cast<double>(x.size()), d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double f = cdf(x[i]);
    d = std::max({d, std::abs(f - i / n), std::abs((i + 1) / n - f)});
  }
  return d;
}

double mean_of(const std::vector<double>& x) {
  return std::accumulate(x.begin(), x.end(), 0.0) / x.size();
}

double var_of(const std::vector<double>& x) {
  double m = mean_of(x), acc = 0;
  for (double v : x) acc += (v - m) * (v - m);
  return acc / x.size();
}

// Critical value of the KS statistic for n samples at level ~1e-6.
double ks_bound(size_t n) {
  return std::sqrt(0.5 * std::log(2.0 / 1e-6) / n);
}

// ---------------------------------------------------------------------------------------
// The generator

TEST(Threefry, Random123KnownAnswers) {
  // Random123 tests/kat_vectors, threefry2x32 with 20 rounds: (counter, key) -> output.
  struct Kat {
    threefry::Words ctr, key, out;
  };
  const Kat kats[] = {
      {{0x00000000, 0x00000000}, {0x00000000, 0x00000000}, {0x6b200159, 0x99ba4efe}},
      {{0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x1cb996fc, 0xbb002be7}},
      {{0x243f6a88, 0x85a308d3}, {0x13198a2e, 0x03707344}, {0xc4923a9c, 0x483df7a0}},
  };
  for (const auto& k : kats) {
    auto r = threefry::hash(k.key, k.ctr);
    EXPECT_EQ(r.x0, k.out.x0);
    EXPECT_EQ(r.x1, k.out.x1);
  }
}

TEST(RandomKey, SeedSplitsIntoHighAndLowWords) {
  EXPECT_EQ(words(random::key(0)), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(words(random::key(1)), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(words(random::key(uint64_t{1} << 32)), (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(words(random::key((uint64_t{1} << 32) + 1)), (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(random::key(5).dtype(), uint32);
  EXPECT_EQ(random::key(5).shape(), Shape{2});
}

// MLX compatibility. The layout (threefry.h): for m output words, h = m / 2, the pair
// (w[j], w[j + h + m%2]) = threefry(key, (j, j + h + m%2)); for odd m, w[h] =
// threefry(key, (h, 0)).x0. So bits({}, key(0)) = threefry((0,0), (0,0)).x0 = 0x6b200159 =
// 1797259609 (the first Random123 answer), its low 16 bits 0x0159 = 345 and low byte 0x59 =
// 89. The remaining values are those listed in MLX's tests/random_tests.cpp (generated there
// with JAX's threefry_prng_impl.random_bits) and in JAX's documentation (split(PRNGKey(0))).
TEST(RandomBits, MatchMlxAndJax) {
  auto k0 = random::key(0), k1 = random::key(1);
  EXPECT_EQ(words(random::bits({}, k0)), std::vector<uint32_t>{1797259609u});
  EXPECT_EQ(words(random::bits({}, 2, k0)), std::vector<uint32_t>{345});
  EXPECT_EQ(words(random::bits({}, 1, k0)), std::vector<uint32_t>{89});
  EXPECT_EQ(words(random::bits({}, k1)), std::vector<uint32_t>{507451445u});
  EXPECT_EQ(words(random::bits({}, 2, k1)), std::vector<uint32_t>{6197});
  EXPECT_EQ(words(random::bits({}, 1, k1)), std::vector<uint32_t>{53});

  auto b31 = random::bits({3, 1}, k0);
  EXPECT_EQ(b31.shape(), (Shape{3, 1}));
  EXPECT_EQ(words(b31), (std::vector<uint32_t>{4146024105u, 1351547692u, 2718843009u}));
  // Odd byte counts: the last word is partial.
  EXPECT_EQ(words(random::bits({5}, 2, k0)),
            (std::vector<uint32_t>{20137, 63263, 64300, 20622, 16513}));
  EXPECT_EQ(words(random::bits({6}, 2, k0)),
            (std::vector<uint32_t>{20137, 63263, 64300, 20622, 16513, 41486}));
  EXPECT_EQ(words(random::bits({7}, 2, k0)),
            (std::vector<uint32_t>{20137, 63263, 1497, 14756, 16513, 41486, 44591}));
  EXPECT_EQ(words(random::bits({8}, 2, k0)),
            (std::vector<uint32_t>{20137, 63263, 1497, 14756, 16513, 41486, 44591, 19423}));
  EXPECT_EQ(random::bits({0}, k0).size(), 0u);
  EXPECT_EQ(random::bits({2}, 1, k0).dtype(), uint8);
  EXPECT_EQ(random::bits({2}, 2, k0).dtype(), uint16);
}

TEST(RandomSplit, MatchMlxAndJax) {
  auto [k, sub] = random::split(random::key(0));
  EXPECT_EQ(words(k), (std::vector<uint32_t>{4146024105u, 967050713u}));
  EXPECT_EQ(words(sub), (std::vector<uint32_t>{2718843009u, 1272950319u}));
  auto keys = random::split(random::key(0), 3);
  EXPECT_EQ(keys.shape(), (Shape{3, 2}));
  EXPECT_EQ(words(keys), (std::vector<uint32_t>{2467461003u, 428148500u, 3186719485u,
                                                3840466878u, 2562233961u, 1946702221u}));
}

TEST(RandomUniform, MatchesMlxFormula) {
  auto to_float = [](uint32_t n) { return static_cast<float>(n) / 4294967295.0f; };
  auto x = random::uniform({}, random::key(0));
  EXPECT_EQ(x.dtype(), float32);
  EXPECT_EQ(x.item<float>(), to_float(1797259609u));
  auto y = random::uniform({3, 1}, random::key(0));
  auto v = to_vector(y);
  EXPECT_EQ(static_cast<float>(v[0]), to_float(4146024105u));
  EXPECT_EQ(static_cast<float>(v[1]), to_float(1351547692u));
  EXPECT_EQ(static_cast<float>(v[2]), to_float(2718843009u));
}

TEST(RandomBits, Determinism) {
  auto k = fresh_key();
  EXPECT_TRUE(array_equal(random::bits({64}, k), random::bits({64}, k)).item<bool>());
  auto other = random::key(rng()());
  EXPECT_FALSE(array_equal(random::bits({64}, k), random::bits({64}, other)).item<bool>());
  // Subkeys of a split differ from each other and from the parent, and their streams are
  // uncorrelated (correlation of 10^5 uniforms within 5 / sqrt(n)).
  auto [a, b] = random::split(k);
  EXPECT_FALSE(array_equal(a, b).item<bool>());
  EXPECT_FALSE(array_equal(a, k).item<bool>());
  const int n = 100000;
  auto ua = to_vector(random::uniform({n}, float32, a));
  auto ub = to_vector(random::uniform({n}, float32, b));
  double ma = mean_of(ua), mb = mean_of(ub), cov = 0;
  for (int i = 0; i < n; ++i) cov += (ua[i] - ma) * (ub[i] - mb);
  double corr = cov / n / std::sqrt(var_of(ua) * var_of(ub));
  EXPECT_LT(std::abs(corr), 5.0 / std::sqrt(n));
  // A prefix of a larger draw is not the smaller draw (the layout splits into halves),
  // but every draw is a pure function of (key, shape, width).
  EXPECT_TRUE(array_equal(random::split(k, 5), random::split(k, 5)).item<bool>());
}

TEST(RandomSeed, GlobalSequenceIsReproducible) {
  random::seed(4);
  auto x = random::bits({});
  auto y = random::bits({});
  random::seed(4);
  auto a = random::bits({});
  auto b = random::bits({});
  EXPECT_EQ(x.item<uint32_t>(), a.item<uint32_t>());
  EXPECT_EQ(y.item<uint32_t>(), b.item<uint32_t>());
  EXPECT_NE(x.item<uint32_t>(), y.item<uint32_t>());
  // seed(s) then a draw uses the subkey split(key(s))[1].
  random::seed(0);
  auto c = random::bits({}, random::split(random::key(0)).second);
  EXPECT_EQ(random::bits({}).item<uint32_t>(), c.item<uint32_t>());
}

TEST(RandomSeed, ConcurrentDrawsTakeDistinctKeysOfTheSequence) {
  const int per_thread = 200, threads = 4;
  random::seed(11);
  std::multiset<uint32_t> sequential;
  for (int i = 0; i < per_thread * threads; ++i) sequential.insert(random::bits({}).item<uint32_t>());
  random::seed(11);
  std::vector<std::vector<array>> drawn(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) drawn[t].push_back(random::bits({}));
    });
  }
  for (auto& th : pool) th.join();
  std::multiset<uint32_t> concurrent;
  for (auto& v : drawn) {
    for (auto& a : v) concurrent.insert(a.item<uint32_t>());
  }
  EXPECT_EQ(sequential, concurrent);
}

// MLX's KeySequence: next() hands out split(k).second and keeps split(k).first. The subkeys
// of key(0) are MLX's test vectors: split(key(0)) = ([4146024105, 967050713],
// [2718843009, 1272950319]).
TEST(RandomKeySequence, NextIsTheSecondHalfOfASplit) {
  random::KeySequence ks(0);
  EXPECT_EQ(words(ks.next()), (std::vector<uint32_t>{2718843009u, 1272950319u}));
  auto carried = random::split(random::key(0)).first;
  EXPECT_EQ(words(ks.next()), words(random::split(carried).second));
  EXPECT_EQ(ks.next().dtype(), uint32);
  // A copy continues independently from the same point; seed() restarts.
  random::KeySequence copy = ks;
  EXPECT_EQ(words(copy.next()), words(ks.next()));
  ks.seed(0);
  EXPECT_EQ(words(ks.next()), (std::vector<uint32_t>{2718843009u, 1272950319u}));
  EXPECT_EQ(&random::KeySequence::default_(), &random::KeySequence::default_());
}

// seed(s) then key-less calls take the default sequence's keys in call order, so they give
// the keyed calls' numbers: what MLX gives after mx.random.seed(s).
TEST(RandomKeySequence, SeededKeylessCallsGiveTheKeyedNumbers) {
  random::KeySequence ks(42);
  auto k1 = ks.next(), k2 = ks.next(), k3 = ks.next();
  random::seed(42);
  auto u = random::uniform({5});
  auto n = random::normal({4}, float16);
  auto r = random::randint(0, 100, {6});
  expect_allclose(u, random::uniform({5}, k1), 0, 0);
  expect_allclose(n, random::normal({4}, float16, k2), 0, 0);
  expect_allclose(r, random::randint(0, 100, {6}, int32, k3), 0, 0);
  // The default sequence is the one seed() restarts.
  random::seed(0);
  EXPECT_EQ(words(random::KeySequence::default_().next()),
            (std::vector<uint32_t>{2718843009u, 1272950319u}));
  // int64 randint without a key takes two keys, the low 32 bits from the first.
  random::seed(9);
  auto wide = random::randint(0, 1 << 20, {3}, int64);
  random::KeySequence k9(9);
  auto lo = host_bits(host_key(k9.next()), 3), hi = host_bits(host_key(k9.next()), 3);
  auto wv = values<int64_t>(wide);
  for (int i = 0; i < 3; ++i) {
    uint64_t raw = (uint64_t{hi[i]} << 32) | lo[i];
    EXPECT_EQ(wv[i], static_cast<int64_t>(raw % (1u << 20))) << i;
  }
  // MLX's bits takes its key before checking its arguments: a failed call uses one up.
  random::seed(5);
  EXPECT_THROW(random::bits({}, 3), std::invalid_argument);
  auto after = random::bits({});
  random::KeySequence k5(5);
  k5.next();
  EXPECT_EQ(after.item<uint32_t>(), random::bits({}, k5.next()).item<uint32_t>());
}

// ---------------------------------------------------------------------------------------
// MLX's numbers: each op applied by hand, on the host, to the verified bits of its key.

TEST(RandomMlxNumbers, UniformWithBounds) {
  auto k = random::key(7);
  auto b = host_bits(host_key(k), 12);
  auto x = values<float>(random::uniform(array(-2.5f), array(4.0f), {3, 4}, float32, k));
  for (int i = 0; i < 12; ++i) {
    volatile float range = 4.0f - (-2.5f);
    volatile float scaled = range * host_unit(b[i]);
    EXPECT_EQ(x[i], scaled + -2.5f) << i;
  }
}

// randint: low + (b mod (high - low)) in uint64, read as the dtype (MLX's integer-space
// reduction). key(0)'s bits of shape (3, 1) are MLX's 4146024105, 1351547692, 2718843009.
TEST(RandomMlxNumbers, Randint) {
  auto r = random::randint(-3, 7, {3, 1}, int32, random::key(0));
  EXPECT_EQ(r.shape(), (Shape{3, 1}));
  EXPECT_EQ(values<int32_t>(r), (std::vector<int32_t>{2, -1, 6}));
  auto k = random::key(123);
  auto b = host_bits(host_key(k), 16);
  auto u8 = values<uint8_t>(random::randint(10, 250, {16}, uint8, k));
  auto i16 = values<int16_t>(random::randint(-1000, 3, {16}, int16, k));
  auto bl = values<bool>(random::randint(0, 2, {16}, bool_, k));
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(u8[i], 10 + b[i] % 240) << i;
    EXPECT_EQ(i16[i], -1000 + static_cast<int>(b[i] % 1003)) << i;
    EXPECT_EQ(bl[i], b[i] % 2 == 1) << i;
  }
  // int64 with a key: 64 bits from the two halves of split(key), the first half low.
  auto [k1, k2] = random::split(k);
  auto lo = host_bits(host_key(k1), 16), hi = host_bits(host_key(k2), 16);
  const int64_t low = -(int64_t{1} << 40);
  const uint64_t range = (uint64_t{1} << 41) + 12345;
  auto i64 = values<int64_t>(
      random::randint(array(low), array(low + static_cast<int64_t>(range)), {16}, int64, k));
  for (int i = 0; i < 16; ++i) {
    uint64_t raw = (uint64_t{hi[i]} << 32) | lo[i];
    EXPECT_EQ(i64[i], static_cast<int64_t>(static_cast<uint64_t>(low) + raw % range)) << i;
  }
}

// categorical = argmax over the category axis of logits + gumbel, the gumbel noise of
// `shape` with the category axis inserted (MLX's categorical_impl), gumbel = -log(-log(u)).
TEST(RandomMlxNumbers, CategoricalIsGumbelArgmaxOverEveryOverload) {
  const int R = 4, C = 5, S = 3;
  std::vector<float> lv(R * C);
  for (int i = 0; i < R * C; ++i) lv[i] = 0.37f * ((i * 7) % 11) - 1.5f;
  auto logits = array(lv.begin(), Shape{R, C}, float32);
  auto key = random::key(2024);
  // The bits' layout depends on the draw's size: (R, C) and the (.., S) draws differ.
  auto b1 = host_bits(host_key(key), R * C), b3 = host_bits(host_key(key), R * C * S);
  auto gumbel_of = [](uint32_t bits) {
    return -std::log(-std::log(static_cast<double>(host_unit(bits))));
  };
  auto g1 = [&](size_t i) { return gumbel_of(b1[i]); };
  auto g = [&](size_t i) { return gumbel_of(b3[i]); };
  // argmax over c of score(c), checked only where the top two are not within rounding.
  auto expect_pick = [](uint32_t got, int n, auto score, const std::string& where) {
    int best = 0;
    for (int c = 1; c < n; ++c) best = score(c) > score(best) ? c : best;
    double gap = 1e9;
    for (int c = 0; c < n; ++c) {
      if (c != best) gap = std::min(gap, score(best) - score(c));
    }
    if (gap > 1e-4) EXPECT_EQ(got, static_cast<uint32_t>(best)) << where;
  };
  // Default: along the last axis, noise of logits' shape.
  auto a = values<uint32_t>(random::categorical(logits, -1, key));
  ASSERT_EQ(a.size(), static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    expect_pick(a[i], C, [&](int c) { return lv[i * C + c] + g1(i * C + c); }, "axis -1, row " + std::to_string(i));
  }
  // Along axis 0 with shape (S, C): noise (S, R, C), argmax over its axis 1.
  auto s0 = values<uint32_t>(random::categorical(logits, 0, Shape{S, C}, key));
  ASSERT_EQ(s0.size(), static_cast<size_t>(S * C));
  for (int i = 0; i < S; ++i) {
    for (int j = 0; j < C; ++j) {
      expect_pick(s0[i * C + j], R,
                  [&](int r) { return lv[r * C + j] + g((i * R + r) * C + j); },
                  "shape (S, C) at " + std::to_string(i) + "," + std::to_string(j));
    }
  }
  // num_samples along axis 1: logits (R, C, 1), noise (R, C, S), argmax over axis 1.
  auto ns = random::categorical(logits, 1, S, key);
  ASSERT_EQ(ns.shape(), (Shape{R, S}));
  auto nv = values<uint32_t>(ns);
  for (int i = 0; i < R; ++i) {
    for (int t = 0; t < S; ++t) {
      expect_pick(nv[i * S + t], C, [&](int c) { return lv[i * C + c] + g((i * C + c) * S + t); },
                  "num_samples at " + std::to_string(i) + "," + std::to_string(t));
    }
  }
  // And each overload is the public-op composition MLX builds, element for element.
  auto gm = random::gumbel({R, C, S}, float32, key);
  expect_allclose(ns, argmax(add(gm, expand_dims(logits, -1)), 1, false), 0, 0);
  auto gv = to_vector(gm);
  for (int i = 0; i < R * C * S; ++i) EXPECT_NEAR(gv[i], g(i), 1e-5 * (1 + std::abs(g(i)))) << i;
}

TEST(RandomMlxNumbers, BernoulliAndPermutation) {
  auto k = random::key(99);
  auto b = host_bits(host_key(k), 64);
  const float ps[] = {0.0f, 0.3f, 0.5f, 0.999f};
  auto p = array(ps, Shape{4}, float32);
  auto m = values<bool>(random::bernoulli(p, {16, 4}, k));
  const float upper = std::nextafter(4294967295.0f, std::numeric_limits<float>::max());
  for (int i = 0; i < 64; ++i) {
    volatile float t = ps[i % 4] * upper;
    EXPECT_EQ(m[i], static_cast<float>(b[i]) < t) << i;
  }
  // permutation(n) = argsort(bits({n})); permutation(x, axis) = take(x, it, axis).
  auto perm = values<uint32_t>(random::permutation(64, k));
  std::vector<uint32_t> order(64);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t i, uint32_t j) { return b[i] < b[j]; });
  EXPECT_EQ(perm, order);
  auto x = reshape(arange(0, 12), {3, 4});
  auto px = random::permutation(x, 1, k);
  expect_allclose(px, take(x, random::permutation(4, k), 1), 0, 0);
  EXPECT_EQ(px.dtype(), x.dtype());
}

// multivariate_normal = mean + normal(shape + (n,), key) @ ((U * sqrt(S)) @ Vt): for a
// diagonal cov the factor is diag(sqrt(cov)).
TEST(RandomMlxNumbers, MultivariateNormalOfADiagonalCov) {
  auto k = random::key(31);
  auto mean = array({1.0f, -1.0f});
  auto cov = array({4.0f, 0.0f, 0.0f, 9.0f}, Shape{2, 2});
  auto x = random::multivariate_normal(mean, cov, {6}, float32, k);
  ASSERT_EQ(x.shape(), (Shape{6, 2}));
  auto z = random::normal({6, 2}, k);
  expect_allclose(x, add(mean, multiply(z, array({2.0f, 3.0f}))), 1e-6, 1e-6);
}

// MLX's normal lets loc and scale broadcast the samples to a larger shape.
TEST(RandomMlxNumbers, NormalLocScaleBroadcastLikeMlx) {
  auto k = random::key(3);
  auto loc = reshape(array({0.0f, 10.0f}), {2, 1});
  auto x = random::normal({3}, float32, loc, std::nullopt, k);
  ASSERT_EQ(x.shape(), (Shape{2, 3}));
  auto z = random::normal({3}, k);
  expect_allclose(x, add(loc, z), 0, 0);
}

// ---------------------------------------------------------------------------------------
// Distributions

TEST(RandomUniform, MomentsAndKs) {
  const int n = 200000;
  auto x = to_vector(random::uniform(-2.0, 3.0, {n}, float32, fresh_key()));
  for (double v : x) {
    ASSERT_GE(v, -2.0);
    ASSERT_LT(v, 3.0);
  }
  EXPECT_NEAR(mean_of(x), 0.5, 6 * std::sqrt(25.0 / 12 / n));
  EXPECT_NEAR(var_of(x), 25.0 / 12, 0.02);
  EXPECT_LT(ks_statistic(x, [](double v) { return (v + 2) / 5; }), ks_bound(n));
  // Broadcast bounds: each column has its own interval.
  auto lo = array({0.0f, 10.0f, -5.0f}, Shape{1, 3});
  auto hi = array({1.0f, 20.0f, -4.0f}, Shape{1, 3});
  auto y = to_vector(random::uniform(lo, hi, {1000, 3}, float32, fresh_key()));
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(y[3 * i] >= 0 && y[3 * i] < 1);
    EXPECT_TRUE(y[3 * i + 1] >= 10 && y[3 * i + 1] < 20);
    EXPECT_TRUE(y[3 * i + 2] >= -5 && y[3 * i + 2] < -4);
  }
}

TEST(RandomNormal, MomentsAndKs) {
  const int n = 200000;
  auto x = to_vector(random::normal({n}, fresh_key()));
  for (double v : x) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NEAR(mean_of(x), 0.0, 6 / std::sqrt(n));
  EXPECT_NEAR(var_of(x), 1.0, 0.02);
  auto phi = [](double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); };
  EXPECT_LT(ks_statistic(x, phi), ks_bound(n));
  auto y = to_vector(random::normal({n}, float32, array(3.0f), array(2.0f), fresh_key()));
  EXPECT_NEAR(mean_of(y), 3.0, 6 * 2 / std::sqrt(n));
  EXPECT_NEAR(var_of(y), 4.0, 0.08);
  auto z = to_vector(random::normal({n}, float32, -1.0f, 0.5f, fresh_key()));
  EXPECT_NEAR(mean_of(z), -1.0, 6 * 0.5 / std::sqrt(n));
}

// complex64: real and imaginary parts independent N(0, 1/2) (E|z|^2 = 1), drawn as
// erfinv of one uniform per part, paired along a trailing axis of 2 (MLX's rule).
TEST(RandomNormal, Complex64MomentsAndPairing) {
  const int n = 200000;
  auto z = random::normal({n}, complex64, fresh_key());
  ASSERT_EQ(z.dtype(), complex64);
  ASSERT_EQ(z.shape(), Shape{n});
  auto re = to_vector(real(z)), im = to_vector(imag(z));
  // Sample means and variances of N(0, 1/2): standard errors sqrt(1/2n) and sqrt(2/4n)
  // (both 0.0016 here); 6 of them, so a failure means a wrong rule, not bad luck.
  const double se = std::sqrt(0.5 / n);
  EXPECT_NEAR(mean_of(re), 0.0, 6 * se);
  EXPECT_NEAR(mean_of(im), 0.0, 6 * se);
  EXPECT_NEAR(var_of(re), 0.5, 6 * se);
  EXPECT_NEAR(var_of(im), 0.5, 6 * se);
  double cov = 0;
  for (int i = 0; i < n; ++i) cov += re[i] * im[i];
  EXPECT_NEAR(cov / n, 0.0, 6 * 0.5 / std::sqrt(n)); // parts uncorrelated
  auto half_phi = [](double v) { return 0.5 * std::erfc(-v); }; // CDF of N(0, 1/2)
  EXPECT_LT(ks_statistic(re, half_phi), ks_bound(n));
  EXPECT_LT(ks_statistic(im, half_phi), ks_bound(n));

  // The same key's bits: part p of element i is erfinv(u[i, p]), u uniform on (-1, 1).
  auto k = fresh_key();
  auto u = random::uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), {3, 4, 2}, float32, k);
  auto e = to_vector(erfinv(u));
  auto zk = random::normal({3, 4}, complex64, k);
  ASSERT_EQ(zk.shape(), (Shape{3, 4}));
  auto zr = to_vector(real(zk)), zi = to_vector(imag(zk));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(zr[i], e[2 * i]) << i;
    EXPECT_EQ(zi[i], e[2 * i + 1]) << i;
  }

  // loc and scale, real or complex, broadcast over the shape: loc + scale * z.
  auto loc = array(std::complex<float>(1.0f, -2.0f));
  auto w = random::normal({n}, complex64, loc, array(3.0f), fresh_key());
  ASSERT_EQ(w.dtype(), complex64);
  auto wr = to_vector(real(w)), wi = to_vector(imag(w));
  EXPECT_NEAR(mean_of(wr), 1.0, 6 * 3 * se);
  EXPECT_NEAR(mean_of(wi), -2.0, 6 * 3 * se);
  EXPECT_NEAR(var_of(wr), 4.5, 6 * 9 * se);
  EXPECT_NEAR(var_of(wi), 4.5, 6 * 9 * se);
  // A complex scale rotates: i * z swaps the parts (with a sign).
  auto kk = fresh_key();
  auto base = random::normal({8}, complex64, kk);
  auto rot = random::normal({8}, complex64, std::nullopt, array(std::complex<float>(0.0f, 1.0f)), kk);
  expect_allclose(real(rot), negative(imag(base)), 0, 0);
  expect_allclose(imag(rot), real(base), 0, 0);
  // Scalar loc/scale overload: 0 and 1 add nothing; others as arrays of complex64.
  expect_allclose(real(random::normal({8}, complex64, 0.0f, 1.0f, kk)), real(base), 0, 0);
  auto shifted = random::normal({8}, complex64, 2.0f, 0.5f, kk);
  expect_allclose(real(shifted), add(multiply(real(base), array(0.5f)), array(2.0f)), 1e-6, 1e-6);
  expect_allclose(imag(shifted), multiply(imag(base), array(0.5f)), 1e-6, 1e-6);
  // Broadcast loc per column.
  auto cols = random::normal({1000, 2}, complex64, array({-5.0f, 5.0f}), std::nullopt, fresh_key());
  auto cr = to_vector(mean(real(cols), 0));
  EXPECT_NEAR(cr[0], -5.0, 0.2);
  EXPECT_NEAR(cr[1], 5.0, 0.2);
}

// normal(shape, loc, scale, key) in float32, matching the dtype-first overload.
TEST(RandomNormal, ScalarLocScaleFloat32Overload) {
  auto k = fresh_key();
  auto a = random::normal({64}, 1.5f, 2.0f, k);
  ASSERT_EQ(a.dtype(), float32);
  expect_allclose(a, random::normal({64}, float32, array(1.5f), array(2.0f), k), 0, 0);
  expect_allclose(random::normal({64}, 0.0f, 1.0f, k), random::normal({64}, k), 0, 0);
  const int n = 200000;
  auto x = to_vector(random::normal({n}, -3.0f, 0.5f, fresh_key()));
  EXPECT_NEAR(mean_of(x), -3.0, 6 * 0.5 / std::sqrt(n));
  EXPECT_NEAR(var_of(x), 0.25, 6 * 0.25 * std::sqrt(2.0 / n));
}

TEST(RandomDtypes, UniformAndNormal) {
  const int n = 50000;
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(dtype_name(t));
    auto u = random::uniform({n}, t, fresh_key());
    ASSERT_EQ(u.dtype(), t);
    auto uv = to_vector(u);
    for (double v : uv) {
      ASSERT_GE(v, 0.0);
      ASSERT_LT(v, 1.0);
    }
    EXPECT_NEAR(mean_of(uv), 0.5, 0.01);
    auto g = random::normal({n}, t, fresh_key());
    ASSERT_EQ(g.dtype(), t);
    auto gv = to_vector(g);
    for (double v : gv) ASSERT_TRUE(std::isfinite(v));
    EXPECT_NEAR(mean_of(gv), 0.0, 0.03);
    EXPECT_NEAR(var_of(gv), 1.0, 0.05);
  }
  // The float64 draw carries the float32 draw's value (MLX has no float64 uniform).
  auto k = fresh_key();
  expect_allclose(random::uniform({16}, float64, k), astype(random::uniform({16}, float32, k), float64),
                  0, 0);
}

TEST(RandomBernoulli, Frequencies) {
  const int n = 100000;
  auto p = array({0.1f, 0.5f, 0.9f, 0.0f, 1.0f}, Shape{1, 5});
  auto x = random::bernoulli(p, {n, 5}, fresh_key());
  ASSERT_EQ(x.dtype(), bool_);
  auto freq = to_vector(mean(x, 0));
  const double ps[] = {0.1, 0.5, 0.9, 0.0, 1.0};
  for (int j = 0; j < 5; ++j) {
    EXPECT_NEAR(freq[j], ps[j], 6 * std::sqrt(ps[j] * (1 - ps[j]) / n) + 1e-12) << "p = " << ps[j];
  }
  EXPECT_EQ(random::bernoulli().shape(), Shape{});
  EXPECT_FALSE(random::bernoulli(array(-1.0f)).item<bool>());
  EXPECT_TRUE(random::bernoulli(array(5.0f)).item<bool>());
  EXPECT_EQ(random::bernoulli(0.3, {3, 3}).shape(), (Shape{3, 3}));
}

// MLX's scalar-p overloads: bernoulli(p, key) (a scalar) and bernoulli(p, shape, key), p
// taken as float32; the same bits as the array-p forms for a key.
TEST(RandomBernoulli, ScalarPOverloads) {
  auto k = fresh_key();
  auto s = random::bernoulli(0.3, k);
  ASSERT_EQ(s.dtype(), bool_);
  ASSERT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<bool>(), random::bernoulli(array(0.3f), k).item<bool>());
  EXPECT_EQ(random::bernoulli(0.3f, k).item<bool>(), s.item<bool>());
  // p <= 0 never, p >= 1 always.
  for (int i = 0; i < 20; ++i) {
    auto ki = fresh_key();
    EXPECT_FALSE(random::bernoulli(0.0, ki).item<bool>());
    EXPECT_FALSE(random::bernoulli(-0.5, ki).item<bool>());
    EXPECT_TRUE(random::bernoulli(1.0, ki).item<bool>());
    EXPECT_TRUE(random::bernoulli(2.0f, ki).item<bool>());
  }
  // An integer p is array(p), an integer array: MLX throws (its test bernoulli(0, [2])).
  expect_throws_naming<std::invalid_argument>([&] { random::bernoulli(0, k); }, "[bernoulli]");
  expect_throws_naming<std::invalid_argument>([&] { random::bernoulli(1, {2}, k); }, "[bernoulli]");
  auto m = random::bernoulli(0.25, {4, 5}, k);
  ASSERT_EQ(m.shape(), (Shape{4, 5}));
  expect_allclose(m, random::bernoulli(array(0.25f), {4, 5}, k), 0, 0);
  const int n = 200000;
  double p = std::uniform_real_distribution<double>(0.05, 0.95)(rng());
  auto f = to_vector(mean(random::bernoulli(p, {n}, fresh_key())));
  EXPECT_NEAR(f[0], p, 6 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
  // Without a key the global sequence advances: two scalar draws of p = 0.5 over many
  // calls are not all equal.
  int trues = 0;
  for (int i = 0; i < 64; ++i) trues += random::bernoulli(0.5).item<bool>();
  EXPECT_GT(trues, 0);
  EXPECT_LT(trues, 64);
}

TEST(RandomRandint, RangeAndUniformity) {
  const int n = 100000, lo = -3, hi = 7;
  auto x = random::randint(lo, hi, {n}, int32, fresh_key());
  ASSERT_EQ(x.dtype(), int32);
  auto v = to_vector(x);
  std::vector<int> counts(hi - lo, 0);
  for (double e : v) {
    ASSERT_GE(e, lo);
    ASSERT_LT(e, hi);
    ASSERT_EQ(e, std::floor(e));
    counts[static_cast<int>(e) - lo]++;
  }
  // Chi-square with 9 degrees of freedom: 50 is far beyond the 1e-6 quantile (~44).
  double chi2 = 0, expect = static_cast<double>(n) / (hi - lo);
  for (int c : counts) chi2 += (c - expect) * (c - expect) / expect;
  EXPECT_LT(chi2, 50.0);
  for (Dtype t : {uint8, int16, uint32, int64, uint64, bool_}) {
    SCOPED_TRACE(dtype_name(t));
    auto y = random::randint(0, 2, {1000}, t, fresh_key());
    ASSERT_EQ(y.dtype(), t);
    auto yv = to_vector(y);
    double m = mean_of(yv);
    EXPECT_GT(m, 0.4);
    EXPECT_LT(m, 0.6);
    for (double e : yv) ASSERT_TRUE(e == 0 || e == 1);
  }
  // Wide int64 intervals are reduced in integer space.
  int64_t big = int64_t{1} << 40;
  auto w = to_vector(random::randint(array(big), array(big + 5), {1000}, int64, fresh_key()));
  for (double e : w) ASSERT_TRUE(e >= big && e < big + 5);
  // MLX: high <= low gives low everywhere (values are only known at run time).
  auto z = random::randint(20, -10, {3, 3}, int32, fresh_key());
  EXPECT_TRUE(all(equal(z, array(20))).item<bool>());
}

TEST(RandomTruncatedNormal, BoundsAndMoments) {
  const int n = 100000;
  auto x = to_vector(random::truncated_normal(array(-1.0f), array(1.5f), {n}, float32, fresh_key()));
  for (double v : x) {
    ASSERT_GE(v, -1.0);
    ASSERT_LE(v, 1.5);
  }
  // Mean of N(0,1) truncated to [a, b]: (phi(a) - phi(b)) / (Phi(b) - Phi(a)).
  auto pdf = [](double v) { return std::exp(-v * v / 2) / std::sqrt(2 * M_PI); };
  auto cdf = [](double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); };
  double z = cdf(1.5) - cdf(-1.0);
  EXPECT_NEAR(mean_of(x), (pdf(-1.0) - pdf(1.5)) / z, 0.01);
  EXPECT_LT(ks_statistic(x, [&](double v) { return (cdf(v) - cdf(-1.0)) / z; }), ks_bound(n));
  auto y = random::truncated_normal(zeros({2, 1}), ones({1, 3}), float64, fresh_key());
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.dtype(), float64);
}

TEST(RandomGumbelLaplace, Moments) {
  const int n = 200000;
  auto g = to_vector(random::gumbel({n}, float32, fresh_key()));
  EXPECT_NEAR(mean_of(g), 0.5772156649, 0.02);
  EXPECT_NEAR(var_of(g), M_PI * M_PI / 6, 0.05);
  EXPECT_LT(ks_statistic(g, [](double v) { return std::exp(-std::exp(-v)); }), ks_bound(n));
  auto l = to_vector(random::laplace({n}, float32, 1.0f, 2.0f, fresh_key()));
  EXPECT_NEAR(mean_of(l), 1.0, 0.04);
  EXPECT_NEAR(var_of(l), 8.0, 0.2);
  auto lap_cdf = [](double v) {
    double t = (v - 1.0) / 2.0;
    return t < 0 ? 0.5 * std::exp(t) : 1 - 0.5 * std::exp(-t);
  };
  EXPECT_LT(ks_statistic(l, lap_cdf), ks_bound(n));
}

TEST(RandomCategorical, FrequenciesMatchSoftmax) {
  const int n = 100000;
  std::vector<double> logits = {0.5, -1.0, 2.0, 0.0};
  double zsum = 0;
  for (double l : logits) zsum += std::exp(l);
  auto lg = array(logits.begin(), Shape{4}, float32);
  auto s = random::categorical(lg, 0, n, fresh_key());
  ASSERT_EQ(s.shape(), Shape{n});
  ASSERT_EQ(s.dtype(), uint32);
  std::vector<int> counts(4, 0);
  for (double v : to_vector(s)) counts[static_cast<int>(v)]++;
  for (int c = 0; c < 4; ++c) {
    double p = std::exp(logits[c]) / zsum;
    EXPECT_NEAR(counts[c] / static_cast<double>(n), p, 6 * std::sqrt(p * (1 - p) / n)) << c;
  }
  // Batched logits along axis 0 and an explicit shape.
  auto lb = array({0.0f, 100.0f, 100.0f, 0.0f}, Shape{2, 2}); // columns pick row 1, row 0
  auto t = random::categorical(lb, 0, Shape{3, 2}, fresh_key());
  ASSERT_EQ(t.shape(), (Shape{3, 2}));
  auto tv = to_vector(t);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tv[2 * i], 1);
    EXPECT_EQ(tv[2 * i + 1], 0);
  }
  EXPECT_EQ(random::categorical(lb, -1, fresh_key()).shape(), Shape{2});
}

TEST(RandomPermutation, IsAPermutation) {
  auto p = to_vector(random::permutation(1000, fresh_key()));
  std::vector<double> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(p.begin(), p.end()));
  auto x = reshape(arange(0, 24), {4, 6});
  auto y = random::permutation(x, 1, fresh_key());
  ASSERT_EQ(y.shape(), (Shape{4, 6}));
  auto yv = to_vector(y);
  // Every row is the same permutation of its row of x.
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) EXPECT_EQ(yv[r * 6 + c] - yv[c], 6 * r);
  }
  std::vector<double> row0(yv.begin(), yv.begin() + 6);
  std::sort(row0.begin(), row0.end());
  for (int c = 0; c < 6; ++c) EXPECT_EQ(row0[c], c);
}

TEST(RandomMultivariateNormal, SampleCovariance) {
  const int n = 100000;
  std::vector<double> cov = {2.0, 0.6, -0.4, 0.6, 1.0, 0.3, -0.4, 0.3, 0.5};
  auto mean = array({1.0f, -2.0f, 0.5f});
  auto x = random::multivariate_normal(mean, array(cov.begin(), {3, 3}, float32), {n}, float32,
                                       fresh_key());
  ASSERT_EQ(x.shape(), (Shape{n, 3}));
  auto v = to_vector(x);
  double m[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) m[j] += v[3 * i + j] / n;
  }
  EXPECT_NEAR(m[0], 1.0, 0.03);
  EXPECT_NEAR(m[1], -2.0, 0.03);
  EXPECT_NEAR(m[2], 0.5, 0.03);
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      double c = 0;
      for (int i = 0; i < n; ++i) c += (v[3 * i + a] - m[a]) * (v[3 * i + b] - m[b]);
      EXPECT_NEAR(c / n, cov[3 * a + b], 0.04) << a << "," << b;
    }
  }
  // Batch shapes broadcast: cov (1, 2, 3, 3) with shape (1000, 2).
  auto y = random::multivariate_normal(zeros({3}), broadcast_to(eye(3), {1, 2, 3, 3}), {1000, 2},
                                       float32, fresh_key());
  EXPECT_EQ(y.shape(), (Shape{1000, 2, 3}));
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(RandomErrors, BadArgumentsNameTheOp) {
  auto k = random::key(0);
  auto bad_dtype_key = array({0, 0});
  auto bad_shape_key = array({0u, 0u, 0u}, Shape{3, 1});
  expect_throws_naming<std::invalid_argument>([&] { random::bits({2}, 3, k); }, "[bits]");
  expect_throws_naming<std::invalid_argument>([&] { random::bits({2}, bad_dtype_key); }, "[bits]");
  expect_throws_naming<std::invalid_argument>([&] { random::bits({-1}, k); }, "[bits]");
  expect_throws_naming<std::invalid_argument>([&] { random::split(bad_shape_key); }, "[split]");
  expect_throws_naming<std::invalid_argument>([&] { random::uniform({2}, int32, k); }, "[uniform]");
  expect_throws_naming<std::invalid_argument>([&] { random::uniform({2}, bad_shape_key); }, "[uniform]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::uniform(zeros({3, 3}), 1.0, {2, 3}, float32, k); }, "[uniform]");
  expect_throws_naming<std::invalid_argument>([&] { random::normal({2}, int32, k); }, "[normal]");
  expect_throws_naming<std::invalid_argument>([&] { random::normal({2}, complex64, bad_shape_key); }, "[normal]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::normal({2}, complex64, array({1.0f, 2.0f, 3.0f}), std::nullopt, k); }, "[normal]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::bernoulli(array({0.1f, 0.2f}), {3}, k); }, "[bernoulli]");
  expect_throws_naming<std::invalid_argument>([&] { random::bernoulli(0.5, bad_dtype_key); }, "[bernoulli]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::normal({2}, array({0u, 0u}, Shape{1, 2})); }, "[normal]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::randint(3, 5, {1}, float32, k); }, "[randint]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::randint(zeros({4}), 5, {3}, int32, k); }, "[randint]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::randint(0, 5, {3}, int32, bad_dtype_key); }, "[randint]");
  expect_throws_naming<std::invalid_argument>([&] { random::bernoulli(array(1)); }, "[bernoulli]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::bernoulli(array({0.1f, 0.2f, 0.3f}), Shape{2}); }, "[bernoulli]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::truncated_normal(array(-1.0f), array(1.0f), {2}, int32, k); }, "[truncated_normal]");
  expect_throws_naming<std::invalid_argument>([&] { random::gumbel({2}, int32, k); }, "[gumbel]");
  expect_throws_naming<std::invalid_argument>([&] { random::laplace({2}, int32, k); }, "[laplace]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::categorical(zeros({3}), 1, k); }, "[categorical]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::categorical(zeros({2, 3}), 1, Shape{4}, k); }, "[categorical]");
  expect_throws_naming<std::out_of_range>(
      [&] { random::permutation(zeros({3}), 1, k); }, "[permutation]");
  expect_throws_naming<std::invalid_argument>([&] { random::permutation(-1, k); }, "[permutation]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::multivariate_normal(zeros({3, 1}), eye(3), {10}, float32, k); },
      "[multivariate_normal]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::multivariate_normal(zeros({3}), eye(4), {10}, float32, k); },
      "[multivariate_normal]");
  expect_throws_naming<std::invalid_argument>(
      [&] { random::multivariate_normal(zeros({3}), eye(3), {10}, float16, k); },
      "[multivariate_normal]");
}

// ---------------------------------------------------------------------------------------
// Transforms

TEST(RandomVmap, BitsOverKeysMatchMlx) {
  // MLX's tests: vmap of bits({3}) over keys [[0, 0], [1, 1]] along axis 0 and axis 1.
  auto keys = array({0u, 0u, 1u, 1u}, Shape{2, 2});
  auto f = [](const array& k) { return random::bits({3}, k); };
  EXPECT_EQ(words(vmap(f)(keys)), (std::vector<uint32_t>{4146024105u, 1351547692u, 2718843009u,
                                                         3725146706u, 1802982961u, 1349634643u}));
  EXPECT_EQ(words(vmap(f, 1)(keys)), (std::vector<uint32_t>{2441914641u, 1110694964u, 3819641963u,
                                                            2441914641u, 1110694964u, 3819641963u}));
}

TEST(RandomVmap, AgainstALoop) {
  auto keys = random::split(fresh_key(), 5);
  auto lo = randn({4});
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{random::uniform(xs[1], array(5.0), {4}, float64, xs[0])};
  }, {keys, lo}, {0, -1}, 0, 0);
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{random::normal({3, 2}, float32, xs[0]),
                              random::bits({7}, 2, xs[0]),
                              random::randint(0, 10, {6}, int32, xs[0])};
  }, {keys}, {0}, 0, 0);
  // Keys batched along their last axis, and batched bounds with batched keys.
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{random::bernoulli(array(0.5f), {9}, xs[0])};
  }, {transpose(keys)}, {1}, 0, 0);
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{random::uniform(xs[1], add(xs[1], array(1.0)), {4}, float64, xs[0])};
  }, {keys, randn({5, 4})}, {0, 0}, 0, 0);
}

TEST(RandomVmap, MultivariateNormalOverKeysAndCovariances) {
  auto keys = random::split(fresh_key(), 3);
  // Batched covariances: diag(1, 4) scaled per example.
  auto covs = multiply(reshape(array({1.0f, 2.0f, 3.0f}), {3, 1, 1}),
                       reshape(array({1.0f, 0.5f, 0.5f, 4.0f}), {1, 2, 2}));
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{random::multivariate_normal(zeros({2}), xs[1], {5}, float32, xs[0])};
  }, {keys, covs}, {0, 0}, 1e-5, 1e-5);
}

TEST(RandomGrad, AffineInParameters) {
  auto k = fresh_key();
  check_grad([k](const std::vector<array>& xs) {
    return random::uniform(xs[0], xs[1], {3, 4}, float64, k);
  }, {randn({3, 4}), add(randn({4}), array(5.0))});
  check_grad([k](const std::vector<array>& xs) {
    return random::normal({3, 4}, float64, xs[0], xs[1], k);
  }, {randn({4}), uniform({3, 4}, 0.5, 2.0)});
  check_grad([k](const std::vector<array>& xs) {
    return random::truncated_normal(xs[0], xs[1], {5}, float64, k);
  }, {array(-1.0, float64), array(1.0, float64)}, {1e-6, 1e-4, 1e-5});
  // The bits themselves carry a zero derivative: d uniform / d low = 1 - u, d/d high = u.
  auto [outs, grads] = vjp([k](const std::vector<array>& xs) {
    return std::vector<array>{random::uniform(xs[0], xs[1], {}, float64, k)};
  }, {array(0.0, float64), array(1.0, float64)}, {array(1.0, float64)});
  double u = outs[0].item<double>();
  EXPECT_NEAR(grads[0].item<double>(), 1 - u, 1e-12);
  EXPECT_NEAR(grads[1].item<double>(), u, 1e-12);
}

} // namespace
} // namespace nuvec
