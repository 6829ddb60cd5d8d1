// nuvec: the GPU kernels of sorting (Sort, ArgSort, Partition, ArgPartition), indexing
// (GatherAxis, ScatterAxis, Gather, Scatter, MaskedRank), slicing (SliceUpdate,
// DynamicSliceUpdate, Concatenate) and RandomBits against the CPU kernels on fresh random
// inputs: each graph is built once with Device::gpu and once with Device::cpu and the results
// compared on the host, over dtypes, index dtypes, layouts (contiguous, transposed, sliced with
// steps, reversed, broadcast), empty arrays and sizes spanning many blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define REQUIRE_GPU() \
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu = Device::cpu;
const Device kGpu = Device::gpu;
constexpr int kLarge = (1 << 20) + 17; // several blocks and grid-stride rounds

// ---------------------------------------------------------------------------------------
// Host views and comparison

/// Row-major elements of a as doubles, computed on the CPU; complex arrays give their real
/// parts then their imaginary parts.
std::vector<double> host_values(const array& a) {
  if (a.dtype() == complex64) {
    auto re = host_values(real(a, kCpu));
    auto im = host_values(imag(a, kCpu));
    re.insert(re.end(), im.begin(), im.end());
    return re;
  }
  array c = astype(contiguous(a, false, kCpu), float64, kCpu);
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}

/// Asserts gpu and cpu have one shape and dtype and elements within atol + rtol |cpu| (exact
/// by default; NaN matches NaN), reporting the count and the first few mismatches.
void expect_match(const array& gpu, const array& cpu, double rtol = 0, double atol = 0) {
  ASSERT_EQ(gpu.shape(), cpu.shape());
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  auto g = host_values(gpu);
  auto c = host_values(cpu);
  ASSERT_EQ(g.size(), c.size());
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(c[i]) ? std::isnan(g[i])
                               : (g[i] == c[i] || std::abs(g[i] - c[i]) <= atol + rtol * std::abs(c[i]));
    if (!ok && bad++ < 5) first << " [" << i << "] gpu " << g[i] << " cpu " << c[i] << ";";
  }
  EXPECT_EQ(bad, 0u) << "mismatches of " << g.size() << ":" << first.str();
}

/// The flat (row-major) indices of every line of `shape` along axis.
std::vector<std::vector<size_t>> lines_of(const Shape& shape, int axis) {
  const int nd = static_cast<int>(shape.size());
  size_t inner = 1, outer = 1;
  for (int d = axis + 1; d < nd; ++d) inner *= shape[d];
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  const size_t n = shape[axis];
  std::vector<std::vector<size_t>> out;
  for (size_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < inner; ++j) {
      std::vector<size_t> line;
      for (size_t i = 0; i < n; ++i) line.push_back((o * n + i) * inner + j);
      out.push_back(line);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Inputs

bool is_float(Dtype dt) {
  return dt == float16 || dt == float32 || dt == float64 || dt == bfloat16;
}

/// Random host values of dtype: normal floats (small integers when `ties`, so that equal
/// values occur, and a tenth NaNs when `nans`), complex with both parts random (ties: small
/// integers), integers within the dtype's range (a few levels when `ties`), bool.
array values_of(const Shape& shape, Dtype dt, bool ties = false, bool nans = false) {
  array x = array(0.0f);
  if (dt == bool_) {
    x = greater(randn(shape, float32), array(0.0f), kCpu);
  } else if (dt == complex64) {
    array re = ties ? astype(randint(shape, -2, 2, int32), complex64, kCpu) : randn(shape, complex64);
    array im = ties ? astype(randint(shape, -2, 2, int32), complex64, kCpu) : randn(shape, complex64);
    x = add(re, multiply(im, array(complex64_t(0.0f, 1.0f)), kCpu), kCpu);
  } else if (is_float(dt)) {
    x = ties ? astype(randint(shape, -3, 3, int32), dt, kCpu) : randn(shape, dt);
    if (nans) {
      array mask = less(uniform(shape, 0.0, 1.0, float32), array(0.1f), kCpu);
      x = where(mask, astype(array(NAN), dt, kCpu), x, kCpu);
    }
  } else if (issubdtype(dt, unsignedinteger)) {
    x = randint(shape, 0, ties ? 4 : 250, dt);
  } else {
    x = randint(shape, ties ? -3 : -120, ties ? 3 : 120, dt);
  }
  eval(x);
  return x;
}

using Gen = std::function<array(const Shape&)>;

const std::vector<std::string> kLayouts = {"contiguous", "transposed", "strided", "reversed",
                                           "broadcast"};

/// gen's values of `shape` in a layout (built and evaluated on the CPU): contiguous;
/// transposed (a transpose of the reversed shape); strided (every other element of a larger
/// array, from an offset); reversed (a negative step along axis 0); broadcast (axis 0 of
/// size 1 broadcast).
array in_layout(const Shape& shape, const std::string& layout, const Gen& gen) {
  array x = array(0.0f);
  const int nd = static_cast<int>(shape.size());
  if (layout == "transposed") {
    Shape rev(shape.rbegin(), shape.rend());
    x = transpose(gen(rev), kCpu);
  } else if (layout == "strided") {
    Shape big, start, stop, step;
    for (auto d : shape) {
      big.push_back(2 * d + 1);
      start.push_back(1);
      stop.push_back(1 + 2 * d);
      step.push_back(2);
    }
    x = slice(gen(big), start, stop, step, kCpu);
  } else if (layout == "reversed" && nd > 0 && shape[0] > 0) {
    Shape start(nd, 0), stop = shape, step(nd, 1);
    start[0] = shape[0] - 1;
    stop[0] = -shape[0] - 1;
    step[0] = -1;
    x = slice(gen(shape), start, stop, step, kCpu);
  } else if (layout == "broadcast" && nd > 0) {
    Shape one = shape;
    one[0] = 1;
    x = broadcast_to(gen(one), shape, kCpu);
  } else {
    x = gen(shape);
  }
  eval(x);
  EXPECT_EQ(x.shape(), shape);
  return x;
}

/// Random indices of dtype for an axis of size n: in [-n, n) for signed dtypes (negatives
/// count from the end), [0, n) for unsigned ones.
array indices_of(const Shape& shape, int64_t n, Dtype dt) {
  array i = issubdtype(dt, signedinteger) ? randint(shape, -n, n - 1, dt) : randint(shape, 0, n - 1, dt);
  eval(i);
  return i;
}

/// Tolerance of a GPU sum (atomics in any order) against the CPU's sequential sum.
double sum_tol(Dtype dt) {
  if (dt == float16) return 1e-2;
  if (dt == bfloat16) return 5e-2;
  if (dt == float32 || dt == complex64) return 1e-5;
  if (dt == float64) return 1e-12;
  return 0; // integers and bool are exact
}

const std::vector<Dtype> kAllDtypes = {bool_,  uint8,   uint16,  uint32,   uint64,
                                       int8,   int16,   int32,   int64,    float16,
                                       float32, float64, bfloat16, complex64};

// ---------------------------------------------------------------------------------------
// Sort, ArgSort, Partition, ArgPartition

// Values exactly; indices exactly (both sorts are stable, ties in index order, NaNs last).
TEST(GpuSort, SortAndArgsortMatchCpuOverDtypesLayoutsAxes) {
  REQUIRE_GPU();
  for (Dtype dt : kAllDtypes) {
    for (const auto& layout : kLayouts) {
      array x = in_layout({5, 33, 7}, layout, [&](const Shape& s) { return values_of(s, dt, true, true); });
      for (int axis : {0, 1, 2, -1}) {
        SCOPED_TRACE(dtype_name(dt) + " " + layout + " axis " + std::to_string(axis));
        expect_match(sort(x, axis, kGpu), sort(x, axis, kCpu));
        expect_match(argsort(x, axis, kGpu), argsort(x, axis, kCpu));
      }
    }
  }
}

TEST(GpuSort, DistinctValuesNegativeZeroAndNaNs) {
  REQUIRE_GPU();
  array x = array({3.0f, -0.0f, NAN, 0.0f, -INFINITY, 1.0f, -NAN, INFINITY, 0.0f, -2.0f}, {10});
  expect_match(sort(x, 0, kGpu), sort(x, 0, kCpu));
  // -0 ties with +0: positions 1, 3, 8 in order; NaNs last in order.
  expect_close(argsort(x, 0, kGpu), {10}, {4, 9, 1, 3, 8, 5, 0, 7, 2, 6}, 0, 0);
  for (Dtype dt : {float16, bfloat16, float64, complex64}) {
    SCOPED_TRACE(dtype_name(dt));
    array y = astype(x, dt, kCpu);
    expect_match(sort(y, 0, kGpu), sort(y, 0, kCpu));
    expect_match(argsort(y, 0, kGpu), argsort(y, 0, kCpu));
  }
  // Complex: lexicographic, a NaN in either part last.
  array c = add(astype(array({1.0f, 1.0f, -1.0f, NAN, 0.0f}, {5}), complex64, kCpu),
                multiply(astype(array({2.0f, -3.0f, 0.0f, 0.0f, NAN}, {5}), complex64, kCpu),
                         array(complex64_t(0.0f, 1.0f)), kCpu), kCpu);
  expect_close(argsort(c, 0, kGpu), {5}, {2, 1, 0, 3, 4}, 0, 0);
}

TEST(GpuSort, LargeManyLinesAndEmpty) {
  REQUIRE_GPU();
  struct Case {
    Shape shape;
    Dtype dt;
    int axis;
  };
  const std::vector<Case> cases = {
      {{kLarge}, float32, 0},   {{kLarge}, int64, 0},     {{kLarge}, uint8, 0},
      {{kLarge}, float64, 0},   {{3, 100003}, int32, 1},  {{3, 100003}, float64, 1},
      {{70001, 3}, float32, 1}, {{70001, 3}, int64, 1},   {{70001, 3}, complex64, 0},
      {{257, 2049}, float16, 0}, {{4099, 65}, bool_, 1},  {{2, 3, 70001}, bfloat16, 2},
      {{0, 5}, float32, 0},     {{0, 5}, float64, 1},     {{5, 0}, int32, 1},
      {{1}, float32, 0},        {{6, 1}, float64, 1}};
  for (const auto& c : cases) {
    std::ostringstream name;
    name << dtype_name(c.dt) << " " << c.shape << " axis " << c.axis;
    SCOPED_TRACE(name.str());
    array x = values_of(c.shape, c.dt, false, true);
    expect_match(sort(x, c.axis, kGpu), sort(x, c.axis, kCpu));
    expect_match(argsort(x, c.axis, kGpu), argsort(x, c.axis, kCpu));
    // Many ties in long lines: stability over several radix blocks.
    array t = values_of(c.shape, c.dt, true, false);
    expect_match(argsort(t, c.axis, kGpu), argsort(t, c.axis, kCpu));
  }
}

/// Asserts that `got` (values) partitions x's lines along axis at kth: the kth element is
/// the sorted line's, none before it is greater, none after it smaller (NaNs last), and the
/// line holds x's elements.
void expect_partition(const array& x, const array& got, int kth, int axis) {
  ASSERT_EQ(got.shape(), x.shape());
  auto xv = host_values(x), gv = host_values(got);
  auto less = [](double a, double b) {
    if (std::isnan(b)) return !std::isnan(a);
    if (std::isnan(a)) return false;
    return a < b;
  };
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  int ax = axis < 0 ? axis + static_cast<int>(x.ndim()) : axis;
  for (const auto& line : lines_of(x.shape(), ax)) {
    const int n = static_cast<int>(line.size());
    const int k = kth < 0 ? kth + n : kth;
    std::vector<double> want, have;
    for (auto i : line) want.push_back(xv[i]), have.push_back(gv[i]);
    std::sort(want.begin(), want.end(), less);
    ASSERT_TRUE(same(have[k], want[k]));
    for (int i = 0; i < k; ++i) EXPECT_FALSE(less(have[k], have[i]));
    for (int i = k + 1; i < n; ++i) EXPECT_FALSE(less(have[i], have[k]));
    std::sort(have.begin(), have.end(), less);
    for (int i = 0; i < n; ++i) ASSERT_TRUE(same(have[i], want[i]));
  }
}

TEST(GpuSort, PartitionAndArgpartitionArePartitions) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, float64, float16, int32, uint8, bool_}) {
    for (const auto& layout : {std::string("contiguous"), std::string("transposed"), std::string("strided")}) {
      array x = in_layout({6, 9, 5}, layout, [&](const Shape& s) { return values_of(s, dt, true, true); });
      for (int axis : {0, 1, 2}) {
        const int n = x.shape(axis);
        for (int kth : {0, n / 2, n - 1, -1}) {
          SCOPED_TRACE(dtype_name(dt) + " " + layout + " axis " + std::to_string(axis) + " kth " +
                       std::to_string(kth));
          array p = partition(x, kth, axis, kGpu);
          EXPECT_EQ(p.dtype(), dt);
          expect_partition(x, p, kth, axis);
          array idx = argpartition(x, kth, axis, kGpu);
          EXPECT_EQ(idx.dtype(), uint32);
          // argpartition's arrangement is partition's, as on the CPU.
          expect_match(take_along_axis(x, idx, axis, kCpu), p);
        }
      }
    }
  }
  array big = values_of({kLarge}, float32, false, true);
  expect_partition(big, partition(big, 12345, 0, kGpu), 12345, 0);
}

// ---------------------------------------------------------------------------------------
// take_along_axis, put_along_axis, scatter_add_axis (GatherAxis, ScatterAxis)

const std::vector<Dtype> kIndexDtypes = {int32, int64, uint8, int16, uint32, int8, uint64};

TEST(GpuIndexing, TakeAlongAxisOverDtypesIndexDtypesLayouts) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, float16, int64, bool_, complex64, uint8, float64}) {
    for (Dtype it : kIndexDtypes) {
      for (const auto& layout : kLayouts) {
        array a = in_layout({6, 7, 5}, layout, [&](const Shape& s) { return values_of(s, dt); });
        for (int axis : {0, 1, 2}) {
          SCOPED_TRACE(dtype_name(dt) + " idx " + dtype_name(it) + " " + layout + " axis " +
                       std::to_string(axis));
          Shape ishape = a.shape();
          ishape[axis] = 11; // longer than the axis: repeats
          array idx = in_layout(ishape, layout, [&](const Shape& s) { return indices_of(s, a.shape(axis), it); });
          expect_match(take_along_axis(a, idx, axis, kGpu), take_along_axis(a, idx, axis, kCpu));
          // Indices broadcast along the other axes.
          Shape bshape(3, 1);
          bshape[axis] = 4;
          array bidx = indices_of(bshape, a.shape(axis), it);
          expect_match(take_along_axis(a, bidx, axis, kGpu), take_along_axis(a, bidx, axis, kCpu));
        }
      }
    }
  }
  // Large and empty.
  array a = values_of({kLarge}, float32);
  array idx = indices_of({kLarge}, kLarge, int64);
  expect_match(take_along_axis(a, idx, 0, kGpu), take_along_axis(a, idx, 0, kCpu));
  array e = values_of({0, 4}, float32);
  expect_match(take_along_axis(e, indices_of({0, 2}, 4, int32), 1, kGpu),
               take_along_axis(e, indices_of({0, 2}, 4, int32), 1, kCpu));
}

TEST(GpuIndexing, PutAlongAxisLastDuplicateWinsAndScatterAddAxisAccumulates) {
  REQUIRE_GPU();
  for (Dtype dt : kAllDtypes) {
    for (Dtype it : {int32, int64, uint8, int16}) {
      for (const auto& layout : {std::string("contiguous"), std::string("transposed"), std::string("strided"),
                                 std::string("broadcast")}) {
        array a = in_layout({5, 6, 4}, layout, [&](const Shape& s) { return values_of(s, dt); });
        for (int axis : {0, 1, 2}) {
          SCOPED_TRACE(dtype_name(dt) + " idx " + dtype_name(it) + " " + layout + " axis " +
                       std::to_string(axis));
          Shape ishape = a.shape();
          ishape[axis] = 9; // more updates than positions: duplicates in every line
          array idx = in_layout(ishape, layout, [&](const Shape& s) { return indices_of(s, a.shape(axis), it); });
          // Half types add small integers (exact in any order); the others random values.
          const bool half = dt == float16 || dt == bfloat16;
          array v = in_layout(ishape, layout, [&](const Shape& s) { return values_of(s, dt, half); });
          expect_match(put_along_axis(a, idx, v, axis, kGpu), put_along_axis(a, idx, v, axis, kCpu));
          const double tol = sum_tol(dt);
          expect_match(scatter_add_axis(a, idx, v, axis, kGpu), scatter_add_axis(a, idx, v, axis, kCpu),
                       tol, tol);
        }
      }
    }
  }
  // Many updates landing on few positions, over many blocks.
  for (Dtype dt : {float32, int32, int8, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    // float32: an integer base too, so every partial sum is exact whatever the order (a
    // fractional base rounds differently at the magnitudes the running sums pass through).
    array a = values_of({3, 8}, dt, dt == float32);
    array idx = indices_of({3, kLarge / 3}, 8, int32);
    array v = values_of({3, kLarge / 3}, dt, true);
    expect_match(put_along_axis(a, idx, v, 1, kGpu), put_along_axis(a, idx, v, 1, kCpu));
    // Small integer updates keep float32 sums exact in any order; float16 atomics round
    // after every add onto the (non-integer) base while the CPU adds in sequence, so they
    // agree to float16 rounding only.
    array small = dt == float16 ? values_of({3, 600}, dt, true) : v;
    array sidx = dt == float16 ? indices_of({3, 600}, 8, int32) : idx;
    const double tol = dt == float16 ? sum_tol(dt) : 0.0;
    expect_match(scatter_add_axis(a, sidx, small, 1, kGpu), scatter_add_axis(a, sidx, small, 1, kCpu),
                 tol, tol);
  }
}

// ---------------------------------------------------------------------------------------
// take, gather, scatter (Gather, Scatter)

TEST(GpuIndexing, TakeAndGatherWindows) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, int16, uint64, bool_, complex64}) {
    for (const auto& layout : kLayouts) {
      array a = in_layout({7, 6, 5}, layout, [&](const Shape& s) { return values_of(s, dt); });
      for (Dtype it : {int32, int64, uint16}) {
        SCOPED_TRACE(dtype_name(dt) + " idx " + dtype_name(it) + " " + layout);
        for (int axis : {0, 1, 2}) {
          array idx = in_layout({3, 4}, layout, [&](const Shape& s) { return indices_of(s, a.shape(axis), it); });
          expect_match(take(a, idx, axis, kGpu), take(a, idx, axis, kCpu));
        }
        array flat = indices_of({9}, 7 * 6 * 5, it);
        expect_match(take(a, flat, kGpu), take(a, flat, kCpu));
        // Two indexed axes with windows; starts near the end shift back so windows fit.
        array i0 = indices_of({4, 3}, 7, it);
        array i2 = indices_of({1, 3}, 5, it); // broadcasts against i0
        const Shape sizes = {2, 3, 4};
        expect_match(gather(a, {i0, i2}, {0, 2}, sizes, kGpu), gather(a, {i0, i2}, {0, 2}, sizes, kCpu));
        expect_match(gather(a, {i2}, {1}, {7, 1, 2}, kGpu), gather(a, {i2}, {1}, {7, 1, 2}, kCpu));
      }
    }
  }
  // No index arrays: one window at the origin.
  array a = values_of({4, 5}, float32);
  const std::vector<array> no_indices;
  const std::vector<int> no_axes;
  expect_match(gather(a, no_indices, no_axes, {2, 3}, kGpu), gather(a, no_indices, no_axes, {2, 3}, kCpu));
  // Large: rows of a table, and single elements of a long vector.
  array table = values_of({1000, 129}, float32);
  array rows = indices_of({5000}, 1000, int32);
  expect_match(take(table, rows, 0, kGpu), take(table, rows, 0, kCpu));
  array v = values_of({kLarge}, float64);
  array at = indices_of({kLarge}, kLarge, int64);
  expect_match(take(v, at, 0, kGpu), take(v, at, 0, kCpu));
  // Empty indices and empty windows.
  expect_match(take(table, indices_of({0}, 1000, int32), 0, kGpu),
               take(table, indices_of({0}, 1000, int32), 0, kCpu));
  expect_match(gather(a, {indices_of({3}, 4, int32)}, {0}, {1, 0}, kGpu),
               gather(a, {indices_of({3}, 4, int32)}, {0}, {1, 0}, kCpu));
}

using ScatterFn = array (*)(const array&, const std::vector<array>&, const array&, const std::vector<int>&,
                            StreamOrDevice);

TEST(GpuIndexing, ScatterModesWithDuplicates) {
  REQUIRE_GPU();
  struct Mode {
    const char* name;
    ScatterFn fn;
  };
  const std::vector<Mode> modes = {{"scatter", scatter},          {"scatter_add", scatter_add},
                                   {"scatter_prod", scatter_prod}, {"scatter_max", scatter_max},
                                   {"scatter_min", scatter_min}};
  for (Dtype dt : kAllDtypes) {
    for (const auto& m : modes) {
      const std::string mode = m.name;
      if (dt == complex64 && (mode == "scatter_max" || mode == "scatter_min")) continue;
      for (const auto& layout : {std::string("contiguous"), std::string("transposed"), std::string("broadcast")}) {
        SCOPED_TRACE(dtype_name(dt) + " " + mode + " " + layout);
        // Products of small integers can outgrow the half types' significands, and then round
        // differently in another order.
        const double tol = (dt == float16 || dt == bfloat16) ? 2e-2 : 1e-6;
        // Small integer values: sums and products are exact in any order.
        array a = in_layout({6, 5, 4}, layout, [&](const Shape& s) { return values_of(s, dt, true, mode != "scatter_prod"); });
        // One axis, whole-row windows: 8 index positions on 6 rows (duplicates).
        array i0 = indices_of({8}, 6, int32);
        array u1 = in_layout({8, 1, 5, 4}, layout, [&](const Shape& s) { return values_of(s, dt, true, mode == "scatter_max"); });
        expect_match(m.fn(a, {i0}, u1, {0}, kGpu), m.fn(a, {i0}, u1, {0}, kCpu), tol, tol);
        // Two axes, windows overrunning the array's end (the outside part is dropped).
        array j0 = indices_of({3, 4}, 6, int64);
        array j2 = indices_of({3, 4}, 4, int16);
        array u2 = values_of({3, 4, 2, 3, 3}, dt, true);
        expect_match(m.fn(a, {j0, j2}, u2, {0, 2}, kGpu), m.fn(a, {j0, j2}, u2, {0, 2}, kCpu), tol, tol);
        // Broadcast updates: one value for every window element.
        array ub = broadcast_to(values_of({1}, dt, true), {3, 4, 1, 5, 1}, kCpu);
        expect_match(m.fn(a, {j0, j2}, ub, {0, 2}, kGpu), m.fn(a, {j0, j2}, ub, {0, 2}, kCpu), tol, tol);
      }
    }
  }
  // Many colliding updates over many blocks.
  for (Dtype dt : {float32, int32, uint8, float64, int64}) {
    SCOPED_TRACE(dtype_name(dt));
    array a = values_of({16}, dt, true);
    array idx = indices_of({kLarge}, 16, int32);
    array u = values_of({kLarge, 1}, dt, true);
    expect_match(scatter(a, {idx}, u, {0}, kGpu), scatter(a, {idx}, u, {0}, kCpu));
    expect_match(scatter_max(a, {idx}, u, {0}, kGpu), scatter_max(a, {idx}, u, {0}, kCpu));
    expect_match(scatter_min(a, {idx}, u, {0}, kGpu), scatter_min(a, {idx}, u, {0}, kCpu));
    if (dt == float32 || dt == float64) {
      expect_match(scatter_add(a, {idx}, u, {0}, kGpu), scatter_add(a, {idx}, u, {0}, kCpu), 1e-9, 1e-9);
    } else {
      // Integer sums wrap identically in any order.
      expect_match(scatter_add(a, {idx}, u, {0}, kGpu), scatter_add(a, {idx}, u, {0}, kCpu));
    }
  }
}

TEST(GpuIndexing, MaskedScatterRanks) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, int8, complex64, bool_, float16}) {
    for (const auto& layout : kLayouts) {
      SCOPED_TRACE(dtype_name(dt) + " " + layout);
      array a = in_layout({5, 6, 7}, layout, [&](const Shape& s) { return values_of(s, dt); });
      array mask = in_layout({5, 6, 7}, layout, [&](const Shape& s) { return values_of(s, bool_); });
      array src = values_of({100}, dt);
      expect_match(masked_scatter(a, mask, src, kGpu), masked_scatter(a, mask, src, kCpu));
      // A mask of the leading axes, broadcast over the last (MLX aligns the mask with the
      // leading axes); a short source cycles.
      array m2 = values_of({5, 6}, bool_);
      array s2 = values_of({5}, dt);
      expect_match(masked_scatter(a, m2, s2, kGpu), masked_scatter(a, m2, s2, kCpu));
    }
  }
  array a = values_of({kLarge}, float32);
  array mask = values_of({kLarge}, bool_);
  array src = values_of({kLarge}, float32);
  expect_match(masked_scatter(a, mask, src, kGpu), masked_scatter(a, mask, src, kCpu));
}

// An index outside [-n, n) raises the CPU's std::out_of_range (same message) at eval and
// leaves the node's output zeroed; the kernels skip it, and the stream keeps working.
TEST(GpuIndexing, OutOfRangeIndicesThrowAtEvalAsOnTheCpu) {
  REQUIRE_GPU();
  array a = values_of({4, 3}, float32);
  for (Dtype it : {int32, int64, int8, uint8, uint64}) {
    const bool sgn = issubdtype(it, signedinteger);
    for (int bad : {4, 9, -5, -100}) {
      if (!sgn && bad < 0) continue;
      SCOPED_TRACE(dtype_name(it) + " bad " + std::to_string(bad));
      array idx = astype(array({1, bad, 0}, {3}, int32), it, kCpu);
      array idx2 = reshape(idx, {3, 1}, kCpu);
      array v = values_of({3, 3}, float32);
      std::vector<std::function<array(StreamOrDevice)>> ops = {
          [&](StreamOrDevice s) { return take(a, idx, 0, s); },
          [&](StreamOrDevice s) { return take_along_axis(a, idx2, 0, s); },
          [&](StreamOrDevice s) { return put_along_axis(a, idx2, slice(v, {0, 0}, {3, 1}, kCpu), 0, s); },
          [&](StreamOrDevice s) { return scatter_add_axis(a, idx2, slice(v, {0, 0}, {3, 1}, kCpu), 0, s); },
          [&](StreamOrDevice s) { return gather(a, {idx}, {0}, {1, 3}, s); },
          [&](StreamOrDevice s) { return scatter(a, {idx}, reshape(v, {3, 1, 3}, kCpu), {0}, s); },
          [&](StreamOrDevice s) { return scatter_max(a, {idx}, reshape(v, {3, 1, 3}, kCpu), {0}, s); },
      };
      for (size_t k = 0; k < ops.size(); ++k) {
        SCOPED_TRACE("op " + std::to_string(k));
        array y = ops[k](kGpu);
        const std::string want = range_error(ops[k](kCpu));
        ASSERT_FALSE(want.empty());
        EXPECT_EQ(range_error(y), want);
        for (double x : host_values(y)) ASSERT_EQ(x, 0.0);
      }
    }
  }
  // The error is raised once; the next GPU node runs normally.
  array good = array({2, -1}, {2}, int32);
  expect_match(take(a, good, 0, kGpu), take(a, good, 0, kCpu));
}

// The range checks are read once the device has run the node (StreamState::after_device,
// at the stream's next release event or synchronisation, with no host function on the
// stream): one bad node among many checked ones in one eval still raises at that eval, the
// others' results are right, and a following eval of more checked nodes than a release
// batch (8) raises nothing left over.
TEST(GpuIndexing, OneBadNodeAmongManyCheckedNodesRaisesAtItsEval) {
  REQUIRE_GPU();
  array a = values_of({4, 3}, float32);
  array good = array({2, -1, 0}, {3}, int32);
  array bad = array({1, 7, 0}, {3}, int32);
  std::vector<array> ys;
  for (int i = 0; i < 21; ++i) ys.push_back(take(a, i == 13 ? bad : good, 0, kGpu));
  EXPECT_THROW(eval(ys), std::out_of_range);
  array want = take(a, good, 0, kCpu);
  for (int i = 0; i < 21; ++i) {
    if (i == 13) {
      for (double x : host_values(ys[i])) ASSERT_EQ(x, 0.0);
    } else {
      expect_match(ys[i], want);
    }
  }
  std::vector<array> zs;
  for (int i = 0; i < 30; ++i) zs.push_back(take(a, good, 0, kGpu));
  EXPECT_NO_THROW(eval(zs));
  for (auto& z : zs) expect_match(z, want);
}

// ---------------------------------------------------------------------------------------
// slice_update, dynamic slice_update, concatenate

TEST(GpuSlicing, SliceUpdateWithStepsAndLayouts) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, float16, int8, int64, bool_, complex64, uint16}) {
    for (const auto& layout : kLayouts) {
      SCOPED_TRACE(dtype_name(dt) + " " + layout);
      array src = in_layout({9, 8, 7}, layout, [&](const Shape& s) { return values_of(s, dt); });
      // Window 1:8:3 x 7:0:-2 x 0:7 -> shape (3, 4, 7).
      array upd = in_layout({3, 4, 7}, layout, [&](const Shape& s) { return values_of(s, dt); });
      expect_match(slice_update(src, upd, {1, 7, 0}, {8, 0, 7}, {3, -2, 1}, kGpu),
                   slice_update(src, upd, {1, 7, 0}, {8, 0, 7}, {3, -2, 1}, kCpu));
      // An update broadcast to the window, and an empty window.
      array one = values_of({1}, dt);
      expect_match(slice_update(src, one, {2, 0, 1}, {5, 8, 6}, kGpu), slice_update(src, one, {2, 0, 1}, {5, 8, 6}, kCpu));
      array none = values_of({0, 8, 7}, dt);
      expect_match(slice_update(src, none, {3, 0, 0}, {3, 8, 7}, kGpu), slice_update(src, none, {3, 0, 0}, {3, 8, 7}, kCpu));
    }
  }
  array big = values_of({kLarge}, float32);
  array upd = values_of({(kLarge - 5) / 2}, float32);
  expect_match(slice_update(big, upd, {3}, {kLarge - 2}, {2}, kGpu), slice_update(big, upd, {3}, {kLarge - 2}, {2}, kCpu));
}

TEST(GpuSlicing, DynamicSliceUpdateStartsOnTheDevice) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, int16, complex64, bool_, float64}) {
    for (Dtype st : {int32, int64, uint8, int8}) {
      array src = in_layout({6, 7, 5}, "transposed", [&](const Shape& s) { return values_of(s, dt); });
      array upd = in_layout({2, 3, 5}, "strided", [&](const Shape& s) { return values_of(s, dt); });
      const bool sgn = issubdtype(st, signedinteger);
      // In range, negative (from the end), and past the end (clamped so the window fits).
      for (auto starts : std::vector<std::vector<int>>{{1, 2}, {4, 4}, {sgn ? -2 : 0, sgn ? -7 : 1}, {5, 100}}) {
        SCOPED_TRACE(dtype_name(dt) + " start " + dtype_name(st) + " " + std::to_string(starts[0]) + "," +
                     std::to_string(starts[1]));
        array start = astype(array({starts[0], starts[1]}, {2}, int32), st, kCpu);
        expect_match(slice_update(src, upd, start, {0, 1}, kGpu), slice_update(src, upd, start, {0, 1}, kCpu));
      }
      // An update of lower rank (leading axes of size 1), one axis.
      array row = values_of({5}, dt);
      array s1 = astype(array({3}, {1}, int32), st, kCpu);
      expect_match(slice_update(src, row, s1, {1}, kGpu), slice_update(src, row, s1, {1}, kCpu));
    }
  }
  array big = values_of({3, kLarge / 3}, float32);
  array upd = values_of({1, kLarge / 4}, float32);
  array start = array({2, 1000}, {2}, int64);
  expect_match(slice_update(big, upd, start, {0, 1}, kGpu), slice_update(big, upd, start, {0, 1}, kCpu));
}

TEST(GpuSlicing, ConcatenateLayoutsAxesAndEmpty) {
  REQUIRE_GPU();
  for (Dtype dt : {float32, bfloat16, uint8, int64, bool_, complex64}) {
    for (int axis : {0, 1, 2}) {
      SCOPED_TRACE(dtype_name(dt) + " axis " + std::to_string(axis));
      std::vector<array> parts;
      int k = 0;
      for (const auto& layout : kLayouts) {
        Shape s = {4, 5, 3};
        s[axis] = 1 + (k++ % 3);
        parts.push_back(in_layout(s, layout, [&](const Shape& sh) { return values_of(sh, dt); }));
      }
      Shape empty = {4, 5, 3};
      empty[axis] = 0;
      parts.insert(parts.begin() + 2, values_of(empty, dt));
      expect_match(concatenate(parts, axis, kGpu), concatenate(parts, axis, kCpu));
    }
  }
  array a = values_of({kLarge}, float32), b = values_of({1000}, float32);
  expect_match(concatenate({a, b, a}, 0, kGpu), concatenate({a, b, a}, 0, kCpu));
  array e = values_of({0, 3}, int32);
  expect_match(concatenate({e, e}, 0, kGpu), concatenate({e, e}, 0, kCpu));
}

// ---------------------------------------------------------------------------------------
// RandomBits

TEST(GpuRandom, BitsMatchCpuBitForBit) {
  REQUIRE_GPU();
  for (uint64_t seed : {uint64_t(0), uint64_t(7), (uint64_t(1) << 32) + 1, uint64_t(0xdeadbeefcafe)}) {
    array k = random::key(seed);
    for (int width : {1, 2, 4}) {
      for (const Shape& shape : std::vector<Shape>{{}, {1}, {2}, {3}, {5, 7}, {4, 4}, {kLarge}, {0}, {3, 0}}) {
        std::ostringstream name;
        name << "seed " << seed << " width " << width << " shape " << shape;
        SCOPED_TRACE(name.str());
        expect_match(random::bits(shape, width, k, kGpu), random::bits(shape, width, k, kCpu));
      }
    }
  }
  // MLX's values for key(0) (random_test.cpp's BitsOverKeysMatchMlx), on the GPU.
  array keys = array({0u, 0u, 1u, 1u}, Shape{2, 2});
  auto f = [](const array& key) { return random::bits({3}, 4, key, kGpu); };
  expect_close(vmap(f)(keys), {2, 3}, {4146024105.0, 1351547692.0, 2718843009.0, 3725146706.0, 1802982961.0, 1349634643.0}, 0, 0);
  // Several keys at once (vmap over keys, also from a transposed key array).
  array many = random::split(random::key(42), 5, kCpu);
  for (int width : {1, 2, 4}) {
    auto g = [&](const array& key) { return random::bits({3, 5}, width, key, kGpu); };
    auto h = [&](const array& key) { return random::bits({3, 5}, width, key, kCpu); };
    expect_match(vmap(g)(many), vmap(h)(many));
    array tk = transpose(many, kCpu);
    expect_match(vmap(g, 1)(tk), vmap(h, 1)(tk));
  }
}

} // namespace
} // namespace nuvec::testing
