// nuvec tests: shape and view ops (reshape, flatten, squeeze, expand_dims, transpose,
// swapaxes, moveaxis, broadcast, atleast_nd, view, contiguous, stop_gradient, depends):
// forward values against index arithmetic written here, buffer sharing of views, layout
// flags, errors, and derivatives / batching through the generic checker.
#include <cstring>
#include <numeric>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// 0, 1, ..., n-1 as float64 in `shape`, built without any op under test.
array iota(const Shape& shape, Dtype dtype = float64) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return astype(array(v.begin(), shape, float64), dtype);
}

bool shares_buffer(const array& a, const array& b) {
  return a.data_shared_ptr() == b.data_shared_ptr();
}

// Row-major flat index -> multi-index.
std::vector<int> unravel(size_t flat, const Shape& shape) {
  std::vector<int> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = static_cast<int>(flat % shape[d]);
    flat /= shape[d];
  }
  return idx;
}

size_t ravel(const std::vector<int>& idx, const Shape& shape) {
  size_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// The reference transpose of row-major values.
std::vector<double> ref_transpose(const std::vector<double>& v, const Shape& shape,
                                  const std::vector<int>& perm) {
  Shape out_shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_shape[i] = shape[perm[i]];
  std::vector<double> out(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    auto oi = unravel(k, out_shape);
    std::vector<int> ii(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) ii[perm[i]] = oi[i];
    out[k] = v[ravel(ii, shape)];
  }
  return out;
}

} // namespace

// ---- reshape --------------------------------------------------------------------------

TEST(Reshape, ValuesAndInference) {
  auto a = randn({2, 3, 4});
  auto v = to_vector(a);
  auto b = reshape(a, {4, -1});
  EXPECT_EQ(b.shape(), (Shape{4, 6}));
  expect_close(b, {4, 6}, v, 0, 0);
  expect_close(reshape(a, {-1}), {24}, v, 0, 0);
  expect_close(reshape(a, {1, 24, 1}), {1, 24, 1}, v, 0, 0);
  expect_close(reshape(array(3.5), {1, 1}), {1, 1}, {3.5});
  expect_close(reshape(zeros({0, 3}), {3, 0}), {3, 0}, {});
  // Same shape: the input itself.
  EXPECT_EQ(reshape(a, {2, 3, 4}).id(), a.id());
}

TEST(Reshape, ContiguousInputIsAView) {
  auto a = randn({4, 6});
  eval(a);
  auto b = reshape(a, {2, 12});
  eval(b);
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_EQ(b.raw_data(), a.raw_data());
  EXPECT_TRUE(b.flags().row_contiguous);
  EXPECT_EQ(b.strides(), (Strides{12, 1}));
}

TEST(Reshape, NonContiguousInputCopies) {
  auto a = randn({3, 4});
  auto t = transpose(a);
  auto b = reshape(t, {12});
  eval(a, b);
  EXPECT_FALSE(shares_buffer(a, b));
  EXPECT_TRUE(b.flags().row_contiguous);
  expect_close(b, {12}, ref_transpose(to_vector(a), {3, 4}, {1, 0}), 0, 0);
}

TEST(Reshape, StridedViewWhenLayoutAllows) {
  // Transposing then splitting an axis keeps each merged group contiguous: no copy.
  auto a = randn({4, 6});
  auto t = transpose(a); // (6, 4), strides (1, 6)
  auto b = reshape(t, {2, 3, 4});
  eval(a, b);
  EXPECT_TRUE(shares_buffer(a, b));
  expect_close(b, {2, 3, 4}, ref_transpose(to_vector(a), {4, 6}, {1, 0}), 0, 0);
  // A broadcast splits without copying too.
  auto c = broadcast_to(randn({1, 3}), {4, 3});
  auto d = reshape(c, {2, 2, 3});
  eval(c, d);
  EXPECT_TRUE(shares_buffer(c, d));
  expect_allclose(d, reshape(contiguous(c), {2, 2, 3}), 0, 0);
}

TEST(Reshape, NegativeAndSlicedStrides) {
  // A reversed view (negative strides) and a strided slice read correctly.
  auto a = randn({3, 4});
  auto v = to_vector(a);
  auto r = reshape(flip(a, {1}), {12});
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i)
    for (int j = 3; j >= 0; --j) expected.push_back(v[i * 4 + j]);
  expect_close(r, {12}, expected, 0, 0);
  auto sl = slice(a, Shape{0, 1}, Shape{3, 4}, Shape{2, 2}); // rows 0, 2; columns 1, 3
  auto c = reshape(sl, {4});
  expect_close(c, {4}, {v[1], v[3], v[9], v[11]}, 0, 0);
  auto t = contiguous(transpose(flip(a)));
  expected.clear();
  for (int j = 3; j >= 0; --j)
    for (int i = 2; i >= 0; --i) expected.push_back(v[i * 4 + j]);
  expect_close(t, {4, 3}, expected, 0, 0);
}

TEST(Reshape, Errors) {
  auto a = zeros({2, 3});
  expect_throws_naming<std::invalid_argument>([&] { reshape(a, {4, 2}); }, "[reshape]");
  expect_throws_naming<std::invalid_argument>([&] { reshape(a, {-1, -1}); }, "[reshape]");
  expect_throws_naming<std::invalid_argument>([&] { reshape(a, {4, -1}); }, "[reshape]");
  expect_throws_naming<std::invalid_argument>([&] { reshape(a, {-2, -3}); }, "[reshape]");
  expect_throws_naming<std::invalid_argument>(
      [&] { reshape(zeros({0, 2}), {0, -1}); }, "[reshape]");
}

TEST(Flatten, Values) {
  auto a = randn({2, 3, 4});
  auto v = to_vector(a);
  expect_close(flatten(a), {24}, v, 0, 0);
  expect_close(flatten(a, 1, 2), {2, 12}, v, 0, 0);
  expect_close(flatten(a, 0, 1), {6, 4}, v, 0, 0);
  expect_close(flatten(a, -2, -1), {2, 12}, v, 0, 0);
  expect_close(flatten(array(2.0)), {1}, {2.0});
  expect_throws_naming<std::invalid_argument>([&] { flatten(a, 2, 1); }, "[flatten]");
  expect_throws_naming<std::invalid_argument>([&] { flatten(a, 3, 3); }, "[flatten]");
}

TEST(Unflatten, Values) {
  auto a = randn({2, 12});
  auto v = to_vector(a);
  expect_close(unflatten(a, 1, {3, -1}), {2, 3, 4}, v, 0, 0);
  expect_close(unflatten(a, -2, {1, 2}), {1, 2, 12}, v, 0, 0);
  expect_throws_naming<std::invalid_argument>([&] { unflatten(a, 1, {5, -1}); }, "[unflatten]");
  expect_throws_naming<std::invalid_argument>([&] { unflatten(a, 1, {}); }, "[unflatten]");
  expect_throws_naming<std::invalid_argument>([&] { unflatten(a, 2, {12}); }, "[unflatten]");
}

// ---- squeeze / expand_dims ------------------------------------------------------------

TEST(Squeeze, ValuesAndViews) {
  auto a = randn({1, 3, 1, 2});
  eval(a);
  auto v = to_vector(a);
  auto b = squeeze(a);
  auto c = squeeze(a, 2);
  auto d = squeeze(a, {0, -2});
  eval(b, c, d);
  expect_close(b, {3, 2}, v, 0, 0);
  expect_close(c, {1, 3, 2}, v, 0, 0);
  expect_close(d, {3, 2}, v, 0, 0);
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_EQ(b.raw_data(), a.raw_data());
  EXPECT_TRUE(b.flags().row_contiguous);
  // Squeezing a transposed view keeps its strides.
  auto t = transpose(randn({2, 1, 3}));
  auto st = squeeze(t, 1);
  eval(t, st);
  EXPECT_EQ(st.strides(), (Strides{1, 3}));
  expect_allclose(st, reshape(contiguous(t), {3, 2}), 0, 0);
}

TEST(Squeeze, Errors) {
  auto a = zeros({1, 3});
  expect_throws_naming<std::invalid_argument>([&] { squeeze(a, 1); }, "[squeeze]");
  expect_throws_naming<std::invalid_argument>([&] { squeeze(a, 2); }, "[squeeze]");
  expect_throws_naming<std::invalid_argument>([&] { squeeze(a, -3); }, "[squeeze]");
  expect_throws_naming<std::invalid_argument>([&] { squeeze(a, {0, -2}); }, "[squeeze]");
}

TEST(ExpandDims, ValuesAndViews) {
  auto a = randn({3, 2});
  eval(a);
  auto v = to_vector(a);
  auto b = expand_dims(a, 0);
  auto c = expand_dims(a, -1);
  auto d = expand_dims(a, {0, 2, 4});
  eval(b, c, d);
  expect_close(b, {1, 3, 2}, v, 0, 0);
  expect_close(c, {3, 2, 1}, v, 0, 0);
  expect_close(d, {1, 3, 1, 2, 1}, v, 0, 0);
  EXPECT_TRUE(shares_buffer(a, d));
  EXPECT_EQ(d.raw_data(), a.raw_data());
  EXPECT_TRUE(d.flags().row_contiguous);
  expect_close(expand_dims(array(1.5), {0, 1}), {1, 1}, {1.5});
}

TEST(ExpandDims, Errors) {
  auto a = zeros({3, 2});
  expect_throws_naming<std::invalid_argument>([&] { expand_dims(a, 3); }, "[expand_dims]");
  expect_throws_naming<std::invalid_argument>([&] { expand_dims(a, -4); }, "[expand_dims]");
  expect_throws_naming<std::invalid_argument>([&] { expand_dims(a, {1, 1}); }, "[expand_dims]");
}

// ---- transpose / swapaxes / moveaxis --------------------------------------------------

TEST(Transpose, ValuesViewsAndFlags) {
  auto a = randn({2, 3, 4});
  eval(a);
  auto v = to_vector(a);
  std::vector<std::vector<int>> perms = {{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {0, 2, 1}, {2, 0, 1}, {1, 2, 0}};
  for (auto& p : perms) {
    auto t = transpose(a, p);
    eval(t);
    Shape shape{a.shape()[p[0]], a.shape()[p[1]], a.shape()[p[2]]};
    expect_close(t, shape, ref_transpose(v, {2, 3, 4}, p), 0, 0);
    EXPECT_TRUE(shares_buffer(a, t));
    bool identity = p == std::vector<int>{0, 1, 2};
    EXPECT_EQ(t.flags().row_contiguous, identity);
    EXPECT_EQ(t.flags().col_contiguous, (p == std::vector<int>{2, 1, 0}));
    EXPECT_TRUE(t.flags().contiguous);
  }
  auto r = transpose(a);
  expect_close(r, {4, 3, 2}, ref_transpose(v, {2, 3, 4}, {2, 1, 0}), 0, 0);
  auto n = transpose(a, {-1, 0, -2});
  expect_close(n, {4, 2, 3}, ref_transpose(v, {2, 3, 4}, {2, 0, 1}), 0, 0);
  // Transposing twice back is row-contiguous again.
  auto tt = transpose(transpose(a, {1, 2, 0}), {2, 0, 1});
  eval(tt);
  EXPECT_TRUE(tt.flags().row_contiguous);
  expect_close(tt, {2, 3, 4}, v, 0, 0);
}

TEST(Transpose, Errors) {
  auto a = zeros({2, 3});
  expect_throws_naming<std::invalid_argument>([&] { transpose(a, {0}); }, "[transpose]");
  expect_throws_naming<std::invalid_argument>([&] { transpose(a, {0, 2}); }, "[transpose]");
  expect_throws_naming<std::invalid_argument>([&] { transpose(a, {1, 1}); }, "[transpose]");
  expect_throws_naming<std::invalid_argument>([&] { swapaxes(a, 0, 2); }, "[swapaxes]");
  expect_throws_naming<std::invalid_argument>([&] { moveaxis(a, -3, 0); }, "[moveaxis]");
}

TEST(SwapMoveAxis, Values) {
  auto a = randn({2, 3, 4});
  auto v = to_vector(a);
  expect_close(swapaxes(a, 0, 2), {4, 3, 2}, ref_transpose(v, {2, 3, 4}, {2, 1, 0}), 0, 0);
  expect_close(swapaxes(a, -1, 1), {2, 4, 3}, ref_transpose(v, {2, 3, 4}, {0, 2, 1}), 0, 0);
  expect_close(moveaxis(a, 0, 2), {3, 4, 2}, ref_transpose(v, {2, 3, 4}, {1, 2, 0}), 0, 0);
  expect_close(moveaxis(a, -1, 0), {4, 2, 3}, ref_transpose(v, {2, 3, 4}, {2, 0, 1}), 0, 0);
  expect_close(moveaxis(a, 1, 1), {2, 3, 4}, v, 0, 0);
}

// ---- broadcast ------------------------------------------------------------------------

TEST(Broadcast, Shapes) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({2, 1, 5}, {4, 1}), (Shape{2, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {0}), (Shape{0}));
  expect_throws_naming<std::invalid_argument>(
      [] { broadcast_shapes({2, 3}, {3, 2}); }, "[broadcast_shapes]");
}

TEST(Broadcast, ValuesViewAndFlags) {
  auto a = randn({3, 1});
  eval(a);
  auto v = to_vector(a);
  auto b = broadcast_to(a, {2, 3, 4});
  eval(b);
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) expected.push_back(v[j]);
  expect_close(b, {2, 3, 4}, expected, 0, 0);
  EXPECT_TRUE(shares_buffer(a, b));
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  EXPECT_FALSE(b.flags().row_contiguous);
  EXPECT_FALSE(b.flags().col_contiguous);
  // MLX's broadcast flags: the distinct elements still fill the input's block, so the view
  // stays "contiguous" over data_size() = the input's size (kernels treat it as dense only
  // when data_size() == size()).
  EXPECT_TRUE(b.flags().contiguous);
  EXPECT_EQ(b.data_size(), a.data_size());
  EXPECT_LT(b.data_size(), b.size());
  // A scalar.
  expect_close(broadcast_to(array(2.5), {2, 2}), {2, 2}, {2.5, 2.5, 2.5, 2.5});
  // Same shape: the input itself.
  EXPECT_EQ(broadcast_to(a, {3, 1}).id(), a.id());
}

TEST(Broadcast, Arrays) {
  auto a = randn({3, 1});
  auto b = randn({4});
  auto c = array(1.0);
  auto out = broadcast_arrays({a, b, c});
  ASSERT_EQ(out.size(), 3u);
  for (auto& o : out) EXPECT_EQ(o.shape(), (Shape{3, 4}));
  auto va = to_vector(a), vb = to_vector(b);
  std::vector<double> ea, eb;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      ea.push_back(va[i]);
      eb.push_back(vb[j]);
    }
  expect_close(out[0], {3, 4}, ea, 0, 0);
  expect_close(out[1], {3, 4}, eb, 0, 0);
  expect_close(out[2], {3, 4}, std::vector<double>(12, 1.0), 0, 0);
  expect_throws_naming<std::invalid_argument>(
      [] { broadcast_arrays({zeros({2}), zeros({3})}); }, "[broadcast");
}

TEST(Broadcast, Errors) {
  auto a = zeros({2, 3});
  expect_throws_naming<std::invalid_argument>([&] { broadcast_to(a, {3, 3}); }, "[broadcast_to]");
  expect_throws_naming<std::invalid_argument>([&] { broadcast_to(a, {3}); }, "[broadcast_to]");
  expect_throws_naming<std::invalid_argument>([&] { broadcast_to(a, {-2, 3}); }, "[broadcast_to]");
}

TEST(Broadcast, KernelsReadBroadcastInputs) {
  // A broadcast, transposed, then materialised.
  auto a = randn({3});
  auto b = transpose(broadcast_to(a, {2, 3}));
  auto c = contiguous(b);
  eval(c);
  EXPECT_TRUE(c.flags().row_contiguous);
  auto v = to_vector(a);
  expect_close(c, {3, 2}, {v[0], v[0], v[1], v[1], v[2], v[2]}, 0, 0);
}

// ---- atleast_nd -----------------------------------------------------------------------

TEST(AtLeast, Shapes) {
  auto s = array(1.0), v = zeros({3}), m = zeros({2, 3}), t = zeros({2, 3, 4});
  EXPECT_EQ(atleast_1d(s).shape(), (Shape{1}));
  EXPECT_EQ(atleast_1d(v).shape(), (Shape{3}));
  EXPECT_EQ(atleast_2d(s).shape(), (Shape{1, 1}));
  EXPECT_EQ(atleast_2d(v).shape(), (Shape{1, 3}));
  EXPECT_EQ(atleast_2d(m).shape(), (Shape{2, 3}));
  EXPECT_EQ(atleast_3d(s).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(atleast_3d(v).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(atleast_3d(m).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(atleast_3d(t).shape(), (Shape{2, 3, 4}));
  auto many = atleast_2d(std::vector<array>{s, v, t});
  EXPECT_EQ(many[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(many[1].shape(), (Shape{1, 3}));
  EXPECT_EQ(many[2].shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(atleast_1d(std::vector<array>{s})[0].shape(), (Shape{1}));
  EXPECT_EQ(atleast_3d(std::vector<array>{v})[0].shape(), (Shape{1, 3, 1}));
  auto x = randn({3});
  expect_close(atleast_3d(x), {1, 3, 1}, to_vector(x), 0, 0);
}

// ---- view -----------------------------------------------------------------------------

TEST(View, ReinterpretsBits) {
  auto a = array({1.0f, -2.0f, 0.5f});
  auto b = view(a, uint32);
  eval(a, b);
  EXPECT_TRUE(shares_buffer(a, b));
  const uint32_t* bits = b.data<uint32_t>();
  const float* f = a.data<float>();
  for (int i = 0; i < 3; ++i) {
    uint32_t e;
    std::memcpy(&e, &f[i], 4);
    EXPECT_EQ(bits[i], e);
  }
  // Narrower: the last axis grows.
  auto c = view(array({1, 2}, int32), uint8);
  EXPECT_EQ(c.shape(), (Shape{8}));
  expect_close(c, {8}, {1, 0, 0, 0, 2, 0, 0, 0}, 0, 0);
  // Wider: the last axis shrinks.
  auto d = view(array({1, 0, 2, 0}, int16), int32);
  expect_close(d, {2}, {1, 2}, 0, 0);
  // Same dtype: the input itself.
  EXPECT_EQ(view(a, float32).id(), a.id());
  // Non-contiguous input: copied first.
  auto m = transpose(array({1, 2, 3, 4}, {2, 2}, int32));
  expect_close(view(m, float32) == view(contiguous(m), float32), {2, 2}, {1, 1, 1, 1}, 0, 0);
  expect_close(view(view(m, uint8), int32), {2, 2}, {1, 3, 2, 4}, 0, 0);
}

TEST(View, Errors) {
  expect_throws_naming<std::invalid_argument>([] { view(array(1.0f), float64); }, "[view]");
  expect_throws_naming<std::invalid_argument>(
      [] { view(array({1, 2, 3}, int16), int32); }, "[view]");
}

// ---- contiguous / copy / stop_gradient / depends --------------------------------------

TEST(Contiguous, CopiesOnlyWhenNeeded) {
  auto a = randn({3, 4});
  auto b = contiguous(a);
  eval(a, b);
  EXPECT_TRUE(shares_buffer(a, b));
  auto t = transpose(a);
  auto c = contiguous(t);
  auto cc = contiguous(t, true);
  eval(c, cc);
  EXPECT_FALSE(shares_buffer(a, c));
  EXPECT_TRUE(c.flags().row_contiguous);
  EXPECT_TRUE(shares_buffer(a, cc)); // column-major is allowed
  expect_close(c, {4, 3}, ref_transpose(to_vector(a), {3, 4}, {1, 0}), 0, 0);
}

TEST(StopGradient, ValuesAndZeroDerivative) {
  auto a = randn({3});
  auto b = stop_gradient(a);
  eval(a, b);
  EXPECT_TRUE(shares_buffer(a, b));
  expect_allclose(b, a, 0, 0);
  auto [outs, g] = vjp(
      [](const std::vector<array>& x) { return std::vector<array>{stop_gradient(x[0])}; },
      {a}, {ones({3}, float64)});
  expect_close(g[0], {3}, {0, 0, 0}, 0, 0);
  auto [jo, jt] = jvp(
      [](const std::vector<array>& x) { return std::vector<array>{stop_gradient(x[0])}; },
      {a}, {ones({3}, float64)});
  expect_close(jt[0], {3}, {0, 0, 0}, 0, 0);
}

TEST(Depends, PassesInputsThrough) {
  auto a = randn({2}), b = randn({3}), dep = randn({4});
  auto out = depends({a, b}, {dep});
  ASSERT_EQ(out.size(), 2u);
  eval(out);
  EXPECT_TRUE(shares_buffer(out[0], a));
  EXPECT_TRUE(shares_buffer(out[1], b));
  expect_allclose(out[0], a, 0, 0);
  expect_allclose(out[1], b, 0, 0);
  auto f = [](const std::vector<array>& x) { return depends({x[0]}, {x[1]}); };
  auto [outs, g] = vjp(f, {a, dep}, {full({2}, 3.0, float64)});
  expect_close(g[0], {2}, {3, 3}, 0, 0);
  expect_close(g[1], {4}, {0, 0, 0, 0}, 0, 0);
  auto ta = randn({2});
  auto [jouts, jt] = jvp(f, {a, dep}, {ta, randn({4})});
  ASSERT_EQ(jt.size(), 1u);
  expect_allclose(jt[0], ta, 0, 0);
}

// ---- derivatives and batching ---------------------------------------------------------

TEST(ShapeRules, Gradients) {
  check_grad([](const std::vector<array>& x) { return reshape(x[0], {3, -1}); }, {randn({2, 3, 2})});
  check_grad([](const std::vector<array>& x) { return reshape(transpose(x[0]), {-1}); },
             {randn({2, 3})});
  check_grad([](const std::vector<array>& x) { return transpose(x[0], {1, 2, 0}); },
             {randn({2, 3, 4})});
  check_grad([](const std::vector<array>& x) { return broadcast_to(x[0], {2, 3, 4}); },
             {randn({3, 1})});
  check_grad([](const std::vector<array>& x) { return squeeze(x[0], {0, 2}); },
             {randn({1, 3, 1, 2})});
  check_grad([](const std::vector<array>& x) { return expand_dims(x[0], {0, 3}); },
             {randn({3, 2})});
  check_grad([](const std::vector<array>& x) { return moveaxis(x[0], 0, -1); },
             {randn({2, 3, 4})});
  check_grad([](const std::vector<array>& x) { return contiguous(transpose(x[0])); },
             {randn({3, 2})});
}

TEST(ShapeRules, Vmap) {
  using V = std::vector<array>;
  check_vmap([](const V& x) { return V{reshape(x[0], {-1})}; }, {randn({3, 2, 4})}, {1});
  check_vmap([](const V& x) { return V{reshape(x[0], {4, 2})}; }, {randn({2, 4, 3})}, {2});
  check_vmap([](const V& x) { return V{transpose(x[0])}; }, {randn({2, 5, 3})}, {1});
  check_vmap([](const V& x) { return V{transpose(x[0], {1, 2, 0})}; }, {randn({4, 2, 3, 5})}, {0});
  check_vmap([](const V& x) { return V{broadcast_to(x[0], {2, 3, 4})}; }, {randn({3, 1, 5})}, {2});
  check_vmap([](const V& x) { return V{broadcast_to(x[0], {2, 4})}; }, {randn({5})}, {0});
  check_vmap([](const V& x) { return V{squeeze(x[0], 1)}; }, {randn({3, 1, 4})}, {2});
  check_vmap([](const V& x) { return V{squeeze(x[0])}; }, {randn({1, 3, 5, 1})}, {2});
  check_vmap([](const V& x) { return V{expand_dims(x[0], {0, -1})}; }, {randn({3, 4})}, {1});
  check_vmap([](const V& x) { return V{contiguous(transpose(x[0]))}; }, {randn({3, 4, 2})}, {2});
  check_vmap([](const V& x) { return V{stop_gradient(x[0])}; }, {randn({3, 4})}, {1});
  check_vmap([](const V& x) { return depends({x[0]}, {x[1]}); }, {randn({3, 4}), randn({4})}, {1, 0});
  check_vmap([](const V& x) { return V{view(x[0], uint8)}; }, {randn({3, 4}, float32)}, {1});
}

TEST(AsStridedBounds, RejectsWindowsOutsideTheInput) {
  auto a = nuvec::arange(10.0);
  // In bounds: the last element addressed is 2 + 3*2 + 1 = 9.
  EXPECT_NO_THROW(nuvec::eval(nuvec::as_strided(a, {4, 2}, {2, 1}, 2)));
  nuvec::testing::expect_throws_naming<std::invalid_argument>(
      [&] { nuvec::as_strided(a, {4, 2}, {3, 1}, 0); }, "[as_strided]");
  nuvec::testing::expect_throws_naming<std::invalid_argument>(
      [&] { nuvec::as_strided(a, {3}, {-1}, 1); }, "[as_strided]");
  EXPECT_NO_THROW(nuvec::eval(nuvec::as_strided(a, {0, 5}, {100, 100}, 50)));
}
