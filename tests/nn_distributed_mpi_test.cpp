// nuvec tests: nuvec::nn's distributed helpers (nn/distributed.h) across processes. Run by
// CTest as `mpirun -np 2` and `mpirun -np 4 --oversubscribe` (tests/CMakeLists.txt,
// NnDistributedMpi.np*); alone, outside mpirun, every test skips. Each process makes every
// process's inputs from the same seeds, so it knows the single-process answer and checks its
// own result against it: average_gradients (several keys, shapes and dtypes; buckets forced
// small, disabled, or one per dtype, counted on the graph; a bfloat16 communication type;
// a sub-group), data-parallel training steps against the whole batch on one process, and a
// 2-layer MLP split with shard_linear / shard_inplace against the unsharded model (outputs,
// each shard's parameter gradients and the input's gradient).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nuvec/nn.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
namespace dist = nuvec::distributed;
using nn::ParamMap;

namespace {

dist::Group world() {
  return dist::init();
}

#define NEED_PROCESSES()                                                         \
  if (world().size() < 2) GTEST_SKIP() << "not started by mpirun with 2 or more processes"

// Process r's array of a case: float64 values in [-3, 3) from a seed of (case, r), as dtype.
array input_of(int rank, int seed, const Shape& shape, Dtype dt = float64) {
  std::mt19937_64 gen(uint64_t(seed) * 1000003 + rank);
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(n);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (auto& x : v) x = u(gen);
  return astype(array(v.begin(), shape, float64), dt);
}

struct GradSpec {
  std::string key;
  Shape shape;
  Dtype dtype;
};

// Keys of three dtypes, a scalar and an empty gradient. Bytes (float32 / float64 / bfloat16):
// a.bias 20, a.weight 60, b 192, c 14, d 4, e.x 12, f 0, g 44, h 24.
const std::vector<GradSpec>& grad_specs() {
  static const std::vector<GradSpec> specs = {
      {"a.bias", {5}, float32},   {"a.weight", {3, 5}, float32}, {"b", {4, 2, 3}, float64},
      {"c", {7}, bfloat16},       {"d", {}, float32},            {"e.x", {2, 3}, bfloat16},
      {"f", {0, 3}, float64},     {"g", {11}, float32},          {"h", {3}, float64},
  };
  return specs;
}

// Process r's gradients.
ParamMap grads_of(int rank) {
  ParamMap g;
  int seed = 100;
  for (auto& s : grad_specs()) g.emplace(s.key, input_of(rank, ++seed, s.shape, s.dtype));
  return g;
}

// The AllSum nodes of the (unevaluated) graph of `outs`, each once.
std::vector<array> all_sum_nodes(const ParamMap& outs) {
  std::vector<array> found, stack;
  std::set<std::uintptr_t> seen;
  for (auto& [k, v] : outs) stack.push_back(v);
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!seen.insert(a.id()).second || !a.has_primitive()) continue;
    if (std::string(a.primitive().name()) == "AllSum") {
      found.push_back(a);
      continue;
    }
    for (auto& in : a.inputs()) stack.push_back(in);
  }
  return found;
}

// Checks `got` against the mean over the processes `ranks` of their gradients.
void expect_mean(const ParamMap& got, const std::vector<int>& ranks, bool bf16_traffic) {
  std::vector<ParamMap> all;
  for (int r : ranks) all.push_back(grads_of(r));
  ASSERT_EQ(got.size(), grad_specs().size());
  const double p = static_cast<double>(ranks.size());
  for (auto& s : grad_specs()) {
    SCOPED_TRACE(s.key);
    ASSERT_TRUE(got.count(s.key));
    const array& g = got.at(s.key);
    EXPECT_EQ(g.dtype(), s.dtype);
    ASSERT_EQ(g.shape(), s.shape);
    array want = zeros(s.shape, float64);
    for (auto& m : all) want = want + astype(m.at(s.key), float64);
    want = want / p;
    // The sum of p values in [-3, 3) in the transfer dtype, then divided by p.
    const bool coarse = bf16_traffic || s.dtype == bfloat16;
    const double tol = coarse ? 2e-2 : s.dtype == float32 ? 2e-6 : 1e-13;
    expect_allclose(astype(g, float64), want, tol, tol * 3);
  }
}

} // namespace

TEST(NnDistributedMpi, AverageGradientsIsTheMeanOverProcesses) {
  NEED_PROCESSES();
  auto g = world();
  std::vector<int> everyone;
  for (int r = 0; r < g.size(); ++r) everyone.push_back(r);
  const ParamMap mine = grads_of(g.rank());
  struct Case {
    int64_t size;
    std::optional<Dtype> ct;
    size_t buckets; // AllSum nodes expected
  };
  // Bucket counts for the byte sizes of grad_specs(), at most `size` bytes per bucket:
  //   64 B: float32 [a.bias] [a.weight d] [g], float64 [b] [f h], bfloat16 [c e.x]   -> 6
  //   64 B in bfloat16: float32 [a.bias a.weight d g] (64 B), float64 [b f h], [c e.x] -> 3
  //   1 B: every gradient alone; <= 0: one all_sum per gradient; 32 MiB: one per dtype.
  const std::vector<Case> cases = {
      {64, std::nullopt, 6},        {64, bfloat16, 3},          {1, std::nullopt, 9},
      {0, std::nullopt, 9},         {-5, std::nullopt, 9},      {0, bfloat16, 9},
      {32 * 1024 * 1024, std::nullopt, 3}, {32 * 1024 * 1024, bfloat16, 3},
  };
  for (auto& c : cases) {
    SCOPED_TRACE("all_reduce_size " + std::to_string(c.size) + (c.ct ? " bfloat16" : ""));
    const ParamMap avg = nn::average_gradients(mine, std::nullopt, c.size, c.ct);
    const auto nodes = all_sum_nodes(avg);
    EXPECT_EQ(nodes.size(), c.buckets);
    std::map<std::string, int> per_dtype;
    for (auto& n : nodes) {
      if (c.ct) EXPECT_EQ(n.dtype(), *c.ct);
      ++per_dtype[dtype_name(n.dtype())];
      // A bucket of several gradients (a size no single gradient has) stays within the size.
      bool single = false;
      for (auto& s : grad_specs()) {
        size_t elems = 1;
        for (auto e : s.shape) elems *= e;
        single = single || elems == n.size();
      }
      if (c.size > 0 && !single) EXPECT_LE(int64_t(n.nbytes()), c.size);
    }
    if (!c.ct && c.size == 64) {
      EXPECT_EQ(per_dtype["float32"], 3);
      EXPECT_EQ(per_dtype["float64"], 2);
      EXPECT_EQ(per_dtype["bfloat16"], 1);
    }
    expect_mean(avg, everyone, c.ct.has_value());
  }
  // Explicit group argument and the default size.
  expect_mean(nn::average_gradients(mine, g), everyone, false);
}

TEST(NnDistributedMpi, AverageGradientsOverASubGroup) {
  NEED_PROCESSES();
  auto g = world();
  const int color = g.rank() % 2;
  auto sub = g.split(color);
  std::vector<int> members;
  for (int r = 0; r < g.size(); ++r) {
    if (r % 2 == color) members.push_back(r);
  }
  ASSERT_EQ(sub.size(), int(members.size()));
  const ParamMap mine = grads_of(g.rank());
  const ParamMap avg = nn::average_gradients(mine, sub, 64);
  if (sub.size() == 1) {
    for (auto& [k, v] : mine) EXPECT_EQ(avg.at(k).id(), v.id());
  }
  expect_mean(avg, members, false);
}

// Data parallelism: each process differentiates the mean loss of its own batch; the averaged
// gradients equal the gradients of the whole batch (every process's) on one process.
TEST(NnDistributedMpi, DataParallelGradientsEqualTheWholeBatch) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size(), b = 3, d = 4;
  auto make_model = [] {
    auto m = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 8), nn::Tanh(), std::make_shared<nn::Linear>(8, 2)});
    ParamMap params = m->parameters();
    int seed = 200;
    for (auto& [k, v] : params) v = input_of(0, ++seed, v.shape());
    m->update(params);
    return m;
  };
  auto model = make_model();
  auto loss = [&](const std::vector<array>& a) { return mean(square((*model)(a[0]) - a[1])); };
  auto vg = nn::value_and_grad(*model, loss);
  std::vector<array> xs, ys;
  for (int r = 0; r < p; ++r) {
    xs.push_back(input_of(r, 301, {b, d}));
    ys.push_back(input_of(r, 302, {b, 2}));
  }
  auto [l_local, g_local] = vg({xs[g.rank()], ys[g.rank()]});
  auto [l_all, g_all] = vg({concatenate(xs, 0), concatenate(ys, 0)});
  for (int64_t size : {int64_t(0), int64_t(64), int64_t(1) << 20}) {
    const ParamMap avg = nn::average_gradients(g_local, std::nullopt, size);
    ASSERT_EQ(avg.size(), g_all.size());
    for (auto& [k, v] : g_all) {
      SCOPED_TRACE(k);
      expect_allclose(avg.at(k), v, 1e-12, 1e-13);
    }
  }
  EXPECT_NEAR(dist::all_sum(l_local).item<double>() / p, l_all.item<double>(), 1e-12);
}

// A 2-layer MLP split the Megatron way with shard_linear: the first Linear's rows
// (all-to-sharded, sum_gradients on its input), the second's columns (sharded-to-all, one
// all_sum). Outputs, gradients of every shard and of the input equal the unsharded model's.
TEST(NnDistributedMpi, ShardedMlpMatchesTheUnshardedModel) {
  NEED_PROCESSES();
  auto g = world();
  const int p = g.size(), r = g.rank(), d = 6, hid = 4 * p, dout = 5, k = hid / p;
  auto l1 = std::make_shared<nn::Linear>(d, hid), l2 = std::make_shared<nn::Linear>(hid, dout);
  l1->update({{"weight", input_of(0, 401, {hid, d})}, {"bias", input_of(0, 402, {hid})}});
  l2->update({{"weight", input_of(0, 403, {dout, hid})}, {"bias", input_of(0, 404, {dout})}});
  nn::Sequential full({l1, nn::ReLU(), l2});
  nn::Sequential sharded(
      {nn::shard_linear(*l1, "all-to-sharded"), nn::ReLU(), nn::shard_linear(*l2, "sharded-to-all")});
  EXPECT_EQ(sharded[0].name(), "AllToShardedLinear");
  EXPECT_EQ(sharded[2].name(), "ShardedToAllLinear");

  const array x = input_of(0, 405, {7, d}), c = input_of(0, 406, {7, dout});
  // The shard of the first layer's output: this rank's columns of the full hidden layer.
  expect_allclose(sharded[0](x), slice((*l1)(x), {0, r * k}, {7, (r + 1) * k}), 1e-12, 1e-12);
  // The whole model, also on a 3-d batch.
  expect_allclose(sharded(x), full(x), 1e-12, 1e-12);
  const array x3 = input_of(0, 407, {2, 3, d});
  expect_allclose(sharded(x3), full(x3), 1e-12, 1e-12);

  // Parameter gradients of a replicated loss.
  auto loss_of = [&c](nn::Module& m) {
    return [&m, &c](const std::vector<array>& a) { return sum(m(a[0]) * c) + sum(square(m(a[0]))); };
  };
  auto [lf, gf] = nn::value_and_grad(full, loss_of(full))({x});
  auto [ls, gs] = nn::value_and_grad(sharded, loss_of(sharded))({x});
  EXPECT_NEAR(ls.item<double>(), lf.item<double>(), 1e-10 * (1 + std::abs(lf.item<double>())));
  ASSERT_EQ(gs.size(), 4u);
  expect_allclose(
      gs.at("layers.0.weight"), slice(gf.at("layers.0.weight"), {r * k, 0}, {(r + 1) * k, d}), 1e-10, 1e-12);
  expect_allclose(gs.at("layers.0.bias"), slice(gf.at("layers.0.bias"), {r * k}, {(r + 1) * k}), 1e-10, 1e-12);
  expect_allclose(
      gs.at("layers.2.weight"), slice(gf.at("layers.2.weight"), {0, r * k}, {dout, (r + 1) * k}), 1e-10, 1e-12);
  expect_allclose(gs.at("layers.2.bias"), gf.at("layers.2.bias"), 1e-10, 1e-12);

  // The input's gradient: each shard's contribution, summed by sum_gradients.
  auto loss_x = [&](nn::Module& m) {
    return grad([&m, &c](const array& a) { return sum(m(a) * c) + sum(square(m(a))); });
  };
  expect_allclose(loss_x(sharded)(x), loss_x(full)(x), 1e-10, 1e-12);

  // The same split made by shard_inplace on a copy of the model.
  auto c1 = std::make_shared<nn::Linear>(d, hid), c2 = std::make_shared<nn::Linear>(hid, dout);
  c1->update(l1->parameters());
  c2->update(l2->parameters());
  nn::Sequential inplace({c1, nn::ReLU(), c2});
  nn::shard_inplace(inplace, {{"layers.0", "all-to-sharded"}, {"layers.2", "sharded-to-all"}});
  expect_allclose(inplace(x), full(x), 1e-12, 1e-12);
  expect_allclose(loss_x(inplace)(x), loss_x(full)(x), 1e-10, 1e-12);
  const ParamMap pi = inplace.parameters();
  EXPECT_EQ(pi.at("layers.0.weight").shape(), (Shape{k, d}));
  EXPECT_EQ(pi.at("layers.2.weight").shape(), (Shape{dout, k}));
  EXPECT_EQ(pi.at("layers.2.bias").shape(), (Shape{dout}));

  // Layers made by their constructors: this process's shapes.
  nn::AllToShardedLinear a(d, hid);
  nn::ShardedToAllLinear s(hid, dout, false);
  EXPECT_EQ(a.parameters().at("weight").shape(), (Shape{k, d}));
  EXPECT_EQ(a.parameters().at("bias").shape(), (Shape{k}));
  EXPECT_EQ(s.parameters().at("weight").shape(), (Shape{dout, k}));
  EXPECT_EQ(s.parameters().size(), 1u);
  EXPECT_EQ(s(zeros({2, k})).shape(), (Shape{2, dout}));
}

TEST(NnDistributedMpi, DimensionsThatDoNotSplitThrow) {
  NEED_PROCESSES();
  const int p = world().size();
  using E = std::invalid_argument;
  expect_throws_naming<E>([&] { nn::AllToShardedLinear(4, p + 1); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([&] { nn::ShardedToAllLinear(p + 1, 4); }, "[nn.ShardedToAllLinear]");
  nn::Linear odd(p + 1, p + 1);
  expect_throws_naming<E>([&] { nn::shard_linear(odd, "all-to-sharded"); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([&] { nn::shard_linear(odd, "sharded-to-all"); }, "[nn.ShardedToAllLinear]");
  // ShardedToAllLinear takes this process's shard of the input, not the whole input.
  nn::ShardedToAllLinear s(2 * p, 3);
  expect_throws_naming<E>([&] { s(zeros({1, 2 * p})); }, "[nn.ShardedToAllLinear]");
  nn::Sequential model({std::make_shared<nn::Linear>(4, p + 1)});
  expect_throws_naming<E>(
      [&] { nn::shard_inplace(model, {{"layers.0", "all-to-sharded"}}); }, "[nn.AllToShardedLinear]");
  EXPECT_EQ(model[0].name(), "Linear");
  // The group still works afterwards.
  EXPECT_EQ(dist::all_sum(array(1)).item<int>(), p);
}
