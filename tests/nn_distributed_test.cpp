// nuvec tests: nuvec::nn's distributed helpers (nn/distributed.h) on one process, where the
// group has size 1: average_gradients returns its input, sum_gradients is the identity with
// the gradient passed through, the sharded Linear layers and shard_linear / shard_inplace
// equal nn::Linear, and bad arguments throw naming the op. The multi-process behaviour is in
// nn_distributed_mpi_test.cpp (run under mpirun).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "nuvec/nn.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nuvec {
namespace {

using namespace nuvec::testing;
using nn::ParamMap;

// Every parameter of m as random float64 values.
void randomize_f64(nn::Module& m) {
  ParamMap p = m.parameters();
  for (auto& [k, v] : p) v = randn(v.shape(), float64);
  m.update(p);
}

// A module holding a child it calls through no member of its own: it does not override
// child_replaced, so replace_child refuses.
class Holder : public nn::Module {
 public:
  Holder() {
    inner = register_module("inner", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                           std::make_shared<nn::Linear>(4, 4)}));
    out = register_module("out", std::make_shared<nn::Linear>(4, 4));
  }
  array forward(const array& x) override { return (*out)((*inner)(x)); }
  std::shared_ptr<nn::Sequential> inner;
  std::shared_ptr<nn::Linear> out;
};

// These tests are about the group of one process (the binary run alone).
#define ONE_PROCESS()                 \
  if (distributed::init().size() > 1) \
  GTEST_SKIP() << "started by mpirun: nn_distributed_mpi_test covers groups of several processes"

TEST(NnDistributed, SingleProcessGroup) {
  ONE_PROCESS();
  EXPECT_EQ(distributed::init().size(), 1);
  EXPECT_EQ(distributed::init().rank(), 0);
}

TEST(NnDistributed, AverageGradientsOfOneProcessIsTheInput) {
  ONE_PROCESS();
  ParamMap g = {
      {"a.weight", randn({3, 4}, float32)},
      {"a.bias", randn({4}, float32)},
      {"b", randn({2, 2, 2}, float64)},
      {"c", astype(randn({5}), bfloat16)},
      {"d", randn({}, float32)},
  };
  for (int64_t size : {int64_t(-1), int64_t(0), int64_t(8), int64_t(32) * 1024 * 1024}) {
    for (std::optional<Dtype> ct : {std::optional<Dtype>(), std::optional<Dtype>(bfloat16)}) {
      ParamMap out = nn::average_gradients(g, std::nullopt, size, ct);
      ASSERT_EQ(out.size(), g.size());
      for (auto& [k, v] : g) {
        ASSERT_TRUE(out.count(k)) << k;
        // The same arrays: no node, no cast (even with a communication type).
        EXPECT_EQ(out.at(k).id(), v.id()) << k;
        EXPECT_EQ(out.at(k).dtype(), v.dtype()) << k;
        EXPECT_EQ(out.at(k).shape(), v.shape()) << k;
      }
    }
  }
  EXPECT_TRUE(nn::average_gradients({}).empty());
  ParamMap out = nn::average_gradients(g, distributed::init());
  expect_allclose(out.at("b"), g.at("b"), 0, 0);
}

TEST(NnDistributed, SumGradientsIsTheIdentityWithGradientPassthrough) {
  ONE_PROCESS();
  auto f = nn::sum_gradients();
  const array x = randn({3, 5}), c = randn({3, 5});
  const array y = f(x);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.dtype(), x.dtype());
  expect_allclose(y, x, 0, 0);
  // d/dx sum(f(x)^2 * c) = 2 x c: the cotangent goes through unchanged.
  const array gx = grad([&](const array& a) { return sum(square(f(a)) * c); })(x);
  expect_allclose(gx, 2.0 * x * c, 1e-12, 1e-12);
  auto [out, tan] = jvp(f, x, c);
  expect_allclose(tan, c, 0, 0);
  const array xb = astype(x, bfloat16);
  EXPECT_EQ(nn::sum_gradients(distributed::init())(xb).dtype(), bfloat16);
}

TEST(NnDistributed, ShardedLayersOfOneProcessEqualLinear) {
  ONE_PROCESS();
  const double bound = 1.0 / std::sqrt(6.0);
  nn::AllToShardedLinear a(6, 4);
  nn::ShardedToAllLinear s(6, 4);
  for (nn::Module* m : {static_cast<nn::Module*>(&a), static_cast<nn::Module*>(&s)}) {
    ParamMap p = m->parameters();
    ASSERT_EQ(p.size(), 2u) << m->name();
    EXPECT_EQ(p.at("weight").shape(), (Shape{4, 6})) << m->name();
    EXPECT_EQ(p.at("bias").shape(), (Shape{4})) << m->name();
    EXPECT_EQ(p.at("weight").dtype(), float32);
    for (double v : to_vector(p.at("weight"))) {
      EXPECT_LE(std::abs(v), bound) << m->name();
    }
    for (double v : to_vector(p.at("bias"))) {
      EXPECT_LE(std::abs(v), bound) << m->name();
    }
  }
  EXPECT_EQ(a.input_dims(), 6);
  EXPECT_EQ(a.output_dims(), 4);
  EXPECT_EQ(s.input_dims(), 6);
  EXPECT_EQ(s.output_dims(), 4);
  EXPECT_EQ(a.group().size(), 1);
  EXPECT_EQ(a.name(), "AllToShardedLinear");
  EXPECT_EQ(s.name(), "ShardedToAllLinear");

  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    nn::Linear lin(6, 4, bias);
    randomize_f64(lin);
    nn::AllToShardedLinear a2(6, 4, bias);
    nn::ShardedToAllLinear s2(6, 4, bias);
    a2.update(lin.parameters());
    s2.update(lin.parameters());
    EXPECT_EQ(a2.parameters().size(), bias ? 2u : 1u);
    for (Shape shape : {Shape{6}, Shape{3, 6}, Shape{2, 3, 6}}) {
      const array x = randn(shape);
      expect_allclose(a2(x), lin(x), 1e-12, 1e-12);
      expect_allclose(s2(x), lin(x), 1e-12, 1e-12);
    }
  }
}

TEST(NnDistributed, ShardLinearOfOneProcessReproducesLinear) {
  ONE_PROCESS();
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    nn::Linear lin(5, 8, bias);
    randomize_f64(lin);
    const array x = randn({4, 5}), c = randn({4, 8});
    auto loss_of = [&](nn::Module& m) {
      return nn::value_and_grad(m, [&m, &c](const std::vector<array>& a) { return sum(m(a[0]) * c); });
    };
    auto [lf, gf] = loss_of(lin)({x});
    const array gxf = grad([&](const array& a) { return sum(lin(a) * c); })(x);
    for (std::string sharding : {"all-to-sharded", "sharded-to-all"}) {
      SCOPED_TRACE(sharding);
      auto m = nn::shard_linear(lin, sharding);
      EXPECT_EQ(m->name(), sharding == "all-to-sharded" ? "AllToShardedLinear" : "ShardedToAllLinear");
      expect_allclose((*m)(x), lin(x), 1e-12, 1e-12);
      auto [ls, gs] = loss_of(*m)({x});
      EXPECT_NEAR(ls.item<double>(), lf.item<double>(), 1e-12);
      ASSERT_EQ(gs.size(), gf.size());
      for (auto& [k, v] : gf) expect_allclose(gs.at(k), v, 1e-12, 1e-12);
      const array gxs = grad([&](const array& a) { return sum((*m)(a) * c); })(x);
      expect_allclose(gxs, gxf, 1e-12, 1e-12);
      // The source layer's parameters are copied, not shared with the new layer's slots.
      EXPECT_EQ(m->parameters().at("weight").dtype(), float64);
    }
  }
  // A frozen source still gives trainable shards (MLX's from_linear builds a fresh layer).
  nn::Linear frozen(3, 2);
  frozen.freeze();
  EXPECT_EQ(nn::shard_linear(frozen, "all-to-sharded")->trainable_parameters().size(), 2u);
}

TEST(NnDistributed, ShardInplaceSwapsTheListedLinears) {
  ONE_PROCESS();
  nn::Sequential model({std::make_shared<nn::Linear>(4, 8), nn::ReLU(), std::make_shared<nn::Linear>(8, 3)});
  randomize_f64(model);
  model.eval();
  const array x = randn({5, 4});
  const array want = model(x);
  nn::shard_inplace(model, {{"layers.0", "all-to-sharded"}, {"layers.2", "sharded-to-all"}});
  EXPECT_EQ(model[0].name(), "AllToShardedLinear");
  EXPECT_EQ(model[1].name(), "ReLU");
  EXPECT_EQ(model[2].name(), "ShardedToAllLinear");
  EXPECT_FALSE(model[0].training()); // the replaced layer's mode is kept
  expect_allclose(model(x), want, 1e-12, 1e-12);
  EXPECT_EQ(model.parameters().size(), 4u);
  nn::shard_inplace(model, {}); // nothing to do
}

TEST(NnDistributed, BadArgumentsThrowNamingTheOp) {
  ONE_PROCESS();
  using E = std::invalid_argument;
  expect_throws_naming<E>([] { nn::AllToShardedLinear(0, 4); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([] { nn::AllToShardedLinear(4, -1); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([] { nn::ShardedToAllLinear(0, 4); }, "[nn.ShardedToAllLinear]");
  expect_throws_naming<E>([] { nn::ShardedToAllLinear(4, 0); }, "[nn.ShardedToAllLinear]");
  nn::AllToShardedLinear a(4, 2);
  nn::ShardedToAllLinear s(4, 2);
  expect_throws_naming<E>([&] { a(zeros({3, 5})); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([&] { a(array(1.0f)); }, "[nn.AllToShardedLinear]");
  expect_throws_naming<E>([&] { s(zeros({3, 3})); }, "[nn.ShardedToAllLinear]");

  nn::Linear lin(4, 2);
  try {
    nn::shard_linear(lin, "rows");
    ADD_FAILURE() << "expected a throw";
  } catch (const E& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[nn.shard_linear]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rows"), std::string::npos) << msg;
  }

  // shard_inplace: unknown path, not a Linear, bad sharding, the model itself: each names the
  // path, and the model is left unchanged.
  nn::Sequential model({std::make_shared<nn::Linear>(4, 4), nn::ReLU()});
  auto expect_path = [&](const std::map<std::string, std::string>& sh, const std::string& path) {
    try {
      nn::shard_inplace(model, sh);
      ADD_FAILURE() << "expected a throw for " << path;
    } catch (const E& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[nn.shard_inplace]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
    }
    EXPECT_EQ(model[0].name(), "Linear");
  };
  expect_path({{"layers.0", "all-to-sharded"}, {"layers.7", "all-to-sharded"}}, "layers.7");
  expect_path({{"layers.0", "all-to-sharded"}, {"layers.1", "all-to-sharded"}}, "layers.1");
  expect_path({{"layers.0", "columns"}}, "layers.0");
  expect_path({{"", "all-to-sharded"}}, "");

  // A parent that refuses the swap ("out", after "inner.layers.0" in path order): the earlier
  // swap is undone.
  Holder h;
  const array x = randn({2, 4});
  randomize_f64(h);
  const array want = h(x);
  try {
    nn::shard_inplace(h, {{"inner.layers.0", "all-to-sharded"}, {"out", "sharded-to-all"}});
    ADD_FAILURE() << "expected a throw";
  } catch (const E& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[nn.shard_inplace]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'out'"), std::string::npos) << msg;
  }
  EXPECT_EQ((*h.inner)[0].name(), "Linear");
  for (auto& [name, child] : h.children()) EXPECT_EQ(child->name(), name == "inner" ? "Sequential" : "Linear");
  expect_allclose(h(x), want, 0, 0);
}

} // namespace
} // namespace nuvec
