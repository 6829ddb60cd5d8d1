// The collectives over MPI: run by CTest as `mpirun -np 2` and `mpirun -np 4 --oversubscribe`
// (tests/CMakeLists.txt; alone, outside mpirun, every test skips). Each process makes every
// process's inputs from the same seeds, so it knows the single-process answer of each
// collective and checks its own result against it: all_sum, all_max, all_min, all_gather and
// sum_scatter for every dtype MPI moves, empty, scalar and non-contiguous inputs; sub-groups
// from split; a send/recv ring; processes that disagree on shapes (raising everywhere, never
// hanging); gradients through the collectives against central differences of each process's
// own loss (the rules' convention); jvp and vmap; a tensor-parallel MLP against the same model
// on one process.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
namespace dist = nuvec::distributed;

namespace {

dist::Group world() {
  return dist::init();
}

#define NEED_PROCESSES()                                                         \
  if (world().size() < 2) GTEST_SKIP() << "not started by mpirun with 2 or more processes"

// Process r's input of a case: float64 values from a seed of (case, r), as dtype. Integers
// and bools get small values so sums stay exact.
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

// The single-process answer over every process's inputs.
array reference(dist::detail::ReduceOp op, int seed, const Shape& shape, Dtype dt, int size) {
  array acc = astype(input_of(0, seed, shape, dt), float64);
  for (int r = 1; r < size; ++r) {
    const array x = astype(input_of(r, seed, shape, dt), float64);
    acc = op == dist::detail::ReduceOp::sum ? add(acc, x) : op == dist::detail::ReduceOp::max ? maximum(acc, x)
                                                                                                : minimum(acc, x);
  }
  if (dt == bool_) acc = minimum(acc, array(1.0)); // or
  return acc;
}

double tol_of(Dtype dt) {
  return dt == float16 ? 2e-3 : dt == bfloat16 ? 1.6e-2 : dt == float32 ? 1e-6 : dt == float64 ? 1e-14 : 0.0;
}

} // namespace

TEST(DistributedMpi, WorldGroup) {
  NEED_PROCESSES();
  EXPECT_TRUE(dist::is_available("mpi"));
  auto g = world();
  EXPECT_GE(g.rank(), 0);
  EXPECT_LT(g.rank(), g.size());
  EXPECT_EQ(dist::init(true, "mpi").size(), g.size());
}

TEST(DistributedMpi, ReductionsOfEveryDtypeAndShape) {
  NEED_PROCESSES();
  auto g = world();
  const std::vector<Shape> shapes = {{}, {0}, {7}, {3, 5}, {2, 3, 4}};
  int seed = 0;
  for (Dtype dt : {float32, float64, float16, bfloat16, int32, int64, int8, uint8, uint32, bool_, complex64}) {
    for (const Shape& shape : shapes) {
      ++seed;
      SCOPED_TRACE(dtype_name(dt) + " seed " + std::to_string(seed));
      const array x = input_of(g.rank(), seed, shape, dt);
      using Op = dist::detail::ReduceOp;
      for (Op op : {Op::sum, Op::max, Op::min}) {
        if (dt == complex64 && op != Op::sum) continue;
        const array got = op == Op::sum ? dist::all_sum(x) : op == Op::max ? dist::all_max(x) : dist::all_min(x);
        EXPECT_EQ(got.dtype(), dt);
        ASSERT_EQ(got.shape(), shape);
        if (dt == complex64) {
          array want = input_of(0, seed, shape, dt);
          for (int r = 1; r < g.size(); ++r) want = add(want, input_of(r, seed, shape, dt));
          expect_allclose(real(got), real(want), 1e-6, 1e-6);
          expect_allclose(imag(got), imag(want), 1e-6, 1e-6);
        } else {
          const double t = tol_of(dt) * g.size();
          expect_allclose(astype(got, float64), reference(op, seed, shape, dt, g.size()), t, t);
        }
      }
    }
  }
}

TEST(DistributedMpi, NonContiguousInputs) {
  NEED_PROCESSES();
  auto g = world();
  const array x = transpose(input_of(g.rank(), 99, {4, 6}, float32));
  const array want = transpose(reference(dist::detail::ReduceOp::sum, 99, {4, 6}, float32, g.size()));
  expect_allclose(astype(dist::all_sum(x), float64), want, 1e-6, 1e-6);
  const array sliced = slice(input_of(g.rank(), 98, {6, 5}, float64), {1, 0}, {6, 5}, {2, 2});
  std::vector<array> all;
  for (int r = 0; r < g.size(); ++r) all.push_back(slice(input_of(r, 98, {6, 5}, float64), {1, 0}, {6, 5}, {2, 2}));
  expect_allclose(dist::all_gather(sliced), concatenate(all, 0), 0, 0);
}

TEST(DistributedMpi, GatherAndScatter) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size();
  for (Dtype dt : {float32, bfloat16, int64, bool_}) {
    SCOPED_TRACE(dtype_name(dt));
    // all_gather: rows of every process in rank order; a scalar becomes [size].
    std::vector<array> rows, scalars;
    for (int r = 0; r < p; ++r) {
      rows.push_back(input_of(r, 7, {3, 2}, dt));
      scalars.push_back(reshape(input_of(r, 8, {}, dt), {1}));
    }
    expect_allclose(astype(dist::all_gather(input_of(g.rank(), 7, {3, 2}, dt)), float64),
                    astype(concatenate(rows, 0), float64), 0, 0);
    const array gs = dist::all_gather(input_of(g.rank(), 8, {}, dt));
    ASSERT_EQ(gs.shape(), Shape{p});
    expect_allclose(astype(gs, float64), astype(concatenate(scalars, 0), float64), 0, 0);
    // sum_scatter: this rank's rows of the sum.
    if (dt == bool_) continue;
    const array sum = reference(dist::detail::ReduceOp::sum, 9, {2 * p, 3}, dt, p);
    const array got = dist::sum_scatter(input_of(g.rank(), 9, {2 * p, 3}, dt));
    ASSERT_EQ(got.shape(), (Shape{2, 3}));
    const double t = tol_of(dt) * p;
    expect_allclose(astype(got, float64), slice(sum, {2 * g.rank(), 0}, {2 * g.rank() + 2, 3}), t, t);
  }
  expect_throws_naming<std::invalid_argument>([&] { dist::sum_scatter(zeros({2 * p + 1, 2})); }, "[sum_scatter]");
}

TEST(DistributedMpi, SubGroupsFromSplit) {
  NEED_PROCESSES();
  auto g = world();
  const int color = g.rank() % 2;
  auto sub = g.split(color);
  int members = 0;
  for (int r = 0; r < g.size(); ++r) members += r % 2 == color;
  ASSERT_EQ(sub.size(), members);
  EXPECT_EQ(sub.rank(), g.rank() / 2);
  // The sum over the sub-group: every member's rank.
  double want = 0;
  for (int r = color; r < g.size(); r += 2) want += r;
  const array got = dist::all_sum(array(double(g.rank())), sub);
  EXPECT_EQ(got.item<double>(), want);
  // Reversed order by key.
  auto rev = g.split(0, g.size() - g.rank());
  EXPECT_EQ(rev.rank(), g.size() - 1 - g.rank());
}

TEST(DistributedMpi, SendRecvRing) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size(), next = (g.rank() + 1) % p, prev = (g.rank() + p - 1) % p;
  for (Dtype dt : {float32, float16, int32, bool_}) {
    SCOPED_TRACE(dtype_name(dt));
    const array mine = input_of(g.rank(), 11, {5, 3}, dt);
    // Even ranks send first, odd ones receive first: no cycle of blocking sends.
    array got = dist::recv_like(mine, prev);
    if (g.rank() % 2 == 0) {
      eval(dist::send(mine, next));
      eval(got);
    } else {
      eval(got);
      eval(dist::send(mine, next));
    }
    expect_allclose(astype(got, float64), astype(input_of(prev, 11, {5, 3}, dt), float64), 0, 0);
  }
  expect_throws_naming<std::invalid_argument>([&] { dist::send(zeros({2}), p); }, "[send]");
  expect_throws_naming<std::invalid_argument>([&] { dist::recv({2}, float32, g.rank()); }, "[recv]");
}

TEST(DistributedMpi, DisagreeingProcessesRaiseEverywhere) {
  NEED_PROCESSES();
  auto g = world();
  // Rank 0 has 3 elements, the others 4: every process raises, naming the op and the shapes.
  const array x = zeros({g.rank() == 0 ? 3 : 4});
  expect_throws_naming<std::invalid_argument>([&] { eval(dist::all_sum(x)); }, "[all_sum]");
  const array y = zeros({2}, g.rank() == 0 ? float32 : int32);
  expect_throws_naming<std::invalid_argument>([&] { eval(dist::all_gather(y)); }, "disagree");
  // A receive of the wrong shape raises on the receiver and leaves the channel usable.
  if (g.rank() == 0) eval(dist::send(ones({3}), 1));
  if (g.rank() == 1) {
    expect_throws_naming<std::invalid_argument>([&] { eval(dist::recv({4}, float32, 0)); }, "[recv]");
  }
  // The group still works afterwards.
  EXPECT_EQ(dist::all_sum(array(1)).item<int>(), g.size());
}

// Each process's own loss L_r, differentiated by the rules and by central differences in its
// own inputs (the other processes hold theirs still: the rules' convention).
TEST(DistributedMpi, GradientsThroughCollectives) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size();
  const array c = input_of(g.rank(), 21, {2 * p}, float64);       // this process's weights
  const array cg = input_of(g.rank(), 22, {p * 2 * p}, float64);  // for the gather's output
  std::vector<std::pair<std::string, std::function<array(const array&)>>> losses = {
      {"all_sum", [&](const array& x) { return sum(multiply(square(dist::all_sum(x)), c)); }},
      {"all_max", [&](const array& x) { return sum(multiply(dist::all_max(x), c)); }},
      {"all_min", [&](const array& x) { return sum(multiply(dist::all_min(x), c)); }},
      {"all_gather", [&](const array& x) { return sum(multiply(dist::all_gather(x), cg)); }},
      {"sum_scatter",
       [&](const array& x) { return sum(multiply(dist::sum_scatter(x), slice(c, {0}, {2}))); }},
  };
  const array x0 = input_of(g.rank(), 23, {2 * p}, float64);
  const double h = 1e-6;
  for (auto& [name, loss] : losses) {
    SCOPED_TRACE(name);
    const array grad_x = grad(loss)(x0);
    const auto gv = to_vector(grad_x);
    // Every process runs the same sequence of collectives: owner o perturbs its element i.
    for (int o = 0; o < p; ++o) {
      for (int i = 0; i < 2 * p; ++i) {
        auto at = [&](double d) {
          array x = x0;
          if (g.rank() == o) {
            std::vector<double> v = to_vector(x0);
            v[i] += d;
            x = array(v.begin(), {2 * p}, float64);
          }
          return loss(x).item<double>();
        };
        const double fd = (at(h) - at(-h)) / (2 * h);
        if (g.rank() == o) EXPECT_NEAR(gv[i], fd, 1e-5 * (1 + std::abs(fd))) << "element " << i;
      }
    }
  }
}

TEST(DistributedMpi, JvpAndVmap) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size();
  const array x = input_of(g.rank(), 31, {3, 4}, float64), t = input_of(g.rank(), 32, {3, 4}, float64);
  auto [out, tan] = jvp([](const array& a) { return dist::all_sum(a); }, x, t);
  expect_allclose(tan, reference(dist::detail::ReduceOp::sum, 32, {3, 4}, float64, p), 1e-12, 1e-12);
  // vmap over axis 0 of a gather: each example gathered on its own.
  auto vg = vmap([](const std::vector<array>& a) { return std::vector<array>{dist::all_gather(a[0])}; }, {0});
  const array batched = vg({x})[0];
  for (int b = 0; b < 3; ++b) {
    const array row = squeeze(slice(x, {b, 0}, {b + 1, 4}), 0);
    expect_allclose(squeeze(slice(batched, {b, 0}, {b + 1, 4 * p}), 0), dist::all_gather(row), 0, 0);
  }
  auto vs = vmap([](const std::vector<array>& a) { return std::vector<array>{dist::all_sum(a[0])}; }, {1});
  expect_allclose(vs({x})[0], transpose(dist::all_sum(x)), 0, 0);
}

// A two-layer MLP split over the processes the Megatron way (W1 by columns, W2 by rows, one
// all_sum): outputs and gradients equal the single-process model's.
TEST(DistributedMpi, TensorParallelMlpMatchesOneProcess) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size(), d = 6, hid = 4 * p, r = g.rank();
  const array x = input_of(0, 41, {5, d}, float64);  // the same batch everywhere
  const array w1 = input_of(0, 42, {d, hid}, float64), w2 = input_of(0, 43, {hid, d}, float64);
  const int k = hid / p;
  const array w1r = slice(w1, {0, r * k}, {d, (r + 1) * k}), w2r = slice(w2, {r * k, 0}, {(r + 1) * k, d});
  auto full = [&](const std::vector<array>& w) { return sum(square(matmul(maximum(matmul(x, w[0]), array(0.0)), w[1]))); };
  auto sharded = [&](const std::vector<array>& w) {
    return sum(square(dist::all_sum(matmul(maximum(matmul(x, w[0]), array(0.0)), w[1]))));
  };
  auto [lf, gf] = value_and_grad(full, std::vector<int>{0, 1})({w1, w2});
  auto [ls, gs] = value_and_grad(sharded, std::vector<int>{0, 1})({w1r, w2r});
  EXPECT_NEAR(ls.item<double>(), lf.item<double>(), 1e-9 * std::abs(lf.item<double>()));
  expect_allclose(gs[0], slice(gf[0], {0, r * k}, {d, (r + 1) * k}), 1e-9, 1e-12);
  expect_allclose(gs[1], slice(gf[1], {r * k, 0}, {(r + 1) * k, d}), 1e-9, 1e-12);
}

// A process that never joins a collective: the others abort the job after
// NUVEC_DISTRIBUTED_TIMEOUT seconds with a message instead of hanging. Run only by the CTest
// entry DistributedMpi.TimeoutAborts (which sets NUVEC_TEST_EXPECT_ABORT and expects the
// message and a failed job).
TEST(DistributedMpi, AMissingProcessAbortsTheJob) {
  NEED_PROCESSES();
  if (std::getenv("NUVEC_TEST_EXPECT_ABORT") == nullptr) GTEST_SKIP() << "run by DistributedMpi.TimeoutAborts";
  auto g = world();
  if (g.rank() == 0) eval(dist::all_sum(array(1.0f))); // rank 1 never comes
  std::this_thread::sleep_for(std::chrono::seconds(60));
  ADD_FAILURE() << "the job was not aborted";
}
