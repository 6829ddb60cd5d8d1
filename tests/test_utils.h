// nuvec tests: random inputs (fresh each run; the seed is printed so a failure can be
// replayed with NUVEC_TEST_SEED) and float64 views of arrays for reference comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <iostream>
#include <random>
#include <vector>

#include "core/sanitizers.h"
#include "nuvec/nuvec.h"

namespace nuvec::testing {

/// Whether the CPU allocator caches freed blocks: not under AddressSanitizer, where each
/// buffer is an exact-size block of its own (src/core/allocator.cpp, scripts/asan_check.sh).
#if defined(NUVEC_ADDRESS_SANITIZER)
inline constexpr bool kCachingAllocator = false;
#else
inline constexpr bool kCachingAllocator = true;
#endif

/// The test process's generator: seeded from NUVEC_TEST_SEED or the clock, printed once.
inline std::mt19937_64& rng() {
  static std::mt19937_64 gen = [] {
    uint64_t seed;
    if (const char* s = std::getenv("NUVEC_TEST_SEED")) {
      seed = std::strtoull(s, nullptr, 10);
    } else {
      seed = std::random_device{}();
    }
    std::cerr << "[nuvec tests] NUVEC_TEST_SEED=" << seed << "\n";
    return std::mt19937_64(seed);
  }();
  return gen;
}

/// A fresh directory for this test process, removed at exit. The path object is never
/// destroyed: the atexit handler, registered while it is built, would otherwise run after
/// its destructor and read freed memory.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path* dir = [] {
    auto* d = new std::filesystem::path(
        std::filesystem::temp_directory_path() /
        ("nuvec_test_" + std::to_string(std::random_device{}())));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

/// Normal(0, 1) samples of a shape, as dtype (default float64).
inline array randn(const Shape& shape, Dtype dtype = float64) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng());
  return astype(array(v.begin(), shape, float64), dtype);
}

/// Uniform [lo, hi) samples, as dtype.
inline array uniform(const Shape& shape, double lo, double hi, Dtype dtype = float64) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng());
  return astype(array(v.begin(), shape, float64), dtype);
}

/// Uniform integers in [lo, hi], as dtype.
inline array randint(const Shape& shape, int64_t lo, int64_t hi, Dtype dtype = int32) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = dist(rng());
  return astype(array(v.begin(), shape, int64), dtype);
}

/// The elements of a (any dtype, any layout) in row-major order, as doubles.
inline std::vector<double> to_vector(const array& a) {
  array c = astype(contiguous(a), float64);
  eval(c);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.size());
}

/// Asserts a has `shape` and elements close to `expected` (row-major):
/// |a - e| <= atol + rtol |e|, NaNs matching NaNs.
inline void expect_close(
    const array& a,
    const Shape& shape,
    const std::vector<double>& expected,
    double rtol = 1e-5,
    double atol = 1e-6) {
  ASSERT_EQ(a.shape(), shape);
  auto got = to_vector(a);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at flat index " << i;
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "at flat index " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], atol + rtol * std::abs(expected[i]))
          << "at flat index " << i;
    }
  }
}

/// Asserts two arrays have equal shapes and close elements.
inline void expect_allclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-6) {
  expect_close(a, b.shape(), to_vector(b), rtol, atol);
}

/// Asserts that calling f throws E whose message contains `op` (e.g. "[reshape]").
template <typename E, typename F>
void expect_throws_naming(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << "expected an exception naming " << op;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos)
        << "message: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type; message: " << e.what();
  }
}

/// The message of the std::out_of_range that evaluating y raises ("" when none): index
/// errors are reported at eval, where a kernel finds them.
inline std::string range_error(array y) {
  try {
    eval(y);
  } catch (const std::out_of_range& e) {
    return e.what();
  }
  return "";
}

/// Sets an environment variable for a scope (a kernel's switch in a test) and restores the
/// previous value, or its absence, on the way out, a failed assertion's exception included.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) before_ = v, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), before_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, before_;
  bool had_ = false;
};

} // namespace nuvec::testing
