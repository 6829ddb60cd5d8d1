// nuvec tests: convolution (conv_general, conv1d/2d/3d, conv_transpose1d/2d/3d) against a
// direct float64 loop written here from the definition, derivatives and batching through the
// generic checkers, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// ---------------------------------------------------------------------------------------
// References (row-major float64 loops, independent of the kernel)

struct Params {
  std::vector<int> stride, lo, hi, kdil, idil; // one entry per spatial axis
  int groups = 1;
  bool flip = false;
};

Params defaults(int spatial) {
  return {std::vector<int>(spatial, 1), std::vector<int>(spatial, 0),
          std::vector<int>(spatial, 0), std::vector<int>(spatial, 1),
          std::vector<int>(spatial, 1), 1, false};
}

// Row-major flat index of idx in shape.
int64_t flat(const Shape& shape, const std::vector<int>& idx) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

// Row-major multi-index of f in shape.
std::vector<int> unflat(const Shape& shape, int64_t f) {
  std::vector<int> idx(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = static_cast<int>(f % shape[i]);
    f /= shape[i];
  }
  return idx;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int d : s) n *= d;
  return n;
}

// out[n, o, co] = sum_{k, c} xd[n, o*stride + k*kdil - lo, g*cig + c] * w[co, flip(k), c],
// xd the input with idil - 1 zeros between elements (read as "skip" here).
std::vector<double> ref_conv(const array& xa, const array& wa, const Params& p, Shape& out_shape) {
  auto x = to_vector(xa), w = to_vector(wa);
  const Shape& xs = xa.shape();
  const Shape& ws = wa.shape();
  int sp = static_cast<int>(xs.size()) - 2;
  int cin = xs.back(), cout = ws[0], cig = cin / p.groups, cog = cout / p.groups;
  out_shape = {xs[0]};
  for (int d = 0; d < sp; ++d) {
    int dil_in = (xs[1 + d] - 1) * p.idil[d] + 1 + p.lo[d] + p.hi[d];
    int dil_k = (ws[1 + d] - 1) * p.kdil[d] + 1;
    out_shape.push_back((dil_in - dil_k) / p.stride[d] + 1);
  }
  out_shape.push_back(cout);
  Shape kshape(ws.begin() + 1, ws.end() - 1);
  Shape oshape(out_shape.begin() + 1, out_shape.end() - 1);
  std::vector<double> out(numel(out_shape), 0.0);
  for (int n = 0; n < xs[0]; ++n) {
    for (int64_t of = 0; of < numel(oshape); ++of) {
      auto o = unflat(oshape, of);
      for (int co = 0; co < cout; ++co) {
        int g = co / cog;
        double acc = 0;
        for (int64_t kf = 0; kf < numel(kshape); ++kf) {
          auto k = unflat(kshape, kf);
          std::vector<int> xi = {n};
          bool ok = true;
          for (int d = 0; d < sp && ok; ++d) {
            int j = o[d] * p.stride[d] + k[d] * p.kdil[d] - p.lo[d];
            ok = j >= 0 && j % p.idil[d] == 0 && j / p.idil[d] < xs[1 + d];
            xi.push_back(j / std::max(p.idil[d], 1));
          }
          if (!ok) continue;
          std::vector<int> wi = {co};
          for (int d = 0; d < sp; ++d) wi.push_back(p.flip ? kshape[d] - 1 - k[d] : k[d]);
          for (int c = 0; c < cig; ++c) {
            xi.push_back(g * cig + c);
            wi.push_back(c);
            acc += x[flat(xs, xi)] * w[flat(ws, wi)];
            xi.pop_back();
            wi.pop_back();
          }
        }
        std::vector<int> oi = {n};
        oi.insert(oi.end(), o.begin(), o.end());
        oi.push_back(co);
        out[flat(out_shape, oi)] = acc;
      }
    }
  }
  return out;
}

// Transposed convolution by scattering: out[n, i*stride + m*dil - pad, co] += x[n, i, ci] *
// w[co, m, ci] (ci in co's group), output length (I-1)*stride - 2*pad + dil*(K-1) + 1 + op.
std::vector<double> ref_conv_transpose(
    const array& xa, const array& wa, const std::vector<int>& stride,
    const std::vector<int>& pad, const std::vector<int>& dil, const std::vector<int>& opad,
    int groups, Shape& out_shape) {
  auto x = to_vector(xa), w = to_vector(wa);
  const Shape& xs = xa.shape();
  const Shape& ws = wa.shape();
  int sp = static_cast<int>(xs.size()) - 2;
  int cin = xs.back(), cout = ws[0], cig = cin / groups, cog = cout / groups;
  out_shape = {xs[0]};
  for (int d = 0; d < sp; ++d) {
    out_shape.push_back(
        (xs[1 + d] - 1) * stride[d] - 2 * pad[d] + dil[d] * (ws[1 + d] - 1) + 1 + opad[d]);
  }
  out_shape.push_back(cout);
  Shape ishape(xs.begin() + 1, xs.end() - 1), kshape(ws.begin() + 1, ws.end() - 1);
  std::vector<double> out(numel(out_shape), 0.0);
  for (int n = 0; n < xs[0]; ++n) {
    for (int64_t f = 0; f < numel(ishape); ++f) {
      auto i = unflat(ishape, f);
      for (int64_t kf = 0; kf < numel(kshape); ++kf) {
        auto m = unflat(kshape, kf);
        std::vector<int> oi = {n};
        bool ok = true;
        for (int d = 0; d < sp; ++d) {
          int pos = i[d] * stride[d] + m[d] * dil[d] - pad[d];
          ok = ok && pos >= 0 && pos < out_shape[1 + d];
          oi.push_back(pos);
        }
        if (!ok) continue;
        for (int co = 0; co < cout; ++co) {
          int g = co / cog;
          double acc = 0;
          for (int c = 0; c < cig; ++c) {
            std::vector<int> xi = {n}, wi = {co};
            xi.insert(xi.end(), i.begin(), i.end());
            xi.push_back(g * cig + c);
            wi.insert(wi.end(), m.begin(), m.end());
            wi.push_back(c);
            acc += x[flat(xs, xi)] * w[flat(ws, wi)];
          }
          oi.push_back(co);
          out[flat(out_shape, oi)] += acc;
          oi.pop_back();
        }
      }
    }
  }
  return out;
}

array conv_p(const array& x, const array& w, const Params& p) {
  return conv_general(x, w, p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip);
}

double rtol_for(Dtype t) {
  return t == float64 ? 1e-10 : (t == float32 ? 1e-4 : 2e-2);
}

// Compares conv_general(x, w, p) with the reference; the tolerance scales with the sum of
// |terms| (bounded here by sqrt(taps) for unit normal data).
void expect_conv_matches(const array& x, const array& w, const Params& p) {
  Shape shape;
  auto expected = ref_conv(x, w, p, shape);
  Dtype t = promote_types(x.dtype(), w.dtype());
  double taps = static_cast<double>(w.size() / w.shape(0));
  double tol = rtol_for(t) * std::sqrt(taps) * 2;
  auto y = conv_p(x, w, p);
  EXPECT_EQ(y.dtype(), t);
  expect_close(y, shape, expected, rtol_for(t), tol);
}

// ---------------------------------------------------------------------------------------
// Forward values

TEST(Conv, Conv1dAgainstLoop) {
  for (Dtype t : {float32, float64}) {
    auto x = randn({2, 11, 4}, t);
    auto w = randn({6, 3, 4}, t);
    for (int stride : {1, 2, 3}) {
      for (int pad : {0, 1, 2}) {
        for (int dil : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << "stride " << stride << " pad " << pad << " dil " << dil);
          Params p = defaults(1);
          p.stride = {stride};
          p.lo = p.hi = {pad};
          p.kdil = {dil};
          Shape shape;
          auto expected = ref_conv(x, w, p, shape);
          expect_close(conv1d(x, w, stride, pad, dil), shape, expected, rtol_for(t), 1e-4);
        }
      }
    }
  }
}

TEST(Conv, Conv1dGroups) {
  auto x = randn({3, 9, 6}, float32);
  for (int groups : {1, 2, 3, 6}) {
    auto w = randn({12, 2, 6 / groups}, float32);
    Params p = defaults(1);
    p.groups = groups;
    p.lo = p.hi = {1};
    Shape shape;
    auto expected = ref_conv(x, w, p, shape);
    expect_close(conv1d(x, w, 1, 1, 1, groups), shape, expected, 1e-4, 1e-4);
  }
}

TEST(Conv, Conv2dAgainstLoop) {
  struct Case {
    std::pair<int, int> stride, pad, dil;
    int groups;
  };
  std::vector<Case> cases = {
      {{1, 1}, {0, 0}, {1, 1}, 1}, {{2, 1}, {1, 0}, {1, 1}, 1}, {{1, 2}, {1, 2}, {2, 1}, 1},
      {{2, 2}, {1, 1}, {1, 1}, 2}, {{3, 2}, {2, 1}, {2, 2}, 4},  {{1, 1}, {1, 1}, {1, 1}, 4},
  };
  for (Dtype t : {float32, float64}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(::testing::Message() << "case stride " << c.stride.first << "," << c.stride.second
                                      << " groups " << c.groups << " dtype " << t);
      auto x = randn({2, 9, 8, 8}, t);
      auto w = randn({8, 3, 2, 8 / c.groups}, t);
      Params p = defaults(2);
      p.stride = {c.stride.first, c.stride.second};
      p.lo = p.hi = {c.pad.first, c.pad.second};
      p.kdil = {c.dil.first, c.dil.second};
      p.groups = c.groups;
      Shape shape;
      auto expected = ref_conv(x, w, p, shape);
      expect_close(conv2d(x, w, c.stride, c.pad, c.dil, c.groups), shape, expected, rtol_for(t), 1e-4);
    }
  }
}

TEST(Conv, Conv3dAgainstLoop) {
  auto x = randn({2, 5, 6, 4, 4}, float32);
  auto w = randn({6, 2, 3, 2, 2}, float32);
  Params p = defaults(3);
  p.stride = {1, 2, 1};
  p.lo = p.hi = {1, 0, 1};
  p.kdil = {2, 1, 1};
  p.groups = 2;
  Shape shape;
  auto expected = ref_conv(x, w, p, shape);
  auto y = conv3d(x, w, {1, 2, 1}, {1, 0, 1}, {2, 1, 1}, 2);
  expect_close(y, shape, expected, 1e-4, 1e-4);
}

TEST(Conv, GeneralAsymmetricPaddingInputDilationFlip) {
  for (Dtype t : {float32, float64}) {
    auto x = randn({2, 5, 6, 4}, t);
    auto w = randn({4, 3, 2, 2}, t);
    Params p = defaults(2);
    p.stride = {2, 1};
    p.lo = {2, 0};
    p.hi = {0, 3};
    p.kdil = {1, 2};
    p.idil = {2, 3};
    p.groups = 2;
    for (bool flip : {false, true}) {
      p.flip = flip;
      expect_conv_matches(x, w, p);
    }
  }
}

TEST(Conv, GeneralNegativePaddingCrops) {
  auto x = randn({1, 9, 3}, float64);
  auto w = randn({2, 3, 3}, float64);
  Params p = defaults(1);
  p.lo = {-2};
  p.hi = {-1};
  expect_conv_matches(x, w, p);
}

TEST(Conv, GeneralSingleEntryVectorsApplyToEveryAxis) {
  auto x = randn({1, 7, 6, 2}, float32);
  auto w = randn({3, 2, 2, 2}, float32);
  auto y = conv_general(x, w, {2}, {1}, {1}, {1}, {1}, 1, false);
  Params p = defaults(2);
  p.stride = {2, 2};
  p.lo = p.hi = {1, 1};
  Shape shape;
  auto expected = ref_conv(x, w, p, shape);
  expect_close(y, shape, expected, 1e-4, 1e-4);
  // The symmetric-padding overload (all arguments given: the short forms are ambiguous).
  auto y2 = conv_general(x, w, std::vector<int>{2}, std::vector<int>{1}, std::vector<int>{1},
                         std::vector<int>{1}, 1, false, StreamOrDevice{});
  expect_close(y2, shape, expected, 1e-4, 1e-4);
}

TEST(Conv, HalfTypesAccumulateInFloat) {
  for (Dtype t : {float16, bfloat16}) {
    auto x = randn({2, 7, 7, 4}, t);
    auto w = randn({4, 3, 3, 2}, t);
    Params p = defaults(2);
    p.lo = p.hi = {1, 1};
    p.stride = {2, 1};
    p.groups = 2;
    Shape shape;
    auto expected = ref_conv(x, w, p, shape); // reads the rounded half values
    auto y = conv_p(x, w, p);
    EXPECT_EQ(y.dtype(), t);
    double rtol = t == float16 ? 1e-2 : 3e-2;
    expect_close(y, shape, expected, rtol, t == float16 ? 3e-2 : 1e-1);
  }
}

TEST(Conv, MixedDtypesPromote) {
  auto x = randn({1, 6, 3}, float16);
  auto w = randn({2, 2, 3}, float32);
  auto y = conv1d(x, w);
  EXPECT_EQ(y.dtype(), float32);
  Shape shape;
  auto expected = ref_conv(x, w, defaults(1), shape);
  expect_close(y, shape, expected, 1e-5, 1e-5);
}

TEST(Conv, NonContiguousInputs) {
  // Input built channels-first and transposed; weight sliced with a step and reversed.
  auto xc = randn({2, 4, 7, 9}, float32);         // (N, C, H, W)
  auto x = transpose(xc, {0, 2, 3, 1});            // (N, H, W, C), channel stride != 1
  auto wbig = randn({6, 3, 6, 8}, float32);
  auto w = slice(wbig, Shape{5, 0, 0, 0}, Shape{-7, 3, 6, 8}, Shape{-2, 1, 2, 2}); // (3, 3, 3, 4)
  ASSERT_EQ(w.shape(), Shape({3, 3, 3, 4}));
  Params p = defaults(2);
  p.lo = p.hi = {1, 1};
  p.stride = {1, 2};
  expect_conv_matches(x, w, p);
  // Broadcast (stride 0) input and a strided slice of the batch and spatial axes.
  auto xb = broadcast_to(randn({1, 1, 5, 4}, float64), {3, 6, 5, 4});
  auto wb = randn({2, 2, 2, 4}, float64);
  expect_conv_matches(xb, wb, defaults(2));
  auto xs = slice(randn({4, 12, 10, 3}, float64), Shape{0, 1, 0, 0}, Shape{4, 12, 10, 3}, Shape{2, 3, 2, 1});
  expect_conv_matches(xs, randn({5, 2, 3, 3}, float64), defaults(2));
}

TEST(Conv, OneByOneUsesInputAsIs) {
  // The 1x1 path reads the input rows in place; with groups each group reads its columns.
  for (int groups : {1, 4}) {
    auto x = randn({3, 5, 6, 8}, float32);
    auto w = randn({12, 1, 1, 8 / groups}, float32);
    Params p = defaults(2);
    p.groups = groups;
    expect_conv_matches(x, w, p);
  }
  // A 1x1 kernel with stride still goes through im2col.
  Params p = defaults(2);
  p.stride = {2, 2};
  expect_conv_matches(randn({2, 5, 5, 3}, float32), randn({4, 1, 1, 3}, float32), p);
}

TEST(Conv, LargeEnoughForChunksAndThreads) {
  // 2 * 66 * 66 rows x 576 columns: more than one im2col chunk, split between threads.
  auto x = randn({2, 66, 66, 64}, float32);
  auto w = randn({16, 3, 3, 64}, float32);
  Params p = defaults(2);
  p.lo = p.hi = {1, 1};
  expect_conv_matches(x, w, p);
}

TEST(Conv, EmptyBatchAndEmptyChannels) {
  auto y = conv1d(zeros({0, 5, 2}), zeros({3, 2, 2}));
  EXPECT_EQ(y.shape(), Shape({0, 4, 3}));
  eval(y);
  auto z = conv1d(randn({2, 5, 0}, float32), zeros({3, 2, 0}));
  expect_close(z, {2, 4, 3}, std::vector<double>(24, 0.0));
}

TEST(Conv, TransposeAgainstScatterLoop) {
  {
    auto x = randn({2, 6, 4}, float64);
    auto w = randn({3, 3, 4}, float64);
    for (int stride : {1, 2, 3}) {
      for (int pad : {0, 1, 3}) {
        for (int dil : {1, 2}) {
          for (int opad : {0, 1}) {
            SCOPED_TRACE(::testing::Message() << stride << " " << pad << " " << dil << " " << opad);
            Shape shape;
            auto expected = ref_conv_transpose(x, w, {stride}, {pad}, {dil}, {opad}, 1, shape);
            expect_close(conv_transpose1d(x, w, stride, pad, dil, opad), shape, expected, 1e-10, 1e-10);
          }
        }
      }
    }
  }
  {
    auto x = randn({2, 4, 5, 6}, float32);
    auto w = randn({4, 3, 2, 3}, float32); // groups 2: C_in 6 -> 3 per group, C_out 4
    Shape shape;
    auto expected = ref_conv_transpose(x, w, {2, 1}, {1, 0}, {1, 2}, {1, 0}, 2, shape);
    auto y = conv_transpose2d(x, w, {2, 1}, {1, 0}, {1, 2}, {1, 0}, 2);
    expect_close(y, shape, expected, 1e-4, 1e-4);
  }
  {
    auto x = randn({1, 3, 2, 3, 2}, float32);
    auto w = randn({3, 2, 2, 3, 2}, float32);
    Shape shape;
    auto expected = ref_conv_transpose(x, w, {2, 1, 2}, {0, 1, 1}, {1, 1, 2}, {1, 0, 0}, 1, shape);
    auto y = conv_transpose3d(x, w, {2, 1, 2}, {0, 1, 1}, {1, 1, 2}, {1, 0, 0});
    expect_close(y, shape, expected, 1e-4, 1e-4);
  }
}

// ---------------------------------------------------------------------------------------
// Derivatives (float64, small sizes)

TEST(ConvGrad, Conv1dInputAndWeight) {
  for (int stride : {1, 2}) {
    for (int dil : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "stride " << stride << " dil " << dil);
      auto f = [=](const std::vector<array>& in) { return conv1d(in[0], in[1], stride, 1, dil); };
      check_grad(f, {randn({2, 8, 3}), randn({4, 3, 3})});
    }
  }
}

TEST(ConvGrad, Conv2dStridedDilatedGrouped) {
  auto f = [](const std::vector<array>& in) {
    return conv2d(in[0], in[1], {2, 1}, {1, 2}, {1, 2}, 2);
  };
  check_grad(f, {randn({2, 6, 5, 4}), randn({4, 2, 2, 2})});
  // A stride that leaves input elements unread (7 = 2*3 + 1 with kernel 2).
  auto g = [](const std::vector<array>& in) { return conv2d(in[0], in[1], {3, 2}); };
  check_grad(g, {randn({1, 8, 7, 2}), randn({3, 2, 2, 2})});
}

TEST(ConvGrad, GeneralInputDilationFlipAsymmetric) {
  for (bool flip : {false, true}) {
    auto f = [=](const std::vector<array>& in) {
      return conv_general(in[0], in[1], {2, 1}, {2, 0}, {0, 1}, {1, 2}, {2, 1}, 2, flip);
    };
    check_grad(f, {randn({2, 4, 5, 4}), randn({2, 3, 2, 2})});
  }
  // Negative padding (cropping) and large padding.
  auto g = [](const std::vector<array>& in) {
    return conv_general(in[0], in[1], {1}, {-1}, {4}, {1}, {1}, 1, false);
  };
  check_grad(g, {randn({1, 6, 2}), randn({2, 3, 2})});
}

TEST(ConvGrad, Conv3d) {
  auto f = [](const std::vector<array>& in) {
    return conv3d(in[0], in[1], {1, 2, 1}, {1, 0, 0}, {1, 1, 2}, 1);
  };
  check_grad(f, {randn({1, 3, 4, 4, 2}), randn({2, 2, 2, 2, 2})});
}

TEST(ConvGrad, ExtentsPastInt32) {
  // Stride and padding of 2^31 - 1 along H: the padded input and the stride-dilated
  // cotangent span about 2^32 positions, though the output has 3 rows. Only output row 1
  // reads the input (rows 0..2); rows 0 and 2 read padding. MLX throws std::overflow_error
  // for the weight gradient; nuvec computes it in 64 bits (docs/MLX-DIFFERENCES.md).
  const int imax = 2147483647;
  auto x = randn({1, 8, 7, 1}, float64), w = randn({1, 3, 3, 1}, float64);
  auto f = [&](const std::vector<array>& p) {
    return std::vector<array>{conv_general(p[0], p[1], {imax, 1}, {imax, 0}, {imax, 0}, {1, 1}, {1, 1})};
  };
  auto y = f({x, w})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 3, 5, 1}));
  auto cot = randn(y.shape(), float64);
  auto [outs, grads] = vjp(f, {x, w}, {cot});
  auto xv = to_vector(x), wv = to_vector(w), cv = to_vector(cot);
  std::vector<double> ye(15, 0.0), dx(56, 0.0), dw(9, 0.0);
  for (int j = 0; j < 5; ++j) {
    for (int k = 0; k < 3; ++k) {
      for (int l = 0; l < 3; ++l) {
        ye[5 + j] += xv[k * 7 + j + l] * wv[k * 3 + l];
        dw[k * 3 + l] += cv[5 + j] * xv[k * 7 + j + l];
        dx[k * 7 + j + l] += cv[5 + j] * wv[k * 3 + l];
      }
    }
  }
  expect_close(y, {1, 3, 5, 1}, ye, 1e-12, 1e-12);
  expect_close(grads[0], {1, 8, 7, 1}, dx, 1e-12, 1e-12);
  expect_close(grads[1], {1, 3, 3, 1}, dw, 1e-12, 1e-12);
}

TEST(ConvGrad, Transposed) {
  auto f = [](const std::vector<array>& in) {
    return conv_transpose2d(in[0], in[1], {2, 2}, {1, 0}, {1, 2}, {1, 0}, 2);
  };
  check_grad(f, {randn({1, 3, 3, 4}), randn({2, 3, 2, 2})});
  auto g = [](const std::vector<array>& in) { return conv_transpose1d(in[0], in[1], 3, 2, 1, 2); };
  check_grad(g, {randn({2, 4, 2}), randn({3, 4, 2})});
}

TEST(ConvGrad, SecondOrder) {
  // The gradient is itself a convolution graph; differentiate it again.
  auto f = [](const std::vector<array>& in) {
    auto loss = [](const std::vector<array>& xs) {
      auto y = conv1d(xs[0], xs[1], 2, 1);
      return std::vector<array>{sum(multiply(y, y))};
    };
    auto [v, g] = vjp(loss, in, {array(1.0, float64)});
    return g[1];
  };
  check_grad(f, {randn({1, 6, 2}), randn({2, 2, 2})});
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(ConvVmap, InputWeightBoth) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{conv2d(in[0], in[1], {2, 1}, {1, 1}, {1, 2}, 2)};
  };
  auto xb = randn({3, 2, 6, 5, 4});  // batch at axis 0
  auto x = randn({2, 6, 5, 4});
  auto wb = randn({4, 3, 2, 2, 2});  // batch at axis 1 (C_out, B, KH, KW, Cig)
  auto w = randn({4, 2, 2, 2});
  check_vmap(f, {xb, w}, {0, -1});
  check_vmap(f, {x, moveaxis(wb, 1, 0)}, {-1, 0});
  check_vmap(f, {x, wb}, {-1, 1});
  check_vmap(f, {moveaxis(xb, 0, 3), wb}, {3, 1});
}

TEST(ConvVmap, GeneralAndTransposed) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{
        conv_general(in[0], in[1], {2}, {1}, {0}, {2}, {2}, 1, true),
        conv_transpose1d(in[0], in[1], 2, 1, 1, 1)};
  };
  check_vmap(f, {randn({2, 5, 3}), randn({4, 3, 2, 3})}, {-1, 0});
  check_vmap(f, {randn({2, 4, 5, 3}), randn({3, 2, 3})}, {1, -1});
  check_vmap(f, {randn({2, 5, 4, 3}), randn({3, 2, 3, 2})}, {0, 3});
}

TEST(ConvVmap, OfGrad) {
  // vmap over per-example weight gradients.
  auto f = [](const std::vector<array>& in) {
    auto loss = [](const std::vector<array>& xs) {
      return std::vector<array>{sum(conv1d(xs[0], xs[1], 1, 1))};
    };
    auto [v, g] = vjp(loss, in, {array(1.0, float64)});
    return std::vector<array>{g[0], g[1]};
  };
  check_vmap(f, {randn({3, 2, 5, 2}), randn({3, 2, 2})}, {0, -1});
}

// ---------------------------------------------------------------------------------------
// Bad input

TEST(ConvErrors, ShapesAndParameters) {
  auto x = randn({2, 8, 4}, float32);
  auto w = randn({6, 3, 4}, float32);
  auto bad = [](auto f, const char* op) { expect_throws_naming<std::invalid_argument>(f, op); };
  bad([&] { conv1d(x, randn({6, 3, 3, 4}, float32)); }, "[conv1d]");            // rank
  bad([&] { conv1d(randn({8, 4}, float32), randn({6, 4}, float32)); }, "[conv1d]");
  bad([&] { conv1d(x, randn({6, 3, 3}, float32)); }, "[conv1d]");               // channels
  bad([&] { conv1d(x, randn({6, 3, 2}, float32), 1, 0, 1, 3); }, "[conv1d]");   // groups
  bad([&] { conv1d(x, randn({5, 3, 2}, float32), 1, 0, 1, 2); }, "[conv1d]");   // C_out
  bad([&] { conv1d(x, w, 1, 0, 1, 0); }, "[conv1d]");
  bad([&] { conv1d(x, randn({6, 9, 4}, float32)); }, "[conv1d]");               // too large
  bad([&] { conv1d(x, w, 1, 0, 4); }, "[conv1d]");                              // dilated
  bad([&] { conv1d(x, w, 0); }, "[conv1d]");
  bad([&] { conv1d(x, w, -1); }, "[conv1d]");
  bad([&] { conv1d(x, w, 1, 0, 0); }, "[conv1d]");
  bad([&] { conv1d(astype(x, int32), astype(w, int32)); }, "[conv1d]");
  bad([&] { conv2d(x, w); }, "[conv2d]");
  // More spatial axes than the shared geometry holds (backend/common/conv_geometry.h).
  bad([&] {
    conv_general(ones(Shape(11, 1), float32), ones(Shape(11, 1), float32), {1}, {0}, {0}, {1}, {1}, 1, false);
  }, "[conv_general]");
  bad([&] { conv2d(randn({1, 4, 4, 2}, float32), randn({2, 5, 1, 2}, float32)); }, "[conv2d]");
  bad([&] { conv3d(randn({1, 4, 4, 2}, float32), randn({2, 1, 1, 2}, float32)); }, "[conv3d]");
  bad([&] { conv_general(x, w, {1, 1}, {0}, {0}, {1}, {1}, 1, false); }, "[conv_general]");
  bad([&] { conv_general(x, w, {1}, {0}, {0}, {1}, {0}, 1, false); }, "[conv_general]");
  bad([&] { conv_general(x, w, {1}, {-6}, {0}, {1}, {1}, 1, false); }, "[conv_general]");
  bad([&] { conv_transpose1d(x, randn({6, 3, 3}, float32)); }, "[conv_transpose1d]");
  bad([&] { conv_transpose1d(x, w, 0); }, "[conv_transpose1d]");
  bad([&] { conv_transpose2d(x, w); }, "[conv_transpose2d]");
  bad([&] { conv_transpose3d(x, w); }, "[conv_transpose3d]");
  // The message names the shapes.
  try {
    conv1d(x, randn({6, 3, 3}, float32));
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 8, 4)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(6, 3, 3)"), std::string::npos) << e.what();
  }
}

} // namespace
