// nuvec: compile_graph on a GPU stream replays CUDA graphs (GraphReplay, include/nuvec/compile.h):
// equal to the uncompiled function call after call with new inputs; state computed in place
// of an input (slice_update) stays in its buffer and is updated in place; a held input is
// never overwritten; outputs of one call survive the next; views and index errors behave as
// without compile. GPU only (skipped without one).
#include <gtest/gtest.h>

#include <typeinfo>

#include "compile/graph.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

// Runs the test body with the GPU as default device.
class GpuGraphReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU available";
    saved_ = default_device();
    set_default_device(Device::gpu);
  }
  void TearDown() override { set_default_device(saved_); }

 private:
  Device saved_{Device::cpu};
};

// A chain of matmul, element-wise ops, a reduction and a softmax: ~10 nodes.
std::vector<array> mlp(const std::vector<array>& in) {
  array h = matmul(in[0], in[1]);
  h = multiply(h, sigmoid(h));
  array y = softmax(add(h, in[2]), -1);
  return {y, sum(h, 0)};
}

void expect_equal(const array& got, const array& want, double tol = 1e-6) {
  ASSERT_EQ(got.shape(), want.shape());
  auto g = to_vector(got), w = to_vector(want);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << "at " << i;
}

const void* device_address(const array& a) {
  return a.data_shared_ptr()->device.load();
}

// The replay counters of the compiled function behind a (read before a is evaluated).
const nuvec::detail::ReplayTape& tape_of(const array& a) {
  return dynamic_cast<const nuvec::GraphReplay&>(a.primitive()).tape();
}

// Each test compiles its own function, so that no test starts from another's captured graphs.
// The lambda captures its line: captureless lambdas are keyed by their address, and the
// compiler may fold identical ones into one function (GCC's -fipa-icf at -O2), which would
// give the tests that compile the same `fn` one cache.
#define COMPILE(fn) compile_graph([line = __LINE__](const std::vector<array>& in) { return fn(in); })

TEST_F(GpuGraphReplay, EqualsTheFunctionCallAfterCall) {
  auto f = COMPILE(mlp);
  const nuvec::detail::ReplayTape* tape = nullptr;
  for (int call = 0; call < 6; ++call) {
    std::vector<array> in = {randn({37, 53}), randn({53, 29}), randn({29})};
    auto got = f(in);
    ASSERT_EQ(typeid(got[0].primitive()), typeid(nuvec::GraphReplay)) << "one node per call";
    tape = &tape_of(got[0]);
    auto want = mlp(in);
    expect_equal(got[0], want[0]);
    expect_equal(got[1], want[1]);
  }
  // The first call runs the nodes; the second captures; every later call replays.
  EXPECT_EQ(tape->node_runs.load(), 1);
  EXPECT_EQ(tape->replays.load(), 5);
}

// compile itself keeps MLX's answer, the trace's nodes (code may inspect them).
TEST_F(GpuGraphReplay, CompileStillReturnsTheTracedNodes) {
  auto f = compile([](const std::vector<array>& in) { return mlp(in); });
  std::vector<array> in = {randn({5, 6}), randn({6, 7}), randn({7})};
  auto got = f(in);
  EXPECT_NE(typeid(got[0].primitive()), typeid(nuvec::GraphReplay));
  expect_equal(got[0], mlp(in)[0]);
}

// The KV-cache pattern: state in, state updated by slice_update out, passed back in.
std::vector<array> cache_step(const std::vector<array>& in) {
  // in: cache [64, 8], row [1, 8], position (int32 [1])
  array cache = slice_update(in[0], exp(in[1]), in[2], {0});
  return {sum(cache, 0), cache};
}

// cache_step's first output against the sums of the reference cache ref [64, 8].
void expect_column_sums(const array& sums, const std::vector<double>& ref, int step) {
  auto sv = to_vector(sums);
  for (int j = 0; j < 8; ++j) {
    double s = 0;
    for (int r = 0; r < 64; ++r) s += ref[r * 8 + j];
    ASSERT_NEAR(sv[j], s, 1e-4 * (1 + std::abs(s))) << "step " << step << " column " << j;
  }
}

void expect_cache(const array& cache, const std::vector<double>& ref) {
  auto cv = to_vector(cache);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(cv[i], ref[i], 1e-5) << "at " << i;
}

TEST_F(GpuGraphReplay, StateUpdatedInPlaceStaysInItsBuffer) {
  auto f = COMPILE(cache_step);
  array cache = contiguous(zeros({64, 8}));
  eval(cache);
  std::vector<double> ref(64 * 8, 0.0);
  const void* addr = nullptr;
  for (int step = 0; step < 12; ++step) {
    array row = randn({1, 8});
    auto rv = to_vector(row);
    auto out = f({cache, row, array({step * 5}, int32)});
    cache = out[1];
    eval(out);
    for (int j = 0; j < 8; ++j) ref[step * 5 * 8 + j] = std::exp(rv[j]);
    // The column sums see every row (the cache itself is read on the host only at the end:
    // a host copy of state makes later calls run node by node, HostReadsOfStateStayCurrent).
    expect_column_sums(out[0], ref, step);
    // From the capture on, the cache is written where it lies.
    if (step == 2) addr = device_address(cache);
    if (step > 2) EXPECT_EQ(device_address(cache), addr) << "step " << step;
  }
  EXPECT_EQ(tape_of(f({cache, randn({1, 8}), array({63}, int32)})[1]).replays.load(), 11);
  expect_cache(cache, ref);
}

// State read on the host between calls (a host copy of its buffer exists) is never updated
// behind that copy's back: the calls run node by node and stay right.
TEST_F(GpuGraphReplay, HostReadsOfStateStayCurrent) {
  auto f = COMPILE(cache_step);
  array cache = contiguous(zeros({64, 8}));
  std::vector<double> ref(64 * 8, 0.0);
  for (int step = 0; step < 8; ++step) {
    array row = randn({1, 8});
    auto rv = to_vector(row);
    cache = f({cache, row, array({step * 7}, int32)})[1];
    for (int j = 0; j < 8; ++j) ref[step * 7 * 8 + j] = std::exp(rv[j]);
    expect_cache(cache, ref);
  }
}

TEST_F(GpuGraphReplay, AHeldInputIsNeverOverwritten) {
  auto f = COMPILE(cache_step);
  array cache = contiguous(zeros({64, 8}));
  for (int step = 0; step < 4; ++step) cache = f({cache, randn({1, 8}), array({step}, int32)})[1];
  const nuvec::detail::ReplayTape* tape = nullptr;
  {
    auto sums = f({cache, randn({1, 8}), array({4}, int32)});
    tape = &tape_of(sums[1]);
    cache = sums[1];
    eval(sums);
  } // `sums` held the state too: only `cache` holds it from here on
  const long replays = tape->replays.load();
  // `cache` is still held here: the call must not write its buffer (its values are checked
  // through a copy made on the device, so that no host copy changes the path).
  array before = copy(cache);
  eval(before);
  array next = f({cache, full({1, 8}, 3.0f), array({40}, int32)})[1];
  eval(next);
  EXPECT_TRUE(array_equal(cache, before).item<bool>());
  EXPECT_NEAR(to_vector(slice(next, {40, 0}, {41, 8}))[0], std::exp(3.0), 1e-4);
  // Passed in as its only handle, the next call writes it in place again (a replay).
  std::vector<array> in = {cache, full({1, 8}, 1.0f), array({41}, int32)};
  cache = array(0);
  before = array(0);
  auto again = f(in);
  in.clear();
  // (Its tape is not the first calls': those passed float64 rows (test_utils' randn), these
  // float32 ones (full), another signature; `next` ran its nodes, so this call replays.)
  const nuvec::detail::ReplayTape& again_tape = tape_of(again[1]);
  const long again_before = again_tape.replays.load();
  eval(again);
  EXPECT_GT(again_tape.replays.load(), again_before);
  EXPECT_GE(tape->replays.load(), replays);
  EXPECT_NEAR(to_vector(slice(again[1], {41, 0}, {42, 8}))[0], std::exp(1.0), 1e-5);
}

// Two signatures (two captured graphs) updating one state in turn, as an engine's step
// buckets do: each replays in place though the other's graph holds the buffer too.
TEST_F(GpuGraphReplay, TwoGraphsShareOneState) {
  auto f = COMPILE(cache_step);
  array cache = contiguous(zeros({64, 8}));
  std::vector<double> ref(64 * 8, 0.0);
  const nuvec::detail::ReplayTape *one = nullptr, *two = nullptr;
  for (int step = 0; step < 16; ++step) {
    const int rows = 1 + step % 2;
    array update = randn({rows, 8});
    auto uv = to_vector(update);
    auto out = f({cache, update, array({step * 3}, int32)});
    (rows == 1 ? one : two) = &tape_of(out[1]);
    cache = out[1];
    eval(out);
    for (int i = 0; i < rows * 8; ++i) ref[step * 3 * 8 + i] = std::exp(uv[i]);
    expect_column_sums(out[0], ref, step);
  }
  EXPECT_EQ(one->replays.load(), 7); // the first call of each runs the nodes
  EXPECT_EQ(two->replays.load(), 7);
  expect_cache(cache, ref);
}

TEST_F(GpuGraphReplay, OutputsOfOneCallSurviveTheNext) {
  auto f = COMPILE(mlp);
  std::vector<array> a = {randn({16, 24}), randn({24, 40}), randn({40})};
  std::vector<array> b = {randn({16, 24}), randn({24, 40}), randn({40})};
  for (int warm = 0; warm < 3; ++warm) eval(f(a));
  auto ya = f(a);
  async_eval(ya);
  auto yb = f(b); // queued behind ya on the same stream: replays the same graph
  async_eval(yb);
  expect_equal(ya[0], mlp(a)[0]);
  expect_equal(yb[0], mlp(b)[0]);
  expect_equal(ya[1], mlp(a)[1]);
}

TEST_F(GpuGraphReplay, ViewsAndHostInputs) {
  auto f = COMPILE(mlp);
  for (int warm = 0; warm < 3; ++warm) eval(f({randn({8, 12}), randn({12, 20}), randn({20})}));
  // A transposed view and data that starts on the host.
  array w = randn({20, 12});
  std::vector<float> bias(20);
  for (int i = 0; i < 20; ++i) bias[i] = 0.1f * i - 1.0f;
  std::vector<array> in = {randn({8, 12}), transpose(w), array(bias.data(), {20}, float32)};
  auto got = f(in);
  auto want = mlp(in);
  expect_equal(got[0], want[0]);
  expect_equal(got[1], want[1]);
}

std::vector<array> gather_rows(const std::vector<array>& in) {
  return {take(in[0], in[1], 0)};
}

TEST_F(GpuGraphReplay, IndexErrorsAreReportedOnReplay) {
  auto f = COMPILE(gather_rows);
  array table = randn({10, 4});
  for (int call = 0; call < 3; ++call) {
    auto y = f({table, array({1, 7, call}, int32)});
    expect_equal(y[0], take(table, array({1, 7, call}, int32), 0));
  }
  auto bad = f({table, array({1, 12, 2}, int32)});
  EXPECT_THROW(eval(bad), std::out_of_range);
  // The slot is cleared: the next call is fine.
  auto ok = f({table, array({0, 9, 3}, int32)});
  expect_equal(ok[0], take(table, array({0, 9, 3}, int32), 0));
}

TEST_F(GpuGraphReplay, GradientsGoThroughTheFunction) {
  auto loss = [](const std::vector<array>& in) { return std::vector<array>{sum(mlp(in)[1])}; };
  auto cf = compile_graph(loss);
  std::vector<array> in = {randn({6, 5}), randn({5, 7}), randn({7})};
  auto g = vjp(cf, in, {array(1.0f)}).second;
  auto w = vjp(loss, in, {array(1.0f)}).second;
  for (size_t i = 0; i < g.size(); ++i) expect_equal(g[i], w[i], 1e-5);
}

} // namespace
