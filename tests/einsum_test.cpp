// nuvec tests: einsum/einsum_path against a brute-force loop over every label assignment,
// hadamard_transform against explicit H_m kron Sylvester matrices (m = 1, 12, 20, 28) and
// for orthogonality, block_masked_mm, gather_mm and
// segmented_mm against explicit loops; derivatives and batching through tests/checker.h.
#include <bit>
#include <map>
#include <string>
#include <vector>

#include "checker.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

// out[output] = sum over all other labels of prod_i x_i[term_i], by enumerating every
// assignment of values to labels. Subscripts: letters only, explicit "->".
std::vector<double> brute_einsum(const std::string& subs, const std::vector<array>& xs, Shape& out_shape) {
  auto arrow = subs.find("->");
  std::string lhs = subs.substr(0, arrow), out = subs.substr(arrow + 2);
  std::vector<std::string> terms;
  size_t pos = 0;
  while (true) {
    size_t c = lhs.find(',', pos);
    terms.push_back(lhs.substr(pos, c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  std::map<char, int> size;
  std::vector<std::vector<double>> vals;
  for (size_t i = 0; i < xs.size(); ++i) {
    for (size_t a = 0; a < terms[i].size(); ++a) size[terms[i][a]] = std::max(size[terms[i][a]], xs[i].shape(static_cast<int>(a)));
    vals.push_back(to_vector(xs[i]));
  }
  std::string labels;
  for (auto& [c, n] : size) labels.push_back(c);
  out_shape.clear();
  for (char c : out) out_shape.push_back(size[c]);
  auto ost = dense_strides(out_shape);
  int64_t total = 1;
  for (int d : out_shape) total *= d;
  std::vector<double> res(total, 0.0);
  std::map<char, int> idx;
  for (char c : labels) idx[c] = 0;
  while (true) {
    double prod = 1;
    for (size_t i = 0; i < xs.size(); ++i) {
      auto st = dense_strides(xs[i].shape());
      int64_t off = 0;
      for (size_t a = 0; a < terms[i].size(); ++a) {
        int d = xs[i].shape(static_cast<int>(a));
        off += (d == 1 ? 0 : idx[terms[i][a]]) * st[a];
      }
      prod *= vals[i][off];
    }
    int64_t o = 0;
    for (size_t a = 0; a < out.size(); ++a) o += idx[out[a]] * ost[a];
    res[o] += prod;
    int k = static_cast<int>(labels.size()) - 1;
    while (k >= 0 && ++idx[labels[k]] == size[labels[k]]) idx[labels[k--]] = 0;
    if (k < 0) break;
  }
  return res;
}

void expect_einsum(const std::string& subs, const std::vector<array>& xs, const std::string& ref_subs = "") {
  SCOPED_TRACE(subs);
  Shape shape;
  auto want = brute_einsum(ref_subs.empty() ? subs : ref_subs, xs, shape);
  expect_close(einsum(subs, xs), shape, want, 1e-9, 1e-9);
}

TEST(Einsum, AgainstLoops) {
  expect_einsum("ij,jk->ik", {randn({3, 4}), randn({4, 5})});
  expect_einsum("ij->ji", {randn({3, 4})});
  expect_einsum("ii->i", {randn({4, 4})});
  expect_einsum("ii->", {randn({4, 4})});
  expect_einsum("iij->ji", {randn({3, 3, 2})});
  expect_einsum("ijk,ikl->ijl", {randn({2, 3, 4}), randn({2, 4, 5})});
  expect_einsum("i,j->ij", {randn({3}), randn({4})});
  expect_einsum("ij,ij->", {randn({3, 4}), randn({3, 4})});
  expect_einsum("ij,ij->ij", {randn({3, 4}), randn({3, 4})});
  expect_einsum("abc,cd,de->abe", {randn({2, 3, 4}), randn({4, 5}), randn({5, 2})});
  expect_einsum("ij,jk,kl->il", {randn({2, 6}), randn({6, 3}), randn({3, 4})});
  expect_einsum("ijk->", {randn({2, 3, 4})});
  expect_einsum("ab,bc,ca->", {randn({3, 4}), randn({4, 5}), randn({5, 3})});
  expect_einsum("bn,anm,bm->ba", {randn({2, 3}), randn({4, 3, 5}), randn({2, 5})});
  // Implicit output: letters seen once, in character order.
  expect_einsum("ij,jk", {randn({3, 4}), randn({4, 5})}, "ij,jk->ik");
  expect_einsum("ba", {randn({3, 4})}, "ba->ab");
  expect_einsum("ii", {randn({3, 3})}, "ii->");
  // Ellipsis broadcasting (size-1 batch axes broadcast).
  expect_einsum("...ij,...jk->...ik", {randn({2, 3, 4}), randn({1, 4, 5})}, "bij,bjk->bik");
  expect_einsum("i...->...", {randn({3, 2, 4})}, "iab->ab");
  // Integer operands.
  array ai = randint({3, 4}, -4, 4), bi = randint({4, 2}, -4, 4);
  expect_einsum("ij,jk->ik", {ai, bi});
}

TEST(Einsum, Path) {
  std::vector<array> xs = {randn({2, 6}), randn({6, 3}), randn({3, 40})};
  auto [path, text] = einsum_path("ij,jk,kl->il", xs);
  ASSERT_EQ(path.size(), 2u);
  // Greedy: (ij,jk) gives a 2x3 intermediate, smaller than any other pair's.
  EXPECT_EQ(path[0], std::vector<int>({0, 1}));
  EXPECT_EQ(path[1], std::vector<int>({0, 1}));
  EXPECT_NE(text.find("ij,jk,kl->il"), std::string::npos);
  EXPECT_NE(text.find("ij,jk->ik"), std::string::npos);
  auto [p1, t1] = einsum_path("ii->", {randn({3, 3})});
  EXPECT_EQ(p1, std::vector<std::vector<int>>({{0}}));
}

TEST(Einsum, GradAndVmap) {
  check_grad([](const std::vector<array>& xs) { return einsum("ij,jk->ik", xs); }, {randn({3, 4}), randn({4, 2})});
  check_grad([](const std::vector<array>& xs) { return einsum("ii->i", xs); }, {randn({4, 4})});
  check_grad([](const std::vector<array>& xs) { return einsum("abc,cd,de->abe", xs); }, {randn({2, 3, 4}), randn({4, 3}), randn({3, 2})});
  check_vmap([](const std::vector<array>& xs) { return std::vector<array>{einsum("ij,jk->ik", xs)}; }, {randn({3, 5, 4}), randn({4, 2})}, {1, -1});
  check_vmap([](const std::vector<array>& xs) { return std::vector<array>{einsum("ij,jk,k->i", xs)}; }, {randn({3, 4}), randn({4, 2, 3}), randn({3, 2})}, {-1, 2, 0});
}

TEST(Einsum, Errors) {
  array a = randn({3, 4}), b = randn({4, 5});
  expect_throws_naming<std::invalid_argument>([&] { einsum("ij,jk", {a}); }, "[einsum]");
  expect_throws_naming<std::invalid_argument>([&] { einsum("ijk,jk->ik", {a, b}); }, "[einsum]");
  expect_throws_naming<std::invalid_argument>([&] { einsum("ij,jk->iz", {a, b}); }, "[einsum]");
  expect_throws_naming<std::invalid_argument>([&] { einsum("ij,kj->ik", {a, b}); }, "[einsum]");
  expect_throws_naming<std::invalid_argument>([&] { einsum("i2,jk->ik", {a, b}); }, "[einsum]");
  expect_throws_naming<std::invalid_argument>([&] { einsum_path("ij,jk->ii", {a, b}); }, "[einsum_path]");
}

// The Sylvester-Hadamard matrix entry (-1)^popcount(i & j).
double hadamard_entry(int i, int j) {
  return std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0;
}

// The order-12/20/28 matrices MLX uses, in the +/- row format of Sloane's library
// (neilsloane.com/hadamard), transcribed independently of the hex rows in the source.
const std::map<int, std::vector<std::string>>& sloane_rows() {
  static const std::map<int, std::vector<std::string>> rows = {
      {12,
       {"+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-", "+++++-++----",
        "+-+---+--+-+", "++--+++-++--", "+--++---+--+", "++----+++-++", "+--+-++---+-",
        "++++----+++-", "+-+--+-++---"}},
      {20,
       {"+----+----++--++-++-", "-+----+---+++---+-++", "--+----+---+++-+-+-+",
        "---+----+---+++++-+-", "----+----++--++-++-+", "-+++++-----+--+++--+",
        "+-+++-+---+-+--+++--", "++-++--+---+-+--+++-", "+++-+---+---+-+--+++",
        "++++-----++--+-+--++", "--++-+-++-+-----++++", "---++-+-++-+---+-+++",
        "+---++-+-+--+--++-++", "++---++-+----+-+++-+", "-++---++-+----+++++-",
        "-+--+--++-+----+----", "+-+-----++-+----+---", "-+-+-+---+--+----+--",
        "--+-+++------+----+-", "+--+--++------+----+"}},
      {28,
       {"+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-",
        "--+-----+++---+-+-+----+--++", "---+-----+++---+-+-+-+--+--+",
        "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
        "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-",
        "---++++-+-----+-++--+-+-+--+", "+---+++--+----++-++--+-+-+--",
        "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
        "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+",
        "-+-++-++--++--+--------++++-", "+-+-++--+--++--+--------++++",
        "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
        "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---",
        "+-++-+---++--+------+-++++--", "-++--++-+-++-+++----++------",
        "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
        "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--",
        "+--++-+-++-+-+----+++-----+-", "++--++-+-++-+-+----++------+"}},
  };
  return rows;
}

// H_m kron H_p (n = m p) as a dense float64 matrix, row-major.
std::vector<double> hadamard_reference(int n) {
  int m = 1;
  for (int f : {12, 20, 28}) {
    if (n % f == 0) m = f;
  }
  int p = n / m;
  std::vector<double> h(static_cast<size_t>(n) * n);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      double hm = m == 1 ? 1.0 : (sloane_rows().at(m)[r / p][c / p] == '+' ? 1.0 : -1.0);
      h[r * n + c] = hm * hadamard_entry(r % p, c % p);
    }
  }
  return h;
}

TEST(Hadamard, AgainstMatrix) {
  for (int n : {1, 2, 8, 32, 12, 24, 48, 20, 40, 28, 56, 112}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto h = hadamard_reference(n);
    array x = randn({3, n});
    auto v = to_vector(x);
    for (std::optional<float> scale : {std::optional<float>(), std::optional<float>(0.5f)}) {
      double sc = scale ? *scale : 1.0 / std::sqrt(double(n));
      std::vector<double> want(3 * n, 0.0);
      for (int r = 0; r < 3; ++r) {
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) want[r * n + i] += sc * h[i * n + j] * v[r * n + j];
        }
      }
      array y = hadamard_transform(x, scale);
      EXPECT_EQ(y.dtype(), float64);
      expect_close(y, {3, n}, want, 1e-9, 1e-9);
    }
    // float32 and a non-contiguous input (the transform runs over the last axis only).
    array xt = transpose(randn({n, 2}, float32));
    auto vt = to_vector(xt);
    std::vector<double> want(2 * n, 0.0);
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) want[r * n + i] += h[i * n + j] * vt[r * n + j];
      }
    }
    array yt = hadamard_transform(xt, 1.0f);
    EXPECT_EQ(yt.dtype(), float32);
    expect_close(yt, {2, n}, want, 1e-5, 1e-4);
  }
  EXPECT_EQ(hadamard_transform(randint({4}, -3, 3)).dtype(), float32);
  EXPECT_EQ(hadamard_transform(randint({12}, -3, 3)).dtype(), float32);
}

// The op's own matrix, read off by transforming the identity, is orthogonal: M M^T = n I
// with scale 1, and M M^T = I with the default scale.
TEST(Hadamard, Orthogonal) {
  for (int n : {4, 12, 20, 28, 24, 40, 56, 96}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto m1 = to_vector(hadamard_transform(eye(n, float64), 1.0f));
    auto md = to_vector(hadamard_transform(eye(n, float64)));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        double d1 = 0, dd = 0;
        for (int k = 0; k < n; ++k) {
          d1 += m1[i * n + k] * m1[j * n + k];
          dd += md[i * n + k] * md[j * n + k];
        }
        ASSERT_EQ(d1, i == j ? double(n) : 0.0) << i << ", " << j;
        ASSERT_NEAR(dd, i == j ? 1.0 : 0.0, 1e-12) << i << ", " << j;
        ASSERT_TRUE(m1[i * n + j] == 1.0 || m1[i * n + j] == -1.0);
      }
    }
  }
  // The order-m tables themselves.
  for (const auto& [m, rows] : sloane_rows()) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) {
        int dot = 0;
        for (int k = 0; k < m; ++k) dot += (rows[i][k] == rows[j][k]) ? 1 : -1;
        ASSERT_EQ(dot, i == j ? m : 0) << "m " << m << " rows " << i << ", " << j;
      }
    }
  }
}

TEST(Hadamard, DerivativesAndBatching) {
  // H_20 and H_28 are not symmetric, so the vjp must apply the transpose.
  for (int n : {8, 12, 20, 28, 40}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    check_grad([](const std::vector<array>& xs) { return hadamard_transform(xs[0]); }, {randn({2, n})});
    check_grad([](const std::vector<array>& xs) { return hadamard_transform(xs[0], 0.25f); }, {randn({n})});
    check_vmap([](const std::vector<array>& xs) { return std::vector<array>{hadamard_transform(xs[0])}; }, {randn({4, 3, n})}, {1});
    check_vmap([](const std::vector<array>& xs) { return std::vector<array>{hadamard_transform(xs[0])}; }, {randn({n, 3})}, {1});
  }
}

TEST(Hadamard, Errors) {
  // n not of the form m 2^k, m in {1, 12, 20, 28}: 6 = 3 * 2, 36 = 12 * 3, 60 = 12 * 5,
  // 44 = 11 * 4, 0; a scalar; complex input.
  for (int n : {3, 6, 36, 60, 44, 240, 0}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expect_throws_naming<std::invalid_argument>([&] { hadamard_transform(randn({2, n})); }, "[hadamard_transform]");
  }
  // n = 1, a 0-d array included: MLX's test_hadamard (the input itself, or times the scale).
  EXPECT_EQ(hadamard_transform(array(5.0f)).item<float>(), 5.0f);
  EXPECT_NEAR(hadamard_transform(array(5), 0.2f).item<float>(), 1.0f, 1e-7);
  EXPECT_EQ(hadamard_transform(array({3, 4}, {2, 1})).dtype(), int32);
  expect_throws_naming<std::invalid_argument>([] { hadamard_transform(astype(randn({12}), complex64)); }, "[hadamard_transform]");
}

// (..., M, K) @ (..., K, N) reference for 2-D operands, on flat row-major vectors.
std::vector<double> ref_mm(const std::vector<double>& a, const std::vector<double>& b, int m, int k, int n) {
  std::vector<double> c(m * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int kk = 0; kk < k; ++kk) {
      for (int j = 0; j < n; ++j) c[i * n + j] += a[i * k + kk] * b[kk * n + j];
    }
  }
  return c;
}

TEST(BlockMaskedMM, AgainstLoops) {
  int m = 5, k = 7, n = 3, bs = 2;
  array a = randn({m, k}), b = randn({k, n});
  array mo = astype(randint({3, 2}, 0, 1), bool_), ml = astype(randint({3, 4}, 0, 1), bool_);
  array mr = randn({4, 2});
  auto av = to_vector(a), bv = to_vector(b), mov = to_vector(mo), mlv = to_vector(ml), mrv = to_vector(mr);
  for (int i = 0; i < m; ++i) {
    for (int kk = 0; kk < k; ++kk) av[i * k + kk] *= mlv[(i / bs) * 4 + kk / bs];
  }
  for (int kk = 0; kk < k; ++kk) {
    for (int j = 0; j < n; ++j) bv[kk * n + j] *= mrv[(kk / bs) * 2 + j / bs];
  }
  auto want = ref_mm(av, bv, m, k, n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) want[i * n + j] *= mov[(i / bs) * 2 + j / bs];
  }
  expect_close(block_masked_mm(a, b, bs, mo, ml, mr), {m, n}, want, 1e-9, 1e-9);
  expect_allclose(block_masked_mm(a, b, bs), matmul(a, b));
  check_grad([&](const std::vector<array>& xs) { return block_masked_mm(xs[0], xs[1], bs, mo, ml, mr); }, {a, b}, {.argnums = {0, 1}});
  check_vmap(
      [&](const std::vector<array>& xs) { return std::vector<array>{block_masked_mm(xs[0], xs[1], bs, mo, ml, mr)}; },
      {randn({m, 3, k}), b}, {1, -1});
  expect_throws_naming<std::invalid_argument>([&] { block_masked_mm(a, b, bs, randn({2, 2})); }, "[block_masked_mm]");
  expect_throws_naming<std::invalid_argument>([&] { block_masked_mm(a, b, 0); }, "[block_masked_mm]");
}

TEST(GatherMM, AgainstLoops) {
  int m = 2, k = 3, n = 4;
  array a = randn({2, 3, m, k}), b = randn({5, k, n});
  array li = array({5, 0, 3, 5}, {2, 2}, int32);
  array ri = array({4, 1}, {2, 1}, uint32);
  auto av = to_vector(a), bv = to_vector(b);
  std::vector<int> l = {5, 0, 3, 5}, r = {4, 1};
  std::vector<double> want;
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 2; ++q) {
      std::vector<double> am(av.begin() + l[p * 2 + q] * m * k, av.begin() + (l[p * 2 + q] + 1) * m * k);
      std::vector<double> bm(bv.begin() + r[p] * k * n, bv.begin() + (r[p] + 1) * k * n);
      auto c = ref_mm(am, bm, m, k, n);
      want.insert(want.end(), c.begin(), c.end());
    }
  }
  expect_close(gather_mm(a, b, li, ri), {2, 2, m, n}, want, 1e-9, 1e-9);
  // Without indices: each matrix pairs with its own position (batch shapes must agree).
  array a2 = randn({5, m, k});
  expect_allclose(gather_mm(a2, b), matmul(a2, b));
  check_grad([&](const std::vector<array>& xs) { return gather_mm(xs[0], xs[1], li, ri); }, {a, b});
  check_vmap([&](const std::vector<array>& xs) { return std::vector<array>{gather_mm(xs[0], xs[1], li, ri)}; }, {randn({2, 3, 3, m, k}), b}, {1, -1});
  expect_throws_naming<std::invalid_argument>([&] { gather_mm(a, b, randn({2})); }, "[gather_mm]");
}

TEST(SegmentedMM, AgainstLoops) {
  int m = 2, k = 6, n = 3;
  array a = randn({m, k}), b = randn({k, n});
  std::vector<int> seg = {0, 2, 2, 6, 1, 5, 3, 3};
  array segs = array(seg.begin(), {4, 2}, int32);
  auto av = to_vector(a), bv = to_vector(b);
  std::vector<double> want;
  for (int sgi = 0; sgi < 4; ++sgi) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int kk = seg[2 * sgi]; kk < seg[2 * sgi + 1]; ++kk) acc += av[i * k + kk] * bv[kk * n + j];
        want.push_back(acc);
      }
    }
  }
  expect_close(segmented_mm(a, b, segs), {4, m, n}, want, 1e-9, 1e-9);
  check_grad([&](const std::vector<array>& xs) { return segmented_mm(xs[0], xs[1], segs); }, {a, b});
  check_vmap([&](const std::vector<array>& xs) { return std::vector<array>{segmented_mm(xs[0], xs[1], segs)}; }, {randn({3, m, k}), b}, {0, -1});
  expect_throws_naming<std::invalid_argument>([&] { segmented_mm(a, b, array({0, 1, 2}, {3}, int32)); }, "[segmented_mm]");
}

} // namespace
} // namespace nuvec::testing
