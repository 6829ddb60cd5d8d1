// The NCCL backend (src/backend/cuda/distributed/nccl_group.cpp). Alone, on one GPU: a
// communicator of one rank, over which every collective returns its input exactly, run through
// the primitives themselves (the ops short-circuit groups of one process) for float32, float16,
// bfloat16, int32 and bool, odd sizes, empty, scalar and non-contiguous inputs; ordered on the
// GPU stream after the kernels that make its input; CPU streams and int16 reductions refused
// with std::invalid_argument. Under `mpirun -np 2`, one GPU a process (CTest's
// DistributedNccl.np2, registered where the machine has 2 GPUs): the collectives against the
// single-process answer, send/recv and split. Without a GPU the tests skip, as the other GPU
// tests do; a build without NCCL must say so from init(true, "nccl").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "distributed/primitives.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
namespace dist = nuvec::distributed;
using Op = dist::detail::ReduceOp;

namespace {

#ifdef NUVEC_WITH_NCCL
constexpr bool kBuiltWithNccl = true;
#else
constexpr bool kBuiltWithNccl = false;
#endif

#define REQUIRE_NCCL()                                                        \
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU available";         \
  if (!kBuiltWithNccl) GTEST_SKIP() << "nuvec was built without NCCL"

// The NCCL world (made by the first call; every process of an mpirun job makes it together).
// NVLink multicast stays off unless the environment says otherwise (README).
dist::Group nccl_world() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  return dist::init(true, "nccl");
}

#define REQUIRE_ONE_PROCESS() \
  if (nccl_world().size() != 1) GTEST_SKIP() << "for one process (run alone, not under mpirun)"
#define REQUIRE_PROCESSES() \
  if (nccl_world().size() < 2) GTEST_SKIP() << "not started by mpirun with 2 or more processes"

Stream gpu_stream() {
  return default_stream(Device::gpu);
}

// The primitives' nodes on the GPU stream, as the ops record them for groups of 2 or more.
array reduce_node(const array& x, const dist::Group& g, Op op) {
  return array(x.shape(), x.dtype(), std::make_shared<dist::AllReduce>(gpu_stream(), g, op), {x});
}

array gather_node(const array& x, const dist::Group& g) {
  auto p = std::make_shared<dist::AllGather>(gpu_stream(), g);
  Shape shape = p->output_shapes({x})[0];
  return array(std::move(shape), x.dtype(), std::move(p), {x});
}

array scatter_node(const array& x, const dist::Group& g) {
  auto p = std::make_shared<dist::ReduceScatter>(gpu_stream(), g);
  Shape shape = p->output_shapes({x})[0];
  return array(std::move(shape), x.dtype(), std::move(p), {x});
}

// Process r's input of a case: float64 values from a seed of (case, r), as dtype. Integers and
// bools get small values so that sums stay exact.
array input_of(int rank, int seed, const Shape& shape, Dtype dt) {
  std::mt19937_64 gen(uint64_t(seed) * 1000003 + rank);
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (auto& x : v) {
    x = u(gen);
    if (issubdtype(dt, integer) || dt == bool_) x = std::floor(std::abs(x) * 7);
    if (dt == bool_) x = std::fmod(x, 2.0);
  }
  return astype(array(v.begin(), shape, float64), dt);
}

// The single-process answer over every process's inputs, in float64 (bool: or, or, and).
array reference(Op op, int seed, const Shape& shape, Dtype dt, int size) {
  array acc = astype(input_of(0, seed, shape, dt), float64);
  for (int r = 1; r < size; ++r) {
    const array x = astype(input_of(r, seed, shape, dt), float64);
    acc = op == Op::sum ? add(acc, x) : op == Op::max ? maximum(acc, x) : minimum(acc, x);
  }
  if (dt == bool_) acc = minimum(acc, array(1.0));
  return acc;
}

double tol_of(Dtype dt) {
  return dt == float16 ? 2e-3 : dt == bfloat16 ? 1.6e-2 : dt == float32 ? 1e-6 : 0.0;
}

void expect_same(const array& got, const array& want) {
  EXPECT_EQ(got.dtype(), want.dtype());
  expect_close(astype(got, float64), want.shape(), to_vector(want), 0, 0);
}

} // namespace

TEST(DistributedNccl, Availability) {
  if (!kBuiltWithNccl) {
    EXPECT_FALSE(dist::is_available("nccl"));
    expect_throws_naming<std::runtime_error>([] { dist::init(true, "nccl"); }, "built without NCCL");
    return;
  }
  EXPECT_EQ(dist::is_available("nccl"), is_available(Device::gpu));
  if (!is_available(Device::gpu)) {
    expect_throws_naming<std::runtime_error>([] { dist::init(true, "nccl"); }, "no CUDA GPU");
    GTEST_SKIP() << "no GPU available";
  }
  auto g = nccl_world();
  EXPECT_STREQ(g.raw_group()->backend(), "nccl");
  EXPECT_GE(g.rank(), 0);
  EXPECT_LT(g.rank(), g.size());
  // Made once; the first group made is the ops' default group.
  EXPECT_EQ(dist::init(false, "nccl").raw_group(), g.raw_group());
  EXPECT_EQ(dist::init().raw_group(), g.raw_group());
}

// Over one rank each collective is a copy through NCCL: the result equals the input exactly,
// whatever its dtype, size or layout (non-contiguous inputs are made contiguous on the GPU).
TEST(DistributedNccl, CollectivesOverOneGpuReturnTheirInput) {
  REQUIRE_NCCL();
  REQUIRE_ONE_PROCESS();
  auto g = nccl_world();
  int seed = 0;
  for (Dtype dt : {float32, float16, bfloat16, int32, bool_}) {
    for (const Shape& shape : std::vector<Shape>{{1}, {7}, {3, 5}, {2, 3, 5}, {0, 4}}) {
      ++seed;
      const array x = input_of(0, seed, shape, dt);
      std::vector<std::pair<std::string, array>> inputs = {{"host", x}, {"gpu", contiguous(x, false, Device::gpu)}};
      if (shape.size() >= 2) {
        inputs.emplace_back("transposed", transpose(x, Device::gpu));
        Shape stop = shape, step(shape.size(), 1);
        step[0] = 2;
        inputs.emplace_back("strided", slice(x, Shape(shape.size(), 0), stop, step, Device::gpu));
      }
      inputs.emplace_back("broadcast", broadcast_to(slice(x, Shape(shape.size(), 0), Shape(shape.size(), 1)), shape));
      for (const auto& [layout, v] : inputs) {
        SCOPED_TRACE(dtype_name(dt) + " seed " + std::to_string(seed) + " " + layout);
        for (Op op : {Op::sum, Op::max, Op::min}) expect_same(reduce_node(v, g, op), v);
        expect_same(gather_node(v, g), v);
        expect_same(scatter_node(v, g), v);
      }
    }
  }
  // A scalar is gathered into [1]; the ops themselves return their input over one process.
  const array s = input_of(0, 100, {}, float32);
  const array gs = gather_node(s, g);
  ASSERT_EQ(gs.shape(), Shape{1});
  EXPECT_EQ(gs.item<float>(), s.item<float>());
  expect_same(reduce_node(s, g, Op::sum), s);
  expect_same(dist::all_sum(s, g, Device::gpu), s);
}

// float64, the 8- and 64-bit integers and complex64 (the sum, as pairs of floats) reduce too;
// int16 gathers (bytes) but does not reduce.
TEST(DistributedNccl, OtherDtypes) {
  REQUIRE_NCCL();
  REQUIRE_ONE_PROCESS();
  auto g = nccl_world();
  for (Dtype dt : {float64, int64, uint64, uint32, int8, uint8}) {
    SCOPED_TRACE(dtype_name(dt));
    const array x = input_of(0, 200, {5, 3}, dt);
    for (Op op : {Op::sum, Op::max, Op::min}) expect_same(reduce_node(x, g, op), x);
    expect_same(scatter_node(x, g), x);
  }
  const array z = astype(input_of(0, 201, {6}, float32), complex64);
  const array zs = reduce_node(z, g, Op::sum);
  expect_allclose(real(zs), real(z), 0, 0);
  expect_allclose(imag(zs), imag(z), 0, 0);
  const array i16 = input_of(0, 202, {9}, int16);
  expect_same(gather_node(i16, g), i16);
  expect_throws_naming<std::invalid_argument>([&] { dist::all_sum(i16, g, Device::gpu); },
                                              "[all_sum] the nccl backend cannot reduce int16");
  expect_throws_naming<std::invalid_argument>([&] { dist::sum_scatter(i16, g, Device::gpu); },
                                              "[sum_scatter] the nccl backend cannot reduce int16");
  expect_throws_naming<std::invalid_argument>([&] { eval(reduce_node(astype(i16, uint16), g, Op::max)); },
                                              "[all_max] the nccl backend cannot reduce uint16");
}

// The collective runs on the GPU stream after the products that make its input, and before
// the kernel that reads its output: read too early, it would copy a half-written matrix.
TEST(DistributedNccl, OrderedWithTheKernelsOfItsStream) {
  REQUIRE_NCCL();
  REQUIRE_ONE_PROCESS();
  auto g = nccl_world();
  const array a = uniform({2048, 2048}, -1, 1, float32);
  array y = a;
  for (int i = 0; i < 6; ++i) y = multiply(matmul(y, a, Device::gpu), array(0.02f), Device::gpu);
  const array z = reduce_node(y, g, Op::sum);
  const array w = multiply(z, array(2.0f), Device::gpu);
  eval({w, y});
  expect_allclose(w, multiply(y, array(2.0f)), 0, 0);
}

TEST(DistributedNccl, CpuStreamsAreRefused) {
  REQUIRE_NCCL();
  auto g = nccl_world();
  const array x = input_of(g.rank(), 300, {4, 3}, float32);
  const std::string why = "the nccl backend works on GPU arrays";
  expect_throws_naming<std::invalid_argument>([&] { dist::all_sum(x, g, Device::cpu); }, "[all_sum] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::all_max(x, g, Device::cpu); }, "[all_max] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::all_min(x, g, Device::cpu); }, "[all_min] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::all_gather(x, g, Device::cpu); }, "[all_gather] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::sum_scatter(x, g, Device::cpu); }, "[sum_scatter] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::send(x, 0, g, Device::cpu); }, "[send] " + why);
  expect_throws_naming<std::invalid_argument>([&] { dist::recv({2}, float32, 0, g, Device::cpu); }, "[recv] " + why);
  // A node put on a CPU stream by hand reaches the group from eval_cpu, which refuses it too.
  const array y(x.shape(), x.dtype(), std::make_shared<dist::AllReduce>(default_stream(Device::cpu), g, Op::sum), {x});
  expect_throws_naming<std::invalid_argument>([&] { eval(y); }, "[all_sum] " + why);
}

TEST(DistributedNccl, SplitOfOneGpu) {
  REQUIRE_NCCL();
  REQUIRE_ONE_PROCESS();
  auto g = nccl_world();
  auto sub = g.split(3);
  EXPECT_STREQ(sub.raw_group()->backend(), "nccl");
  EXPECT_EQ(sub.size(), 1);
  EXPECT_EQ(sub.rank(), 0);
  const array x = input_of(0, 400, {5, 2}, bfloat16);
  expect_same(reduce_node(x, sub, Op::sum), x);
  expect_throws_naming<std::invalid_argument>([&] { g.split(-1); }, "[split]");
}

// ---- Under mpirun, one GPU a process ---------------------------------------------------

TEST(DistributedNcclProcesses, CollectivesMatchOneProcess) {
  REQUIRE_NCCL();
  REQUIRE_PROCESSES();
  auto g = nccl_world();
  const int p = g.size(), r = g.rank();
  int seed = 500;
  for (Dtype dt : {float32, float16, bfloat16, int32, bool_}) {
    for (const Shape& shape : std::vector<Shape>{{}, {7}, {3, 5}}) {
      ++seed;
      SCOPED_TRACE(dtype_name(dt) + " seed " + std::to_string(seed));
      const array x = input_of(r, seed, shape, dt);
      const double t = tol_of(dt) * p;
      expect_allclose(astype(dist::all_sum(x, g, Device::gpu), float64), reference(Op::sum, seed, shape, dt, p), t, t);
      expect_allclose(astype(dist::all_max(x, g, Device::gpu), float64), reference(Op::max, seed, shape, dt, p), 0, 0);
      expect_allclose(astype(dist::all_min(x, g, Device::gpu), float64), reference(Op::min, seed, shape, dt, p), 0, 0);
      std::vector<array> all;
      for (int k = 0; k < p; ++k) all.push_back(reshape(input_of(k, seed, shape, dt), {-1}));
      const array gathered = dist::all_gather(x, g, Device::gpu);
      expect_allclose(astype(reshape(gathered, {-1}), float64), astype(concatenate(all, 0), float64), 0, 0);
    }
    // sum_scatter: this rank's rows of the sum, from a non-contiguous input.
    if (dt == bool_) continue;
    const array sum = reference(Op::sum, 600, {3, 2 * p}, dt, p);
    const array got = dist::sum_scatter(transpose(input_of(r, 600, {3, 2 * p}, dt)), g, Device::gpu);
    ASSERT_EQ(got.shape(), (Shape{2, 3}));
    const double t = tol_of(dt) * p;
    expect_allclose(astype(got, float64), slice(transpose(sum), {2 * r, 0}, {2 * r + 2, 3}), t, t);
  }
}

TEST(DistributedNcclProcesses, SendRecv) {
  REQUIRE_NCCL();
  REQUIRE_PROCESSES();
  auto g = nccl_world();
  const int p = g.size(), next = (g.rank() + 1) % p, prev = (g.rank() + p - 1) % p;
  for (Dtype dt : {float32, bfloat16, int16, bool_}) {
    SCOPED_TRACE(dtype_name(dt));
    const array mine = input_of(g.rank(), 700, {5, 3}, dt);
    // A send waits on the GPU for its receive: even ranks send first, odd ones receive first.
    const array got = dist::recv_like(mine, prev, g, Device::gpu);
    if (g.rank() % 2 == 0) {
      eval(dist::send(mine, next, g, Device::gpu));
      eval(got);
    } else {
      eval(got);
      eval(dist::send(mine, next, g, Device::gpu));
    }
    expect_same(got, input_of(prev, 700, {5, 3}, dt));
  }
}

TEST(DistributedNcclProcesses, SubGroupsFromSplit) {
  REQUIRE_NCCL();
  REQUIRE_PROCESSES();
  auto g = nccl_world();
  // Reversed order by key: the sum over the sub-group is the world's.
  auto rev = g.split(0, g.size() - g.rank());
  EXPECT_EQ(rev.size(), g.size());
  EXPECT_EQ(rev.rank(), g.size() - 1 - g.rank());
  EXPECT_EQ(dist::all_sum(array(double(g.rank()), float64), rev, Device::gpu).item<double>(),
            g.size() * (g.size() - 1) / 2.0);
  // One group per parity.
  const int color = g.rank() % 2;
  auto sub = g.split(color);
  double want = 0;
  for (int k = color; k < g.size(); k += 2) want += k;
  EXPECT_EQ(dist::all_sum(array(double(g.rank()), float64), sub, Device::gpu).item<double>(), want);
}
