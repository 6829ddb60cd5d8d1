// nuvec tests: the reduction families on the GPU (Reduce: sum, prod, max, min, all, any;
// ArgReduce: argmax, argmin; Scan: cumsum, cumprod, cummax, cummin, logcumsumexp) against the
// CPU kernels, which define the semantics. Each case builds the same op on Device::gpu and
// Device::cpu over the same fresh random input (its layout view built and evaluated on the
// CPU, so only the kernels under test run on the GPU) and compares the results on the host.
// Values are chosen so that results are exact whatever the order of accumulation (small
// integers for sums, powers of two for products, wrap-around integers), so those compare
// bit for bit and catch any lost or doubled element; float sums of normal values are checked
// against a float64 reference with an error bound. Layouts: contiguous, transposed, sliced
// with steps, broadcast, reversed (negative strides), misaligned; size 0, empty reductions,
// inputs over 2^20 elements (the split / chunked multi-pass paths), and more non-mergeable
// dimensions than the kernels' indexers walk.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu(Device::cpu);
const Device kGpu(Device::gpu);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<Dtype> kAllTypes = {bool_,   uint8,    uint16,  uint32,  uint64,
                                      int8,    int16,    int32,   int64,   float16,
                                      bfloat16, float32, float64, complex64};
const std::vector<Dtype> kFloatTypes = {float16, bfloat16, float32, float64};

bool is_float_type(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}
bool is_exact_type(Dtype t) {
  return !is_float_type(t) && t != complex64; // integers and bool
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

template <typename V>
std::string str(const V& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}
std::string str(Dtype t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// ---- inputs -------------------------------------------------------------------------------

/// What an input's values look like.
enum class Fill {
  small_int, // integers in [-8, 8] (bool: fair coin): sums exact in any order
  normal, // floats 2 N(0, 1); integers random 64-bit patterns (wrap-around)
  ties, // integers in [0, 3] (bool: fair coin): many equal extremes, many zeros
  pow2, // floats +-1 with rare +-2, +-0.5 (complex: +-1, +-i): products exact in any order
  mostly_true, // bool (and numbers): nonzero with probability 0.98
};

/// Fresh random values of `shape` as dtype t, evaluated on the CPU. nan_rate replaces that
/// fraction of elements with NaN (real float types only).
array make_values(const Shape& shape, Dtype t, Fill fill, double nan_rate = 0.0) {
  const int64_t n = numel(shape);
  auto& gen = rng();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::uniform_int_distribution<int64_t> small(-8, 8), tie(0, 3);
  auto number = [&]() -> double {
    switch (fill) {
      case Fill::small_int: return static_cast<double>(small(gen));
      case Fill::normal: return normal(gen);
      case Fill::ties: return static_cast<double>(tie(gen));
      case Fill::pow2: {
        const double sign = (gen() & 1) ? 1.0 : -1.0;
        const double u = unit(gen);
        return sign * (u < 0.005 ? 2.0 : u < 0.01 ? 0.5 : 1.0);
      }
      case Fill::mostly_true: return unit(gen) < 0.98 ? 1.0 + static_cast<double>(tie(gen)) : 0.0;
    }
    return 0.0;
  };
  array out = array(0);
  if (t == complex64) {
    std::vector<double> re(n), im(n);
    for (int64_t i = 0; i < n; ++i) {
      if (fill == Fill::pow2) {
        const uint64_t r = gen() % 4; // 1, -1, i, -i
        re[i] = r == 0 ? 1.0 : r == 1 ? -1.0 : 0.0;
        im[i] = r == 2 ? 1.0 : r == 3 ? -1.0 : 0.0;
      } else {
        re[i] = number();
        im[i] = number();
      }
    }
    array r = astype(array(re.begin(), shape, float64), complex64, kCpu);
    array m = astype(array(im.begin(), shape, float64), complex64, kCpu);
    out = add(r, multiply(m, array(std::complex<float>(0.0f, 1.0f)), kCpu), kCpu);
  } else if (is_float_type(t)) {
    std::vector<double> v(n);
    for (auto& x : v) x = unit(gen) < nan_rate ? kNaN : number();
    out = astype(array(v.begin(), shape, float64), t, kCpu);
  } else {
    std::vector<int64_t> v(n);
    for (auto& x : v) {
      if (t == bool_ && fill != Fill::mostly_true) x = static_cast<int64_t>(gen() & 1);
      else if (fill == Fill::normal) x = static_cast<int64_t>(gen()); // wraps to the dtype
      else x = static_cast<int64_t>(number());
    }
    out = astype(array(v.begin(), shape, int64), t, kCpu);
  }
  eval(out);
  return out;
}

/// How an input of a given logical shape is laid out in memory.
enum class Layout { contiguous, transposed, strided, broadcast, reversed, misaligned };
const std::vector<Layout> kAllLayouts = {Layout::contiguous, Layout::transposed, Layout::strided,
                                         Layout::broadcast,  Layout::reversed,   Layout::misaligned};

std::string str(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::strided: return "sliced with steps";
    case Layout::broadcast: return "broadcast";
    case Layout::reversed: return "reversed";
    case Layout::misaligned: return "misaligned";
  }
  return "?";
}

/// An evaluated CPU array of logical shape `shape` and the given layout: a transposed view
/// of a reversed-shape buffer, every other element along the first and last axes (offset
/// by one), a broadcast of a first axis of size 1, all axes reversed (negative strides), or
/// rows starting one element past an aligned address.
array make_input(const Shape& shape, Dtype t, Layout layout, Fill fill, double nan_rate = 0.0) {
  const int nd = static_cast<int>(shape.size());
  array out = array(0);
  switch (layout) {
    case Layout::contiguous:
      return make_values(shape, t, fill, nan_rate);
    case Layout::transposed: {
      Shape rev(shape.rbegin(), shape.rend());
      std::vector<int> perm(nd);
      for (int d = 0; d < nd; ++d) perm[d] = nd - 1 - d;
      out = transpose(make_values(rev, t, fill, nan_rate), perm, kCpu);
      break;
    }
    case Layout::strided: {
      Shape big = shape, start(nd, 0), stop = shape, step(nd, 1);
      for (int d : {0, nd - 1}) {
        big[d] = 2 * shape[d] + 1;
        start[d] = 1;
        stop[d] = 1 + 2 * shape[d];
        step[d] = 2;
      }
      out = slice(make_values(big, t, fill, nan_rate), start, stop, step, kCpu);
      break;
    }
    case Layout::broadcast: {
      Shape one = shape;
      one[0] = 1;
      out = broadcast_to(make_values(one, t, fill, nan_rate), shape, kCpu);
      break;
    }
    case Layout::reversed:
      out = flip(make_values(shape, t, fill, nan_rate), kCpu);
      break;
    case Layout::misaligned: {
      Shape big = shape, start(nd, 0);
      big[nd - 1] += 1;
      start[nd - 1] = 1;
      out = slice(make_values(big, t, fill, nan_rate), start, big, kCpu);
      break;
    }
  }
  eval(out);
  EXPECT_EQ(out.shape(), shape);
  return out;
}

// ---- comparison -----------------------------------------------------------------------------

/// a's elements in row-major order as float64 / int64 (integers wrap bijectively), computed
/// on the CPU (a GPU-resident array is copied back by the CPU kernels).
std::vector<double> host_f64(const array& a) {
  array c = astype(contiguous(a, false, kCpu), float64, kCpu);
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}
std::vector<int64_t> host_i64(const array& a) {
  array c = astype(contiguous(a, false, kCpu), int64, kCpu);
  eval(c);
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.size());
}

/// Asserts got (GPU) and want (CPU) have equal shapes and dtypes and matching elements:
/// integers and bools exactly; floats within atol + rtol |want| (0, 0: exactly), NaN where
/// want is NaN and the same infinities; complex part by part.
void expect_match(const array& got, const array& want, const std::string& what, double rtol = 0.0, double atol = 0.0) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (want.dtype() == complex64) {
    expect_match(real(got, kCpu), real(want, kCpu), what + " (real part)", rtol, atol);
    expect_match(imag(got, kCpu), imag(want, kCpu), what + " (imaginary part)", rtol, atol);
    return;
  }
  int failures = 0;
  if (is_exact_type(want.dtype())) {
    auto g = host_i64(got), w = host_i64(want);
    for (size_t i = 0; i < w.size() && failures < 5; ++i) {
      if (g[i] != w[i]) {
        ADD_FAILURE() << what << ": at flat index " << i << " GPU " << g[i] << ", CPU " << w[i];
        ++failures;
      }
    }
    return;
  }
  auto g = host_f64(got), w = host_f64(want);
  for (size_t i = 0; i < w.size() && failures < 5; ++i) {
    bool ok;
    if (std::isnan(w[i])) ok = std::isnan(g[i]);
    else if (std::isinf(w[i])) ok = g[i] == w[i];
    else ok = std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok) {
      ADD_FAILURE() << what << ": at flat index " << i << " GPU " << g[i] << ", CPU " << w[i];
      ++failures;
    }
  }
}

/// Runs f on the CPU and on the GPU and compares (see expect_match).
void compare(const std::function<array(StreamOrDevice)>& f, const std::string& what, double rtol = 0.0, double atol = 0.0) {
  array want = f(kCpu);
  eval(want);
  array got = f(kGpu);
  eval(got);
  expect_match(got, want, what, rtol, atol);
}

// ---- Reduce -------------------------------------------------------------------------------

using AxesOp = std::function<array(const array&, const std::vector<int>&, StreamOrDevice)>;

struct NamedOp {
  std::string name;
  AxesOp f;
};

const NamedOp kSum{"sum", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return sum(a, ax, false, s); }};
const NamedOp kProd{"prod", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return prod(a, ax, false, s); }};
const NamedOp kMax{"max", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return max(a, ax, false, s); }};
const NamedOp kMin{"min", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return min(a, ax, false, s); }};
const NamedOp kAll{"all", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return all(a, ax, false, s); }};
const NamedOp kAny{"any", [](const array& a, const std::vector<int>& ax, StreamOrDevice s) { return any(a, ax, false, s); }};

struct ReduceCase {
  Shape shape;
  std::vector<int> axes;
};

/// Shapes and axes covering the kernels' paths: rows (reduced axes innermost), columns
/// (reduced axes outer: wide, narrow and unaligned inner runs), general strided mixes, the
/// all-reduce, few long rows (split across blocks) and few long columns (split rows).
const std::vector<ReduceCase> kReduceCases = {
    {{33, 65, 17}, {0}},       {{33, 65, 17}, {1}},   {{33, 65, 17}, {2}},
    {{33, 65, 17}, {0, 1}},    {{33, 65, 17}, {0, 2}}, {{33, 65, 17}, {1, 2}},
    {{33, 65, 17}, {0, 1, 2}}, {{64, 256}, {0}},      {{64, 256}, {1}},
    {{4, 3000, 5}, {1}},       {{3, 50000}, {1}},     {{50000, 3}, {0}},
    {{7, 1}, {0}},             {{1, 7}, {1}},
};

std::string what_of(const std::string& op, Dtype t, Layout l, const ReduceCase& c) {
  return op + " " + str(t) + " " + str(l) + " shape " + str(c.shape) + " axes " + str(c.axes);
}

/// Compares op over every case, layout and dtype, on fresh inputs of the given fill.
void sweep_reduce(const NamedOp& op, const std::vector<Dtype>& types, Fill fill, double nan_rate = 0.0,
    const std::vector<ReduceCase>& cases = kReduceCases) {
  for (Dtype t : types) {
    for (Layout l : kAllLayouts) {
      for (const auto& c : cases) {
        array x = make_input(c.shape, t, l, fill, is_float_type(t) ? nan_rate : 0.0);
        compare([&](StreamOrDevice s) { return op.f(x, c.axes, s); }, what_of(op.name, t, l, c));
      }
    }
  }
}

TEST(GpuReduce, SumExact) {
  NUVEC_REQUIRE_GPU();
  // Small integers: every partial sum is exact, so any accumulation order gives the CPU's
  // bits; bool and the narrow integers sum in int32/uint32 (the op's cast).
  sweep_reduce(kSum, {bool_, uint8, int8, int16, uint32, int32, uint64, int64, float16, bfloat16, float32, float64, complex64},
      Fill::small_int);
}

TEST(GpuReduce, SumWrapsIntegers) {
  NUVEC_REQUIRE_GPU();
  // Random 64-bit patterns: sums wrap around, which is order independent.
  sweep_reduce(kSum, {uint32, int32, uint64, int64}, Fill::normal);
}

TEST(GpuReduce, SumLarge) {
  NUVEC_REQUIRE_GPU();
  const std::vector<ReduceCase> cases = {
      {{(1 << 20) + 17}, {0}}, {{2048, 2051}, {0}}, {{2048, 2051}, {1}}, {{2048, 2051}, {0, 1}},
      {{16, 65536}, {1}},      {{65536, 16}, {0}},
  };
  for (Dtype t : {float32, int32, float16, float64}) {
    for (Layout l : {Layout::contiguous, Layout::transposed, Layout::misaligned}) {
      for (const auto& c : cases) {
        array x = make_input(c.shape, t, l, Fill::small_int);
        compare([&](StreamOrDevice s) { return sum(x, c.axes, false, s); }, what_of("sum", t, l, c));
        compare([&](StreamOrDevice s) { return max(x, c.axes, false, s); }, what_of("max", t, l, c));
      }
    }
  }
}

TEST(GpuReduce, SumFloatAccuracy) {
  NUVEC_REQUIRE_GPU();
  // Normal values against a float64 reference: within the float accumulation error bound
  // (a few ulps of the sum of magnitudes) plus one rounding to the output dtype.
  const std::vector<ReduceCase> cases = {
      {{(1 << 20) + 17}, {0}}, {{300, 1000}, {0}}, {{300, 1000}, {1}}, {{33, 65, 17}, {0, 2}},
      {{5, 100000}, {1}},
  };
  for (Dtype t : kFloatTypes) {
    const double eps_out = t == float16 ? 1.0 / 1024 : t == bfloat16 ? 1.0 / 128 : t == float32 ? 1.2e-7 : 2.3e-16;
    const double eps_acc = t == float64 ? 2.3e-16 : 1.2e-7;
    for (Layout l : {Layout::contiguous, Layout::transposed}) {
      for (const auto& c : cases) {
        array x = make_input(c.shape, t, l, Fill::normal);
        array got = sum(x, c.axes, false, kGpu);
        array x64 = astype(x, float64, kCpu);
        array ref = sum(x64, c.axes, false, kCpu);
        array mag = sum(abs(x64, kCpu), c.axes, false, kCpu);
        eval(got, ref, mag);
        auto g = host_f64(got), r = host_f64(ref), m = host_f64(mag);
        ASSERT_EQ(g.size(), r.size());
        int failures = 0;
        for (size_t i = 0; i < r.size() && failures < 5; ++i) {
          const double bound = eps_out * std::abs(r[i]) + 32 * eps_acc * m[i] + 1e-300;
          if (!(std::abs(g[i] - r[i]) <= bound)) {
            ADD_FAILURE() << what_of("sum", t, l, c) << ": at " << i << " GPU " << g[i] << ", float64 " << r[i]
                          << ", bound " << bound;
            ++failures;
          }
        }
      }
    }
  }
}

TEST(GpuReduce, ProdExact) {
  NUVEC_REQUIRE_GPU();
  // Integers wrap (random bits); floats are +-1, +-2, +-0.5 and complex +-1, +-i, whose
  // products are exact in any order.
  sweep_reduce(kProd, {uint32, int32, uint64, int64, int8, bool_}, Fill::normal);
  sweep_reduce(kProd, {float16, bfloat16, float32, float64, complex64}, Fill::pow2);
}

TEST(GpuReduce, MaxMinWithNaN) {
  NUVEC_REQUIRE_GPU();
  for (const auto& op : {kMax, kMin}) {
    // Without NaNs: every dtype (complex ordered lexicographically, bool as or/and).
    sweep_reduce(op, kAllTypes, Fill::normal);
    // Ties (signed zeros, repeated extremes) and NaNs, which win wherever they are.
    sweep_reduce(op, kFloatTypes, Fill::ties, 0.002);
    sweep_reduce(op, {float32, float64}, Fill::normal, 0.02);
  }
}

TEST(GpuReduce, AllAny) {
  NUVEC_REQUIRE_GPU();
  for (const auto& op : {kAll, kAny}) {
    sweep_reduce(op, {bool_, float32, int32, complex64}, Fill::ties);
    sweep_reduce(op, {bool_, float16, uint8}, Fill::mostly_true);
  }
}

TEST(GpuReduce, EmptyAndSizeZero) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : {float32, int32, bool_, complex64}) {
    array x = make_values({5, 0, 3}, t, Fill::small_int);
    for (const auto& op : {kSum, kProd, kAll, kAny}) {
      // Empty reductions give the identity; reductions of size-0 outputs give size 0.
      for (const auto& axes : std::vector<std::vector<int>>{{1}, {0, 1}, {0}, {0, 2}, {0, 1, 2}}) {
        compare([&](StreamOrDevice s) { return op.f(x, axes, s); },
            op.name + " " + str(t) + " size-0 input, axes " + str(axes));
      }
    }
    // max/min of nothing is an error on both devices (raised by the op).
    expect_throws_naming<std::invalid_argument>([&] { eval(max(x, 1, false, kGpu)); }, "max");
    expect_throws_naming<std::invalid_argument>([&] { eval(min(x, 1, false, kGpu)); }, "min");
  }
}

TEST(GpuReduce, ManyNonMergeableDims) {
  NUVEC_REQUIRE_GPU();
  // 18 axes of size 2, every other one reduced: 9 kept dims that do not merge, beyond what
  // the kernels' indexer walks.
  Shape shape(18, 2);
  std::vector<int> odd, even;
  for (int d = 0; d < 18; ++d) (d % 2 ? odd : even).push_back(d);
  for (Dtype t : {float32, int64}) {
    array x = make_values(shape, t, Fill::small_int);
    compare([&](StreamOrDevice s) { return sum(x, odd, false, s); }, "sum over odd axes " + str(t));
    compare([&](StreamOrDevice s) { return max(x, even, false, s); }, "max over even axes " + str(t));
  }
}

TEST(GpuReduce, MeanVarThroughSum) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : {float32, float16}) {
    array x = make_input({300, 1000}, t, Layout::transposed, Fill::normal);
    for (int axis : {0, 1}) {
      const double rtol = t == float16 ? 4e-3 : 1e-4;
      compare([&](StreamOrDevice s) { return mean(x, axis, false, s); }, "mean " + str(t), rtol, rtol);
      compare([&](StreamOrDevice s) { return var(x, axis, false, 0, s); }, "var " + str(t), rtol, rtol);
    }
  }
}

// ---- ArgReduce ----------------------------------------------------------------------------

using ArgOp = std::function<array(const array&, int, StreamOrDevice)>;
const std::vector<std::pair<std::string, ArgOp>> kArgOps = {
    {"argmax", [](const array& a, int ax, StreamOrDevice s) { return argmax(a, ax, false, s); }},
    {"argmin", [](const array& a, int ax, StreamOrDevice s) { return argmin(a, ax, false, s); }},
};

TEST(GpuArgReduce, TiesNaNsLayoutsDtypes) {
  NUVEC_REQUIRE_GPU();
  // Values in [0, 3]: the extreme occurs many times and the first occurrence must win; NaNs
  // (first one wins) in a share of the float cases.
  const Shape shape = {33, 65, 17};
  for (const auto& [name, op] : kArgOps) {
    for (Dtype t : kAllTypes) {
      for (Layout l : kAllLayouts) {
        for (double nan_rate : {0.0, 0.003}) {
          if (nan_rate > 0 && !is_float_type(t)) continue;
          array x = make_input(shape, t, l, Fill::ties, nan_rate);
          for (int axis : {0, 1, 2}) {
            compare([&](StreamOrDevice s) { return op(x, axis, s); },
                name + " " + str(t) + " " + str(l) + " axis " + std::to_string(axis) + " nan rate " +
                    std::to_string(nan_rate));
          }
          // Over the flattened array (flattened on the CPU).
          array flat = reshape(x, {-1}, kCpu);
          eval(flat);
          compare([&](StreamOrDevice s) { return op(flat, 0, s); }, name + " flat " + str(t) + " " + str(l));
        }
      }
    }
  }
}

TEST(GpuArgReduce, Large) {
  NUVEC_REQUIRE_GPU();
  struct Case {
    Shape shape;
    int axis;
  };
  const std::vector<Case> cases = {
      {{(1 << 20) + 17}, 0}, {{3, 200000}, 1}, {{200000, 3}, 0}, {{64, 4096}, 1}, {{4096, 64}, 0},
  };
  for (const auto& [name, op] : kArgOps) {
    for (Dtype t : {float32, int32, float16, float64, uint8}) {
      for (Fill fill : {Fill::ties, Fill::normal}) {
        for (const auto& c : cases) {
          array x = make_input(c.shape, t, Layout::contiguous, fill, is_float_type(t) ? 1e-6 : 0.0);
          compare([&](StreamOrDevice s) { return op(x, c.axis, s); },
              name + " " + str(t) + " shape " + str(c.shape) + " axis " + std::to_string(c.axis));
        }
      }
    }
  }
}

TEST(GpuArgReduce, FirstNaNWins) {
  NUVEC_REQUIRE_GPU();
  std::vector<double> v(100000, 1.0);
  v[70000] = 5.0;
  v[123] = kNaN;
  v[99999] = kNaN;
  array x = astype(array(v.begin(), {100000}, float64), float32, kCpu);
  array amax = argmax(x, 0, false, kGpu), amin = argmin(x, 0, false, kGpu);
  eval(amax, amin);
  EXPECT_EQ(host_i64(amax)[0], 123);
  EXPECT_EQ(host_i64(amin)[0], 123);
  v[123] = 1.0;
  v[99999] = 1.0;
  array y = astype(array(v.begin(), {100000}, float64), float32, kCpu);
  array ymax = argmax(y, 0, false, kGpu), ymin = argmin(y, 0, false, kGpu);
  eval(ymax, ymin);
  EXPECT_EQ(host_i64(ymax)[0], 70000);
  EXPECT_EQ(host_i64(ymin)[0], 0);
}

// ---- Scan -----------------------------------------------------------------------------------

using ScanOpFn = std::function<array(const array&, int, bool, bool, StreamOrDevice)>;
struct NamedScan {
  std::string name;
  ScanOpFn f;
};
const NamedScan kCumsum{"cumsum", [](const array& a, int ax, bool r, bool inc, StreamOrDevice s) { return cumsum(a, ax, r, inc, s); }};
const NamedScan kCumprod{"cumprod", [](const array& a, int ax, bool r, bool inc, StreamOrDevice s) { return cumprod(a, ax, r, inc, s); }};
const NamedScan kCummax{"cummax", [](const array& a, int ax, bool r, bool inc, StreamOrDevice s) { return cummax(a, ax, r, inc, s); }};
const NamedScan kCummin{"cummin", [](const array& a, int ax, bool r, bool inc, StreamOrDevice s) { return cummin(a, ax, r, inc, s); }};
const NamedScan kLogcumsumexp{"logcumsumexp", [](const array& a, int ax, bool r, bool inc, StreamOrDevice s) {
                                return logcumsumexp(a, ax, r, inc, s);
                              }};

struct ScanCase {
  Shape shape;
  int axis;
};

/// Shapes covering the paths: last axis (block scan per row; short rows one thread per
/// row), middle and first axes (one thread per column), few long rows or columns (chunked
/// three-pass scans).
const std::vector<ScanCase> kScanCases = {
    {{17, 33, 9}, 0}, {{17, 33, 9}, 1}, {{17, 33, 9}, 2}, {{5, 3000}, 1}, {{4, 20}, 1},
    {{2, 30000}, 1},  {{30000, 2}, 0},  {{3, 1}, 1},     {{1, 3}, 0},
};

/// Compares op for every case, layout, dtype and (reverse, inclusive) pair.
void sweep_scan(const NamedScan& op, const std::vector<Dtype>& types, Fill fill, double nan_rate = 0.0,
    double rtol = 0.0, double atol = 0.0, const std::vector<ScanCase>& cases = kScanCases,
    const std::vector<Layout>& layouts = kAllLayouts) {
  for (Dtype t : types) {
    for (Layout l : layouts) {
      for (const auto& c : cases) {
        array x = make_input(c.shape, t, l, fill, is_float_type(t) ? nan_rate : 0.0);
        for (bool reverse : {false, true}) {
          for (bool inclusive : {true, false}) {
            compare([&](StreamOrDevice s) { return op.f(x, c.axis, reverse, inclusive, s); },
                op.name + " " + str(t) + " " + str(l) + " shape " + str(c.shape) + " axis " +
                    std::to_string(c.axis) + (reverse ? " reverse" : "") + (inclusive ? "" : " exclusive"),
                rtol, atol);
          }
        }
      }
    }
  }
}

TEST(GpuScan, CumsumExact) {
  NUVEC_REQUIRE_GPU();
  sweep_scan(kCumsum, {bool_, int8, uint16, int32, uint32, int64, float16, bfloat16, float32, float64, complex64},
      Fill::small_int);
  sweep_scan(kCumsum, {int32, uint32, int64, uint64}, Fill::normal); // wrap-around
}

TEST(GpuScan, CumprodExact) {
  NUVEC_REQUIRE_GPU();
  sweep_scan(kCumprod, {int32, uint32, int64, uint64}, Fill::normal);
  sweep_scan(kCumprod, {float16, bfloat16, float32, float64, complex64}, Fill::pow2);
}

TEST(GpuScan, CummaxCumminWithNaN) {
  NUVEC_REQUIRE_GPU();
  for (const auto& op : {kCummax, kCummin}) {
    sweep_scan(op, {bool_, uint8, int16, uint32, int64, float16, bfloat16, float32, float64}, Fill::normal);
    sweep_scan(op, {float16, float32, float64}, Fill::ties, 0.01);
  }
}

TEST(GpuScan, Logcumsumexp) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kFloatTypes) {
    // One rounding of the float result for the half types; the rest is the float error of
    // a differently grouped accumulation.
    const double rtol = t == float16 ? 2e-3 : t == bfloat16 ? 1.6e-2 : t == float32 ? 2e-5 : 1e-12;
    sweep_scan(kLogcumsumexp, {t}, Fill::normal, 0.0, rtol, rtol);
    sweep_scan(kLogcumsumexp, {t}, Fill::normal, 0.003, rtol, rtol, {{{17, 33, 9}, 1}, {{5, 3000}, 1}});
  }
  // Infinities: -inf is the identity, +inf absorbs.
  std::vector<double> v = {-kInf, -kInf, 1.0, -kInf, kInf, 2.0, -kInf, kNaN, 3.0};
  array x = astype(array(v.begin(), {9}, float64), float32, kCpu);
  for (bool reverse : {false, true}) {
    compare([&](StreamOrDevice s) { return logcumsumexp(x, 0, reverse, true, s); }, "logcumsumexp with infinities", 1e-6, 1e-6);
  }
}

TEST(GpuScan, Large) {
  NUVEC_REQUIRE_GPU();
  const std::vector<ScanCase> cases = {
      {{(1 << 20) + 17}, 0}, {{3, 400000}, 1}, {{400000, 3}, 0}, {{512, 2049}, 1}, {{2049, 512}, 0},
  };
  const std::vector<Layout> layouts = {Layout::contiguous, Layout::transposed};
  sweep_scan(kCumsum, {float32, int32, float16}, Fill::small_int, 0.0, 0.0, 0.0, cases, layouts);
  sweep_scan(kCummax, {float32}, Fill::normal, 1e-6, 0.0, 0.0, cases, layouts);
  sweep_scan(kCumprod, {float64}, Fill::pow2, 0.0, 0.0, 0.0, cases, {Layout::contiguous});
}

TEST(GpuScan, SizeZeroAndManyDims) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : {float32, int32}) {
    array x = make_values({5, 0, 3}, t, Fill::small_int);
    for (int axis : {0, 1, 2}) {
      compare([&](StreamOrDevice s) { return cumsum(x, axis, false, true, s); }, "cumsum size 0 axis " + std::to_string(axis));
    }
    // More non-mergeable dims than the indexers walk: a transposed 18-d input.
    array y = make_values(Shape(18, 2), t, Fill::small_int);
    std::vector<int> perm(18);
    std::iota(perm.begin(), perm.end(), 0);
    std::reverse(perm.begin(), perm.end());
    std::swap(perm[0], perm[1]);
    array yt = transpose(y, perm, kCpu);
    eval(yt);
    for (int axis : {0, 9, 17}) {
      compare([&](StreamOrDevice s) { return cumsum(yt, axis, true, false, s); }, "cumsum 18-d axis " + std::to_string(axis));
    }
  }
}

} // namespace
} // namespace nuvec::testing
