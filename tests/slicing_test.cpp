// nuvec tests: slicing and joining (slice, slice_update, dynamic windows, split, concatenate,
// stack, unstack, repeat, tile, pad, roll, flip, diagonal, diag, trace). References are index
// arithmetic written here (NumPy's semantics); derivatives and batching go through checker.h.
#include <array>
#include <complex>
#include <sstream>
#include <functional>
#include <numeric>

#include "checker.h"
#include "donation_checks.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

using Index = std::vector<int64_t>;

/// A float64 copy of an array for index lookups.
struct Ref {
  Shape shape;
  std::vector<double> v;
  explicit Ref(const array& a) : shape(a.shape()), v(to_vector(a)) {}
  double at(const Index& idx) const {
    int64_t off = 0;
    for (size_t i = 0; i < shape.size(); ++i) off = off * shape[i] + idx[i];
    return v[off];
  }
};

/// The row-major elements of `shape`, each computed by f from its multi-index.
std::vector<double> build(const Shape& shape, const std::function<double(const Index&)>& f) {
  std::vector<double> out;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  Index idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    out.push_back(f(idx));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

/// The indices a Python slice start:stop:step selects from n elements, by walking.
std::vector<int64_t> py_indices(int64_t n, int64_t start, int64_t stop, int64_t step) {
  auto clampv = [&](int64_t x, bool is_start) {
    if (x < 0) x += n;
    if (step > 0) return std::min<int64_t>(std::max<int64_t>(x, 0), n);
    (void)is_start;
    return std::min<int64_t>(std::max<int64_t>(x, -1), n - 1);
  };
  int64_t a = clampv(start, true), b = clampv(stop, false);
  std::vector<int64_t> out;
  for (int64_t i = a; step > 0 ? i < b : i > b; i += step) out.push_back(i);
  return out;
}

/// NumPy's a[start:stop:step, ...] computed by index lists.
std::pair<Shape, std::vector<double>> ref_slice(
    const array& a,
    const Shape& start,
    const Shape& stop,
    const Shape& step) {
  Ref r(a);
  std::vector<std::vector<int64_t>> lists;
  Shape shape;
  for (size_t i = 0; i < a.ndim(); ++i) {
    lists.push_back(py_indices(a.shape(i), start[i], stop[i], step[i]));
    shape.push_back(static_cast<int32_t>(lists.back().size()));
  }
  auto v = build(shape, [&](const Index& idx) {
    Index src(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) src[i] = lists[i][idx[i]];
    return r.at(src);
  });
  return {shape, v};
}

std::string str(const Shape& s) {
  std::ostringstream os;
  nuvec::operator<<(os, s);
  return os.str();
}

int64_t wrap(int64_t i, int64_t n) {
  return ((i % n) + n) % n;
}

} // namespace

// ---------------------------------------------------------------------------------------
// slice

TEST(Slice, MatchesNumPyBounds) {
  auto a = randn({5, 6, 7}, float32);
  std::vector<std::array<Shape, 3>> cases = {
      {Shape{0, 0, 0}, Shape{5, 6, 7}, Shape{1, 1, 1}},
      {Shape{1, 2, 3}, Shape{4, 5, 6}, Shape{1, 2, 3}},
      {Shape{-3, -100, 2}, Shape{-1, 100, -1}, Shape{1, 1, 2}},
      {Shape{4, 5, 6}, Shape{-100, 0, 1}, Shape{-1, -2, -3}},
      {Shape{-1, 100, 0}, Shape{0, -7, 7}, Shape{-2, -1, 4}},
      {Shape{3, 2, 1}, Shape{1, 2, 100}, Shape{1, 1, 1}}, // empty along two axes
      {Shape{10, -10, 0}, Shape{20, 10, 7}, Shape{1, 3, 7}},
  };
  for (auto& [start, stop, step] : cases) {
    auto [shape, expected] = ref_slice(a, start, stop, step);
    SCOPED_TRACE("start " + str(start) + " stop " + str(stop) + " step " + str(step));
    expect_close(slice(a, start, stop, step), shape, expected, 0, 0);
  }
  auto [shape, expected] = ref_slice(a, {1, 0, 2}, {3, 6, 5}, {1, 1, 1});
  expect_close(slice(a, {1, 0, 2}, {3, 6, 5}), shape, expected, 0, 0);
}

TEST(Slice, IsAViewSharingMemory) {
  auto a = randn({6, 8}, float32);
  eval(a);
  auto rows = slice(a, Shape{2, 0}, Shape{5, 8});
  eval(rows);
  EXPECT_EQ(rows.data_shared_ptr(), a.data_shared_ptr());
  EXPECT_EQ(rows.raw_data(), static_cast<void*>(a.data<float>() + 16));
  EXPECT_TRUE(rows.flags().row_contiguous);
  auto strided = slice(a, Shape{5, 7}, Shape{0, 0}, Shape{-2, -3});
  eval(strided);
  EXPECT_EQ(strided.data_shared_ptr(), a.data_shared_ptr());
  EXPECT_EQ(strided.raw_data(), static_cast<void*>(a.data<float>() + 5 * 8 + 7));
  EXPECT_EQ(strided.strides(), (Strides{-16, -3}));
  EXPECT_FALSE(strided.flags().row_contiguous);
  EXPECT_FALSE(strided.flags().contiguous);
  auto cols = slice(a, Shape{0, 1}, Shape{6, 3});
  eval(cols);
  EXPECT_FALSE(cols.flags().row_contiguous);
  EXPECT_FALSE(cols.flags().contiguous);
  auto [shape, expected] = ref_slice(a, {0, 1}, {6, 3}, {1, 1});
  expect_close(cols, shape, expected, 0, 0);
}

TEST(Slice, OfNonContiguousInputs) {
  auto a = randn({4, 5, 3}, float64);
  auto t = transpose(a, {2, 0, 1}); // (3, 4, 5)
  auto f = flip(a, {1});
  auto b = broadcast_to(randn({1, 5, 1}), {4, 5, 3});
  for (auto& x : {t, f, b}) {
    auto xc = contiguous(x);
    Shape start{-1, 3, 0}, stop{-100, 0, 100}, step{-1, -2, 2};
    auto [shape, expected] = ref_slice(xc, start, stop, step);
    expect_close(slice(x, start, stop, step), shape, expected, 0, 0);
    // A slice of a slice.
    auto inner = slice(slice(x, Shape{1, 1, 0}, Shape{100, 100, 100}), Shape{0, 3, 0}, Shape{-1, 0, 3}, Shape{2, -1, 1});
    auto xs = contiguous(slice(xc, Shape{1, 1, 0}, Shape{100, 100, 100}));
    auto [shape2, expected2] = ref_slice(xs, {0, 3, 0}, {-1, 0, 3}, {2, -1, 1});
    expect_close(inner, shape2, expected2, 0, 0);
  }
}

TEST(Slice, SeveralDtypes) {
  for (Dtype t : {int32, uint8, bool_, float16, bfloat16, int64, float64, int8, uint32}) {
    SCOPED_TRACE(::testing::Message() << t);
    auto a = t == bool_ ? astype(randint({4, 5}, 0, 1), bool_) : randint({4, 5}, 0, 100, t);
    auto out = slice(a, Shape{3, 1}, Shape{0, 5}, Shape{-1, 2});
    EXPECT_EQ(out.dtype(), t);
    auto [shape, expected] = ref_slice(a, Shape{3, 1}, Shape{0, 5}, Shape{-1, 2});
    expect_close(out, shape, expected, 0, 0);
  }
  // complex64 (to_vector keeps only the real part, so read the raw elements).
  std::vector<complex64_t> vals;
  for (int i = 0; i < 12; ++i) vals.push_back(complex64_t(float(i), float(-2 * i)));
  array z(vals.begin(), Shape{3, 4}, complex64);
  auto out = contiguous(slice(z, Shape{2, 3}, Shape{-100, -100}, Shape{-2, -3}));
  eval(out);
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  const complex64_t* p = out.data<complex64_t>();
  int expect_idx[] = {11, 8, 3, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i].real(), float(expect_idx[i]));
    EXPECT_EQ(p[i].imag(), float(-2 * expect_idx[i]));
  }
}

TEST(Slice, ZeroDimAndEmpty) {
  auto s = array(3.5f);
  EXPECT_EQ(slice(s, {}, {}).item<float>(), 3.5f);
  auto a = randn({0, 3});
  auto out = slice(a, {0, 1}, {0, 3});
  eval(out);
  EXPECT_EQ(out.shape(), (Shape{0, 2}));
}

TEST(Slice, BadInput) {
  auto a = randn({3, 4});
  expect_throws_naming<std::invalid_argument>([&] { slice(a, {0}, {1}); }, "[slice]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, Shape{0, 0}, Shape{3, 4}, Shape{1, 0}); }, "[slice]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, Shape{0, 0}, Shape{3, 4}, Shape{1}); }, "[slice]");
}

TEST(Slice, DynamicStartClampsToFit) {
  auto a = randn({5, 6, 4});
  Ref r(a);
  struct Case {
    std::vector<int> starts;
    std::vector<int> axes;
    Shape size;
  };
  std::vector<Case> cases = {
      {{1, 2}, {0, 1}, {3, 2, 4}},
      {{4, 5}, {0, 1}, {3, 2, 4}},  // clamped to 2 and 4
      {{-1, -3}, {1, 2}, {5, 2, 2}}, // from the end: 5 -> clamped 4, 1
      {{-100}, {-1}, {5, 6, 3}},     // clamped to 0
      {{2}, {1}, {4}},               // sizes per axis: only axis 1 windowed
  };
  for (auto& c : cases) {
    array start(c.starts.begin(), Shape{int32_t(c.starts.size())}, int32);
    auto out = slice(a, start, c.axes, c.size);
    Shape full = a.shape();
    if (c.size.size() == a.ndim()) {
      full = c.size;
    } else {
      for (size_t k = 0; k < c.axes.size(); ++k) full[(c.axes[k] + 3) % 3] = c.size[k];
    }
    Index st(3, 0);
    for (size_t k = 0; k < c.axes.size(); ++k) {
      int ax = (c.axes[k] + 3) % 3;
      int64_t v = c.starts[k];
      if (v < 0) v += a.shape(ax);
      st[ax] = std::clamp<int64_t>(v, 0, a.shape(ax) - full[ax]);
    }
    auto expected = build(full, [&](const Index& idx) {
      return r.at({idx[0] + st[0], idx[1] + st[1], idx[2] + st[2]});
    });
    expect_close(out, full, expected, 0, 0);
  }
  // Other integer dtypes for the start.
  auto out = slice(a, array({1, 1}, uint8), {0, 2}, {2, 6, 3});
  auto expected = build({2, 6, 3}, [&](const Index& i) { return r.at({i[0] + 1, i[1], i[2] + 1}); });
  expect_close(out, {2, 6, 3}, expected, 0, 0);
}

TEST(Slice, DynamicBadInput) {
  auto a = randn({3, 4});
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, array({1.0f}), {0}, {1, 4}); }, "[slice]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, array({1, 2}), {0}, {1, 4}); }, "[slice]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, array({1}), {0}, {5, 4}); }, "[slice]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice(a, array({1}), {2}, {1, 4}); }, "[slice]");
}

// ---------------------------------------------------------------------------------------
// slice_update

TEST(SliceUpdate, WritesTheWindow) {
  auto src = randn({5, 6}, float32);
  Shape start{-1, 1}, stop{-100, 6}, step{-2, 2};
  auto rows = py_indices(5, -1, -100, -2), cols = py_indices(6, 1, 6, 2);
  auto upd = randn({int32_t(rows.size()), int32_t(cols.size())}, float32);
  auto out = slice_update(src, upd, start, stop, step);
  Ref rs(src), ru(upd);
  auto expected = build({5, 6}, [&](const Index& i) {
    auto r = std::find(rows.begin(), rows.end(), i[0]);
    auto c = std::find(cols.begin(), cols.end(), i[1]);
    if (r != rows.end() && c != cols.end()) return ru.at({r - rows.begin(), c - cols.begin()});
    return rs.at(i);
  });
  expect_close(out, {5, 6}, expected, 0, 0);
  // src itself is unchanged (arrays are immutable).
  expect_close(src, {5, 6}, rs.v, 0, 0);
}

TEST(SliceUpdate, BroadcastsAndCastsTheUpdate) {
  auto src = randint({4, 5}, -5, 5, int32);
  auto upd = array({2.7f, -1.2f, 0.4f}); // broadcast over rows, cast to int32
  auto out = slice_update(src, upd, Shape{1, 1}, Shape{3, 4});
  EXPECT_EQ(out.dtype(), int32);
  Ref rs(src);
  double vals[] = {2, -1, 0};
  auto expected = build({4, 5}, [&](const Index& i) {
    if (i[0] >= 1 && i[0] < 3 && i[1] >= 1 && i[1] < 4) return vals[i[1] - 1];
    return rs.at(i);
  });
  expect_close(out, {4, 5}, expected, 0, 0);
  // Transposed source and update.
  auto s2 = transpose(randn({6, 4}));
  auto u2 = transpose(randn({3, 2}));
  auto out2 = slice_update(s2, u2, Shape{1, 0}, Shape{3, 6}, Shape{1, 2});
  Ref r2(s2), ru2(u2);
  auto e2 = build({4, 6}, [&](const Index& i) {
    if (i[0] >= 1 && i[0] < 3 && i[1] % 2 == 0) return ru2.at({i[0] - 1, i[1] / 2});
    return r2.at(i);
  });
  expect_close(out2, {4, 6}, e2, 0, 0);
}

TEST(SliceUpdate, Dynamic) {
  auto src = randn({5, 6});
  auto upd = randn({2, 3});
  Ref rs(src), ru(upd);
  // Start (4, -2): clamped to (3, 3).
  auto out = slice_update(src, upd, array({4, -2}), {0, 1});
  auto expected = build({5, 6}, [&](const Index& i) {
    if (i[0] >= 3 && i[1] >= 3) return ru.at({i[0] - 3, i[1] - 3});
    return rs.at(i);
  });
  expect_close(out, {5, 6}, expected, 0, 0);
  // A lower-rank update gets leading size-1 axes.
  auto row = randn({4});
  Ref rr(row);
  auto out2 = slice_update(src, row, array({2, 1}), {0, 1});
  auto e2 = build({5, 6}, [&](const Index& i) {
    if (i[0] == 2 && i[1] >= 1 && i[1] < 5) return rr.at({i[1] - 1});
    return rs.at(i);
  });
  expect_close(out2, {5, 6}, e2, 0, 0);
}

TEST(SliceUpdate, BadInput) {
  auto src = randn({3, 4});
  expect_throws_naming<std::invalid_argument>(
      [&] { slice_update(src, randn({2, 2}), Shape{0, 0}, Shape{3, 4}); }, "[slice_update]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice_update(src, randn({1}), Shape{0, 0}, Shape{3, 4}, Shape{0, 1}); }, "[slice_update]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice_update(src, randn({4, 4}), array({0, 0}), {0, 1}); }, "[slice_update]");
  expect_throws_naming<std::invalid_argument>(
      [&] { slice_update(src, randn({1, 1}), array({0}), {3}); }, "[slice_update]");
}

// ---------------------------------------------------------------------------------------
// split, concatenate, stack, unstack

TEST(Split, ByCountAndIndices) {
  auto a = randn({6, 4});
  Ref r(a);
  auto parts = split(a, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (int p = 0; p < 3; ++p) {
    auto e = build({2, 4}, [&](const Index& i) { return r.at({i[0] + 2 * p, i[1]}); });
    expect_close(parts[p], {2, 4}, e, 0, 0);
  }
  auto cols = split(a, 2, -1);
  auto e1 = build({6, 2}, [&](const Index& i) { return r.at({i[0], i[1] + 2}); });
  expect_close(cols[1], {6, 2}, e1, 0, 0);
  // NumPy: indices [1, 5, 3, 10] -> [0:1], [1:5], [5:3] (empty), [3:10] -> rows 3..5, [10:].
  auto pieces = split(a, Shape{1, 5, 3, 10});
  ASSERT_EQ(pieces.size(), 5u);
  Shape sizes[] = {{1, 4}, {4, 4}, {0, 4}, {3, 4}, {0, 4}};
  int offsets[] = {0, 1, 5, 3, 6};
  for (int p = 0; p < 5; ++p) {
    auto e = build(sizes[p], [&](const Index& i) { return r.at({i[0] + offsets[p], i[1]}); });
    expect_close(pieces[p], sizes[p], e, 0, 0);
  }
  auto neg = split(a, Shape{-2}, 0);
  EXPECT_EQ(neg[0].shape(), (Shape{4, 4}));
  EXPECT_EQ(neg[1].shape(), (Shape{2, 4}));
}

TEST(Split, BadInput) {
  auto a = randn({5, 4});
  expect_throws_naming<std::invalid_argument>([&] { split(a, 2); }, "[split]");
  expect_throws_naming<std::invalid_argument>([&] { split(a, 0); }, "[split]");
  expect_throws_naming<std::invalid_argument>([&] { split(a, 2, 2); }, "[split]");
  expect_throws_naming<std::invalid_argument>([&] { split(a, Shape{1}, -3); }, "[split]");
}

TEST(Concatenate, JoinsAndPromotes) {
  auto a = randint({2, 3}, -9, 9, int32);
  auto b = randn({2, 1}, float32);
  auto c = randint({2, 2}, 0, 9, uint8);
  auto out = concatenate({a, b, c}, -1);
  EXPECT_EQ(out.dtype(), float32);
  Ref ra(a), rb(b), rc(c);
  auto e = build({2, 6}, [&](const Index& i) {
    if (i[1] < 3) return ra.at(i);
    if (i[1] < 4) return rb.at({i[0], 0});
    return rc.at({i[0], i[1] - 4});
  });
  expect_close(out, {2, 6}, e, 1e-6, 0);
  // Non-contiguous inputs along axis 0.
  auto t = transpose(randn({3, 2}));
  auto f = flip(randn({1, 3}), {1});
  auto out0 = concatenate({t, f}, 0);
  Ref rt(t), rf(f);
  auto e0 = build({3, 3}, [&](const Index& i) {
    return i[0] < 2 ? rt.at(i) : rf.at({0, i[1]});
  });
  expect_close(out0, {3, 3}, e0, 0, 0);
  // Without an axis: flattened.
  auto flat = concatenate({randn({2, 2}), randn({3})});
  EXPECT_EQ(flat.shape(), (Shape{7}));
  // Several dtypes.
  for (Dtype dt : {bool_, int16, float16, int64, uint64}) {
    auto x = astype(randint({2, 2}, 0, 1), dt), y = astype(randint({1, 2}, 0, 1), dt);
    auto xy = concatenate({x, y});
    EXPECT_EQ(xy.dtype(), dt);
    auto vx = to_vector(x), vy = to_vector(y);
    vx.insert(vx.end(), vy.begin(), vy.end());
    expect_close(concatenate({x, y}, 0), {3, 2}, vx, 0, 0);
  }
}

TEST(Concatenate, BadInput) {
  expect_throws_naming<std::invalid_argument>([&] { concatenate({}, 0); }, "[concatenate]");
  expect_throws_naming<std::invalid_argument>(
      [&] { concatenate({randn({2, 3}), randn({3, 3})}, 1); }, "[concatenate]");
  expect_throws_naming<std::invalid_argument>(
      [&] { concatenate({randn({2, 3}), randn({3})}, 0); }, "[concatenate]");
  expect_throws_naming<std::invalid_argument>(
      [&] { concatenate({randn({2, 3}), randn({2, 3})}, 2); }, "[concatenate]");
}

TEST(Stack, StacksAndUnstacks) {
  auto a = randn({2, 3}), b = randn({2, 3});
  Ref ra(a), rb(b);
  auto s1 = stack({a, b}, 1);
  auto e = build({2, 2, 3}, [&](const Index& i) {
    return i[1] == 0 ? ra.at({i[0], i[2]}) : rb.at({i[0], i[2]});
  });
  expect_close(s1, {2, 2, 3}, e, 0, 0);
  auto s2 = stack({a, b}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  auto parts = unstack(s1, 1);
  ASSERT_EQ(parts.size(), 2u);
  expect_allclose(parts[0], a, 0, 0);
  expect_allclose(parts[1], b, 0, 0);
  auto rows = unstack(a, -2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].shape(), (Shape{3}));
  expect_throws_naming<std::invalid_argument>([&] { stack({a, randn({3, 2})}); }, "[stack]");
  expect_throws_naming<std::invalid_argument>([&] { stack({}); }, "[stack]");
  expect_throws_naming<std::invalid_argument>([&] { stack({a, b}, 3); }, "[stack]");
  expect_throws_naming<std::invalid_argument>([&] { unstack(a, 2); }, "[unstack]");
  expect_throws_naming<std::invalid_argument>([&] { unstack(array(1.0f)); }, "[unstack]");
}

// ---------------------------------------------------------------------------------------
// repeat, tile

TEST(Repeat, RepeatsElements) {
  auto a = randn({2, 3});
  Ref r(a);
  auto out = repeat(a, 3, 1);
  expect_close(out, {2, 9}, build({2, 9}, [&](const Index& i) { return r.at({i[0], i[1] / 3}); }), 0, 0);
  auto out0 = repeat(a, 2, -2);
  expect_close(out0, {4, 3}, build({4, 3}, [&](const Index& i) { return r.at({i[0] / 2, i[1]}); }), 0, 0);
  auto flat = repeat(a, 2);
  expect_close(flat, {12}, build({12}, [&](const Index& i) { return r.v[i[0] / 2]; }), 0, 0);
  EXPECT_EQ(repeat(a, 0, 0).shape(), (Shape{0, 3}));
  expect_throws_naming<std::invalid_argument>([&] { repeat(a, -1, 0); }, "[repeat]");
  expect_throws_naming<std::invalid_argument>([&] { repeat(a, 2, 2); }, "[repeat]");
}

TEST(Tile, TilesLikeNumPy) {
  auto a = randn({2, 3});
  Ref r(a);
  auto out = tile(a, {2, 3});
  expect_close(out, {4, 9}, build({4, 9}, [&](const Index& i) { return r.at({i[0] % 2, i[1] % 3}); }), 0, 0);
  auto more = tile(a, {2, 1, 2}); // reps longer than ndim: a gains a leading axis
  expect_close(more, {2, 2, 6}, build({2, 2, 6}, [&](const Index& i) { return r.at({i[1], i[2] % 3}); }), 0, 0);
  auto fewer = tile(a, {2}); // reps shorter: applied to the last axes
  expect_close(fewer, {2, 6}, build({2, 6}, [&](const Index& i) { return r.at({i[0], i[1] % 3}); }), 0, 0);
  EXPECT_EQ(tile(a, {0, 1}).shape(), (Shape{0, 3}));
  expect_throws_naming<std::invalid_argument>([&] { tile(a, {-1, 1}); }, "[tile]");
}

// ---------------------------------------------------------------------------------------
// pad

TEST(Pad, ConstantAndEdge) {
  auto a = randn({3, 4}, float32);
  Ref r(a);
  auto out = pad(a, {{1, 2}, {0, 3}}, array(7.5f));
  auto e = build({6, 7}, [&](const Index& i) {
    int64_t x = i[0] - 1, y = i[1];
    return (x >= 0 && x < 3 && y < 4) ? r.at({x, y}) : 7.5;
  });
  expect_close(out, {6, 7}, e, 0, 0);
  auto edge = pad(a, std::vector<int>{1}, Shape{2}, Shape{1}, array(0), "edge");
  auto ee = build({3, 7}, [&](const Index& i) {
    return r.at({i[0], std::clamp<int64_t>(i[1] - 2, 0, 3)});
  });
  expect_close(edge, {3, 7}, ee, 0, 0);
  auto edge2 = pad(a, 2, array(0), "edge");
  auto ee2 = build({7, 8}, [&](const Index& i) {
    return r.at({std::clamp<int64_t>(i[0] - 2, 0, 2), std::clamp<int64_t>(i[1] - 2, 0, 3)});
  });
  expect_close(edge2, {7, 8}, ee2, 0, 0);
  auto ints = pad(randint({2}, 0, 5, int32), {1, 0}, array(2.9));
  EXPECT_EQ(ints.dtype(), int32);
  EXPECT_EQ(to_vector(ints)[0], 2.0);
}

TEST(Pad, BadInput) {
  auto a = randn({3, 4});
  expect_throws_naming<std::invalid_argument>([&] { pad(a, -1); }, "[pad]");
  expect_throws_naming<std::invalid_argument>([&] { pad(a, {{0, 1}, {-2, 0}}); }, "[pad]");
  expect_throws_naming<std::invalid_argument>([&] { pad(a, 1, array(0), "wrap"); }, "[pad]");
  expect_throws_naming<std::invalid_argument>([&] { pad(a, 1, array({1, 2})); }, "[pad]");
  expect_throws_naming<std::invalid_argument>([&] { pad(a, std::vector<int>{2}, Shape{1}, Shape{1}); }, "[pad]");
  expect_throws_naming<std::invalid_argument>(
      [&] { pad(randn({0, 2}), 1, array(0), "edge"); }, "[pad]");
}

// ---------------------------------------------------------------------------------------
// roll, flip

TEST(Roll, AllOverloads) {
  auto a = randn({3, 4});
  Ref r(a);
  auto flat_roll = [&](int64_t k) {
    return build({3, 4}, [&](const Index& i) { return r.v[wrap(i[0] * 4 + i[1] - k, 12)]; });
  };
  expect_close(roll(a, 5), {3, 4}, flat_roll(5), 0, 0);
  expect_close(roll(a, -13), {3, 4}, flat_roll(-13), 0, 0);
  expect_close(roll(a, Shape{2, 3}), {3, 4}, flat_roll(5), 0, 0);
  auto axes_roll = [&](int64_t k0, int64_t k1) {
    return build({3, 4}, [&](const Index& i) { return r.at({wrap(i[0] - k0, 3), wrap(i[1] - k1, 4)}); });
  };
  expect_close(roll(a, 1, 1), {3, 4}, axes_roll(0, 1), 0, 0);
  expect_close(roll(a, -1, -2), {3, 4}, axes_roll(-1, 0), 0, 0);
  expect_close(roll(a, 2, std::vector<int>{0, 1}), {3, 4}, axes_roll(2, 2), 0, 0);
  expect_close(roll(a, Shape{1, 2}, 1), {3, 4}, axes_roll(0, 3), 0, 0);
  expect_close(roll(a, Shape{1, -5}, std::vector<int>{0, 1}), {3, 4}, axes_roll(1, -5), 0, 0);
  expect_close(roll(a, Shape{1, 1}, std::vector<int>{1, 1}), {3, 4}, axes_roll(0, 2), 0, 0);
  EXPECT_EQ(roll(randn({0, 2}), 3, 0).shape(), (Shape{0, 2}));
  expect_throws_naming<std::invalid_argument>([&] { roll(a, 1, 2); }, "[roll]");
  expect_throws_naming<std::invalid_argument>(
      [&] { roll(a, Shape{1, 2, 3}, std::vector<int>{0, 1}); }, "[roll]");
}

TEST(Flip, IsANegativeStrideView) {
  auto a = randn({3, 4}, float32);
  eval(a);
  auto f = flip(a, {1});
  eval(f);
  EXPECT_EQ(f.data_shared_ptr(), a.data_shared_ptr());
  EXPECT_EQ(f.strides(), (Strides{4, -1}));
  Ref r(a);
  expect_close(f, {3, 4}, build({3, 4}, [&](const Index& i) { return r.at({i[0], 3 - i[1]}); }), 0, 0);
  auto all = flip(a);
  expect_close(all, {3, 4}, build({3, 4}, [&](const Index& i) { return r.at({2 - i[0], 3 - i[1]}); }), 0, 0);
  // Flipping twice is the identity, and a flipped view can be copied.
  expect_allclose(flip(flip(a, {0}), {0}), a, 0, 0);
  expect_throws_naming<std::invalid_argument>([&] { flip(a, {2}); }, "[flip]");
}

// ---------------------------------------------------------------------------------------
// diagonal, diag, trace

TEST(Diagonal, OffsetsAndAxes) {
  auto a = randn({3, 4, 5});
  Ref r(a);
  for (int offset : {0, 1, 3, -1, -2, 7, -9}) {
    for (auto [ax1, ax2] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 2}, {2, 1}, {-1, -3}}) {
      SCOPED_TRACE(::testing::Message() << "offset " << offset << " axes " << ax1 << "," << ax2);
      int a1 = (ax1 + 3) % 3, a2 = (ax2 + 3) % 3, other = 3 - a1 - a2;
      int64_t row0 = offset >= 0 ? 0 : -offset, col0 = offset >= 0 ? offset : 0;
      int64_t d = std::max<int64_t>(0, std::min<int64_t>(a.shape(a1) - row0, a.shape(a2) - col0));
      Shape shape{a.shape(other), int32_t(d)};
      auto e = build(shape, [&](const Index& i) {
        Index src(3);
        src[other] = i[0];
        src[a1] = i[1] + row0;
        src[a2] = i[1] + col0;
        return r.at(src);
      });
      expect_close(diagonal(a, offset, ax1, ax2), shape, e, 0, 0);
    }
  }
  expect_throws_naming<std::invalid_argument>([&] { diagonal(randn({3})); }, "[diagonal]");
  expect_throws_naming<std::invalid_argument>([&] { diagonal(a, 0, 1, -2); }, "[diagonal]");
  expect_throws_naming<std::out_of_range>([&] { diagonal(a, 0, 0, 3); }, "[diagonal]");
}

TEST(Diag, BothDirections) {
  auto v = randn({3});
  Ref rv(v);
  for (int k : {0, 2, -1}) {
    int64_t m = 3 + std::abs(k);
    auto e = build({int32_t(m), int32_t(m)}, [&](const Index& i) {
      int64_t j = k >= 0 ? i[0] : i[1];
      return (i[1] - i[0] == k) ? rv.at({j}) : 0.0;
    });
    expect_close(diag(v, k), {int32_t(m), int32_t(m)}, e, 0, 0);
  }
  auto m = randn({3, 4});
  Ref rm(m);
  expect_close(diag(m, 1), {3}, {rm.at({0, 1}), rm.at({1, 2}), rm.at({2, 3})}, 0, 0);
  expect_close(diag(m, -2), {1}, {rm.at({2, 0})}, 0, 0);
  EXPECT_EQ(diag(randn({0}), 2).shape(), (Shape{2, 2}));
  // NaN off the diagonal must not appear (no multiplication by a mask).
  auto nan_in = array({std::nanf(""), 1.0f});
  auto d = to_vector(diag(nan_in));
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_EQ(d[1], 0.0);
  EXPECT_EQ(d[2], 0.0);
  expect_throws_naming<std::invalid_argument>([&] { diag(randn({2, 2, 2})); }, "[diag]");
}

TEST(Trace, SumsTheDiagonal) {
  auto a = randn({4, 5, 3});
  Ref r(a);
  double t0 = 0;
  for (int i = 0; i < 4; ++i) t0 += r.at({i, i, 0});
  auto tr = trace(a, 0, 0, 1);
  ASSERT_EQ(tr.shape(), (Shape{3}));
  EXPECT_NEAR(to_vector(tr)[0], t0, 1e-12);
  auto m = randn({3, 4});
  Ref rm(m);
  EXPECT_NEAR(trace(m).item<double>(), rm.at({0, 0}) + rm.at({1, 1}) + rm.at({2, 2}), 1e-12);
  EXPECT_NEAR(trace(m, 1, 1, 0).item<double>(), rm.at({1, 0}) + rm.at({2, 1}), 1e-12);
  auto i8 = astype(full({20, 20}, 100, int32), int8);
  auto wide = trace(i8, 0, 0, 1, int64);
  EXPECT_EQ(wide.dtype(), int64);
  EXPECT_EQ(wide.item<int64_t>(), 2000);
  EXPECT_EQ(trace(i8).dtype(), int8);
  EXPECT_EQ(trace(m, 10, 0, 1).item<double>(), 0.0);
  expect_throws_naming<std::invalid_argument>([&] { trace(randn({3})); }, "[trace]");
  expect_throws_naming<std::out_of_range>([&] { trace(m, 0, 0, 2); }, "[trace]");
}

// ---------------------------------------------------------------------------------------
// Derivatives (vjp and jvp against finite differences)

TEST(SlicingGrad, Primitives) {
  using V = std::vector<array>;
  check_grad([](const V& x) { return slice(x[0], Shape{3, 0}, Shape{0, 5}, Shape{-1, 2}); }, {randn({4, 5})});
  check_grad(
      [](const V& x) { return slice_update(x[0], x[1], Shape{1, 4}, Shape{-100, 0}, Shape{-1, -2}); },
      {randn({3, 5}), randn({2, 2})});
  check_grad(
      [](const V& x) { return slice(x[0], array({2, -1}), {0, 1}, {2, 3}); }, {randn({5, 4})});
  check_grad(
      [](const V& x) { return slice_update(x[0], x[1], array({1, 1}), {0, 1}); },
      {randn({4, 4}), randn({2, 3})});
  // The start as a function input: its derivative is zero and its tangent is ignored.
  check_grad(
      [](const V& x) { return slice(x[0], x[1], {0, 1}, {2, 3}); },
      {randn({5, 4}), array({2, -1})});
  check_grad(
      [](const V& x) { return slice_update(x[0], x[1], x[2], {1}); },
      {randn({3, 5}), randn({3, 2}), array({2})});
  auto [outs, grads] = vjp(
      [](const V& x) { return V{slice(x[0], x[1], {0}, {1, 3})}; },
      {randn({3, 3}), array({1})},
      {randn({1, 3})});
  EXPECT_EQ(to_vector(grads[1]), std::vector<double>{0.0});
  // Second order: the derivative of a slice's vjp (a SliceUpdate) is itself checked.
  check_grad(
      [](const V& x) {
        auto g = vjp([](const V& y) { return V{slice(y[0], Shape{0, 2}, Shape{3, 0}, Shape{2, -1})}; },
                     {x[0]}, {x[1]}).second[0];
        return g;
      },
      {randn({4, 3}), randn({2, 2})});
  check_grad(
      [](const V& x) { return concatenate({x[0], x[1], x[2]}, 1); },
      {randn({2, 1}), randn({2, 3}), randn({2, 2})});
}

TEST(SlicingGrad, ComposedOps) {
  using V = std::vector<array>;
  check_grad([](const V& x) { return pad(x[0], {{1, 0}, {2, 1}}, array(3.0)); }, {randn({2, 3})});
  check_grad([](const V& x) { return pad(x[0], {{1, 2}, {0, 2}}, array(0), "edge"); }, {randn({2, 3})});
  check_grad([](const V& x) { return roll(x[0], Shape{1, -2}, std::vector<int>{0, 1}); }, {randn({3, 4})});
  check_grad([](const V& x) { return roll(x[0], 5); }, {randn({3, 4})});
  check_grad([](const V& x) { return tile(x[0], {2, 1, 2}); }, {randn({2, 3})});
  check_grad([](const V& x) { return repeat(x[0], 3, 0); }, {randn({2, 3})});
  check_grad([](const V& x) { return diagonal(x[0], 1, 2, 0); }, {randn({3, 2, 4})});
  check_grad([](const V& x) { return trace(x[0], -1, 0, 1); }, {randn({4, 3})});
  check_grad([](const V& x) { return diag(x[0], -1); }, {randn({3})});
  check_grad([](const V& x) { return stack({x[0], x[1]}, 1); }, {randn({2, 3}), randn({2, 3})});
  check_grad([](const V& x) { return split(x[0], Shape{1, 3}, 1)[1]; }, {randn({2, 5})});
  check_grad([](const V& x) { return unstack(x[0], 1)[2]; }, {randn({2, 3})});
  check_grad([](const V& x) { return flip(x[0], {0, 1}); }, {randn({3, 2})});
}

// ---------------------------------------------------------------------------------------
// Batching (vmap against a loop over the batch)

TEST(SlicingVmap, Primitives) {
  using V = std::vector<array>;
  auto sl = [](const V& x) { return V{slice(x[0], Shape{2, 0}, Shape{-100, 3}, Shape{-2, 1})}; };
  check_vmap(sl, {randn({3, 4, 5})}, {0});
  check_vmap(sl, {randn({4, 6, 3})}, {2});
  auto su = [](const V& x) { return V{slice_update(x[0], x[1], Shape{1, 0}, Shape{3, 4}, Shape{1, 2})}; };
  check_vmap(su, {randn({3, 4, 5}), randn({3, 2, 2})}, {0, 0});
  check_vmap(su, {randn({4, 3, 5}), randn({2, 2, 3})}, {1, 2});
  check_vmap(su, {randn({4, 5}), randn({2, 2, 3})}, {-1, 2});
  check_vmap(su, {randn({4, 5, 3}), randn({2, 2})}, {2, -1});
  auto ds = [](const V& x) { return V{slice(x[0], x[1], {1}, {4, 2})}; };
  check_vmap(ds, {randn({3, 4, 5}), array({2})}, {0, -1});
  check_vmap(ds, {randn({4, 5, 3}), randint({3, 1}, -6, 6)}, {2, 0});
  check_vmap(ds, {randn({4, 5}), randint({1, 3}, 0, 4)}, {-1, 1});
  auto dsu = [](const V& x) { return V{slice_update(x[0], x[1], x[2], {0, 1})}; };
  check_vmap(dsu, {randn({3, 4, 5}), randn({3, 2, 2}), array({1, 3})}, {0, 0, -1});
  check_vmap(dsu, {randn({4, 3, 5}), randn({2, 2}), array({1, 3})}, {1, -1, -1});
  check_vmap(dsu, {randn({4, 5}), randn({2, 2, 3}), randint({3, 2}, 0, 4)}, {-1, 2, 0});
  auto cat = [](const V& x) { return V{concatenate({x[0], x[1]}, 1)}; };
  check_vmap(cat, {randn({2, 3, 4}), randn({2, 2})}, {1, -1});
  check_vmap(cat, {randn({3, 2, 1}), randn({2, 3, 2})}, {0, 1});
}

TEST(SlicingVmap, ComposedOps) {
  using V = std::vector<array>;
  auto x = randn({3, 4, 5});
  check_vmap([](const V& v) { return V{pad(v[0], {{1, 2}, {0, 1}}, array(2.0))}; }, {x}, {1});
  check_vmap([](const V& v) { return V{pad(v[0], 1, array(0), "edge")}; }, {x}, {0});
  check_vmap([](const V& v) { return V{roll(v[0], 3)}; }, {x}, {2});
  check_vmap([](const V& v) { return V{roll(v[0], 1, 1)}; }, {x}, {0});
  check_vmap([](const V& v) { return V{tile(v[0], {2, 2})}; }, {x}, {1});
  check_vmap([](const V& v) { return V{repeat(v[0], 2, -1)}; }, {x}, {0});
  check_vmap([](const V& v) { return V{diagonal(v[0], -1)}; }, {x}, {2});
  check_vmap([](const V& v) { return V{trace(v[0], 1, 1, 0)}; }, {x}, {0});
  check_vmap([](const V& v) { return V{stack({v[0], v[1]}, 1)}; }, {x, randn({4, 5})}, {0, -1});
  check_vmap([](const V& v) { return split(v[0], 3, 0); }, {x}, {1});
  check_vmap([](const V& v) { return V{flip(v[0], {0})}; }, {x}, {1});
}

// Donation (array::is_donatable): a src that nothing else refers to when the update runs is
// written in its own buffer; another handle or a view of it keeps its values (the copy path).
namespace {

// src (3, 5, 7) with rows 1..2 of axis 1 replaced by upd (3, 2, 7), row-major.
std::vector<double> window_written(const std::vector<double>& src, const std::vector<double>& upd) {
  std::vector<double> want = src;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 7; ++k) want[(i * 5 + 1 + j) * 7 + k] = upd[(i * 2 + j) * 7 + k];
    }
  }
  return want;
}

} // namespace

TEST(SliceUpdateDonation, WritesInPlaceWhenNothingElseSeesTheSource) {
  array base = randn({3, 5, 7}, float32), upd = randn({3, 2, 7}, float32);
  const auto want = window_written(to_vector(base), to_vector(upd));
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "array start" : "static start");
    array src = fresh_buffer(base);
    std::weak_ptr<array::Data> buffer = watch_buffer(src);
    src = dynamic ? slice_update(src, upd, array({1}, int32), {1}) : slice_update(src, upd, {0, 1, 0}, {3, 3, 7});
    eval(src);
    EXPECT_EQ(src.data_shared_ptr(), buffer.lock()) << "the source's buffer was not reused";
    expect_close(src, {3, 5, 7}, want, 0, 0);
  }
}

TEST(SliceUpdateDonation, CopiesWhileAnotherHandleOrViewSeesTheSource) {
  array base = randn({3, 5, 7}, float32), upd = randn({3, 2, 7}, float32);
  const auto before = to_vector(base);
  const auto want = window_written(before, to_vector(upd));
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "array start" : "static start");
    auto update = [&](const array& src) {
      return dynamic ? slice_update(src, upd, array({1}, int32), {1}) : slice_update(src, upd, {0, 1, 0}, {3, 3, 7});
    };
    // Another handle to the source.
    array src = fresh_buffer(base);
    array keep = src;
    src = update(src);
    eval(src);
    EXPECT_NE(src.data_shared_ptr(), keep.data_shared_ptr());
    expect_close(src, {3, 5, 7}, want, 0, 0);
    expect_close(keep, {3, 5, 7}, before, 0, 0);
    // Only a view of the source: the view keeps the old rows.
    array src2 = fresh_buffer(base);
    array view = slice(src2, {0, 1, 0}, {3, 3, 7});
    eval(view);
    src2 = update(src2);
    eval(src2);
    expect_close(src2, {3, 5, 7}, want, 0, 0);
    expect_allclose(view, slice(base, {0, 1, 0}, {3, 3, 7}), 0, 0);
  }
}

TEST(SliceUpdateDonation, ReadersQueuedBeforeTheUpdateSeeTheOldValues) {
  array base = randn({3, 5, 7}, float32), upd = randn({3, 2, 7}, float32);
  const array old_window_sum = sum(slice(base, {0, 1, 0}, {3, 3, 7}));
  const auto want = window_written(to_vector(base), to_vector(upd));
  // In one graph: a reduction of a view and the update of the viewed source.
  array src = fresh_buffer(base);
  array s = sum(slice(src, {0, 1, 0}, {3, 3, 7}));
  src = slice_update(src, upd, {0, 1, 0}, {3, 3, 7});
  eval({s, src});
  expect_allclose(s, old_window_sum, 1e-6, 1e-6);
  expect_close(src, {3, 5, 7}, want, 0, 0);
  // Queued by async_eval and still running (or just done) when the update is evaluated, as
  // a pipelined decode step leaves the previous step's reads of the KV cache.
  array src2 = fresh_buffer(base);
  array s2 = sum(slice(src2, {0, 1, 0}, {3, 3, 7}));
  async_eval({s2});
  src2 = slice_update(src2, upd, {0, 1, 0}, {3, 3, 7});
  eval(src2);
  expect_allclose(s2, old_window_sum, 1e-6, 1e-6);
  expect_close(src2, {3, 5, 7}, want, 0, 0);
}
