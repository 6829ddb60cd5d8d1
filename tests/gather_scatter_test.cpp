// nuvec tests: take, gather, scatter (None/add/prod/max/min), masked_scatter and
// slice_update_add/prod/max/min against references computed here with index loops, over
// broadcasting index arrays, windows, negative and duplicate indices, dtypes and layouts;
// out-of-range indices (std::out_of_range at eval); errors; derivatives (check_grad) and
// batching (check_vmap).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

using VFn = std::function<std::vector<array>(const std::vector<array>&)>;
using GFn = std::function<array(const std::vector<array>&)>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

int64_t ravel(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + c[d];
  return f;
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int norm_axis(int ax, int nd) {
  return ax < 0 ? ax + nd : ax;
}

// Broadcast shape of the index arrays and their values in row-major order of it.
Shape broadcast_all(const std::vector<array>& idx, std::vector<std::vector<double>>& vals) {
  Shape I;
  for (size_t j = 0; j < idx.size(); ++j) I = j == 0 ? idx[j].shape() : broadcast_shapes(I, idx[j].shape());
  for (auto& ix : idx) vals.push_back(to_vector(broadcast_to(ix, I)));
  return I;
}

// out[i, w] = a[c], c_d = clamp(idx, 0, n - size) + w_d on indexed axes, w_d elsewhere.
std::vector<double> ref_gather(const array& a, const std::vector<array>& idx, std::vector<int> axes, const Shape& sizes) {
  auto av = to_vector(a);
  std::vector<std::vector<double>> iv;
  Shape I = broadcast_all(idx, iv);
  int nd = static_cast<int>(a.ndim());
  for (auto& ax : axes) ax = norm_axis(ax, nd);
  std::vector<double> out;
  for (int64_t i = 0; i < numel(I); ++i) {
    for (int64_t w = 0; w < numel(sizes); ++w) {
      auto c = unravel(w, sizes);
      for (size_t j = 0; j < axes.size(); ++j) {
        int64_t n = a.shape(axes[j]);
        int64_t v = static_cast<int64_t>(iv[j][i]);
        if (v < 0) v += n;
        v = std::clamp<int64_t>(v, 0, n - sizes[axes[j]]);
        c[axes[j]] += v;
      }
      out.push_back(av[ravel(c, a.shape())]);
    }
  }
  return out;
}

enum class Mode { None, Add, Prod, Max, Min };

// Row-major over (I, window): skips positions outside a; the last duplicate wins for None.
std::vector<double> ref_scatter(const array& a, const std::vector<array>& idx, const array& upd, std::vector<int> axes, Mode mode) {
  auto out = to_vector(a);
  std::vector<std::vector<double>> iv;
  Shape I = idx.empty() ? Shape{} : broadcast_all(idx, iv);
  int nd = static_cast<int>(a.ndim());
  for (auto& ax : axes) ax = norm_axis(ax, nd);
  Shape U(upd.shape().end() - nd, upd.shape().end());
  auto uv = to_vector(broadcast_to(upd, concat(I, U)));
  int64_t k = 0;
  for (int64_t i = 0; i < numel(I); ++i) {
    for (int64_t w = 0; w < numel(U); ++w, ++k) {
      auto c = unravel(w, U);
      bool inside = true;
      for (size_t j = 0; j < axes.size(); ++j) {
        int64_t v = static_cast<int64_t>(iv[j][i]);
        if (v < 0) v += a.shape(axes[j]);
        c[axes[j]] += v;
      }
      for (int d = 0; d < nd; ++d) inside = inside && c[d] >= 0 && c[d] < a.shape(d);
      if (!inside) continue;
      double& s = out[ravel(c, a.shape())];
      double u = uv[k];
      switch (mode) {
        case Mode::None: s = u; break;
        case Mode::Add: s += u; break;
        case Mode::Prod: s *= u; break;
        case Mode::Max: s = std::max(s, u); break;
        case Mode::Min: s = std::min(s, u); break;
      }
    }
  }
  return out;
}

array do_scatter(Mode mode, const array& a, const std::vector<array>& idx, const array& upd, const std::vector<int>& axes) {
  switch (mode) {
    case Mode::None: return scatter(a, idx, upd, axes);
    case Mode::Add: return scatter_add(a, idx, upd, axes);
    case Mode::Prod: return scatter_prod(a, idx, upd, axes);
    case Mode::Max: return scatter_max(a, idx, upd, axes);
    case Mode::Min: return scatter_min(a, idx, upd, axes);
  }
  return a;
}

// Window starts in [0, n - size], half of them written as negative indices (start - n).
array starts(const Shape& shape, int n, int size, Dtype dt = int32) {
  auto v = to_vector(randint(shape, 0, n - size, int32));
  auto neg = to_vector(randint(shape, 0, 1, int32));
  for (size_t i = 0; i < v.size(); ++i) {
    if (neg[i] > 0 && !issubdtype(dt, unsignedinteger)) v[i] -= n;
  }
  return astype(array(v.begin(), shape, float64), dt);
}

} // namespace

// ---------------------------------------------------------------------------------------
// take

TEST(Take, AlongAxisAgainstReference) {
  for (Dtype dt : {float32, float64, int32, float16, bool_}) {
    auto a = astype(multiply(randn({3, 4, 5}), array(3.0)), dt);
    for (int axis : {0, 1, 2, -1, -3}) {
      int ax = norm_axis(axis, 3);
      int n = a.shape(ax);
      for (Dtype it : {int32, int64, uint8, int16}) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        Shape is{2, 3};
        int lo = issubdtype(it, unsignedinteger) ? 0 : -n;
        auto idx = randint(is, lo, n - 1, it);
        auto got = take(a, idx, axis);
        Shape expect_shape(a.shape().begin(), a.shape().begin() + ax);
        expect_shape.insert(expect_shape.end(), is.begin(), is.end());
        expect_shape.insert(expect_shape.end(), a.shape().begin() + ax + 1, a.shape().end());
        EXPECT_EQ(got.dtype(), dt);
        // out[pre, j, post] = a[pre, idx[j], post].
        auto av = to_vector(a), iv = to_vector(idx);
        std::vector<double> ref;
        for (int64_t f = 0; f < numel(expect_shape); ++f) {
          auto c = unravel(f, expect_shape);
          std::vector<int64_t> src(c.begin(), c.begin() + ax);
          int64_t j = ravel(std::vector<int64_t>(c.begin() + ax, c.begin() + ax + 2), is);
          int64_t k = static_cast<int64_t>(iv[j]);
          src.push_back(k < 0 ? k + n : k);
          src.insert(src.end(), c.begin() + ax + 2, c.end());
          ref.push_back(av[ravel(src, a.shape())]);
        }
        expect_close(got, expect_shape, ref, 0, 0);
      }
    }
  }
  // Non-contiguous a (transposed, negative-stride slice) and scalar indices.
  auto base = randn({6, 4});
  auto a = slice(transpose(base), Shape{0, 5}, Shape{4, -7}, Shape{1, -1}); // (4, 6), reversed
  auto idx = array({-1, 0, 2, 2}, {2, 2});
  auto ref = ref_gather(a, {idx}, {1}, {4, 1});
  auto got = take(a, idx, 1); // (4, 2, 2)
  auto want = transpose(reshape(array(ref.begin(), {2, 2, 4, 1}, float64), {2, 2, 4}), {2, 0, 1});
  expect_allclose(got, want, 0, 0);
  EXPECT_EQ(take(a, array(3), 0).shape(), (Shape{6}));
  expect_allclose(take(a, 3, 0), squeeze(slice(a, Shape{3, 0}, Shape{4, 6}), 0), 0, 0);
  expect_allclose(take(a, -2, 1), squeeze(slice(a, Shape{0, 4}, Shape{4, 5}), 1), 0, 0);
}

TEST(Take, Flattened) {
  auto a = transpose(randn({4, 3}));
  auto av = to_vector(a);
  auto idx = randint({2, 5}, -12, 11, int64);
  auto iv = to_vector(idx);
  std::vector<double> ref;
  for (double v : iv) ref.push_back(av[static_cast<int>(v < 0 ? v + 12 : v)]);
  expect_close(take(a, idx), {2, 5}, ref, 0, 0);
  expect_close(take(a, -1), {}, {av[11]}, 0, 0);
  expect_close(take(a, 4), {}, {av[4]}, 0, 0);
}

// ---------------------------------------------------------------------------------------
// gather

TEST(Gather, BroadcastIndicesAndWindows) {
  for (Dtype dt : {float32, float64, int32, float16, int8}) {
    auto a = astype(multiply(randn({4, 5, 6}), array(3.0)), dt);
    for (Dtype it : {int32, int64, int16, uint8}) {
      Shape sizes{1, 3, 2};
      auto i0 = starts({3, 1}, 4, 1, it);
      auto i2 = starts({1, 2}, 6, 2, it);
      auto g = gather(a, std::vector<array>{i0, i2}, {0, 2}, sizes);
      EXPECT_EQ(g.dtype(), dt);
      expect_close(g, {3, 2, 1, 3, 2}, ref_gather(a, {i0, i2}, {0, 2}, sizes), 0, 0);
      // Axes in the other order; a negative axis is an error, as in MLX.
      auto g2 = gather(a, std::vector<array>{i2, i0}, {2, 0}, sizes);
      expect_close(g2, {3, 2, 1, 3, 2}, ref_gather(a, {i2, i0}, {2, 0}, sizes), 0, 0);
      EXPECT_THROW(gather(a, std::vector<array>{i2, i0}, {-1, 0}, sizes), std::invalid_argument);
    }
    // Full windows along an indexed axis, the single-index overload, 0-d indices.
    auto i1 = starts({2, 2}, 5, 3);
    expect_close(gather(a, i1, 1, {4, 3, 6}), {2, 2, 4, 3, 6}, ref_gather(a, {i1}, {1}, {4, 3, 6}), 0, 0);
    auto s0 = array(-2);
    expect_close(gather(a, s0, 0, {1, 5, 6}), {1, 5, 6}, ref_gather(a, {s0}, {0}, {1, 5, 6}), 0, 0);
    // No index arrays: a plain window at the origin.
    expect_close(gather(a, std::vector<array>{}, {}, {2, 2, 2}), {2, 2, 2}, ref_gather(a, {}, {}, {2, 2, 2}), 0, 0);
  }
  // Non-contiguous source and indices.
  auto a = transpose(randn({6, 5, 4}), {2, 1, 0});
  auto i0 = transpose(starts({3, 2}, 4, 1));
  auto i1 = starts({2, 1}, 5, 2);
  expect_close(gather(a, std::vector<array>{i0, i1}, {0, 1}, {1, 2, 6}), {2, 3, 1, 2, 6}, ref_gather(a, {i0, i1}, {0, 1}, {1, 2, 6}), 0, 0);
  auto ab = broadcast_to(randn({1, 5, 1}), {4, 5, 6});
  expect_close(gather(ab, std::vector<array>{i0, i1}, {0, 1}, {2, 2, 3}), {2, 3, 2, 2, 3}, ref_gather(ab, {i0, i1}, {0, 1}, {2, 2, 3}), 0, 0);
}

// ---------------------------------------------------------------------------------------
// scatter and its reductions

TEST(Scatter, EveryModeWithDuplicatesAndWindows) {
  for (Mode mode : {Mode::None, Mode::Add, Mode::Prod, Mode::Max, Mode::Min}) {
    for (Dtype dt : {float32, float64, int32, float16, bfloat16}) {
      SCOPED_TRACE("mode " + std::to_string(static_cast<int>(mode)));
      auto scale = mode == Mode::Prod ? 1.0 : 4.0;
      auto a = astype(multiply(randn({4, 5, 6}), array(scale)), dt);
      // 12 index positions into 4 x 6 starts: duplicates are likely.
      auto i0 = starts({3, 1}, 4, 1, int64);
      auto i2 = starts({1, 4}, 6, 2, int16);
      auto upd = astype(multiply(randn({3, 4, 1, 3, 2}), array(scale)), dt);
      auto got = do_scatter(mode, a, {i0, i2}, upd, {0, 2});
      EXPECT_EQ(got.dtype(), dt);
      double tol = dt == float32 ? 1e-5 : dt == float16 ? 2e-2 : dt == bfloat16 ? 1e-1 : 1e-12;
      expect_close(got, a.shape(), ref_scatter(a, {i0, i2}, upd, {0, 2}, mode), tol, tol);
      // Forced duplicates on one position (scatter keeps the last in row-major order).
      auto dup = array({1, -3, 1, 1});
      auto u2 = astype(multiply(randn({4, 4, 1, 6}), array(scale)), dt);
      expect_close(do_scatter(mode, a, {dup}, u2, {1}), a.shape(), ref_scatter(a, {dup}, u2, {1}, mode), tol, tol);
    }
  }
  // Updates broadcast over the index dimensions; another update dtype is cast; transposed a.
  auto a = transpose(randn({5, 4}));
  auto idx = array({0, 2, -1});
  auto u = astype(randn({1, 1, 5}), float32);
  auto got = scatter_add(a, idx, u, 0);
  EXPECT_EQ(got.dtype(), float64);
  expect_close(got, {4, 5}, ref_scatter(a, {idx}, astype(u, float64), {0}, Mode::Add), 1e-6, 1e-6);
  // Single-index overloads of every mode, bool dtype (add is or, prod is and).
  auto b = array({true, false, false, true});
  auto bu = array({true, false}, {2, 1});
  auto bi = array({1, 3});
  expect_close(scatter_add(b, bi, bu, 0), {4}, {1, 1, 0, 1}, 0, 0);
  expect_close(scatter_prod(b, bi, bu, 0), {4}, {1, 0, 0, 0}, 0, 0);
  expect_close(scatter(b, bi, bu, 0), {4}, {1, 1, 0, 0}, 0, 0);
  expect_close(scatter_max(array({1.0, 5.0}), array({0, 0, 1}), array({3.0, 2.0, 4.0}, {3, 1}), 0), {2}, {3, 5});
  expect_close(scatter_min(array({1.0, 5.0}), array({0, 0, 1}), array({3.0, -2.0, 4.0}, {3, 1}), 0), {2}, {-2, 4});
}

TEST(Scatter, WindowsOverrunningTheAxis) {
  // In-range starts whose window does not fit (JAX's dynamic slices): a gather moves the
  // start back so the window fits, a scatter drops the part of the window outside.
  auto a = array({10.0, 20.0, 30.0, 40.0});
  expect_close(gather(a, array({3, -1, 1}), 0, {2}), {3, 2}, {30, 40, 30, 40, 20, 30});
  auto u = array({1.0, 2.0, 3.0, 4.0}, {2, 2});
  expect_close(scatter(a, array({3, 1}), u, 0), {4}, {10, 3, 4, 1});
  expect_close(scatter_add(a, array({-1, 0}), u, 0), {4}, {13, 24, 30, 41});
}

// ---------------------------------------------------------------------------------------
// Index values outside [-n, n): std::out_of_range at eval, naming the op, the value and n

namespace {

// Runs f, which must throw std::out_of_range whose message names op, holds the bad index
// value and the axis size n.
template <typename F>
void expect_index_error(F&& f, const std::string& op, int64_t bad, int64_t n) {
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
}

// Valid random indices for an axis of size n (both signs) with one value outside
// [-n, n) at a random position; `bad` receives it.
array with_bad_index(const Shape& shape, int n, int64_t& bad, Dtype dt = int32) {
  auto v = to_vector(randint(shape, -n, n - 1, int64));
  auto pick = to_vector(randint({3}, 0, 1 << 20, int64));
  size_t at = static_cast<size_t>(pick[0]) % v.size();
  int64_t off = static_cast<int64_t>(pick[1]) % 5;
  bad = pick[2] > (1 << 19) ? n + off : -n - 1 - off;
  v[at] = static_cast<double>(bad);
  return astype(array(v.begin(), shape, float64), dt);
}

} // namespace

TEST(GatherScatter, OutOfRangeIndicesThrowAtEval) {
  for (Dtype it : {int32, int64, int16}) {
    SCOPED_TRACE(::testing::Message() << "index dtype " << it);
    auto a = randn({4, 5, 6});
    int64_t bad;
    // take: each axis, the flattened form.
    for (int axis : {0, 1, 2}) {
      auto idx = with_bad_index({2, 3}, a.shape(axis), bad, it);
      expect_index_error([&] { eval(take(a, idx, axis)); }, "take", bad, a.shape(axis));
    }
    auto fi = with_bad_index({7}, 120, bad, it);
    expect_index_error([&] { eval(take(a, fi)); }, "take", bad, 120);
    // gather over two axes: the bad value on either.
    auto good0 = randint({3, 1}, -4, 3, it);
    auto bad2 = with_bad_index({1, 2}, 6, bad, it);
    expect_index_error([&] { eval(gather(a, std::vector<array>{good0, bad2}, {0, 2}, {1, 2, 1})); }, "gather", bad, 6);
    auto bad0 = with_bad_index({3, 1}, 4, bad, it);
    expect_index_error([&] { eval(gather(a, std::vector<array>{bad0, randint({1, 2}, -6, 5, it)}, {0, 2}, {1, 5, 1})); }, "gather", bad, 4);
    // Every scatter mode.
    auto si = with_bad_index({3}, 5, bad, it);
    auto u = randn({3, 4, 1, 6});
    expect_index_error([&] { eval(scatter(a, si, u, 1)); }, "scatter", bad, 5);
    expect_index_error([&] { eval(scatter_add(a, si, u, 1)); }, "scatter_add", bad, 5);
    expect_index_error([&] { eval(scatter_prod(a, si, u, 1)); }, "scatter_prod", bad, 5);
    expect_index_error([&] { eval(scatter_max(a, si, u, 1)); }, "scatter_max", bad, 5);
    expect_index_error([&] { eval(scatter_min(a, si, u, 1)); }, "scatter_min", bad, 5);
  }
  // uint64 values above int64's range do not wrap to negative (valid) indices.
  auto a = randn({5});
  auto huge = array({uint64_t(1), (uint64_t(1) << 63) + 3});
  try {
    eval(take(a, huge, 0));
    ADD_FAILURE() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("[take]"), std::string::npos) << e.what();
  }
  // A scalar index is checked when take is called (MLX), before any eval.
  int n = a.shape(0);
  for (int bad : {n, n + 3, -n - 1, -n - 7}) {
    expect_throws_naming<std::out_of_range>([&] { take(a, bad, 0); }, "[take]");
    expect_throws_naming<std::out_of_range>([&] { take(a, bad); }, "[take]");
  }
}

TEST(GatherScatter, IndexErrorZeroesTheOutputAndIsRaisedOnce) {
  auto a = randn({6, 3});
  int64_t bad;
  auto idx = with_bad_index({4}, 6, bad);
  array y = take(a, idx, 0);
  EXPECT_THROW(eval(y), std::out_of_range);
  // The failed node holds zeros, and the error does not leak into the next eval.
  for (double v : to_vector(y)) EXPECT_EQ(v, 0.0);
  auto good = randint({4}, -6, 5);
  array z = take(a, good, 0);
  EXPECT_NO_THROW(eval(z));
  auto av = to_vector(a), gv = to_vector(good);
  std::vector<double> want;
  for (double g : gv) {
    int r = static_cast<int>(g < 0 ? g + 6 : g);
    for (int c = 0; c < 3; ++c) want.push_back(av[r * 3 + c]);
  }
  expect_close(z, {4, 3}, want, 0, 0);
  // Through vmap, the batched gather still names take.
  auto f = vmap([&](const array& x) { return take(x, idx, 0); }, 0);
  expect_index_error([&] { eval(f(randn({2, 6, 3}))); }, "take", bad, 6);
  // Through grad: the forward gather fails first, with its own type.
  auto g = grad([&](const array& x) { return sum(take(x, idx, 0)); });
  EXPECT_THROW(eval(g(a)), std::out_of_range);
}

// ---------------------------------------------------------------------------------------
// masked_scatter

TEST(MaskedScatter, PlaceSemantics) {
  for (Dtype dt : {float32, float64, int32}) {
    auto a = astype(multiply(randn({3, 4, 5}), array(4.0)), dt);
    auto mask = greater(randn({3, 4, 5}), array(0.0));
    auto src = astype(multiply(randn({7, 11}), array(4.0)), dt); // more than enough
    auto av = to_vector(a), mv = to_vector(mask), sv = to_vector(src);
    std::vector<double> ref = av;
    size_t k = 0;
    for (size_t p = 0; p < ref.size(); ++p) {
      if (mv[p] != 0) ref[p] = sv[k++ % sv.size()];
    }
    auto got = masked_scatter(a, mask, src);
    EXPECT_EQ(got.dtype(), dt);
    expect_close(got, a.shape(), ref, 0, 0);
  }
  // A broadcast mask; a short src cycles (NumPy's place); src of another dtype; a transposed.
  auto a = transpose(randn({4, 3}));
  auto mask = array({true, false, true, true}, {1, 4});
  auto src = array({1.5f, -2.5f});
  expect_close(masked_scatter(a, mask, src), {3, 4},
               [&] {
                 auto v = to_vector(a);
                 double s[2] = {1.5, -2.5};
                 int k = 0;
                 for (int i = 0; i < 3; ++i)
                   for (int j : {0, 2, 3}) v[i * 4 + j] = s[k++ % 2];
                 return v;
               }());
}

// ---------------------------------------------------------------------------------------
// slice_update_add / prod / max / min

TEST(SliceUpdateReduce, AgainstReference) {
  auto src = randn({5, 6});
  Shape start{4, 1}, stop{-6, 6}, strides{-2, 2}; // rows 4, 2, 0; cols 1, 3, 5
  auto upd = randn({3, 3});
  std::vector<int> rows{4, 2, 0}, cols{1, 3, 5};
  auto sv = to_vector(src), uv = to_vector(upd);
  using Op = std::function<double(double, double)>;
  std::vector<std::pair<std::function<array(const array&, const array&)>, Op>> cases = {
      {[&](const array& s, const array& u) { return slice_update_add(s, u, start, stop, strides); }, [](double x, double y) { return x + y; }},
      {[&](const array& s, const array& u) { return slice_update_prod(s, u, start, stop, strides); }, [](double x, double y) { return x * y; }},
      {[&](const array& s, const array& u) { return slice_update_max(s, u, start, stop, strides); }, [](double x, double y) { return std::max(x, y); }},
      {[&](const array& s, const array& u) { return slice_update_min(s, u, start, stop, strides); }, [](double x, double y) { return std::min(x, y); }},
  };
  for (auto& [fn, op] : cases) {
    auto ref = sv;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) ref[rows[i] * 6 + cols[j]] = op(sv[rows[i] * 6 + cols[j]], uv[i * 3 + j]);
    expect_close(fn(src, upd), {5, 6}, ref, 1e-12, 1e-12);
  }
  // Without strides, a broadcast update, an int src (the result keeps src's dtype).
  auto isrc = astype(multiply(randn({3, 4}), array(5.0)), int32);
  auto got = slice_update_add(isrc, array(2), {1, 0}, {3, 4});
  auto ref = to_vector(isrc);
  for (int i = 4; i < 12; ++i) ref[i] += 2;
  EXPECT_EQ(got.dtype(), int32);
  expect_close(got, {3, 4}, ref, 0, 0);
  expect_close(slice_update_max(isrc, array(0), {0, 0}, {3, 4}), {3, 4},
               [&] { auto v = to_vector(isrc); for (auto& x : v) x = std::max(x, 0.0); return v; }(), 0, 0);
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(GatherScatter, Errors) {
  auto a = randn({3, 4});
  auto i = array({0, 1});
  expect_throws_naming<std::invalid_argument>([&] { gather(a, std::vector<array>{i, i}, {0}, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, std::vector<array>{array({0.5})}, {0}, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, i, 0, {1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, i, 0, {1, 5}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, std::vector<array>{i, i}, {1, -1}, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, std::vector<array>{i, array({0, 1, 2})}, {0, 1}, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, i, 2, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { gather(a, array({true}), 0, {1, 1}); }, "[gather]");
  expect_throws_naming<std::invalid_argument>([&] { take(a, array({1.0}), 0); }, "[take]");
  expect_throws_naming<std::invalid_argument>([&] { take(a, i, -3); }, "[take]");
  expect_throws_naming<std::out_of_range>([&] { take(a, 3, 0); }, "[take]");
  expect_throws_naming<std::out_of_range>([&] { take(a, -13); }, "[take]");
  auto u = randn({2, 1, 4});
  expect_throws_naming<std::invalid_argument>([&] { scatter(a, i, randn({2, 4}), 0); }, "[scatter]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_add(a, i, randn({2, 1, 5}), 0); }, "[scatter_add]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_prod(a, i, randn({3, 1, 4}), 0); }, "[scatter_prod]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_max(a, std::vector<array>{i}, u, {0, 1}); }, "[scatter_max]");
  expect_throws_naming<std::invalid_argument>([&] { scatter_min(a, array({0.0}), randn({1, 1, 4}), 0); }, "[scatter_min]");
  expect_throws_naming<std::invalid_argument>([&] { scatter(a, i, u, 2); }, "[scatter]");
  expect_throws_naming<std::invalid_argument>([&] { masked_scatter(a, ones({3, 4}), randn({12})); }, "[masked_scatter]");
  expect_throws_naming<std::invalid_argument>([&] { masked_scatter(a, array({true, false}), randn({12})); }, "[masked_scatter]");
  expect_throws_naming<std::invalid_argument>([&] { masked_scatter(a, array(true), zeros({0})); }, "[masked_scatter]");
  expect_throws_naming<std::invalid_argument>([&] { slice_update_add(a, randn({2, 3}), {0, 0}, {3, 4}); }, "[slice_update_add]");
  expect_throws_naming<std::invalid_argument>([&] { slice_update_max(a, randn({2}), {0}, {3, 4}); }, "[slice_update_max]");
}

// ---------------------------------------------------------------------------------------
// Derivatives

TEST(GatherScatterGrad, TakeAndGather) {
  auto a = randn({4, 5});
  // 6 picks from 4 rows / 5 columns: duplicates accumulate in the reverse rule.
  auto idx = randint({2, 3}, -4, 3, int32);
  check_grad([&](const std::vector<array>& in) { return take(in[0], in[1], 0); }, {a, idx});
  check_grad([&](const std::vector<array>& in) { return take(in[0], in[1], -1); }, {a, randint({6}, -5, 4, int64)});
  check_grad([&](const std::vector<array>& in) { return take(in[0], in[1]); }, {a, randint({7}, -20, 19, int32)});
  auto b = randn({4, 5, 3});
  auto i0 = starts({3, 1}, 4, 2), i1 = starts({1, 4}, 5, 2);
  check_grad([&](const std::vector<array>& in) { return gather(in[0], std::vector<array>{in[1], in[2]}, {0, 1}, {2, 2, 3}); }, {b, i0, i1});
  // The gradient counts how often each element was picked.
  auto g = grad([&](const array& x) { return sum(take(x, array({1, 1, -4, 3}), 0)); })(randn({4}));
  expect_close(g, {4}, {1, 2, 0, 1}, 0, 0);
}

TEST(GatherScatterGrad, ScatterModes) {
  auto a = randn({4, 5});
  // scatter (None) with unique positions: overwritten positions get no gradient.
  auto uniq = array({3, -4, 1});
  check_grad([&](const std::vector<array>& in) { return scatter(in[0], in[1], in[2], 0); }, {a, uniq, randn({3, 1, 5})});
  // scatter_add with duplicates and windows.
  auto dup = array({1, 1, -3, 0, 2});
  check_grad([&](const std::vector<array>& in) { return scatter_add(in[0], in[1], in[2], 1); }, {a, dup, randn({5, 4, 2})});
  check_grad([&](const std::vector<array>& in) { return scatter_add(in[0], std::vector<array>{in[1], in[2]}, in[3], {0, 1}); },
             {a, starts({3, 1}, 4, 1), starts({1, 2}, 5, 2), randn({3, 2, 1, 2})});
  // max / min (random values: no ties), reverse and forward mode.
  check_grad([&](const std::vector<array>& in) { return scatter_max(in[0], in[1], in[2], 1); }, {a, dup, randn({5, 4, 1})});
  check_grad([&](const std::vector<array>& in) { return scatter_min(in[0], in[1], in[2], 0); }, {a, array({0, 0, -1}), randn({3, 1, 5})});
  // prod (no MLX rule): duplicates, and zeros among the updates (one and two at a position).
  check_grad([&](const std::vector<array>& in) { return scatter_prod(in[0], in[1], in[2], 0); }, {a, array({1, 1, 3}), randn({3, 1, 5})});
  auto zu = randn({3, 1, 5});
  zu = where(array({true, false, true, false, false, false, false, false, true, false, true, false, false, false, false}, {3, 1, 5}), zeros_like(zu), zu);
  auto [outs, vjps] = vjp(
      [&](const std::vector<array>& in) { return std::vector<array>{scatter_prod(in[0], array({1, 1, 2}), in[1], 0)}; },
      {a, zu}, {ones({4, 5}, float64)});
  // Reference: d/du_j = a[c] * product of the other updates at c.
  auto av = to_vector(a), uv = to_vector(zu);
  std::vector<double> ref_u(15), ref_a(20, 1.0);
  int rows[3] = {1, 1, 2};
  for (int j = 0; j < 3; ++j) {
    for (int c = 0; c < 5; ++c) {
      double p = av[rows[j] * 5 + c];
      for (int k = 0; k < 3; ++k) {
        if (k != j && rows[k] == rows[j]) p *= uv[k * 5 + c];
      }
      ref_u[j * 5 + c] = p;
      ref_a[rows[j] * 5 + c] *= uv[j * 5 + c];
    }
  }
  expect_close(vjps[0], {4, 5}, ref_a, 1e-12, 1e-12);
  expect_close(vjps[1], {3, 1, 5}, ref_u, 1e-12, 1e-12);
  check_grad([&](const std::vector<array>& in) { return scatter_prod(in[0], in[1], in[2], 0); }, {a, array({1, 1, 2}), zu});
}

TEST(GatherScatterGrad, MaskedScatterAndSliceUpdateAdd) {
  auto a = randn({3, 4});
  auto mask = greater(randn({3, 4}), array(0.0));
  check_grad([&](const std::vector<array>& in) { return masked_scatter(in[0], mask, in[1]); }, {a, randn({5})});
  // A short src is reused: its gradient accumulates.
  check_grad([&](const std::vector<array>& in) { return masked_scatter(in[0], mask, in[1]); }, {a, randn({2})});
  check_grad([&](const std::vector<array>& in) { return slice_update_add(in[0], in[1], {0, 3}, {3, -5}, {2, -1}); }, {a, randn({2, 4})});
  check_grad([&](const std::vector<array>& in) { return slice_update_max(in[0], in[1], {1, 0}, {3, 4}); }, {a, randn({2, 4})});
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(GatherScatterVmap, GatherAndTake) {
  auto a = randn({3, 4, 5});        // batch 3 on axis 0
  auto at = randn({4, 3, 5});       // batch on axis 1
  auto i0 = starts({3, 2, 1}, 4, 2); // batched indices (per example (2, 1))
  auto i1 = starts({1, 3}, 5, 1);    // unbatched
  // Per example: a (4, 5), i0 (2, 1) on axis 0, i1 (1, 3) on axis 1.
  VFn g2 = [](const std::vector<array>& in) { return std::vector<array>{gather(in[0], std::vector<array>{in[1], in[2]}, {0, 1}, {2, 1})}; };
  check_vmap(g2, {a, i0, i1}, {0, 0, -1});
  check_vmap(g2, {a, starts({2, 1}, 4, 2), i1}, {0, -1, -1});
  check_vmap(g2, {randn({4, 5}), i0, i1}, {-1, 0, -1});
  check_vmap(g2, {at, i0, transpose(starts({3, 1, 3}, 5, 1), {1, 0, 2})}, {1, 0, 1});
  VFn t = [](const std::vector<array>& in) { return std::vector<array>{take(in[0], in[1], 1)}; };
  check_vmap(t, {a, randint({3, 2, 2}, -5, 4)}, {0, 0});
  check_vmap(t, {a, randint({2, 2}, -5, 4)}, {0, -1});
  check_vmap(t, {randn({4, 5}), randint({3, 6}, -5, 4)}, {-1, 0});
  VFn tf = [](const std::vector<array>& in) { return std::vector<array>{take(in[0], in[1])}; };
  check_vmap(tf, {at, randint({3, 4}, -20, 19)}, {1, 0});
}

TEST(GatherScatterVmap, ScatterModesAndMaskedScatter) {
  auto a = randn({3, 4, 5});
  auto idx = array({1, -1, 1, 0, 2, 0}, {3, 2}); // per example (2): duplicates
  auto upd = randn({3, 2, 1, 5});
  auto uidx = array({2, 0});
  for (int m = 0; m < 5; ++m) {
    SCOPED_TRACE("mode " + std::to_string(m));
    Mode mode = static_cast<Mode>(m);
    VFn f = [mode](const std::vector<array>& in) { return std::vector<array>{do_scatter(mode, in[0], {in[1]}, in[2], {0})}; };
    check_vmap(f, {a, idx, upd}, {0, 0, 0});
    check_vmap(f, {a, uidx, randn({2, 1, 5})}, {0, -1, -1});
    check_vmap(f, {randn({4, 5}), idx, upd}, {-1, 0, 0});
    check_vmap(f, {randn({4, 5}), idx, randn({2, 1, 5})}, {-1, 0, -1});
    check_vmap(f, {a, idx, randn({2, 1, 5})}, {0, 0, -1});
    check_vmap(f, {randn({4, 5}), uidx, transpose(upd, {1, 2, 0, 3})}, {-1, -1, 2});
  }
  // Two index arrays with windows.
  VFn f2 = [](const std::vector<array>& in) { return std::vector<array>{scatter_add(in[0], std::vector<array>{in[1], in[2]}, in[3], {1, 0})}; };
  check_vmap(f2, {a, starts({3, 2}, 5, 2), starts({2}, 4, 1), randn({3, 2, 1, 2})}, {0, 0, -1, 0});
  VFn ms = [](const std::vector<array>& in) { return std::vector<array>{masked_scatter(in[0], in[1], in[2])}; };
  auto mask = greater(randn({3, 4, 5}), array(0.0));
  check_vmap(ms, {a, mask, randn({3, 7})}, {0, 0, 0});
  check_vmap(ms, {a, greater(randn({4, 5}), array(0.0)), randn({3, 7})}, {0, -1, 0});
  check_vmap(ms, {randn({4, 5}), mask, randn({30})}, {-1, 0, -1});
  VFn su = [](const std::vector<array>& in) { return std::vector<array>{slice_update_add(in[0], in[1], {1, 0}, {3, 5}, {1, 2})}; };
  check_vmap(su, {a, randn({3, 2, 3})}, {0, 0});
}
