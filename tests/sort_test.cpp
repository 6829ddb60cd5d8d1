// nuvec tests: sort, argsort, take_along_axis, put_along_axis and scatter_add_axis against
// references computed here (std::sort/std::stable_sort with NaNs last, index loops), over
// axes, layouts and dtypes; out-of-range indices (std::out_of_range at eval); errors;
// derivatives and batching; the radix paths of long sort and argsort lines.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool nan_last_less(double a, double b) {
  if (std::isnan(b)) return !std::isnan(a);
  if (std::isnan(a)) return false;
  return a < b;
}

// Lines of a row-major array along axis: calls f(offsets of the line's elements).
void for_each_line(const Shape& shape, int axis, const std::function<void(const std::vector<size_t>&)>& f) {
  int nd = static_cast<int>(shape.size());
  axis = (axis % nd + nd) % nd;
  std::vector<size_t> strides(nd, 1);
  for (int d = nd - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  size_t total = 1;
  for (auto s : shape) total *= s;
  for (size_t i = 0; i < total; ++i) {
    if ((i / strides[axis]) % shape[axis] != 0) continue; // start of a line only
    std::vector<size_t> line;
    for (int k = 0; k < shape[axis]; ++k) line.push_back(i + k * strides[axis]);
    f(line);
  }
}

std::vector<double> ref_sort(const array& x, int axis, bool indices) {
  auto v = to_vector(x);
  std::vector<double> out(v.size());
  if (x.size() == 0) return out;
  for_each_line(x.shape(), axis, [&](const std::vector<size_t>& line) {
    std::vector<size_t> order(line.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return nan_last_less(v[line[a]], v[line[b]]);
    });
    for (size_t k = 0; k < line.size(); ++k) {
      out[line[k]] = indices ? static_cast<double>(order[k]) : v[line[order[k]]];
    }
  });
  return out;
}

std::vector<std::pair<std::string, array>> layouts(Dtype dtype) {
  std::vector<std::pair<std::string, array>> out;
  out.emplace_back("contiguous", randn({3, 4, 5}, dtype));
  out.emplace_back("transposed", transpose(randn({5, 3, 4}, dtype), {1, 2, 0}));
  out.emplace_back("broadcast", broadcast_to(randn({3, 1, 5}, dtype), {3, 4, 5}));
  out.emplace_back("sliced", slice(randn({3, 8, 5}, dtype), Shape{0, 7, 0}, Shape{3, -9, 5}, Shape{1, -2, 1}));
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------
// sort, argsort

TEST(Sort, ValuesAndIndicesOverAxesAndLayouts) {
  for (Dtype dt : {float32, float64, float16, bfloat16, int32, int8, uint8}) {
    for (auto& [name, x0] : layouts(float64)) {
      // Small integers for integer dtypes (ties for argsort's stability).
      auto x = issubdtype(dt, integer) ? astype(multiply(x0, array(3.0)), dt) : astype(x0, dt);
      if (dt == uint8) x = astype(abs(multiply(x0, array(3.0))), dt);
      for (int axis : {0, 1, 2, -1, -3}) {
        SCOPED_TRACE(name + " axis " + std::to_string(axis));
        auto s = sort(x, axis);
        EXPECT_EQ(s.dtype(), dt);
        expect_close(s, x.shape(), ref_sort(x, axis, false), 0, 0);
        auto i = argsort(x, axis);
        EXPECT_EQ(i.dtype(), uint32);
        expect_close(i, x.shape(), ref_sort(x, axis, true), 0, 0);
      }
    }
  }
}

TEST(Sort, FlattenedNaNLastAndStable) {
  auto x = array({3.0, kNaN, -1.0, 2.0, kNaN, -1.0, 0.0, 2.0}, {2, 4});
  expect_close(sort(x), {8}, {-1, -1, 0, 2, 2, 3, kNaN, kNaN});
  expect_close(argsort(x), {8}, {2, 5, 6, 3, 7, 0, 1, 4}, 0, 0);
  expect_close(sort(x, 1), {2, 4}, {-1, 2, 3, kNaN, -1, 0, 2, kNaN});
  expect_close(argsort(x, 1), {2, 4}, {2, 3, 0, 1, 1, 2, 3, 0}, 0, 0);
  // Long runs of equal keys keep their order.
  auto ties = randint({1000}, 0, 3, int32);
  expect_close(argsort(ties), {1000}, ref_sort(ties, 0, true), 0, 0);
  // bool and 0-size.
  auto b = array({true, false, true, false});
  expect_close(sort(b), {4}, {0, 0, 1, 1}, 0, 0);
  EXPECT_EQ(sort(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
}

TEST(Sort, Errors) {
  auto x = randn({2, 3});
  expect_throws_naming<std::invalid_argument>([&] { sort(x, 2); }, "[sort]");
  expect_throws_naming<std::invalid_argument>([&] { argsort(x, -3); }, "[argsort]");
  expect_throws_naming<std::invalid_argument>([&] { sort(array(1.0), 0); }, "[sort]");
}

// ---------------------------------------------------------------------------------------
// take_along_axis, put_along_axis, scatter_add_axis

namespace {

// Reference gather over row-major shapes (indices already broadcast to out shape).
std::vector<double> ref_take(const array& a, const array& idx, int axis) {
  auto av = to_vector(a), iv = to_vector(idx);
  int nd = static_cast<int>(a.ndim());
  axis = (axis % nd + nd) % nd;
  Shape os = idx.shape();
  std::vector<double> out(iv.size());
  std::vector<int> pos(nd, 0);
  for (size_t i = 0; i < iv.size(); ++i) {
    int64_t k = static_cast<int64_t>(iv[i]);
    if (k < 0) k += a.shape(axis);
    size_t src = 0;
    for (int d = 0; d < nd; ++d) {
      int p = d == axis ? static_cast<int>(k) : (a.shape(d) == 1 ? 0 : pos[d]);
      src = src * a.shape(d) + p;
    }
    out[i] = av[src];
    for (int d = nd - 1; d >= 0; --d) {
      if (++pos[d] < os[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

// Reference scatter (idx and values of the same shape; a's shape otherwise).
std::vector<double> ref_scatter(const array& a, const array& idx, const array& values, int axis, bool add_) {
  auto out = to_vector(a);
  auto iv = to_vector(idx), uv = to_vector(broadcast_to(values, idx.shape()));
  int nd = static_cast<int>(a.ndim());
  axis = (axis % nd + nd) % nd;
  Shape is = idx.shape();
  std::vector<int> pos(nd, 0);
  for (size_t i = 0; i < iv.size(); ++i) {
    int64_t k = static_cast<int64_t>(iv[i]);
    if (k < 0) k += a.shape(axis);
    size_t dst = 0;
    for (int d = 0; d < nd; ++d) {
      int p = d == axis ? static_cast<int>(k) : (is[d] == 1 ? pos[d] : pos[d]);
      dst = dst * a.shape(d) + p;
    }
    out[dst] = add_ ? out[dst] + uv[i] : uv[i];
    for (int d = nd - 1; d >= 0; --d) {
      if (++pos[d] < is[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

} // namespace

TEST(AxisIndexing, TakeAlongAxis) {
  for (Dtype dt : {float32, float64, int32, float16}) {
    auto a = astype(randn({3, 4, 5}), dt);
    for (int axis : {0, 1, 2, -1}) {
      int n = a.shape(axis);
      Shape is = a.shape();
      is[(axis + 3) % 3] = 6;
      for (Dtype it : {int32, int64, uint8, int16}) {
        int lo = issubdtype(it, unsignedinteger) ? 0 : -n;
        auto idx = randint(is, lo, n - 1, it);
        auto got = take_along_axis(a, idx, axis);
        EXPECT_EQ(got.dtype(), dt);
        expect_close(got, is, ref_take(a, idx, axis), 0, 0);
      }
    }
    // Broadcasting: indices of size 1 outside the axis, and a of size 1 outside the axis.
    auto idx = randint({1, 2, 1}, -4, 3, int32);
    auto got = take_along_axis(a, idx, 1);
    auto idx_b = broadcast_to(idx, {3, 2, 5});
    expect_close(got, {3, 2, 5}, ref_take(a, idx_b, 1), 0, 0);
    auto a1 = astype(randn({1, 4, 1}), dt);
    auto idx2 = randint({3, 2, 5}, 0, 3, int32);
    expect_close(take_along_axis(a1, idx2, 1), {3, 2, 5},
                 ref_take(broadcast_to(a1, {3, 4, 5}), idx2, 1), 0, 0);
  }
  // Non-contiguous a and indices (transposed views).
  auto a = transpose(randn({5, 4, 3}));
  auto idx = transpose(randint({6, 4, 3}, -5, 4, int32));
  expect_close(take_along_axis(a, idx, 2), {3, 4, 6}, ref_take(a, idx, 2), 0, 0);
}

TEST(AxisIndexing, PutAlongAxisAndScatterAdd) {
  for (Dtype dt : {float32, float64, int32}) {
    auto a = astype(multiply(randn({4, 5, 3}), array(4.0)), dt);
    for (int axis : {0, 1, 2, -2}) {
      int n = a.shape(axis);
      Shape is = a.shape();
      int ax = (axis + 3) % 3;
      is[ax] = 7; // more updates than slots: duplicates
      auto idx = randint(is, -n, n - 1, int32);
      auto vals = astype(multiply(randn(is), array(4.0)), dt);
      expect_close(scatter_add_axis(a, idx, vals, axis), a.shape(), ref_scatter(a, idx, vals, axis, true), 1e-6, 1e-5);
      // put_along_axis: the last duplicate in axis order wins.
      expect_close(put_along_axis(a, idx, vals, axis), a.shape(), ref_scatter(a, idx, vals, axis, false), 0, 0);
    }
  }
  // Scalar values broadcast; indices broadcast over size-1 dims; non-contiguous a.
  auto a = transpose(randn({3, 4}));
  auto idx = array({0, 2}, {1, 2});
  auto got = put_along_axis(a, idx, array(7.0), 1);
  auto idx_b = broadcast_to(idx, {4, 2});
  expect_close(got, {4, 3}, ref_scatter(a, idx_b, full({4, 2}, 7.0, float64), 1, false), 0, 0);
  // A value of another dtype is cast to a's.
  EXPECT_EQ(scatter_add_axis(zeros({3}, int32), array({1}), array({2.7f}), 0).dtype(), int32);
}

// Index values outside [-n, n) throw std::out_of_range at eval naming the op, the value
// and the axis size; the bad value sits at a random position among valid random indices.
TEST(AxisIndexing, OutOfRangeIndicesThrowAtEval) {
  auto expect_index_error = [](auto&& f, const std::string& op, int64_t bad, int64_t n) {
    try {
      f();
      ADD_FAILURE() << "expected std::out_of_range naming " << op;
    } catch (const std::out_of_range& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[" + op + "]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("got " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("size " + std::to_string(n)), std::string::npos) << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type; message: " << e.what();
    }
  };
  for (Dtype it : {int32, int64, uint8}) {
    SCOPED_TRACE(::testing::Message() << "index dtype " << it);
    auto a = randn({3, 7, 4});
    for (int axis : {0, 1, 2}) {
      int n = a.shape(axis);
      Shape is = a.shape();
      is[axis] = 5;
      bool uns = issubdtype(it, unsignedinteger);
      auto v = to_vector(randint(is, uns ? 0 : -n, n - 1, int64));
      auto pick = to_vector(randint({3}, 0, 1 << 20, int64));
      size_t at = static_cast<size_t>(pick[0]) % v.size();
      int64_t off = static_cast<int64_t>(pick[1]) % 5;
      int64_t bad = (uns || pick[2] > (1 << 19)) ? n + off : -n - 1 - off;
      v[at] = static_cast<double>(bad);
      auto idx = astype(array(v.begin(), is, float64), it);
      expect_index_error([&] { eval(take_along_axis(a, idx, axis)); }, "take_along_axis", bad, n);
      expect_index_error([&] { eval(put_along_axis(a, idx, randn(is), axis)); }, "put_along_axis", bad, n);
      expect_index_error([&] { eval(scatter_add_axis(a, idx, array(1.0), axis)); }, "scatter_add_axis", bad, n);
    }
  }
  // An empty axis has no valid index.
  expect_index_error([] { eval(take_along_axis(zeros({2, 0}), zeros({2, 1}, int32), 1)); }, "take_along_axis", 0, 0);
}

TEST(AxisIndexing, Errors) {
  auto a = randn({3, 4});
  auto idx = array({0, 1}, {1, 2});
  expect_throws_naming<std::invalid_argument>([&] { take_along_axis(a, array({0.5, 1.0}, {1, 2}), 1); }, "[take_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { take_along_axis(a, array({0, 1}), 1); }, "[take_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { take_along_axis(a, idx, 2); }, "[take_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { take_along_axis(a, array({0, 1, 0, 1}, {2, 2}), 1); }, "[take_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { put_along_axis(a, array({0, 1}), array(1.0), 0); }, "[put_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { put_along_axis(a, idx, array(1.0), -3); }, "[put_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { put_along_axis(a, idx, array({1.0, 2.0, 3.0}), 1); }, "[put_along_axis]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_add_axis(a, array({0.0}, {1, 1}), array(1.0), 0); }, "[scatter_add_axis]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_add_axis(a, array({0, 1, 0, 1, 0, 1}, {3, 2}), array(1.0), 0); }, "[scatter_add_axis]");
}

// ---------------------------------------------------------------------------------------
// Derivatives

TEST(SortGrad, Sort) {
  auto x = randn({3, 5});
  for (int axis : {0, 1, -1}) {
    check_grad([&](const std::vector<array>& in) { return sort(in[0], axis); }, {x});
  }
  check_grad([](const std::vector<array>& in) { return sort(in[0]); }, {x});
}

TEST(SortGrad, TakeAlongAxisWithDuplicates) {
  auto a = randn({4, 5});
  // 8 picks out of 5 along axis 1: duplicates accumulate in the reverse rule.
  auto idx = randint({4, 8}, -5, 4, int32);
  check_grad([&](const std::vector<array>& in) { return take_along_axis(in[0], in[1], 1); }, {a, idx});
  auto idx0 = randint({6, 1}, 0, 3, int32);
  check_grad([&](const std::vector<array>& in) { return take_along_axis(in[0], in[1], 0); }, {a, idx0});
  // Explicitly: the gradient counts how often each element was picked.
  auto picks = array({1, 1, 1, 3}, {1, 4});
  auto g = grad([&](const array& x) { return sum(take_along_axis(x, picks, 1)); })(randn({1, 5}));
  expect_close(g, {1, 5}, {0, 3, 0, 1, 0}, 0, 0);
}

TEST(SortGrad, PutAlongAxisAndScatterAdd) {
  auto a = randn({4, 5});
  // put_along_axis with unique indices per line (a permutation prefix), so that the
  // overwritten positions are well defined.
  std::vector<int> perm_rows;
  for (int r = 0; r < 4; ++r) {
    std::vector<int> p(5);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng());
    perm_rows.insert(perm_rows.end(), p.begin(), p.begin() + 3);
  }
  auto idx = array(perm_rows.begin(), {4, 3}, int32);
  auto vals = randn({4, 3});
  check_grad([&](const std::vector<array>& in) { return put_along_axis(in[0], in[1], in[2], 1); }, {a, idx, vals});
  // scatter_add_axis with duplicates: both inputs get their full cotangents.
  auto dup = randint({4, 7}, -5, 4, int32);
  auto vals7 = randn({4, 7});
  check_grad([&](const std::vector<array>& in) { return scatter_add_axis(in[0], in[1], in[2], 1); }, {a, dup, vals7});
  // The updates' gradient is the cotangent at their target positions.
  auto [outs, vjps] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{scatter_add_axis(in[0], array({2, 2, 0}), in[1], 0)}; },
      {zeros({3}, float64), zeros({3}, float64)},
      {array({1.0, 2.0, 3.0})});
  expect_close(vjps[0], {3}, {1, 2, 3});
  expect_close(vjps[1], {3}, {3, 3, 1});
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(SortVmap, AgainstALoop) {
  using VFn = std::function<std::vector<array>(const std::vector<array>&)>;
  auto x = randn({4, 3, 5});
  std::vector<VFn> unary = {
      [](const std::vector<array>& in) { return std::vector<array>{sort(in[0], 0)}; },
      [](const std::vector<array>& in) { return std::vector<array>{sort(in[0], -1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{argsort(in[0], 1)}; },
      [](const std::vector<array>& in) { return std::vector<array>{sort(in[0])}; },
  };
  for (size_t i = 0; i < unary.size(); ++i) {
    SCOPED_TRACE("function " + std::to_string(i));
    for (int ax : {0, 1, 2}) check_vmap(unary[i], {x}, {ax});
  }
  // Axis indexing with the array, the indices or both batched.
  auto a = randn({4, 3, 5});
  auto idx = randint({4, 3, 6}, -5, 4, int32);
  VFn take = [](const std::vector<array>& in) { return std::vector<array>{take_along_axis(in[0], in[1], 1)}; };
  check_vmap(take, {a, idx}, {0, 0});
  check_vmap(take, {a, randint({3, 6}, 0, 4, int32)}, {0, -1});
  check_vmap(take, {randn({3, 5}), idx}, {-1, 0});
  check_vmap(take, {transpose(a, {1, 0, 2}), idx}, {1, 0});
  auto sidx = randint({4, 3, 7}, -5, 4, int32);
  auto vals = randn({4, 3, 7});
  VFn add_ = [](const std::vector<array>& in) { return std::vector<array>{scatter_add_axis(in[0], in[1], in[2], 1)}; };
  VFn put = [](const std::vector<array>& in) { return std::vector<array>{put_along_axis(in[0], in[1], in[2], -1)}; };
  check_vmap(add_, {a, sidx, vals}, {0, 0, 0});
  check_vmap(add_, {randn({3, 5}), sidx, vals}, {-1, 0, 0});
  check_vmap(add_, {a, randint({3, 7}, 0, 4, int32), vals}, {0, -1, 0});
  check_vmap(put, {a, sidx, vals}, {0, 0, 0});
  check_vmap(put, {a, randint({3, 7}, 0, 4, int32), randn({3, 7})}, {0, -1, -1});
}

// Long lines take the radix path (32-bit keys): compare with std::sort (NaNs last) on
// values that stress the key map: both signs, zeros of both signs, infinities, NaNs,
// duplicates, and the integer extremes.
TEST(SortLong, RadixPathMatchesComparisonSort) {
  using namespace nuvec;
  std::mt19937_64& gen = nuvec::testing::rng();
  const int n = 50000;
  std::vector<float> f(n);
  std::uniform_real_distribution<float> u(-1e6f, 1e6f);
  for (int i = 0; i < n; ++i) f[i] = u(gen);
  for (int i = 0; i < 200; ++i) {
    f[gen() % n] = NAN;
    f[gen() % n] = -NAN;
    f[gen() % n] = INFINITY;
    f[gen() % n] = -INFINITY;
    f[gen() % n] = 0.0f;
    f[gen() % n] = -0.0f;
    f[gen() % n] = f[gen() % n];
  }
  auto sorted_f = sort(array(f.begin(), {n}));
  std::vector<float> ef = f;
  std::sort(ef.begin(), ef.end(), [](float a, float b) {
    if (std::isnan(b)) return !std::isnan(a);
    if (std::isnan(a)) return false;
    return a < b;
  });
  auto got = nuvec::testing::to_vector(sorted_f);
  for (int i = 0; i < n; ++i) {
    if (std::isnan(ef[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(got[i], static_cast<double>(ef[i])) << i;
    }
  }
  for (Dtype dt : {int32, uint32}) {
    std::vector<int64_t> v(n);
    for (auto& x : v) {
      x = dt == int32 ? static_cast<int64_t>(static_cast<int32_t>(gen()))
                      : static_cast<int64_t>(static_cast<uint32_t>(gen()));
    }
    v[0] = dt == int32 ? INT32_MIN : 0;
    v[1] = dt == int32 ? INT32_MAX : UINT32_MAX;
    // Sorted along axis 0 of a (n, 2) array: strided lines.
    std::vector<int64_t> both(2 * n);
    for (int i = 0; i < n; ++i) both[2 * i] = both[2 * i + 1] = v[i];
    auto a = astype(array(both.begin(), {n, 2}, int64), dt);
    auto s = sort(a, 0);
    std::sort(v.begin(), v.end());
    auto gv = nuvec::testing::to_vector(s);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(gv[2 * i], static_cast<double>(v[i])) << i;
      ASSERT_EQ(gv[2 * i + 1], static_cast<double>(v[i])) << i;
    }
  }
}

// Long lines take argsort's radix path on (key, position) pairs: compare with
// std::stable_sort of positions (NaNs last, -0 == +0 as `<` says) on random values with
// NaNs of both signs, zeros of both signs, infinities and many duplicates, at lengths on
// both sides of the 2048 threshold, over contiguous and strided lines.
TEST(ArgSortLong, RadixPathMatchesStableSort) {
  std::mt19937_64& gen = nuvec::testing::rng();
  auto stable_order = [](const std::vector<double>& v) {
    std::vector<double> order(v.size());
    std::vector<size_t> pos(v.size());
    std::iota(pos.begin(), pos.end(), 0);
    std::stable_sort(pos.begin(), pos.end(), [&](size_t a, size_t b) { return nan_last_less(v[a], v[b]); });
    for (size_t i = 0; i < pos.size(); ++i) order[i] = static_cast<double>(pos[i]);
    return order;
  };
  for (int n : {2047, 2048, 5000, 40000}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    // float32: values from a small set (duplicates) mixed with continuous ones.
    std::vector<float> f(n);
    std::uniform_real_distribution<float> u(-100.0f, 100.0f);
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.5f, -1.5f};
    for (auto& x : f) x = gen() % 3 == 0 ? specials[gen() % 8] : (gen() % 2 ? u(gen) : std::round(u(gen) / 10));
    auto fa = array(f.begin(), {n});
    expect_close(argsort(fa), {n}, stable_order(std::vector<double>(f.begin(), f.end())), 0, 0);
    for (Dtype dt : {int32, uint32}) {
      SCOPED_TRACE(::testing::Message() << dt);
      // Few distinct values (long runs of ties), with the dtype's extremes.
      std::vector<double> v(n);
      for (auto& x : v) {
        int64_t r = static_cast<int64_t>(gen() % 50);
        if (dt == int32) {
          x = static_cast<double>(gen() % 7 == 0 ? static_cast<int32_t>(gen()) : r - 25);
        } else {
          x = static_cast<double>(gen() % 7 == 0 ? static_cast<uint32_t>(gen()) : r);
        }
      }
      v[gen() % n] = dt == int32 ? INT32_MIN : 0.0;
      v[gen() % n] = dt == int32 ? INT32_MAX : UINT32_MAX;
      // Lines along axis 0 of (n, 3): strided input and output.
      std::vector<double> cols(3 * static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        cols[3 * i] = v[i];
        cols[3 * i + 1] = v[n - 1 - i];
        cols[3 * i + 2] = v[i];
      }
      auto a = astype(array(cols.begin(), {n, 3}, float64), dt);
      auto got = to_vector(argsort(a, 0));
      std::vector<double> rev(v.rbegin(), v.rend());
      auto w0 = stable_order(v), w1 = stable_order(rev);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(got[3 * i], w0[i]) << i;
        ASSERT_EQ(got[3 * i + 1], w1[i]) << i;
        ASSERT_EQ(got[3 * i + 2], w0[i]) << i;
      }
    }
  }
}
