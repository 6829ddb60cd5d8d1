// nuvec tests: matrix products (matmul, addmm, tensordot, outer, inner, kron) against float64
// references written here with NumPy's semantics, on fresh random inputs; derivatives and
// batching through tests/checker.h.
#include <complex>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>

#include "checker.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

using cdouble = std::complex<double>;

// A dense row-major tensor of reference values.
template <typename V>
struct Ref {
  Shape shape;
  std::vector<V> v;
};

// Row-major strides of a shape, in elements.
std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

// A shape as "(2, 3)" for trace messages.
std::string str(const Shape& shape) {
  std::ostringstream os;
  nuvec::operator<<(os, shape);
  return os.str();
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The complex elements of a (any layout), in row-major order.
std::vector<cdouble> to_cvector(const array& a) {
  array c = contiguous(astype(a, complex64));
  eval(c);
  const complex64_t* p = c.data<complex64_t>();
  std::vector<cdouble> out;
  for (size_t i = 0; i < c.size(); ++i) out.emplace_back(p[i].real(), p[i].imag());
  return out;
}

Ref<double> ref_of(const array& a) {
  return {a.shape(), to_vector(a)};
}

Ref<cdouble> cref_of(const array& a) {
  return {a.shape(), to_cvector(a)};
}

// Offset of an output batch index into an operand batch shape broadcast against it.
int64_t broadcast_offset(const Shape& out_batch, const std::vector<int>& idx, const Shape& in_batch) {
  int64_t off = 0;
  size_t lead = out_batch.size() - in_batch.size();
  for (size_t i = 0; i < in_batch.size(); ++i) {
    off = off * in_batch[i] + (in_batch[i] == 1 ? 0 : idx[lead + i]);
  }
  return off;
}

// NumPy's matmul, by the triple loop, in double (or complex double).
template <typename V>
Ref<V> ref_matmul(Ref<V> a, Ref<V> b) {
  bool av = a.shape.size() == 1, bv = b.shape.size() == 1;
  if (av) a.shape.insert(a.shape.begin(), 1);
  if (bv) b.shape.push_back(1);
  int m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  size_t nd = std::max(ba.size(), bb.size());
  Shape batch(nd, 1);
  for (size_t i = 0; i < nd; ++i) {
    int da = i < nd - ba.size() ? 1 : ba[i - (nd - ba.size())];
    int db = i < nd - bb.size() ? 1 : bb[i - (nd - bb.size())];
    batch[i] = da == 1 ? db : da;
  }
  Ref<V> out;
  out.shape = batch;
  out.shape.push_back(m);
  out.shape.push_back(n);
  out.v.assign(numel(out.shape), V(0));
  std::vector<int> idx(nd, 0);
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    int64_t rem = bi;
    for (int d = static_cast<int>(nd) - 1; d >= 0; --d) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    const V* pa = a.v.data() + broadcast_offset(batch, idx, ba) * m * k;
    const V* pb = b.v.data() + broadcast_offset(batch, idx, bb) * k * n;
    V* po = out.v.data() + bi * m * n;
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        V acc(0);
        for (int kk = 0; kk < k; ++kk) acc += pa[i * k + kk] * pb[kk * n + j];
        po[i * n + j] = acc;
      }
    }
  }
  if (av) out.shape.erase(out.shape.end() - 2);
  if (bv) out.shape.erase(out.shape.end() - 1);
  return out;
}

void expect_matches(const array& got, const Ref<double>& want, double rtol = 1e-5, double atol = 1e-5) {
  expect_close(got, want.shape, want.v, rtol, atol);
}

void expect_cmatches(const array& got, const Ref<cdouble>& want, double tol = 1e-4) {
  ASSERT_EQ(got.shape(), want.shape);
  auto g = to_cvector(got);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(std::abs(g[i] - want.v[i]), 0.0, tol * (1 + std::abs(want.v[i]))) << "at " << i;
  }
}

// ---------------------------------------------------------------------------------------
// matmul forward

struct ShapePair {
  Shape a, b;
};

const std::vector<ShapePair> kShapes = {
    {{3, 3}, {3, 3}},
    {{4, 7}, {7, 5}},
    {{1, 6}, {6, 1}},
    {{5}, {5, 3}},
    {{4, 5}, {5}},
    {{6}, {6}},
    {{2, 1, 3, 4}, {5, 4, 2}},
    {{3, 4}, {2, 4, 6}},
    {{2, 3, 4}, {4, 5}},
    {{2, 3, 4}, {4}},
    {{7}, {3, 7, 2}},
    {{67, 129}, {129, 65}},
    {{3, 0}, {0, 4}},
    {{0, 3}, {3, 4}},
    {{2, 0, 3}, {3, 4}},
};

TEST(Matmul, Float64AndFloat32Shapes) {
  for (Dtype dt : {float64, float32}) {
    for (auto& [sa, sb] : kShapes) {
      SCOPED_TRACE(::testing::Message() << dt << " " << str(sa) << " @ " << str(sb));
      array a = randn(sa, dt), b = randn(sb, dt);
      array c = matmul(a, b);
      EXPECT_EQ(c.dtype(), dt);
      double tol = dt == float64 ? 1e-12 : 1e-4;
      expect_matches(c, ref_matmul(ref_of(a), ref_of(b)), tol, tol);
    }
  }
}

TEST(Matmul, ZeroInnerDimensionGivesZeros) {
  for (Dtype dt : {float32, float64, int32, complex64, float16}) {
    array c = matmul(zeros({3, 0}, dt), ones({0, 4}, dt));
    EXPECT_EQ(c.dtype(), dt);
    expect_close(c, {3, 4}, std::vector<double>(12, 0.0));
  }
}

TEST(Matmul, TransposedAndStridedViews) {
  // Column-major operands (read in place with Trans), strided ones (packed), a broadcast
  // matrix (stride 0) and reversed axes (negative strides).
  array a0 = randn({6, 4}), b0 = randn({5, 6});
  array at = transpose(a0); // (4, 6), column-contiguous
  array bt = transpose(b0); // (6, 5)
  expect_matches(matmul(at, bt), ref_matmul(ref_of(at), ref_of(bt)), 1e-12, 1e-12);
  array big = randn({8, 12});
  array sa = slice(big, Shape{0, 0}, Shape{8, 12}, Shape{2, 3}); // (4, 4), inner stride 3
  array sb = slice(big, Shape{1, 1}, Shape{5, 12}, Shape{1, 2}); // (4, 6), row stride 12, inner stride 2
  expect_matches(matmul(sa, sb), ref_matmul(ref_of(sa), ref_of(sb)), 1e-12, 1e-12);
  array row = randn({5});
  array bc = broadcast_to(row, {3, 5}); // every row the same, row stride 0
  array w = randn({5, 2});
  expect_matches(matmul(bc, w), ref_matmul(ref_of(bc), ref_of(w)), 1e-12, 1e-12);
  array fl = flip(randn({4, 5}, float32), {0, 1});
  array w2 = randn({5, 3}, float32);
  expect_matches(matmul(fl, w2), ref_matmul(ref_of(fl), ref_of(w2)), 1e-4, 1e-4);
  // A batch of transposed matrices: (2, 3, 4) read as (2, 4, 3).
  array bt3 = swapaxes(randn({2, 3, 4}, float32), 1, 2);
  array x = randn({2, 3, 5}, float32);
  expect_matches(matmul(bt3, x), ref_matmul(ref_of(bt3), ref_of(x)), 1e-4, 1e-4);
  // Transposed batched operand against an unbatched matrix (the batch folds into rows).
  array w3 = randn({3, 5}, float32);
  expect_matches(matmul(bt3, w3), ref_matmul(ref_of(bt3), ref_of(w3)), 1e-4, 1e-4);
  array bcast = broadcast_to(randn({1, 4, 3}, float32), {3, 4, 3});
  expect_matches(matmul(bcast, w3), ref_matmul(ref_of(bcast), ref_of(w3)), 1e-4, 1e-4);
}

TEST(Matmul, HalfTypesAccumulateInFloat32) {
  for (Dtype dt : {float16, bfloat16}) {
    for (auto& [sa, sb] : kShapes) {
      SCOPED_TRACE(::testing::Message() << dt << " " << str(sa) << " @ " << str(sb));
      array a = randn(sa, dt), b = randn(sb, dt);
      array c = matmul(a, b);
      EXPECT_EQ(c.dtype(), dt);
      // Inputs are exact in the reference; the error is the output rounding (and float32
      // accumulation), ~2^-8 relative for bfloat16, scaled by sqrt(K) magnitudes.
      double scale = std::sqrt(static_cast<double>(std::max(1, sa.back())));
      expect_matches(c, ref_matmul(ref_of(a), ref_of(b)), 1e-2, 1e-2 * scale);
    }
  }
}

TEST(Matmul, Integers) {
  for (Dtype dt : {int32, int64, uint32, int16}) {
    for (auto& [sa, sb] : kShapes) {
      SCOPED_TRACE(::testing::Message() << dt << " " << str(sa) << " @ " << str(sb));
      int64_t lo = issubdtype(dt, unsignedinteger) ? 0 : -20;
      array a = randint(sa, lo, 20, dt), b = randint(sb, lo, 20, dt);
      array c = matmul(a, b);
      EXPECT_EQ(c.dtype(), dt);
      expect_matches(c, ref_matmul(ref_of(a), ref_of(b)), 0, 0);
    }
  }
  // Transposed integer operands.
  array a = transpose(randint({5, 3}, -9, 9, int64));
  array b = randint({5, 4}, -9, 9, int64);
  expect_matches(matmul(a, b), ref_matmul(ref_of(a), ref_of(b)), 0, 0);
}

TEST(Matmul, SmallIntegersWrapAround) {
  // NumPy keeps int8/uint8 and wraps modulo 256.
  for (Dtype dt : {int8, uint8}) {
    int64_t lo = dt == int8 ? -128 : 0, hi = dt == int8 ? 127 : 255;
    array a = randint({4, 9}, lo, hi, dt), b = randint({9, 3}, lo, hi, dt);
    array c = matmul(a, b);
    EXPECT_EQ(c.dtype(), dt);
    auto want = ref_matmul(ref_of(a), ref_of(b));
    for (auto& v : want.v) {
      auto r = static_cast<int64_t>(std::llround(v));
      v = dt == int8 ? static_cast<int8_t>(r) : static_cast<uint8_t>(r);
    }
    expect_matches(c, want, 0, 0);
  }
}

TEST(Matmul, BoolIsLogicalOrOfAnds) {
  // NumPy's answer: bool @ bool is bool, any(a[i, k] && b[k, j]).
  array a = randint({5, 7}, 0, 1, bool_), b = randint({7, 4}, 0, 1, bool_);
  array c = matmul(a, b);
  EXPECT_EQ(c.dtype(), bool_);
  auto want = ref_matmul(ref_of(a), ref_of(b));
  for (auto& v : want.v) v = v != 0 ? 1.0 : 0.0;
  expect_matches(c, want, 0, 0);
}

TEST(Matmul, Complex64) {
  for (auto& [sa, sb] : kShapes) {
    SCOPED_TRACE(::testing::Message() << str(sa) << " @ " << str(sb));
    array a = add(randn(sa, complex64), multiply(randn(sa, complex64), array(complex64_t(0, 1))));
    array b = add(randn(sb, complex64), multiply(randn(sb, complex64), array(complex64_t(0, 1))));
    array c = matmul(a, b);
    EXPECT_EQ(c.dtype(), complex64);
    expect_cmatches(c, ref_matmul(cref_of(a), cref_of(b)));
  }
  // Transposed complex operand (Trans, not ConjTrans).
  array a = transpose(add(randn({5, 3}, complex64), multiply(randn({5, 3}, complex64), array(complex64_t(0, 1)))));
  array b = randn({5, 2}, complex64);
  expect_cmatches(matmul(a, b), ref_matmul(cref_of(a), cref_of(b)));
}

TEST(Matmul, PromotesMixedDtypes) {
  array a = randint({3, 4}, -5, 5, int32);
  array b = randn({4, 2}, float32);
  array c = matmul(a, b);
  EXPECT_EQ(c.dtype(), float32);
  expect_matches(c, ref_matmul(ref_of(a), ref_of(b)), 1e-5, 1e-4);
  EXPECT_EQ(matmul(randn({2, 2}, float32), randn({2, 2}, float64)).dtype(), float64);
}

TEST(Matmul, BadInput) {
  expect_throws_naming<std::invalid_argument>([] { matmul(array(1.0f), ones({2, 2})); }, "[matmul]");
  expect_throws_naming<std::invalid_argument>([] { matmul(ones({2, 2}), array(1.0f)); }, "[matmul]");
  expect_throws_naming<std::invalid_argument>([] { matmul(ones({2, 3}), ones({4, 2})); }, "[matmul]");
  expect_throws_naming<std::invalid_argument>([] { matmul(ones({3}), ones({4})); }, "[matmul]");
  expect_throws_naming<std::invalid_argument>(
      [] { matmul(ones({2, 3, 4}), ones({3, 4, 5})); }, "[matmul]");
  // The message shows the shapes.
  try {
    matmul(ones({2, 3}), ones({4, 2}));
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(4, 2)"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// addmm

Ref<double> ref_addmm(const array& c, const array& a, const array& b, double alpha, double beta) {
  auto p = ref_matmul(ref_of(a), ref_of(b));
  auto cv = to_vector(broadcast_to(c, p.shape));
  for (size_t i = 0; i < p.v.size(); ++i) p.v[i] = alpha * p.v[i] + beta * cv[i];
  return p;
}

TEST(AddMM, MatchesReference) {
  struct Case {
    Shape c, a, b;
  };
  std::vector<Case> cases = {
      {{4, 5}, {4, 3}, {3, 5}},
      {{5}, {4, 3}, {3, 5}},
      {{4, 1}, {4, 3}, {3, 5}},
      {{}, {4, 3}, {3, 5}},
      {{5}, {3}, {3, 5}},
      {{4}, {4, 3}, {3}},
      {{}, {3}, {3}},
      {{2, 1, 4, 5}, {2, 1, 4, 3}, {6, 3, 5}},
      {{4, 5}, {4, 0}, {0, 5}},
      {{31, 17}, {31, 40}, {40, 17}},
  };
  for (Dtype dt : {float64, float32}) {
    for (auto& [sc, sa, sb] : cases) {
      for (auto [alpha, beta] : {std::pair{1.0f, 1.0f}, {0.5f, -2.0f}, {2.0f, 0.0f}}) {
        SCOPED_TRACE(::testing::Message() << dt << " c" << str(sc) << " a" << str(sa) << " b" << str(sb)
                                          << " alpha " << alpha << " beta " << beta);
        array c = randn(sc, dt), a = randn(sa, dt), b = randn(sb, dt);
        array out = addmm(c, a, b, alpha, beta);
        EXPECT_EQ(out.dtype(), dt);
        double tol = dt == float64 ? 1e-12 : 1e-4;
        expect_matches(out, ref_addmm(c, a, b, alpha, beta), tol, tol);
      }
    }
  }
}

TEST(AddMM, TransposedHalfAndComplex) {
  array a = transpose(randn({3, 4}, float32)), b = randn({3, 2}, float32), c = randn({4, 2}, float32);
  expect_matches(addmm(c, a, b, 1.5f, 0.5f), ref_addmm(c, a, b, 1.5, 0.5), 1e-4, 1e-4);
  for (Dtype dt : {float16, bfloat16}) {
    array ah = randn({5, 8}, dt), bh = randn({8, 3}, dt), ch = randn({3}, dt);
    array out = addmm(ch, ah, bh, 0.5f, 2.0f);
    EXPECT_EQ(out.dtype(), dt);
    expect_matches(out, ref_addmm(ch, ah, bh, 0.5, 2.0), 1e-2, 5e-2);
  }
  array ac = add(randn({3, 4}, complex64), multiply(randn({3, 4}, complex64), array(complex64_t(0, 1))));
  array bc = add(randn({4, 2}, complex64), multiply(randn({4, 2}, complex64), array(complex64_t(0, 1))));
  array cc = add(randn({3, 2}, complex64), multiply(randn({3, 2}, complex64), array(complex64_t(0, 1))));
  auto want = ref_matmul(cref_of(ac), cref_of(bc));
  auto cv = to_cvector(cc);
  for (size_t i = 0; i < want.v.size(); ++i) want.v[i] = 2.0 * want.v[i] - 0.5 * cv[i];
  expect_cmatches(addmm(cc, ac, bc, 2.0f, -0.5f), want);
}

TEST(AddMM, BadInput) {
  expect_throws_naming<std::invalid_argument>(
      [] { addmm(ones({2, 2}), ones({2, 3}), ones({2, 2})); }, "[addmm]");
  expect_throws_naming<std::invalid_argument>(
      [] { addmm(ones({3, 2}), ones({2, 3}), ones({3, 2})); }, "[addmm]");
  expect_throws_naming<std::invalid_argument>(
      [] { addmm(ones({2}), array(1.0f), ones({2})); }, "[addmm]");
  expect_throws_naming<std::invalid_argument>(
      [] { addmm(ones({2, 2}, int32), ones({2, 2}, int32), ones({2, 2}, int32)); }, "[addmm]");
}

// ---------------------------------------------------------------------------------------
// tensordot, outer, inner, kron

// Reference tensordot by direct index arithmetic.
Ref<double> ref_tensordot(const array& a, const array& b, std::vector<int> ax, std::vector<int> bx) {
  auto va = to_vector(a), vb = to_vector(b);
  int na = a.ndim(), nb = b.ndim();
  for (auto& x : ax) x = (x + na) % std::max(na, 1);
  for (auto& x : bx) x = (x + nb) % std::max(nb, 1);
  std::vector<int> fa, fb;
  for (int i = 0; i < na; ++i) if (std::find(ax.begin(), ax.end(), i) == ax.end()) fa.push_back(i);
  for (int i = 0; i < nb; ++i) if (std::find(bx.begin(), bx.end(), i) == bx.end()) fb.push_back(i);
  Ref<double> out;
  for (int i : fa) out.shape.push_back(a.shape(i));
  for (int i : fb) out.shape.push_back(b.shape(i));
  Shape cs;
  for (int i : ax) cs.push_back(a.shape(i));
  auto sa = dense_strides(a.shape()), sb = dense_strides(b.shape());
  out.v.assign(numel(out.shape), 0.0);
  for (int64_t o = 0; o < numel(out.shape); ++o) {
    int64_t rem = o, base_a = 0, base_b = 0;
    for (int d = static_cast<int>(out.shape.size()) - 1; d >= 0; --d) {
      int64_t i = rem % out.shape[d];
      rem /= out.shape[d];
      if (d >= static_cast<int>(fa.size())) {
        base_b += i * sb[fb[d - fa.size()]];
      } else {
        base_a += i * sa[fa[d]];
      }
    }
    double acc = 0;
    for (int64_t c = 0; c < numel(cs); ++c) {
      int64_t r = c, oa = base_a, ob = base_b;
      for (int d = static_cast<int>(cs.size()) - 1; d >= 0; --d) {
        int64_t i = r % cs[d];
        r /= cs[d];
        oa += i * sa[ax[d]];
        ob += i * sb[bx[d]];
      }
      acc += va[oa] * vb[ob];
    }
    out.v[o] = acc;
  }
  return out;
}

TEST(Tensordot, MatchesReference) {
  array a = randn({3, 4, 5}), b = randn({4, 5, 2});
  expect_matches(tensordot(a, b, 2), ref_tensordot(a, b, {1, 2}, {0, 1}), 1e-12, 1e-12);
  array b2 = randn({5, 6});
  expect_matches(tensordot(a, b2, 1), ref_tensordot(a, b2, {2}, {0}), 1e-12, 1e-12);
  array o = tensordot(randn({2, 3}), randn({4}), 0);
  EXPECT_EQ(o.shape(), (Shape{2, 3, 4}));
  array c = randn({5, 2, 3});
  expect_matches(tensordot(a, c, {2, 0}, {0, 2}), ref_tensordot(a, c, {2, 0}, {0, 2}), 1e-12, 1e-12);
  expect_matches(tensordot(a, c, {-1}, {0}), ref_tensordot(a, c, {2}, {0}), 1e-12, 1e-12);
  array ai = randint({3, 4}, -5, 5, int32), bi = randint({4, 3}, -5, 5, int32);
  array ri = tensordot(ai, bi, {0, 1}, {1, 0});
  EXPECT_EQ(ri.dtype(), int32);
  expect_matches(ri, ref_tensordot(ai, bi, {0, 1}, {1, 0}), 0, 0);
}

TEST(Tensordot, BadInput) {
  expect_throws_naming<std::invalid_argument>([] { tensordot(ones({2, 3}), ones({2, 3}), 1); }, "[tensordot]");
  expect_throws_naming<std::invalid_argument>([] { tensordot(ones({2, 3}), ones({3}), 2); }, "[tensordot]");
  expect_throws_naming<std::invalid_argument>([] { tensordot(ones({2, 3}), ones({3}), -1); }, "[tensordot]");
  expect_throws_naming<std::invalid_argument>(
      [] { tensordot(ones({2, 3}), ones({3, 2}), {0, 1}, {0}); }, "[tensordot]");
  expect_throws_naming<std::invalid_argument>(
      [] { tensordot(ones({2, 2}), ones({2, 2}), {0, 0}, {0, 1}); }, "[tensordot]");
  expect_throws_naming<std::invalid_argument>(
      [] { tensordot(ones({2, 3}), ones({3, 2}), {2}, {0}); }, "[tensordot]");
}

TEST(Outer, MatchesReference) {
  array a = randn({2, 3}), b = randn({4});
  array o = outer(a, b);
  auto va = to_vector(a), vb = to_vector(b);
  std::vector<double> want;
  for (double x : va) {
    for (double y : vb) want.push_back(x * y);
  }
  expect_close(o, {6, 4}, want, 1e-12, 1e-12);
  EXPECT_EQ(outer(array(2.0f), ones({3})).shape(), (Shape{1, 3}));
}

TEST(Inner, MatchesReference) {
  array a = randn({2, 3, 4}), b = randn({5, 4});
  expect_matches(inner(a, b), ref_tensordot(a, b, {2}, {1}), 1e-12, 1e-12);
  array v = randn({4});
  expect_matches(inner(v, v), ref_tensordot(v, v, {0}, {0}), 1e-12, 1e-12);
  array s = inner(array(2.0), b);
  auto vb = to_vector(b);
  for (auto& x : vb) x *= 2;
  expect_close(s, {5, 4}, vb, 1e-12, 1e-12);
  expect_throws_naming<std::invalid_argument>([] { inner(ones({2, 3}), ones({2})); }, "[inner]");
}

TEST(Kron, MatchesReference) {
  auto check = [](const array& a, const array& b) {
    SCOPED_TRACE(::testing::Message() << str(a.shape()) << " kron " << str(b.shape()));
    array k = kron(a, b);
    // Reference: out[i * b_i + j] = a[i] * b[j] per axis, shapes left-padded with ones.
    size_t nd = std::max(a.ndim(), b.ndim());
    Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1), so(nd);
    sa.insert(sa.end(), a.shape().begin(), a.shape().end());
    sb.insert(sb.end(), b.shape().begin(), b.shape().end());
    for (size_t d = 0; d < nd; ++d) so[d] = sa[d] * sb[d];
    auto va = to_vector(a), vb = to_vector(b);
    auto ra = dense_strides(sa), rb = dense_strides(sb);
    std::vector<double> want(numel(so));
    for (int64_t o = 0; o < numel(so); ++o) {
      int64_t rem = o, ia = 0, ib = 0;
      for (int d = static_cast<int>(nd) - 1; d >= 0; --d) {
        int64_t i = rem % so[d];
        rem /= so[d];
        ia += (i / sb[d]) * ra[d];
        ib += (i % sb[d]) * rb[d];
      }
      want[o] = va[ia] * vb[ib];
    }
    expect_close(k, so, want, 1e-12, 1e-12);
  };
  check(randn({2, 3}), randn({4, 5}));
  check(randn({3}), randn({2, 2}));
  check(randn({2, 1, 3}), randn({3, 2}));
  check(randn({2, 0}), randn({3, 2}));
  EXPECT_EQ(kron(array(3.0), randn({2, 2})).shape(), (Shape{2, 2}));
}

// ---------------------------------------------------------------------------------------
// Derivatives and batching (float64 inputs)

using Fn = std::function<array(const std::vector<array>&)>;

std::vector<array> randns(const std::vector<Shape>& shapes) {
  std::vector<array> out;
  for (auto& s : shapes) out.push_back(randn(s));
  return out;
}

TEST(MatmulTransforms, GradMatmul) {
  Fn mm = [](const std::vector<array>& x) { return matmul(x[0], x[1]); };
  for (auto& [sa, sb] : kShapes) {
    if (numel(sa) == 0 || numel(sb) == 0 || numel(sa) > 200) continue;
    SCOPED_TRACE(::testing::Message() << str(sa) << " @ " << str(sb));
    check_grad(mm, randns({sa, sb}));
  }
}

TEST(MatmulTransforms, GradTransposedAndAddMM) {
  // Transposed inputs inside the function.
  check_grad(
      [](const std::vector<array>& x) { return matmul(transpose(x[0]), x[1]); },
      randns({{4, 3}, {4, 2}}));
  for (auto [alpha, beta] : {std::pair{1.0f, 1.0f}, {0.5f, -1.5f}}) {
    check_grad(
        [=](const std::vector<array>& x) { return addmm(x[0], x[1], x[2], alpha, beta); },
        randns({{3, 4}, {3, 5}, {5, 4}}));
    check_grad(
        [=](const std::vector<array>& x) { return addmm(x[0], x[1], x[2], alpha, beta); },
        randns({{4}, {2, 3, 5}, {5, 4}}));
    check_grad(
        [=](const std::vector<array>& x) { return addmm(x[0], x[1], x[2], alpha, beta); },
        randns({{}, {5}, {5}}));
  }
}

TEST(MatmulTransforms, GradTensordotOuterInnerKron) {
  check_grad([](const std::vector<array>& x) { return tensordot(x[0], x[1], 2); },
             randns({{2, 3, 4}, {3, 4, 2}}));
  check_grad([](const std::vector<array>& x) { return tensordot(x[0], x[1], {0, 2}, {2, 0}); },
             randns({{2, 3, 4}, {4, 5, 2}}));
  check_grad([](const std::vector<array>& x) { return outer(x[0], x[1]); },
             randns({{2, 2}, {3}}));
  check_grad([](const std::vector<array>& x) { return inner(x[0], x[1]); },
             randns({{2, 3}, {4, 3}}));
  check_grad([](const std::vector<array>& x) { return kron(x[0], x[1]); },
             randns({{2, 3}, {2, 2}}));
}

TEST(MatmulTransforms, SecondOrder) {
  // grad of a function of the gradient: the rules' graphs are differentiable again.
  auto f = [](const std::vector<array>& x) {
    auto g = vjp(
        [](const std::vector<array>& y) { return std::vector<array>{matmul(y[0], y[1])}; },
        x, {ones({3, 2}, float64)});
    return g.second[0];
  };
  check_grad(f, randns({{3, 4}, {4, 2}}));
}

TEST(MatmulTransforms, Vmap) {
  using VFn = std::function<std::vector<array>(const std::vector<array>&)>;
  VFn mm = [](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; };
  check_vmap(mm, randns({{3, 4, 5}, {5, 2}}), {0, -1});
  check_vmap(mm, randns({{4, 5}, {5, 2, 3}}), {-1, 2});
  check_vmap(mm, randns({{4, 3, 5}, {5, 3, 2}}), {1, 1});
  check_vmap(mm, randns({{3, 5}, {5, 2}}), {0, -1}); // 1-d @ 2-d per example
  check_vmap(mm, randns({{2, 4, 5}, {4, 5}}), {1, 0}); // 2-d @ 1-d per example
  check_vmap(mm, randns({{3, 2, 4, 5}, {2, 5, 6}}), {0, -1}); // batched per example
  VFn am = [](const std::vector<array>& x) {
    return std::vector<array>{addmm(x[0], x[1], x[2], 0.5f, 2.0f)};
  };
  check_vmap(am, randns({{3, 4, 2}, {4, 5}, {5, 2}}), {0, -1, -1});
  check_vmap(am, randns({{4, 2}, {4, 3, 5}, {5, 2}}), {-1, 1, -1});
  check_vmap(am, randns({{2, 3}, {4, 5, 3}, {5, 3, 2}}), {1, 2, 1});
  check_vmap(am, randns({{2}, {4, 5}, {3, 5, 2}}), {-1, -1, 0});
  VFn td = [](const std::vector<array>& x) { return std::vector<array>{tensordot(x[0], x[1], 1)}; };
  check_vmap(td, randns({{3, 2, 4}, {4, 5, 3}}), {0, 2});
  VFn ou = [](const std::vector<array>& x) { return std::vector<array>{outer(x[0], x[1])}; };
  check_vmap(ou, randns({{3, 2}, {4}}), {0, -1});
  VFn in = [](const std::vector<array>& x) { return std::vector<array>{inner(x[0], x[1])}; };
  check_vmap(in, randns({{3, 2, 4}, {5, 4, 3}}), {0, 2});
  VFn kr = [](const std::vector<array>& x) { return std::vector<array>{kron(x[0], x[1])}; };
  check_vmap(kr, randns({{3, 2, 2}, {2, 3}}), {0, -1});
}

TEST(MatmulTransforms, ComplexVjpUsesConjugate) {
  // f(a, b) = a @ b with cotangent g: da = g @ conj(b)^T, db = conj(a)^T @ g (MLX's rule).
  auto cplx = [](const Shape& s) {
    return add(randn(s, complex64), multiply(randn(s, complex64), array(complex64_t(0, 1))));
  };
  array a = cplx({3, 4}), b = cplx({4, 2}), g = cplx({3, 2});
  auto [outs, grads] = vjp(
      [](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; },
      {a, b}, {g});
  auto conj_t = [](Ref<cdouble> r) {
    Ref<cdouble> t{{r.shape[1], r.shape[0]}, std::vector<cdouble>(r.v.size())};
    for (int i = 0; i < r.shape[0]; ++i) {
      for (int j = 0; j < r.shape[1]; ++j) t.v[j * r.shape[0] + i] = std::conj(r.v[i * r.shape[1] + j]);
    }
    return t;
  };
  expect_cmatches(grads[0], ref_matmul(cref_of(g), conj_t(cref_of(b))));
  expect_cmatches(grads[1], ref_matmul(conj_t(cref_of(a)), cref_of(g)));
}

} // namespace
} // namespace nuvec::testing
