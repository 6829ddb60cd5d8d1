// nuvec tests: the scheduler: eval and async_eval, streams and events, the memory API and
// limit, two threads at once, and graphs 100,000 nodes deep (evaluated, differentiated and
// destroyed without recursion).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <sys/wait.h>

#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

TEST(Eval, AsyncEvalThenWait) {
  auto x = randn({256, 256}, float32);
  auto y = exp(multiply(x, array(0.5f)));
  async_eval({y});
  EXPECT_NE(y.status(), array::Status::unscheduled);
  y.wait();
  EXPECT_TRUE(y.is_available());
  auto xv = to_vector(x), yv = to_vector(y);
  for (size_t i = 0; i < xv.size(); i += 97) EXPECT_NEAR(yv[i], std::exp(0.5 * xv[i]), 1e-5 * std::exp(0.5 * xv[i]));
}

// A kernel error of an output async_eval scheduled is raised by the eval that then waits for
// it (not left for some later eval while the caller reads the failed node's zeros), once.
TEST(Eval, AsyncEvalThenEvalRaisesTheKernelError) {
  array a = astype(arange(4), float32);
  array y = take(a, array({1, 9}, {2}, int32), 0);
  async_eval({y});
  EXPECT_THROW(eval(y), std::out_of_range);
  array z = take(a, array({1, 3}, {2}, int32), 0);
  async_eval({z});
  EXPECT_NO_THROW(eval(z));
  EXPECT_EQ(to_vector(z), std::vector<double>({1.0, 3.0}));
}

TEST(Eval, StreamsAndCrossStreamDependencies) {
  Stream s1 = new_stream(Device::cpu);
  Stream s2 = new_stream(Device::cpu);
  EXPECT_NE(s1, s2);
  EXPECT_NE(s1, default_stream(Device::cpu));
  auto x = randn({1000}, float64);
  // A chain that alternates streams: each step waits on the other stream's event.
  array a = x;
  for (int i = 0; i < 50; ++i) {
    a = add(a, array(1.0), i % 2 ? s1 : s2);
  }
  auto b = multiply(a, array(2.0), s1);
  eval(b);
  auto xv = to_vector(x);
  expect_close(b, {1000}, [&] {
    std::vector<double> e(xv.size());
    for (size_t i = 0; i < e.size(); ++i) e[i] = 2 * (xv[i] + 50);
    return e;
  }());
  // async_eval on one stream, consumed on another.
  auto c = exp(x, s1);
  async_eval({c});
  auto d = add(c, array(1.0), s2);
  eval(d);
  auto dv = to_vector(d);
  for (size_t i = 0; i < xv.size(); i += 37) EXPECT_NEAR(dv[i], std::exp(xv[i]) + 1, 1e-9 * std::exp(xv[i]) + 1e-12);
  synchronize(s1);
  synchronize(s2);
  synchronize();
}

TEST(Eval, DefaultStreamCanBeSet) {
  // On the default device, which is the GPU when the suite runs with NUVEC_TEST_DEVICE=gpu.
  const Device dev = default_device();
  Stream old = default_stream(dev);
  Stream s = new_stream(dev);
  set_default_stream(s);
  auto y = add(array(1.0f), array(2.0f));
  EXPECT_EQ(y.primitive().stream(), s);
  EXPECT_EQ(y.item<float>(), 3.0f);
  set_default_stream(old);
  EXPECT_EQ(default_stream(dev), old);
}

TEST(Eval, EventsSignalAndWait) {
  Stream s = new_stream(Device::cpu);
  Event e(s);
  e.set_value(1);
  e.signal(s);
  e.wait();
  EXPECT_TRUE(e.is_signaled());
  Event never(s);
  never.set_value(5);
  EXPECT_FALSE(never.is_signaled());
}

TEST(Memory, AccountingAndCache) {
  if (!nuvec::testing::kCachingAllocator) GTEST_SKIP() << "the allocator does not cache under AddressSanitizer";
  synchronize();
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  size_t before = get_active_memory();
  {
    auto a = zeros({1 << 20}, float32); // 4 MiB
    eval(a);
    EXPECT_GE(get_active_memory(), before + (4u << 20));
    reset_peak_memory();
    EXPECT_GE(get_peak_memory(), before + (4u << 20));
  }
  synchronize();
  EXPECT_LE(get_active_memory(), before);
  EXPECT_GE(get_cache_memory(), 4u << 20); // freed into the cache
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  size_t old = set_cache_limit(0);
  {
    auto a = ones({1 << 16}, float32);
    eval(a);
  }
  synchronize();
  EXPECT_EQ(get_cache_memory(), 0u); // nothing kept with a zero cache limit
  set_cache_limit(old);
}

TEST(Memory, LimitBoundsPeakOfIndependentWork) {
  // Many independent 8 MiB results summed to scalars: with a low limit the scheduler must
  // wait for in-flight work, so the peak stays far below the total of 64 x 8 MiB.
  synchronize();
  clear_cache();
  size_t old = set_memory_limit(64u << 20);
  EXPECT_EQ(get_memory_limit(), 64u << 20);
  std::vector<array> outs;
  auto base = zeros({1 << 21}, float32);
  eval(base);
  reset_peak_memory();
  for (int i = 0; i < 64; ++i) {
    outs.push_back(sum(exp(add(base, array(float(i))))));
  }
  eval(outs);
  size_t peak = get_peak_memory();
  set_memory_limit(old);
  EXPECT_LT(peak, 200u << 20);
  EXPECT_NEAR(outs[3].item<float>(), (1 << 21) * std::exp(3.0f), 1e-3 * (1 << 21) * std::exp(3.0f));
}

TEST(Eval, TwoThreadsIndependentGraphs) {
  auto work = [](int seed, double* result) {
    array a = full({64, 64}, array(double(seed)));
    for (int i = 0; i < 200; ++i) a = add(multiply(a, array(0.5)), array(1.0));
    auto g = grad([](const array& x) { return sum(multiply(x, x)); })(a);
    *result = sum(g).item<double>();
  };
  double r1 = 0, r2 = 0;
  std::thread t1(work, 3, &r1), t2(work, 7, &r2);
  t1.join();
  t2.join();
  // After 200 steps x -> 2 + (x0 - 2) 2^-200 = 2 (to double precision): grad of sum(x^2) = 2x.
  EXPECT_NEAR(r1, 64 * 64 * 4.0, 1e-6);
  EXPECT_NEAR(r2, 64 * 64 * 4.0, 1e-6);
}

TEST(Eval, DeepChainBuildsEvaluatesDifferentiatesAndFrees) {
  constexpr int kDepth = 100000;
  auto f = [](const array& x) {
    array y = x;
    for (int i = 0; i < kDepth; ++i) y = add(y, array(1e-6, float64));
    return y;
  };
  {
    array y = f(array(1.0, float64));
    EXPECT_NEAR(y.item<double>(), 1.0 + kDepth * 1e-6, 1e-9);
  }
  {
    // Unevaluated deep graph destroyed without eval: destruction must not recurse.
    array y = f(array(2.0, float64));
  }
  {
    auto g = grad([&](const array& x) { return multiply(f(x), f(x)); })(array(1.0, float64));
    double v = 1.0 + kDepth * 1e-6;
    EXPECT_NEAR(g.item<double>(), 2 * v, 1e-9);
  }
  {
    auto [y, t] = jvp([&](const array& x) { return f(x); }, array(1.0, float64), array(3.0, float64));
    EXPECT_NEAR(t.item<double>(), 3.0, 1e-12);
  }
}

TEST(Eval, ASchedulingErrorLeavesNoNodeWaitingForever) {
  // y's stream is refused when its node is queued, after x's node was: x carries this eval's
  // event, which must still be signaled, or evaluating x later would block forever.
  array a = ones({4});
  array x = add(a, array(1.0f));
  array y = add(x, array(1.0f), Stream(999, Device::cpu));
  EXPECT_THROW(eval(y), std::exception);
  eval(x);
  expect_close(x, {4}, {2, 2, 2, 2});
}

// A program may return from main with work in flight (an async_eval never waited for): the
// exit waits for the stream workers (up to 2 s) before the libraries they call are torn
// down. The child is this test binary run again with NUVEC_EXIT_CHILD=1 (its own process,
// its own workers): it queues 16 float32 matmuls of 1024³ on the CPU (OpenBLAS) and exits at
// once; without the drain, OpenBLAS's teardown ran under the worker's sgemm (SIGSEGV).
TEST(Eval, ExitWithWorkInFlight) {
  if (std::getenv("NUVEC_EXIT_CHILD")) {
    array a = random::normal({1024, 1024}, float32, 0.0, 1.0, std::nullopt, Device::cpu);
    eval(a);
    array b = a;
    for (int i = 0; i < 16; ++i) b = matmul(b, a, Device::cpu);
    async_eval({b});
    std::exit(0);
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int run = 0; run < 5; ++run) {
    // A timeout: without the drain the child could also hang in OpenBLAS's shutdown.
    const std::string cmd =
        "NUVEC_EXIT_CHILD=1 timeout 120 '" + self + "' --gtest_filter=Eval.ExitWithWorkInFlight > /dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << "the child ended by a signal: status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
}
