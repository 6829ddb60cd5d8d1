// nuvec tests: the element-wise and copy families on the GPU (Unary, Binary, DivMod, Select,
// AsType, Full, Arange, the copy kernels behind contiguous/reshape) against the CPU kernels,
// which define the semantics. Each case builds the same graph on Device::gpu and Device::cpu
// from the same fresh random inputs (special values included: NaN, infinities, signed zeros,
// ties, integer extremes) and compares the results on the host: integers and bools exactly,
// floating results to a few ulps of their dtype. Layouts: contiguous, transposed, broadcast,
// sliced with steps, misaligned, 0-d scalars, size 0, over 2^20 elements, and more
// non-mergeable dimensions than the kernels' indexer walks. Unary and Binary nodes are built
// directly from their primitives, so every (op, dtype) pair is covered, including the ones
// the ops layer never forms; pairs the CPU rejects must be rejected on the GPU as well.
#include <chrono>
#include <cmath>
#include <iostream>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "primitives/elementwise.h"
#include "primitives/primitives.h"
#include "test_utils.h"

namespace nuvec::testing {
namespace {

#define NUVEC_REQUIRE_GPU() \
  if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU"

const Device kCpu(Device::cpu);
const Device kGpu(Device::gpu);

const std::vector<Dtype> kAllTypes = {bool_,   uint8,   uint16,  uint32,  uint64,
                                      int8,    int16,   int32,   int64,   float16,
                                      bfloat16, float32, float64, complex64};

bool is_float_type(Dtype t) {
  return t == float16 || t == bfloat16 || t == float32 || t == float64;
}
bool is_int_type(Dtype t) {
  return !is_float_type(t) && t != complex64; // bool included
}

std::string type_name(Dtype t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// ---- inputs -------------------------------------------------------------------------------

// What an input's values look like.
enum class Values {
  normal,    // floats: 2 * N(0, 1) plus special values; integers: random bits plus extremes
  unit,      // floats in (-1, 1) (domains of arcsin, arctanh, erfinv)
  small_int, // integers in [-3, 20] (exponents), floats 2 * N(0, 1)
  shift,     // integers in [-2, 70] (shift counts)
  divisor,   // integers in [-20, 20] with many 0 and -1; floats 2 * N(0, 1) with zeros
};

int64_t shape_size(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Fresh random values of `shape` as dtype t, evaluated on the CPU.
array make_values(const Shape& shape, Dtype t, Values kind = Values::normal) {
  const int64_t n = shape_size(shape);
  auto& gen = rng();
  array out = array(0);
  if (is_float_type(t) || t == complex64) {
    std::normal_distribution<double> normal(0.0, 2.0);
    std::uniform_real_distribution<double> unit(-0.999, 0.999);
    // Complex values stay finite and nonzero divisors: the complex special cases (C99
    // Annex G) are not pinned down by the CPU kernels.
    const bool specials = t != complex64;
    auto draw = [&]() {
      std::vector<double> v(n);
      for (auto& x : v) x = kind == Values::unit ? unit(gen) : normal(gen);
      if (specials && kind == Values::normal) {
        const double inf = std::numeric_limits<double>::infinity();
        const double sp[] = {0.0, -0.0, inf, -inf, std::nan(""), 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0};
        for (int64_t i = 0; i < n && i < 12; ++i) v[(i * 7919) % n] = sp[i];
      }
      if (specials && kind == Values::divisor) {
        for (int64_t i = 0; i < n; i += 5) v[i] = 0.0;
      }
      return array(v.begin(), shape, float64);
    };
    if (t == complex64) {
      array re = draw(), im = draw();
      out = add(astype(re, complex64, kCpu),
                multiply(astype(im, complex64, kCpu), array(std::complex<float>(0.0f, 1.0f)), kCpu),
                kCpu);
    } else {
      out = astype(draw(), t, kCpu);
    }
  } else if (t == bool_) {
    std::vector<int64_t> v(n);
    for (auto& x : v) x = gen() & 1;
    out = astype(array(v.begin(), shape, int64), bool_, kCpu);
  } else {
    std::vector<int64_t> v(n);
    std::uniform_int_distribution<int64_t> small(-3, 20), shift(-2, 70), div(-20, 20);
    for (auto& x : v) {
      switch (kind) {
        case Values::small_int: x = small(gen); break;
        case Values::shift: x = shift(gen); break;
        case Values::divisor: {
          uint64_t r = gen() % 4;
          x = r == 0 ? 0 : r == 1 ? -1 : div(gen);
          break;
        }
        default: x = static_cast<int64_t>(gen()); break;
      }
    }
    if (kind == Values::normal) {
      const int64_t ext[] = {0, 1, -1, std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), 127, -128, 255, 32767,
                             -32768, 65535, 2147483647, -2147483647 - 1};
      for (int64_t i = 0; i < n && i < 13; ++i) v[(i * 7919) % n] = ext[i];
    }
    // Narrow types keep the low bits (casts between integers wrap).
    out = astype(array(v.begin(), shape, int64), t, kCpu);
  }
  eval(out);
  return out;
}

// ---- comparison -----------------------------------------------------------------------------

// a's elements in row-major order as float64 / uint64 bits, computed on the CPU.
std::vector<double> host_f64(const array& a) {
  array c = astype(contiguous(a, false, kCpu), float64, kCpu);
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}
std::vector<uint64_t> host_u64(const array& a) {
  array c = astype(contiguous(a, false, kCpu), uint64, kCpu);
  eval(c);
  const uint64_t* p = c.data<uint64_t>();
  return std::vector<uint64_t>(p, p + c.size());
}

// Relative and absolute tolerance of results of dtype t (a few ulps; half types differ by at
// most one rounding of the float result).
std::pair<double, double> tolerance(Dtype t) {
  if (t == float64) return {1e-12, 1e-13};
  if (t == float16) return {4e-3, 1e-4};
  if (t == bfloat16) return {2e-2, 1e-3};
  if (t == complex64) return {1e-4, 1e-5};
  return {1e-5, 1e-6};
}

// Asserts gpu and cpu have equal shapes and dtypes, and equal (integers) or close elements.
// `cond`, when given, is a per-element condition number |x f'(x)| of the op: the absolute
// tolerance grows with it, since a function near a pole turns each device's few ulps of
// internal rounding into a large absolute (and relative) difference.
void expect_match(const array& gpu, const array& cpu, const std::string& what,
                  double rtol_scale = 1.0, const std::vector<double>* cond = nullptr) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  int failures = 0;
  auto fail = [&](int64_t i, const std::string& got, const std::string& want) {
    ADD_FAILURE() << what << ": at flat index " << i << " GPU " << got << ", CPU " << want;
    return ++failures >= 5;
  };
  Dtype t = cpu.dtype();
  if (is_int_type(t)) {
    auto g = host_u64(gpu), c = host_u64(cpu);
    for (size_t i = 0; i < c.size(); ++i) {
      if (g[i] != c[i] && fail(i, std::to_string(g[i]), std::to_string(c[i]))) return;
    }
    return;
  }
  auto [rtol, atol] = tolerance(t);
  rtol *= rtol_scale;
  auto close = [&](double g, double c, double scale) {
    if (std::isnan(c)) return std::isnan(g);
    if (std::isinf(c)) return g == c;
    return std::abs(g - c) <= atol * scale + rtol * std::abs(c);
  };
  if (t == complex64) {
    auto gr = host_f64(real(gpu, kCpu)), gi = host_f64(imag(gpu, kCpu));
    auto cr = host_f64(real(cpu, kCpu)), ci = host_f64(imag(cpu, kCpu));
    for (size_t i = 0; i < cr.size(); ++i) {
      double mag = std::max(1.0, std::hypot(cr[i], ci[i]));
      if (cond) mag = std::max(mag, (*cond)[i]);
      if (!close(gr[i], cr[i], mag) || !close(gi[i], ci[i], mag)) {
        if (fail(i, "(" + std::to_string(gr[i]) + ", " + std::to_string(gi[i]) + ")",
                 "(" + std::to_string(cr[i]) + ", " + std::to_string(ci[i]) + ")")) {
          return;
        }
      }
    }
    return;
  }
  auto g = host_f64(gpu), c = host_f64(cpu);
  for (size_t i = 0; i < c.size(); ++i) {
    double scale = cond ? std::max(1.0, (*cond)[i]) : 1.0;
    if (!close(g[i], c[i], scale) && fail(i, std::to_string(g[i]), std::to_string(c[i]))) return;
  }
}

// Evaluates f on the CPU and on the GPU; when the CPU rejects it with invalid_argument, the
// GPU must too (naming the same op); else the results must match. Returns false when rejected.
bool compare_devices(const std::function<array(Device)>& f, const std::string& what,
                     double rtol_scale = 1.0,
                     const std::function<std::vector<double>(const array&)>& cond_of = {}) {
  array cpu = f(kCpu);
  try {
    eval(cpu);
  } catch (const std::invalid_argument& e) {
    array gpu = f(kGpu);
    std::string msg = e.what();
    std::string op = msg.substr(0, msg.find(']') + 1);
    expect_throws_naming<std::invalid_argument>([&] { eval(gpu); }, op);
    return false;
  }
  array gpu = f(kGpu);
  eval(gpu);
  if (cond_of) {
    std::vector<double> cond = cond_of(cpu);
    expect_match(gpu, cpu, what, rtol_scale, &cond);
  } else {
    expect_match(gpu, cpu, what, rtol_scale);
  }
  return true;
}

// ---- layouts --------------------------------------------------------------------------------

// An input of shape {5, 7, 9} (or the given one) laid out in a named way, its views built on
// device d from values made once per case (so both devices see the same elements).
struct Layout {
  std::string name;
  Shape base;                                          // the shape the values are made in
  std::function<array(const array&, Device)> view;     // base values -> input of the case
};

const Shape kShape = {5, 7, 9};

std::vector<Layout> unary_layouts() {
  return {
      {"contiguous", kShape, [](const array& x, Device) { return x; }},
      {"transposed", {9, 7, 5}, [](const array& x, Device d) { return transpose(x, {2, 1, 0}, d); }},
      {"broadcast", {5, 1, 9}, [](const array& x, Device d) { return broadcast_to(x, kShape, d); }},
      {"broadcast scalar", {1}, [](const array& x, Device d) { return broadcast_to(x, kShape, d); }},
      {"sliced with steps", {10, 7, 18},
       [](const array& x, Device d) { return slice(x, {0, 0, 1}, {10, 7, 18}, {2, 1, 2}, d); }},
      {"reversed", {5, 7, 9},
       [](const array& x, Device d) { return slice(x, {4, 6, 8}, {-6, -8, -10}, {-1, -1, -1}, d); }},
      {"misaligned", {316},
       [](const array& x, Device d) { return reshape(slice(x, {1}, {316}, d), kShape, d); }},
      {"0-d", {}, [](const array& x, Device) { return x; }},
      {"size 0", {0, 7}, [](const array& x, Device) { return x; }},
  };
}

// A unary node of the Unary primitive on device d (any op on any dtype, as the CPU kernel sees).
array unary_node(UnaryOp op, const array& a, Device d) {
  return array(a.shape(), unary_output_dtype(op, a.dtype()),
               std::make_shared<Unary>(to_stream(d), op), {a});
}

// A Binary node; inputs of one dtype, each of the output shape or 0-d.
array binary_node(BinaryOp op, const array& a, const array& b, Device d) {
  Shape shape = a.ndim() == 0 ? b.shape() : a.shape();
  return array(shape, binary_output_dtype(op, a.dtype()),
               std::make_shared<Binary>(to_stream(d), op), {a, b});
}

struct UnaryCase {
  UnaryOp op;
  const char* name;
  Values values;
};

const std::vector<UnaryCase> kUnaryOps = {
    {UnaryOp::Abs, "abs", Values::normal},
    {UnaryOp::Negative, "negative", Values::normal},
    {UnaryOp::Sign, "sign", Values::normal},
    {UnaryOp::Floor, "floor", Values::normal},
    {UnaryOp::Ceil, "ceil", Values::normal},
    {UnaryOp::Round, "round", Values::normal},
    {UnaryOp::Sqrt, "sqrt", Values::normal},
    {UnaryOp::Rsqrt, "rsqrt", Values::normal},
    {UnaryOp::Square, "square", Values::normal},
    {UnaryOp::Exp, "exp", Values::normal},
    {UnaryOp::Expm1, "expm1", Values::normal},
    {UnaryOp::Log, "log", Values::normal},
    {UnaryOp::Log2, "log2", Values::normal},
    {UnaryOp::Log10, "log10", Values::normal},
    {UnaryOp::Log1p, "log1p", Values::normal},
    {UnaryOp::Sin, "sin", Values::normal},
    {UnaryOp::Cos, "cos", Values::normal},
    {UnaryOp::Tan, "tan", Values::normal},
    {UnaryOp::ArcSin, "arcsin", Values::unit},
    {UnaryOp::ArcCos, "arccos", Values::unit},
    {UnaryOp::ArcTan, "arctan", Values::normal},
    {UnaryOp::Sinh, "sinh", Values::normal},
    {UnaryOp::Cosh, "cosh", Values::normal},
    {UnaryOp::Tanh, "tanh", Values::normal},
    {UnaryOp::ArcSinh, "arcsinh", Values::normal},
    {UnaryOp::ArcCosh, "arccosh", Values::normal},
    {UnaryOp::ArcTanh, "arctanh", Values::unit},
    {UnaryOp::Sigmoid, "sigmoid", Values::normal},
    {UnaryOp::Erf, "erf", Values::normal},
    {UnaryOp::ErfInv, "erfinv", Values::unit},
    {UnaryOp::LogicalNot, "logical_not", Values::normal},
    {UnaryOp::BitwiseInvert, "bitwise_invert", Values::normal},
    {UnaryOp::Conjugate, "conjugate", Values::normal},
    {UnaryOp::Real, "real", Values::normal},
    {UnaryOp::Imag, "imag", Values::normal},
};

// ---- Unary ----------------------------------------------------------------------------------

TEST(GpuElementwise, UnaryEveryOpAndDtypeAndLayout) {
  NUVEC_REQUIRE_GPU();
  for (const auto& uc : kUnaryOps) {
    for (Dtype t : kAllTypes) {
      for (const auto& layout : unary_layouts()) {
        array x = make_values(layout.base, t, uc.values);
        std::string what = std::string(uc.name) + " " + type_name(t) + " " + layout.name;
        // tan and tanh have poles (tanh's on the imaginary axis, so complex inputs meet
        // them): compare with their condition number |x| |f'(x)|, f' = 1 + tan^2 and
        // 1 - tanh^2, computed from the CPU result.
        std::function<std::vector<double>(const array&)> cond_of;
        if (uc.op == UnaryOp::Tan || uc.op == UnaryOp::Tanh) {
          cond_of = [&, x_cpu = layout.view(x, kCpu)](const array& y) {
            array y2 = square(astype(y, y.dtype() == complex64 ? complex64 : float64, kCpu), kCpu);
            array d = uc.op == UnaryOp::Tan ? add(array(1.0, y2.dtype()), y2, kCpu)
                                            : subtract(array(1.0, y2.dtype()), y2, kCpu);
            array xa = abs(astype(x_cpu, x_cpu.dtype() == complex64 ? complex64 : float64, kCpu), kCpu);
            return host_f64(multiply(astype(xa, float64, kCpu), astype(abs(d, kCpu), float64, kCpu), kCpu));
          };
        }
        bool ok = compare_devices(
            [&](Device d) { return unary_node(uc.op, layout.view(x, d), d); }, what, 1.0, cond_of);
        if (!ok) break; // rejected dtype: once is enough
      }
    }
  }
}

TEST(GpuElementwise, UnaryLargeArrays) {
  NUVEC_REQUIRE_GPU();
  const Shape big = {(1 << 20) + 17};
  for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Abs, UnaryOp::Sigmoid, UnaryOp::Negative}) {
    for (Dtype t : {float32, float16, bfloat16, float64, int32, int8}) {
      if (is_int_type(t) && (op == UnaryOp::Exp || op == UnaryOp::Sigmoid)) continue;
      array x = make_values(big, t);
      std::string what = "large unary " + type_name(t);
      compare_devices([&](Device d) { return unary_node(op, x, d); }, what + " contiguous");
      compare_devices(
          [&](Device d) { return unary_node(op, slice(x, {3}, {(1 << 20) + 17}, {3}, d), d); },
          what + " strided");
    }
  }
}

TEST(GpuElementwise, UnaryThroughOps) {
  NUVEC_REQUIRE_GPU();
  array x = make_values(kShape, float32);
  array i = make_values(kShape, int32, Values::small_int);
  compare_devices([&](Device d) { return exp(x, d); }, "exp");
  compare_devices([&](Device d) { return round(x, 2, d); }, "round 2 decimals");
  compare_devices([&](Device d) { return sqrt(i, d); }, "sqrt of int32 (float32 result)");
  compare_devices([&](Device d) { return logical_not(i, d); }, "logical_not of int32");
  compare_devices([&](Device d) { return isnan(x, d); }, "isnan");
  compare_devices([&](Device d) { return isinf(x, d); }, "isinf");
  compare_devices([&](Device d) { return clip(x, array(-1.0f), array(1.0f), d); }, "clip");
}

// ---- Binary ---------------------------------------------------------------------------------

struct BinaryCase {
  BinaryOp op;
  const char* name;
  Values b_values; // values of the second operand
};

const std::vector<BinaryCase> kBinaryOps = {
    {BinaryOp::Add, "add", Values::normal},
    {BinaryOp::Subtract, "subtract", Values::normal},
    {BinaryOp::Multiply, "multiply", Values::normal},
    {BinaryOp::Divide, "divide", Values::divisor},
    {BinaryOp::FloorDivide, "floor_divide", Values::divisor},
    {BinaryOp::Remainder, "remainder", Values::divisor},
    {BinaryOp::Power, "power", Values::small_int},
    {BinaryOp::Maximum, "maximum", Values::normal},
    {BinaryOp::Minimum, "minimum", Values::normal},
    {BinaryOp::LogAddExp, "logaddexp", Values::normal},
    {BinaryOp::ArcTan2, "arctan2", Values::normal},
    {BinaryOp::Equal, "equal", Values::normal},
    {BinaryOp::NaNEqual, "nan_equal", Values::normal},
    {BinaryOp::NotEqual, "not_equal", Values::normal},
    {BinaryOp::Less, "less", Values::normal},
    {BinaryOp::LessEqual, "less_equal", Values::normal},
    {BinaryOp::Greater, "greater", Values::normal},
    {BinaryOp::GreaterEqual, "greater_equal", Values::normal},
    {BinaryOp::LogicalAnd, "logical_and", Values::normal},
    {BinaryOp::LogicalOr, "logical_or", Values::normal},
    {BinaryOp::BitwiseAnd, "bitwise_and", Values::normal},
    {BinaryOp::BitwiseOr, "bitwise_or", Values::normal},
    {BinaryOp::BitwiseXor, "bitwise_xor", Values::normal},
    {BinaryOp::LeftShift, "left_shift", Values::shift},
    {BinaryOp::RightShift, "right_shift", Values::shift},
};

// Pairs of operand layouts over the output shape kShape.
struct PairLayout {
  std::string name;
  Layout a, b;
};

std::vector<PairLayout> binary_layouts() {
  auto ls = unary_layouts();
  auto by_name = [&](const std::string& n) {
    for (auto& l : ls) {
      if (l.name == n) return l;
    }
    throw std::logic_error("no layout " + n);
  };
  Layout contiguous = by_name("contiguous"), transposed = by_name("transposed"),
         broadcast = by_name("broadcast"), scalar = by_name("broadcast scalar"),
         sliced = by_name("sliced with steps"), reversed = by_name("reversed"),
         misaligned = by_name("misaligned"), zero_d = by_name("0-d");
  Layout empty = by_name("size 0");
  Layout col_major{"column-major", {9, 7, 5},
                   [](const array& x, Device d) { return transpose(x, {2, 1, 0}, d); }};
  return {
      {"contiguous, contiguous", contiguous, contiguous},
      {"contiguous, transposed", contiguous, transposed},
      {"transposed, transposed (shared dense layout)", transposed, col_major},
      {"contiguous, broadcast", contiguous, broadcast},
      {"broadcast, sliced", broadcast, sliced},
      {"broadcast scalar, contiguous", scalar, contiguous},
      {"contiguous, broadcast scalar", contiguous, scalar},
      {"0-d, contiguous", zero_d, contiguous},
      {"transposed, 0-d", transposed, zero_d},
      {"0-d, 0-d", zero_d, zero_d},
      {"reversed, contiguous", reversed, contiguous},
      {"misaligned, misaligned", misaligned, misaligned},
      {"misaligned, contiguous", misaligned, contiguous},
      {"size 0, size 0", empty, empty},
  };
}

TEST(GpuElementwise, BinaryEveryOpAndDtypeAndLayout) {
  NUVEC_REQUIRE_GPU();
  for (const auto& bc : kBinaryOps) {
    for (Dtype t : kAllTypes) {
      for (const auto& pl : binary_layouts()) {
        array a = make_values(pl.a.base, t);
        array b = make_values(pl.b.base, t, bc.b_values);
        std::string what = std::string(bc.name) + " " + type_name(t) + " " + pl.name;
        // pow's error grows with the exponent's magnitude times log|a|.
        double scale = bc.op == BinaryOp::Power ? 10.0 : 1.0;
        bool ok = compare_devices(
            [&](Device d) { return binary_node(bc.op, pl.a.view(a, d), pl.b.view(b, d), d); },
            what, scale);
        if (!ok) break;
      }
    }
  }
}

TEST(GpuElementwise, BinaryLargeArrays) {
  NUVEC_REQUIRE_GPU();
  const int n = (1 << 20) + 17;
  for (Dtype t : {float32, float16, bfloat16, float64, int64, uint8, complex64}) {
    array a = make_values({n}, t), b = make_values({n}, t);
    array s = make_values({}, t);
    std::string w = "large " + type_name(t);
    compare_devices([&](Device d) { return binary_node(BinaryOp::Add, a, b, d); }, w + " add");
    compare_devices([&](Device d) { return binary_node(BinaryOp::Multiply, a, s, d); },
                    w + " multiply by a 0-d scalar");
    compare_devices([&](Device d) { return binary_node(BinaryOp::Less, s, b, d); },
                    w + " 0-d scalar less");
    compare_devices(
        [&](Device d) {
          return binary_node(BinaryOp::Subtract, slice(a, {1}, {n}, d), slice(b, {0}, {n - 1}, d), d);
        },
        w + " subtract misaligned");
  }
  // A 2-d broadcast of a row over a large matrix (strided path over many blocks).
  array m = make_values({1025, 1031}, float32), row = make_values({1031}, float32);
  compare_devices([&](Device d) { return add(m, row, d); }, "large matrix + row");
  array col = make_values({1025}, float32);
  compare_devices([&](Device d) { return add(transpose(m, d), col, d); },
                  "large transposed matrix + row");
}

TEST(GpuElementwise, BinaryThroughOps) {
  NUVEC_REQUIRE_GPU();
  array x = make_values(kShape, float32), y = make_values({7, 1}, float16);
  array i = make_values(kShape, int32, Values::small_int);
  compare_devices([&](Device d) { return add(x, y, d); }, "add with promotion and broadcast");
  compare_devices([&](Device d) { return multiply(x, array(2.5f), d); }, "x * 2.5");
  compare_devices([&](Device d) { return divide(i, array(3), d); }, "int32 / 3 (float32)");
  compare_devices([&](Device d) { return floor_divide(i, array(-3), d); }, "int32 // -3");
  compare_devices([&](Device d) { return remainder(x, array(0.75f), d); }, "x % 0.75");
  compare_devices([&](Device d) { return array_equal(x, x, true, d); }, "array_equal with NaNs");
  compare_devices([&](Device d) { return isclose(x, add(x, array(1e-7f), d), 1e-5, 1e-8, false, d); },
                  "isclose");
}

// Throughput of the contiguous fast paths on 2^28 float32 (run with
// --gtest_also_run_disabled_tests; timing is no CI assertion): add and exp should reach at
// least 90% of the bandwidth of a plain device-to-device copy (Full of an array of its own
// shape), counting the bytes each reads and writes.
TEST(GpuElementwise, DISABLED_Bandwidth) {
  NUVEC_REQUIRE_GPU();
  const int n = 1 << 28;
  array a = multiply(arange(0.0, double(n), 1.0, float32, kGpu), array(1e-8f), kGpu);
  array b = add(a, array(1.0f), kGpu);
  eval(a, b);
  auto gbps = [&](const std::function<array()>& f, double bytes, const char* what) {
    eval(f()); // warm-up: allocator cache, first launches
    constexpr int reps = 20;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) eval(f());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double bw = bytes * reps / s / 1e9;
    std::cout << what << ": " << bw << " GB/s (" << s / reps * 1e3 << " ms)\n";
    return bw;
  };
  const double f4 = 4.0 * n;
  double copy_bw = gbps([&] { return full({n}, a, kGpu); }, 2 * f4, "copy");
  double add_bw = gbps([&] { return add(a, b, kGpu); }, 3 * f4, "add");
  double exp_bw = gbps([&] { return exp(a, kGpu); }, 2 * f4, "exp");
  double scal_bw = gbps([&] { return multiply(a, array(3.0f), kGpu); }, 2 * f4, "a * 3");
  EXPECT_GE(add_bw, 0.9 * copy_bw);
  EXPECT_GE(exp_bw, 0.9 * copy_bw);
  EXPECT_GE(scal_bw, 0.9 * copy_bw);
  // And the values are right at both ends and in the middle.
  array s = add(a, b, kGpu);
  array picked = take(s, array({0, n / 2 + 3, n - 1}), kCpu);
  expect_close(picked, {3}, {1.0, 2 * double(float((n / 2 + 3) * 1e-8f)) + 1.0,
                             2 * double(float((n - 1) * 1e-8f)) + 1.0}, 1e-6, 1e-6);
}

// ---- DivMod ---------------------------------------------------------------------------------

TEST(GpuElementwise, DivMod) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kAllTypes) {
    for (const auto& pl : binary_layouts()) {
      array a = make_values(pl.a.base, t), b = make_values(pl.b.base, t, Values::divisor);
      std::string what = "divmod " + type_name(t) + " " + pl.name;
      array ca = pl.a.view(a, kCpu), cb = pl.b.view(b, kCpu);
      std::vector<array> cpu;
      try {
        cpu = divmod(ca, cb, kCpu);
        eval(cpu);
      } catch (const std::invalid_argument&) {
        // Complex inputs: the op rejects them on either device.
        EXPECT_THROW(eval(divmod(pl.a.view(a, kGpu), pl.b.view(b, kGpu), kGpu)), std::invalid_argument);
        break;
      }
      auto gpu = divmod(pl.a.view(a, kGpu), pl.b.view(b, kGpu), kGpu);
      eval(gpu);
      expect_match(gpu[0], cpu[0], what + " quotient");
      expect_match(gpu[1], cpu[1], what + " remainder");
    }
  }
  const int n = (1 << 20) + 17;
  array a = make_values({n}, int32), b = make_values({n}, int32, Values::divisor);
  auto g = divmod(a, b, kGpu), c = divmod(a, b, kCpu);
  eval(g);
  eval(c);
  expect_match(g[0], c[0], "large divmod quotient");
  expect_match(g[1], c[1], "large divmod remainder");
}

// ---- Select ---------------------------------------------------------------------------------

TEST(GpuElementwise, Select) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kAllTypes) {
    for (const auto& cl : unary_layouts()) {
      for (const auto& pl : binary_layouts()) {
        if ((cl.name == "size 0") != (pl.name == "size 0, size 0")) continue;
        array c = make_values(cl.base, bool_);
        array x = make_values(pl.a.base, t), y = make_values(pl.b.base, t);
        std::string what = "where " + type_name(t) + " cond " + cl.name + ", " + pl.name;
        compare_devices(
            [&](Device d) { return where(cl.view(c, d), pl.a.view(x, d), pl.b.view(y, d), d); },
            what);
      }
    }
  }
  const int n = (1 << 20) + 17;
  array c = make_values({n}, bool_), x = make_values({n}, float32), y = make_values({n}, float32);
  compare_devices([&](Device d) { return where(c, x, y, d); }, "large where");
  compare_devices([&](Device d) { return where(c, x, array(0.0f), d); }, "large where, 0-d y");
  array y8 = make_values({n}, int8);
  compare_devices([&](Device d) { return where(c, array(int8_t(3)), y8, d); },
                  "large where int8, 0-d x");
}

// ---- copies and casts -------------------------------------------------------------------------

TEST(GpuCopy, AsTypeEveryPairAndLayout) {
  NUVEC_REQUIRE_GPU();
  for (Dtype from : kAllTypes) {
    for (const auto& layout : unary_layouts()) {
      array x = make_values(layout.base, from);
      for (Dtype to : kAllTypes) {
        std::string what = "astype " + type_name(from) + " -> " + type_name(to) + " " + layout.name;
        compare_devices([&](Device d) { return astype(layout.view(x, d), to, d); }, what);
      }
    }
  }
  // Out-of-range and NaN float -> integer conversions clamp (NaN gives 0).
  std::vector<double> v = {std::nan(""), 1e30, -1e30, 3.7, -3.7, 255.5, -0.5, 4294967296.0,
                           9.3e18, -9.3e18, 65535.9, 127.5};
  array f = array(v.begin(), {int(v.size())}, float64);
  for (Dtype from : {float64, float32, float16, bfloat16}) {
    array x = astype(f, from, kCpu);
    for (Dtype to : {int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool_}) {
      compare_devices([&](Device d) { return astype(x, to, d); },
                      "clamping " + type_name(from) + " -> " + type_name(to));
    }
  }
}

TEST(GpuCopy, LargeCopiesAndCasts) {
  NUVEC_REQUIRE_GPU();
  const int n = (1 << 20) + 17;
  array x = make_values({n}, float32);
  compare_devices([&](Device d) { return astype(x, float16, d); }, "large float32 -> float16");
  compare_devices([&](Device d) { return astype(slice(x, {1}, {n}, {2}, d), int32, d); },
                  "large strided float32 -> int32");
  array m = make_values({1031, 1029}, float32);
  compare_devices([&](Device d) { return contiguous(transpose(m, d), false, d); },
                  "large transpose copy");
  compare_devices([&](Device d) { return astype(transpose(m, d), bfloat16, d); },
                  "large transposed cast (layout kept)");
}

TEST(GpuCopy, ContiguousAndReshapeCopies) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : {bool_, int8, uint16, int32, float32, float64, complex64, bfloat16}) {
    for (const auto& layout : unary_layouts()) {
      array x = make_values(layout.base, t);
      std::string what = "contiguous " + type_name(t) + " " + layout.name;
      compare_devices([&](Device d) { return contiguous(layout.view(x, d), false, d); }, what);
      if (layout.name != "0-d" && layout.name != "size 0") {
        compare_devices([&](Device d) { return reshape(layout.view(x, d), {-1}, d); },
                        "reshape " + what);
      }
    }
  }
}

TEST(GpuCopy, MoreDimensionsThanTheIndexer) {
  NUVEC_REQUIRE_GPU();
  // Ten dimensions of 2, 3, 2, 3, ... reversed: no two adjacent ones merge, so the plans keep
  // more dimensions than the kernels' indexer walks.
  Shape shape;
  std::vector<int> axes;
  for (int i = 0; i < 10; ++i) {
    shape.push_back(2 + i % 2);
    axes.push_back(9 - i);
  }
  Shape reversed(shape.rbegin(), shape.rend());
  for (Dtype t : {float32, int16, complex64}) {
    array x = make_values(shape, t), y = make_values(reversed, t);
    array c = make_values(shape, bool_);
    compare_devices([&](Device d) { return contiguous(transpose(x, axes, d), false, d); },
                    "10-d transpose copy " + type_name(t));
    compare_devices([&](Device d) { return astype(transpose(x, axes, d), float64, d); },
                    "10-d transposed cast " + type_name(t));
    compare_devices([&](Device d) { return unary_node(UnaryOp::Negative, transpose(x, axes, d), d); },
                    "10-d negative " + type_name(t));
    compare_devices(
        [&](Device d) { return binary_node(BinaryOp::Subtract, transpose(x, axes, d), y, d); },
        "10-d subtract " + type_name(t));
    compare_devices(
        [&](Device d) { return where(transpose(c, axes, d), y, transpose(x, axes, d), d); },
        "10-d where " + type_name(t));
  }
}

TEST(GpuCopy, Full) {
  NUVEC_REQUIRE_GPU();
  for (Dtype t : kAllTypes) {
    std::string w = "full " + type_name(t);
    compare_devices([&](Device d) { return full({5, 7, 9}, array(2.75), t, d); }, w + " scalar");
    array v = make_values({7, 1}, t);
    compare_devices([&](Device d) { return full({5, 7, 9}, v, d); }, w + " broadcast array");
    compare_devices([&](Device d) { return full({0, 3}, array(1.0), t, d); }, w + " size 0");
    compare_devices([&](Device d) { return zeros({(1 << 20) + 17}, t, d); }, w + " large zeros");
    compare_devices([&](Device d) { return ones({3, 1, 4}, t, d); }, w + " ones");
  }
  // Values: full must write the value, not just any constant.
  array g = full({4, 3}, array(-1.5), float32, kGpu);
  expect_close(g, {4, 3}, std::vector<double>(12, -1.5));
}

TEST(GpuCopy, Arange) {
  NUVEC_REQUIRE_GPU();
  struct Range {
    double start, stop, step;
  };
  const std::vector<Range> ranges = {
      {0, 10, 1}, {0.5, 10, 1.5}, {10, -3, -0.7}, {-5, 5, 0.1}, {0, 1000003, 1},
      {3, 3, 1}, {-128, 300, 7}, {1e6, 1e6 + 50, 0.37}};
  for (Dtype t : {int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16,
                  float32, float64}) {
    for (const auto& r : ranges) {
      if (!is_float_type(t) && (t == uint8 || t == uint16 || t == uint32 || t == uint64) &&
          (r.start < 0 || r.stop < 0)) {
        continue;
      }
      std::string what = "arange(" + std::to_string(r.start) + ", " + std::to_string(r.stop) +
                         ", " + std::to_string(r.step) + ") " + type_name(t);
      compare_devices([&](Device d) { return arange(r.start, r.stop, r.step, t, d); }, what, 0.0);
    }
  }
  compare_devices([&](Device d) { return linspace(-1.0, 1.0, 101, float32, d); }, "linspace");
  // Values: the start and the integer step rule (NumPy: the step is int(start + step) -
  // int(start), so 0.5 + 1.5 = 2 -> step 2 from 0).
  expect_close(arange(0.5, 10, 1.5, int32, kGpu), {7}, {0, 2, 4, 6, 8, 10, 12});
}

} // namespace
} // namespace nuvec::testing
