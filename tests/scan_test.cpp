// nuvec tests: cumsum, cumprod, cummax, cummin, logcumsumexp, diff, partition, argpartition,
// topk and searchsorted against float64 references written here (running loops, std::sort,
// std::lower_bound), over axes, reverse/inclusive, layouts and dtypes; NaNs; errors;
// derivatives (including the seed's first-zero and tie rules) and batching.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "checker.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Op { Sum, Prod, Max, Min, LogSumExp };
const Op kOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::LogSumExp};
const char* op_name(Op op) {
  switch (op) {
    case Op::Sum: return "cumsum";
    case Op::Prod: return "cumprod";
    case Op::Max: return "cummax";
    case Op::Min: return "cummin";
    case Op::LogSumExp: return "logcumsumexp";
  }
  return "";
}

array run_op(Op op, const array& x, int axis, bool rev, bool incl) {
  switch (op) {
    case Op::Sum: return cumsum(x, axis, rev, incl);
    case Op::Prod: return cumprod(x, axis, rev, incl);
    case Op::Max: return cummax(x, axis, rev, incl);
    case Op::Min: return cummin(x, axis, rev, incl);
    case Op::LogSumExp: return logcumsumexp(x, axis, rev, incl);
  }
  return x;
}

// Offsets of every line of a row-major shape along axis.
void for_each_line(const Shape& shape, int axis, const std::function<void(const std::vector<size_t>&)>& f) {
  int nd = static_cast<int>(shape.size());
  axis = (axis % nd + nd) % nd;
  std::vector<size_t> strides(nd, 1);
  for (int d = nd - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  size_t total = 1;
  for (auto s : shape) total *= s;
  for (size_t i = 0; i < total; ++i) {
    if ((i / strides[axis]) % shape[axis] != 0) continue;
    std::vector<size_t> line;
    for (int k = 0; k < shape[axis]; ++k) line.push_back(i + k * strides[axis]);
    f(line);
  }
}

double ref_combine(Op op, double acc, double x) {
  switch (op) {
    case Op::Sum: return acc + x;
    case Op::Prod: return acc * x;
    case Op::Max: return (std::isnan(acc) || std::isnan(x)) ? kNaN : std::max(acc, x);
    case Op::Min: return (std::isnan(acc) || std::isnan(x)) ? kNaN : std::min(acc, x);
    case Op::LogSumExp: {
      if (std::isnan(acc) || std::isnan(x)) return kNaN;
      double hi = std::max(acc, x), lo = std::min(acc, x);
      if (lo == -kInf || hi == kInf) return hi;
      return hi + std::log1p(std::exp(lo - hi));
    }
  }
  return 0;
}

double ref_init(Op op) {
  switch (op) {
    case Op::Sum: return 0;
    case Op::Prod: return 1;
    case Op::Max: return -kInf;
    case Op::Min: return kInf;
    case Op::LogSumExp: return -kInf;
  }
  return 0;
}

std::vector<double> ref_scan(Op op, const array& x, int axis, bool rev, bool incl) {
  auto v = to_vector(x);
  std::vector<double> out(v.size());
  for_each_line(x.shape(), axis, [&](const std::vector<size_t>& line) {
    double acc = ref_init(op);
    size_t n = line.size();
    for (size_t k = 0; k < n; ++k) {
      size_t i = line[rev ? n - 1 - k : k];
      if (incl) acc = ref_combine(op, acc, v[i]);
      out[i] = acc;
      if (!incl) acc = ref_combine(op, acc, v[i]);
    }
  });
  return out;
}

array input_for(Op op, const Shape& shape, Dtype dt = float64) {
  // Products of values near 1 stay well scaled.
  return op == Op::Prod ? uniform(shape, 0.5, 1.5, dt) : randn(shape, dt);
}

std::vector<std::pair<std::string, array>> layouts(Op op) {
  std::vector<std::pair<std::string, array>> out;
  out.emplace_back("contiguous", input_for(op, {3, 4, 5}));
  out.emplace_back("transposed", transpose(input_for(op, {5, 3, 4}), {1, 2, 0}));
  out.emplace_back("broadcast", broadcast_to(input_for(op, {3, 1, 5}), {3, 4, 5}));
  out.emplace_back("negative stride",
      slice(input_for(op, {3, 8, 5}), Shape{0, 7, 0}, Shape{3, -9, 5}, Shape{1, -2, 1}));
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------
// Scans: values

TEST(Scan, AllOpsAxesDirectionsLayouts) {
  for (Op op : kOps) {
    for (auto& [name, x64] : layouts(op)) {
      for (Dtype dt : {float32, float64}) {
        array x = astype(x64, dt);
        for (int axis : {0, 1, 2, -1, -2, -3}) {
          for (bool rev : {false, true}) {
            for (bool incl : {true, false}) {
              SCOPED_TRACE(std::string(op_name(op)) + " " + name + " axis " + std::to_string(axis) +
                  " rev " + std::to_string(rev) + " incl " + std::to_string(incl));
              array y = run_op(op, x, axis, rev, incl);
              EXPECT_EQ(y.dtype(), dt);
              expect_close(y, x.shape(), ref_scan(op, x, axis, rev, incl),
                  dt == float32 ? 1e-5 : 1e-12, dt == float32 ? 1e-5 : 1e-12);
            }
          }
        }
      }
    }
  }
}

TEST(Scan, FlattenedOverloads) {
  array x = randn({3, 4});
  array flat = reshape(x, {12});
  expect_allclose(cumsum(x), cumsum(flat, 0));
  expect_allclose(cumsum(x, true, false), cumsum(flat, 0, true, false));
  expect_allclose(cumprod(x), cumprod(flat, 0));
  expect_allclose(cummax(x, true), cummax(flat, 0, true));
  expect_allclose(cummin(x), cummin(flat, 0));
  expect_allclose(logcumsumexp(x, false, false), logcumsumexp(flat, 0, false, false));
}

TEST(Scan, HalfTypesAccumulateInFloat32) {
  // 2000 ones: a float16 accumulator would stop at 2048 resolution limits (and lose ones
  // past 2048); float32 accumulation gives exact integers up to 2000.
  array ones_h = ones({2000}, float16);
  auto got = to_vector(cumsum(ones_h));
  EXPECT_EQ(cumsum(ones_h).dtype(), float16);
  EXPECT_EQ(got[1999], 2000.0);
  for (Dtype dt : {float16, bfloat16}) {
    for (Op op : kOps) {
      array x = input_for(op, {4, 6}, dt);
      for (int axis : {0, 1}) {
        SCOPED_TRACE(op_name(op));
        array y = run_op(op, x, axis, axis == 0, true);
        EXPECT_EQ(y.dtype(), dt);
        expect_close(y, x.shape(), ref_scan(op, x, axis, axis == 0, true), 2e-2, 2e-2);
      }
    }
  }
}

TEST(Scan, IntegerAndBoolDtypes) {
  array xi = randint({4, 7}, -5, 5, int32);
  for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min}) {
    for (bool rev : {false, true}) {
      for (bool incl : {true, false}) {
        SCOPED_TRACE(op_name(op));
        array y = run_op(op, xi, 1, rev, incl);
        EXPECT_EQ(y.dtype(), int32);
        if (op == Op::Max || op == Op::Min) {
          // Exclusive max/min start from the dtype's lowest/highest value.
          auto r = ref_scan(op, xi, 1, rev, incl);
          for (auto& v : r) {
            if (v == -kInf) v = std::numeric_limits<int32_t>::lowest();
            if (v == kInf) v = std::numeric_limits<int32_t>::max();
          }
          expect_close(y, xi.shape(), r, 0, 0);
        } else {
          expect_close(y, xi.shape(), ref_scan(op, xi, 1, rev, incl), 0, 0);
        }
      }
    }
  }
  // Small integers and bool promote as sum does.
  array b = greater(randn({3, 5}), array(0.0));
  EXPECT_EQ(cumsum(b, 1).dtype(), int32);
  expect_close(cumsum(b, 1), b.shape(), ref_scan(Op::Sum, b, 1, false, true), 0, 0);
  EXPECT_EQ(cumsum(astype(xi, int8), 0).dtype(), int32);
  EXPECT_EQ(cumsum(astype(abs(xi), uint8), 0).dtype(), uint32);
  EXPECT_EQ(cumprod(astype(xi, int16), 0).dtype(), int32);
  // cummax/cummin of bool are running or/and.
  EXPECT_EQ(cummax(b, 1).dtype(), bool_);
  expect_close(cummax(b, 1), b.shape(), ref_scan(Op::Max, b, 1, false, true), 0, 0);
  expect_close(cummin(b, 1), b.shape(), ref_scan(Op::Min, b, 1, false, true), 0, 0);
  // logcumsumexp of integers computes in float32.
  EXPECT_EQ(logcumsumexp(xi, 1).dtype(), float32);
  expect_close(logcumsumexp(xi, 1), xi.shape(), ref_scan(Op::LogSumExp, xi, 1, false, true), 1e-5, 1e-5);
}

TEST(Scan, NaNsPropagate) {
  array x = array({1.0, kNaN, 3.0, -2.0}, {4});
  expect_close(cumsum(x), {4}, {1, kNaN, kNaN, kNaN});
  expect_close(cummax(x), {4}, {1, kNaN, kNaN, kNaN});
  expect_close(cummin(x, true), {4}, {kNaN, kNaN, -2, -2});
  expect_close(logcumsumexp(x), {4}, {1, kNaN, kNaN, kNaN});
  // Infinities are exact.
  array y = array({-kInf, -kInf, 0.0, kInf}, {4});
  expect_close(logcumsumexp(y), {4}, {-kInf, -kInf, 0, kInf});
  expect_close(logcumsumexp(y, false, false), {4}, {-kInf, -kInf, -kInf, 0});
}

TEST(Scan, EmptyAndLengthOne) {
  array e = zeros({3, 0});
  EXPECT_EQ(cumsum(e, 1).shape(), (Shape{3, 0}));
  eval(cumsum(e, 1));
  array x = randn({3, 1});
  expect_allclose(cummax(x, 1), x);
  expect_close(cumsum(x, 1, false, false), {3, 1}, {0, 0, 0});
}

// ---------------------------------------------------------------------------------------
// diff

TEST(Diff, OrdersAndAxes) {
  array x = randn({4, 6});
  auto v = to_vector(x);
  for (int axis : {0, 1, -1, -2}) {
    for (int n : {0, 1, 2, 3}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " n " + std::to_string(n));
      int ax = (axis + 2) % 2;
      // Reference: repeated differences in float64.
      std::vector<std::vector<double>> m(4, std::vector<double>(6));
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) m[i][j] = v[i * 6 + j];
      for (int r = 0; r < n; ++r) {
        std::vector<std::vector<double>> next;
        if (ax == 0) {
          for (size_t i = 0; i + 1 < m.size(); ++i) {
            next.emplace_back(m[i].size());
            for (size_t j = 0; j < m[i].size(); ++j) next[i][j] = m[i + 1][j] - m[i][j];
          }
        } else {
          for (auto& row : m) {
            std::vector<double> d;
            for (size_t j = 0; j + 1 < row.size(); ++j) d.push_back(row[j + 1] - row[j]);
            next.push_back(d);
          }
        }
        m = next;
      }
      std::vector<double> flat;
      for (auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
      Shape shape = {ax == 0 ? 4 - n : 4, ax == 1 ? 6 - n : 6};
      expect_close(diff(x, n, axis), shape, flat, 1e-12, 1e-12);
    }
  }
  // Default: n = 1 along the last axis; n past the length leaves an empty axis.
  EXPECT_EQ(diff(x).shape(), (Shape{4, 5}));
  EXPECT_EQ(diff(x, 9, 0).shape(), (Shape{0, 6}));
  // Bool inputs use not_equal (NumPy).
  array b = array({true, true, false, true}, {4});
  EXPECT_EQ(diff(b).dtype(), bool_);
  expect_close(diff(b), {3}, {0, 1, 1}, 0, 0);
  // Non-contiguous inputs.
  array t = transpose(x);
  expect_allclose(diff(t, 1, 0), transpose(diff(x, 1, 1)));
}

// ---------------------------------------------------------------------------------------
// partition, argpartition, topk

namespace {
bool nan_last_less(double a, double b) {
  if (std::isnan(b)) return !std::isnan(a);
  if (std::isnan(a)) return false;
  return a < b;
}

// Checks the partition property of `got` (values) for each line of `x` along axis.
void expect_partitioned(const array& x, const array& got, int kth, int axis) {
  ASSERT_EQ(got.shape(), x.shape());
  auto xv = to_vector(x), gv = to_vector(got);
  for_each_line(x.shape(), axis, [&](const std::vector<size_t>& line) {
    int n = static_cast<int>(line.size());
    int k = kth < 0 ? kth + n : kth;
    std::vector<double> want, have;
    for (auto i : line) want.push_back(xv[i]), have.push_back(gv[i]);
    std::sort(want.begin(), want.end(), nan_last_less);
    double pivot = have[k];
    EXPECT_TRUE(pivot == want[k] || (std::isnan(pivot) && std::isnan(want[k])));
    for (int i = 0; i < k; ++i) EXPECT_FALSE(nan_last_less(pivot, have[i]));
    for (int i = k + 1; i < n; ++i) EXPECT_FALSE(nan_last_less(have[i], pivot));
    std::sort(have.begin(), have.end(), nan_last_less);
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(have[i] == want[i] || (std::isnan(have[i]) && std::isnan(want[i])));
    }
  });
}
} // namespace

TEST(Partition, ValuesIndicesAxesLayoutsDtypes) {
  for (Dtype dt : {float32, float64, float16, int32, bool_}) {
    for (auto& [name, x0] : layouts(Op::Sum)) {
      array x = dt == int32 ? astype(multiply(x0, array(3.0)), dt)
                            : (dt == bool_ ? greater(x0, array(0.0)) : astype(x0, dt));
      for (int axis : {0, 1, 2, -1}) {
        int n = x.shape((axis + 3) % 3);
        for (int kth : {0, n / 2, n - 1, -1, -n}) {
          SCOPED_TRACE(name + " axis " + std::to_string(axis) + " kth " + std::to_string(kth));
          array p = partition(x, kth, axis);
          EXPECT_EQ(p.dtype(), x.dtype());
          expect_partitioned(x, p, kth, axis);
          array idx = argpartition(x, kth, axis);
          EXPECT_EQ(idx.dtype(), uint32);
          // argpartition's arrangement is partition's.
          expect_allclose(take_along_axis(x, idx, axis), p, 0, 0);
        }
      }
    }
  }
  // Flattened overloads and NaNs (last, as in sort).
  array y = array({3.0, kNaN, -1.0, 2.0, kNaN, 0.5}, {2, 3});
  expect_partitioned(reshape(y, {6}), partition(y, 3), 3, 0);
  expect_partitioned(reshape(y, {6}), partition(y, -2), -2, 0);
  expect_allclose(take_along_axis(reshape(y, {6}), argpartition(y, 2), 0), partition(y, 2), 0, 0);
}

TEST(TopK, LargestSortedAscending) {
  for (auto& [name, x] : layouts(Op::Sum)) {
    for (int axis : {0, 1, -1}) {
      int n = x.shape((axis + 3) % 3);
      for (int k : {1, 2, n}) {
        SCOPED_TRACE(name + " axis " + std::to_string(axis) + " k " + std::to_string(k));
        array got = topk(x, k, axis);
        Shape lo(3, 0), hi = x.shape();
        lo[(axis + 3) % 3] = n - k;
        expect_allclose(got, slice(sort(x, axis), lo, hi), 0, 0);
      }
    }
  }
  array v = randn({10});
  auto sorted = to_vector(sort(v));
  expect_close(topk(reshape(v, {2, 5}), 3), {3}, {sorted[7], sorted[8], sorted[9]}, 0, 0);
  EXPECT_EQ(topk(v, 0).shape(), (Shape{0}));
}

// ---------------------------------------------------------------------------------------
// searchsorted

TEST(SearchSorted, LeftAndRightAgainstStdBounds) {
  for (Dtype dt : {float32, float64, int32}) {
    array a = sort(dt == int32 ? randint({20}, -5, 5, int32) : astype(randn({20}), dt));
    array v = dt == int32 ? randint({3, 7}, -7, 7, int32) : astype(randn({3, 7}), dt);
    // Exact hits for the left/right distinction.
    v = concatenate({reshape(v, {21}), slice(a, {3}, {8})}, 0);
    auto av = to_vector(a), vv = to_vector(v);
    for (bool right : {false, true}) {
      std::vector<double> want;
      for (double q : vv) {
        auto it = right ? std::upper_bound(av.begin(), av.end(), q) : std::lower_bound(av.begin(), av.end(), q);
        want.push_back(static_cast<double>(it - av.begin()));
      }
      array got = searchsorted(a, v, right ? "right" : "left");
      EXPECT_EQ(got.dtype(), uint32);
      expect_close(got, v.shape(), want, 0, 0);
    }
  }
  // NaNs order last: left of a NaN is the first NaN; right is the end.
  array a = array({-1.0, 0.0, 2.0, kNaN, kNaN}, {5});
  array q = array({kNaN, 1.0, 5.0}, {3});
  expect_close(searchsorted(a, q), {3}, {3, 2, 3}, 0, 0);
  expect_close(searchsorted(a, q, "right"), {3}, {5, 2, 3}, 0, 0);
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(ScanErrors, NamesTheOp) {
  array x = randn({2, 3});
  expect_throws_naming<std::invalid_argument>([&] { cumsum(x, 2); }, "[cumsum]");
  expect_throws_naming<std::invalid_argument>([&] { cumprod(x, -3); }, "[cumprod]");
  expect_throws_naming<std::invalid_argument>([&] { cummax(x, 5); }, "[cummax]");
  expect_throws_naming<std::invalid_argument>([&] { cummin(x, -4); }, "[cummin]");
  expect_throws_naming<std::invalid_argument>([&] { logcumsumexp(x, 2); }, "[logcumsumexp]");
  expect_throws_naming<std::invalid_argument>(
      [&] { cummax(astype(x, complex64), 0); }, "[cummax]");
  expect_throws_naming<std::invalid_argument>([&] { diff(x, 1, 2); }, "[diff]");
  expect_throws_naming<std::invalid_argument>([&] { diff(x, -1); }, "[diff]");
  expect_throws_naming<std::invalid_argument>([&] { diff(array(1.0)); }, "[diff]");
  expect_throws_naming<std::invalid_argument>([&] { partition(x, 3, 1); }, "[partition]");
  expect_throws_naming<std::invalid_argument>([&] { partition(x, -4, 1); }, "[partition]");
  expect_throws_naming<std::invalid_argument>([&] { partition(x, 0, 2); }, "[partition]");
  expect_throws_naming<std::invalid_argument>([&] { argpartition(x, 6); }, "[argpartition]");
  expect_throws_naming<std::invalid_argument>([&] { argpartition(x, 0, -3); }, "[argpartition]");
  expect_throws_naming<std::invalid_argument>([&] { topk(x, 4, 1); }, "[topk]");
  expect_throws_naming<std::invalid_argument>([&] { topk(x, -1); }, "[topk]");
  expect_throws_naming<std::invalid_argument>([&] { topk(x, 1, 3); }, "[topk]");
  expect_throws_naming<std::invalid_argument>([&] { searchsorted(x, x); }, "[searchsorted]");
}

// ---------------------------------------------------------------------------------------
// Derivatives

TEST(ScanGrad, AllOpsDirections) {
  for (Op op : kOps) {
    for (int axis : {0, 1, -1}) {
      for (bool rev : {false, true}) {
        for (bool incl : {true, false}) {
          SCOPED_TRACE(std::string(op_name(op)) + " axis " + std::to_string(axis) + " rev " +
              std::to_string(rev) + " incl " + std::to_string(incl));
          // Distinct values (no ties) for max/min.
          // Exclusive max/min/logsumexp start from an infinite identity, which finite
          // differences cannot difference; where() masks it (its vjp gives it no cotangent).
          check_grad([&](const std::vector<array>& xs) {
            array y = run_op(op, xs[0], axis, rev, incl);
            return where(isinf(y), zeros_like(y), y);
          }, {input_for(op, {3, 4})});
        }
      }
    }
  }
}

TEST(ScanGrad, CumprodWithZeros) {
  for (int zeros_count : {1, 2}) {
    for (bool rev : {false, true}) {
      for (bool incl : {true, false}) {
        SCOPED_TRACE("zeros " + std::to_string(zeros_count) + " rev " + std::to_string(rev) +
            " incl " + std::to_string(incl));
        auto v = to_vector(uniform({2, 6}, 0.5, 1.5));
        v[2] = 0; // row 0: a zero inside
        v[6 + 0] = 0; // row 1: a zero at the start
        if (zeros_count == 2) {
          v[4] = 0;
          v[6 + 3] = 0;
        }
        array x(v.begin(), {2, 6}, float64);
        check_grad([&](const std::vector<array>& xs) { return cumprod(xs[0], 1, rev, incl); }, {x});
      }
    }
  }
}

TEST(ScanGrad, CummaxCumminTiesFollowTheOwnerRule) {
  // Ties go to the latest element in scan order (seed): x = [1, 3, 3, 2].
  array x = array({1.0, 3.0, 3.0, 2.0}, {4});
  auto g = [&](std::function<array(const array&)> f) {
    return vjp([&](const std::vector<array>& xs) { return std::vector<array>{f(xs[0])}; },
        {x}, {ones({4}, float64)}).second[0];
  };
  // Forward inclusive: outputs 1,3,3,3 owned by 0,1,2,2.
  expect_close(g([](const array& a) { return cummax(a); }), {4}, {1, 1, 2, 0}, 0, 0);
  // Reverse inclusive (scan order 3, 2, 1, 0): outputs 3,3,3,2 owned by 1,1,2,3.
  expect_close(g([](const array& a) { return cummax(a, 0, true); }), {4}, {0, 2, 1, 1}, 0, 0);
  // Forward exclusive: outputs -inf,1,3,3 owned by -,0,1,2.
  expect_close(g([](const array& a) { return cummax(a, 0, false, false); }), {4}, {1, 1, 1, 0}, 0, 0);
  // Reverse exclusive: outputs 3,3,2,-inf owned by 1,2,3,-.
  expect_close(g([](const array& a) { return cummax(a, 0, true, false); }), {4}, {0, 1, 1, 1}, 0, 0);
  // cummin with ties: y = [2, 1, 1, 3] -> outputs 2,1,1,1 owned by 0,1,2,2.
  array y = array({2.0, 1.0, 1.0, 3.0}, {4});
  auto gy = vjp([&](const std::vector<array>& xs) { return std::vector<array>{cummin(xs[0])}; },
      {y}, {ones({4}, float64)}).second[0];
  expect_close(gy, {4}, {1, 1, 2, 0}, 0, 0);
  // jvp moves each owner's tangent.
  array t = array({10.0, 20.0, 30.0, 40.0}, {4});
  auto jt = jvp([&](const std::vector<array>& xs) { return std::vector<array>{cummax(xs[0])}; },
      {x}, {t}).second[0];
  expect_close(jt, {4}, {10, 20, 30, 30}, 0, 0);
}

TEST(ScanGrad, DiffPartitionTopK) {
  check_grad([](const std::vector<array>& xs) { return diff(xs[0], 2, 0); }, {randn({5, 3})});
  check_grad([](const std::vector<array>& xs) { return diff(xs[0]); }, {randn({3, 5})});
  check_grad([](const std::vector<array>& xs) { return partition(xs[0], 2, 1); }, {randn({3, 6})});
  check_grad([](const std::vector<array>& xs) { return partition(xs[0], -1, 0); }, {randn({4, 3})});
  check_grad([](const std::vector<array>& xs) { return topk(xs[0], 3, 1); }, {randn({3, 6})});
  check_grad([](const std::vector<array>& xs) { return topk(xs[0], 2); }, {randn({3, 4})});
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(ScanVmap, EveryPrimitive) {
  array xb = randn({3, 4, 5});
  for (Op op : kOps) {
    for (int in_axis : {0, 1, 2}) {
      for (int axis : {0, 1, -1}) {
        SCOPED_TRACE(std::string(op_name(op)) + " in_axis " + std::to_string(in_axis) + " axis " +
            std::to_string(axis));
        check_vmap([&](const std::vector<array>& xs) {
          return std::vector<array>{run_op(op, xs[0], axis, axis == 0, axis != 1)};
        }, {op == Op::Prod ? uniform({3, 4, 5}, 0.5, 1.5) : xb}, {in_axis}, 1e-10, 1e-12);
      }
    }
  }
  for (int in_axis : {0, 2}) {
    check_vmap([](const std::vector<array>& xs) {
      return std::vector<array>{partition(xs[0], 1, 0), argpartition(xs[0], -2, 1),
          topk(xs[0], 2, 1), diff(xs[0], 1, 0)};
    }, {xb}, {in_axis});
  }
  // searchsorted: a batched with v fixed, and v batched with a fixed.
  array a = sort(randn({3, 6}), 1);
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{searchsorted(xs[0], xs[1]), searchsorted(xs[0], xs[1], "right")};
  }, {a, randn({4})}, {0, -1});
  check_vmap([](const std::vector<array>& xs) {
    return std::vector<array>{searchsorted(xs[0], xs[1])};
  }, {sort(randn({6})), randn({4, 3})}, {-1, 1});
}

// Gradients of the rules are graphs, so they vmap too (per-example gradients).
TEST(ScanVmap, OfGrad) {
  auto f = [](const std::vector<array>& xs) {
    auto gf = grad([](const array& x) { return sum(multiply(cumprod(x, 0), logcumsumexp(x, 0))); });
    return std::vector<array>{gf(xs[0])};
  };
  check_vmap(f, {uniform({3, 5}, 0.5, 1.5)}, {0}, 1e-8, 1e-10);
}
