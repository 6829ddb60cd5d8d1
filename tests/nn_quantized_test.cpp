// nuvec tests: nn::QuantizedLinear, nn::QuantizedEmbedding and nn::quantize (MLX's
// semantics): shapes, parameters and freezing, forward against the float64 product with the
// dequantized weight, safetensors round trips, the conversion of a model tree (predicate,
// indivisible layers, shared layers, modules that refuse replacements), bad input; and the
// issue's check that 4-bit quantization keeps the Fashion-MNIST MLP's test accuracy within
// 1 point (skipped without Debian's dataset-fashion-mnist).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <set>

#include "nuvec/io.h"
#include "nuvec/nn.h"
#include "nuvec/optimizers.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;
namespace fs = std::filesystem;

namespace {

struct Format {
  std::string mode;
  int group_size, bits;
};

// Every affine width at one or two group sizes, and the fp modes.
const std::vector<Format> kFormats = {
    {"affine", 64, 4}, {"affine", 32, 2}, {"affine", 128, 3}, {"affine", 64, 5},
    {"affine", 32, 6}, {"affine", 128, 8}, {"mxfp4", 32, 4},  {"mxfp8", 32, 8},
    {"nvfp4", 16, 4}};

std::string label(const Format& f) {
  return f.mode + " group_size " + std::to_string(f.group_size) + " bits " + std::to_string(f.bits);
}

// The float32 matrix a quantized layer stands for.
array dequantized(const nn::Module& m, const Format& f) {
  auto p = m.parameters();
  std::optional<array> biases;
  if (p.count("biases")) biases = p.at("biases");
  return dequantize(p.at("weight"), p.at("scales"), biases, f.group_size, f.bits, f.mode, std::nullopt, float32);
}

// x @ w.T (+ bias) in float64.
array reference_linear(const array& x, const array& w, const std::optional<array>& bias) {
  auto y = matmul(astype(x, float64), transpose(astype(w, float64)));
  return bias ? add(y, astype(*bias, float64)) : y;
}
// The absolute tolerance of a float32 product over K against it: rounding errors of the K
// terms (each at most max|x| max|w|) grow like sqrt(K).
double tolerance(const array& x, const array& w) {
  const double K = x.shape(-1);
  const double mx = to_vector(max(abs(astype(x, float64))))[0];
  const double mw = to_vector(max(abs(astype(w, float64))))[0];
  return 4e-6 * std::sqrt(K) * mx * mw;
}

std::set<std::string> keys(const nn::ParamMap& m) {
  std::set<std::string> out;
  for (auto& [k, v] : m) out.insert(k);
  return out;
}

// A module that calls its child through a typed member and does not take replacements.
class Wrapper : public nn::Module {
 public:
  Wrapper() {
    inner_ = register_module("inner", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                          std::make_shared<nn::Linear>(64, 32)}));
    head_ = register_module("head", std::make_shared<nn::Linear>(32, 8));
  }
  array forward(const array& x) override { return head_->forward(inner_->forward(x)); }

 private:
  std::shared_ptr<nn::Sequential> inner_;
  std::shared_ptr<nn::Linear> head_;
};

// The same, holding its child as a Module and saying so: replaceable.
class Replaceable : public nn::Module {
 public:
  Replaceable() { head_ = register_module("head", std::shared_ptr<nn::Module>(std::make_shared<nn::Linear>(64, 8))); }
  array forward(const array& x) override { return head_->forward(x); }

 protected:
  bool child_replaced(const std::string& name, const std::shared_ptr<nn::Module>& child) override {
    if (name != "head") return false;
    head_ = child;
    return true;
  }

 private:
  std::shared_ptr<nn::Module> head_;
};

} // namespace

TEST(NnQuantized, QuantizedLinearShapesDtypesAndFreezing) {
  nn::QuantizedLinear q(128, 10);
  EXPECT_EQ(q.group_size(), 64);
  EXPECT_EQ(q.bits(), 4);
  EXPECT_EQ(q.mode(), "affine");
  EXPECT_EQ(q.input_dims(), 128);
  EXPECT_EQ(q.output_dims(), 10);
  auto p = q.parameters();
  EXPECT_EQ(keys(p), (std::set<std::string>{"weight", "scales", "biases", "bias"}));
  EXPECT_EQ(p.at("weight").dtype(), uint32);
  EXPECT_EQ(p.at("weight").shape(), (Shape{10, 16}));
  EXPECT_EQ(p.at("scales").shape(), (Shape{10, 2}));
  EXPECT_EQ(p.at("biases").shape(), (Shape{10, 2}));
  EXPECT_EQ(p.at("scales").dtype(), float32);
  // MLX's constructor freezes everything, the zero bias included.
  EXPECT_TRUE(q.trainable_parameters().empty());
  EXPECT_EQ(to_vector(p.at("bias")), std::vector<double>(10, 0.0));

  EXPECT_EQ(q(randn({3, 128}, float32)).shape(), (Shape{3, 10}));
  EXPECT_EQ(q(randn({2, 3, 128}, float32)).shape(), (Shape{2, 3, 10}));
  EXPECT_EQ(q(randn({128}, float32)).shape(), (Shape{10}));

  // fp modes: uint8 scale codes, no biases; the mode's defaults.
  nn::QuantizedLinear m(64, 6, false, std::nullopt, std::nullopt, "mxfp4");
  EXPECT_EQ(m.group_size(), 32);
  EXPECT_EQ(m.bits(), 4);
  auto mp = m.parameters();
  EXPECT_EQ(keys(mp), (std::set<std::string>{"weight", "scales"}));
  EXPECT_EQ(mp.at("scales").dtype(), uint8);
  EXPECT_EQ(mp.at("scales").shape(), (Shape{6, 2}));
  nn::QuantizedLinear n(64, 6, true, std::nullopt, std::nullopt, "nvfp4");
  EXPECT_EQ(n.group_size(), 16);
  nn::QuantizedLinear e(64, 6, true, std::nullopt, std::nullopt, "mxfp8");
  EXPECT_EQ(e.bits(), 8);
  EXPECT_EQ(e.parameters().at("weight").shape(), (Shape{6, 16}));
}

TEST(NnQuantized, FromLinearMatchesTheDequantizedProduct) {
  for (const auto& f : kFormats) {
    SCOPED_TRACE(label(f));
    for (bool bias : {true, false}) {
      nn::Linear lin(256, 7, bias);
      auto q = nn::QuantizedLinear::from_linear(lin, f.group_size, f.bits, f.mode);
      EXPECT_EQ(q->input_dims(), 256);
      EXPECT_EQ(q->output_dims(), 7);
      // The packed weight is quantize's of the Linear's weight; the bias is shared.
      auto lp = lin.parameters();
      auto expected = nuvec::quantize(lp.at("weight"), f.group_size, f.bits, f.mode);
      auto qp = q->parameters();
      EXPECT_EQ(to_vector(qp.at("weight")), to_vector(expected[0]));
      EXPECT_EQ(to_vector(qp.at("scales")), to_vector(expected[1]));
      EXPECT_EQ(qp.count("biases"), f.mode == "affine" ? 1u : 0u);
      // Only the quantized arrays are frozen: from_linear's bias stays trainable (MLX).
      EXPECT_EQ(keys(q->trainable_parameters()), bias ? std::set<std::string>{"bias"} : std::set<std::string>{});

      auto w = dequantized(*q, f);
      std::optional<array> b;
      if (bias) b = lp.at("bias");
      for (const Shape& xs : {Shape{5, 256}, Shape{2, 3, 256}, Shape{1, 256}}) {
        auto x = randn(xs, float32);
        auto y = (*q)(x);
        Shape ys = xs;
        ys.back() = 7;
        ASSERT_EQ(y.shape(), ys);
        EXPECT_EQ(y.dtype(), float32);
        expect_allclose(y, reference_linear(x, w, b), 1e-5, tolerance(x, w));
      }
    }
  }
}

TEST(NnQuantized, GradientsReachOnlyTheTrainableBias) {
  auto model = std::make_shared<nn::Sequential>();
  model->append(nn::QuantizedLinear::from_linear(nn::Linear(64, 16)));
  model->append(nn::ReLU());
  model->append(std::make_shared<nn::QuantizedLinear>(64 / 4, 3, true, 16, 4, "nvfp4"));
  auto loss = [&](const std::vector<array>& in) { return sum(square((*model)(in[0]))); };
  auto [l, grads] = nn::value_and_grad(*model, loss)({randn({4, 64}, float32)});
  EXPECT_EQ(keys(grads), (std::set<std::string>{"layers.0.bias"}));
  // A model of constructed quantized layers only has nothing to train.
  nn::QuantizedLinear frozen(64, 4);
  auto f = [&](const std::vector<array>& in) { return sum(frozen(in[0])); };
  expect_throws_naming<std::invalid_argument>([&] { nn::value_and_grad(frozen, f)({randn({2, 64}, float32)}); },
                                              "[nn.value_and_grad]");
}

TEST(NnQuantized, SaveAndLoadRoundTrip) {
  for (const std::string mode : {"affine", "mxfp4"}) {
    SCOPED_TRACE(mode);
    auto make = [&] {
      auto m = std::make_shared<nn::Sequential>();
      m->append(std::make_shared<nn::Linear>(96, 64));
      m->append(nn::ReLU());
      m->append(std::make_shared<nn::Linear>(64, 5));
      nn::quantize(*m, 32, 4, mode);
      return m;
    };
    auto a = make();
    auto b = make(); // other random weights, same structure
    const auto file = (scratch_dir() / ("quantized_" + mode + ".safetensors")).string();
    a->save_weights(file);
    b->load_weights(file);
    auto pa = a->parameters(), pb = b->parameters();
    ASSERT_EQ(keys(pa), keys(pb));
    for (auto& [k, v] : pa) {
      EXPECT_EQ(pb.at(k).dtype(), v.dtype()) << k;
      EXPECT_EQ(to_vector(pb.at(k)), to_vector(v)) << k;
    }
    auto x = randn({3, 96}, float32);
    EXPECT_EQ(to_vector((*a)(x)), to_vector((*b)(x)));
    // The loaded layers stay frozen but for the biases of the Linear layers.
    EXPECT_EQ(keys(b->trainable_parameters()), (std::set<std::string>{"layers.0.bias", "layers.2.bias"}));
  }
}

TEST(NnQuantized, QuantizeConvertsASequential) {
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->append(std::make_shared<nn::Linear>(128, 64));
  mlp->append(nn::ReLU());
  mlp->append(std::make_shared<nn::Linear>(64, 48));
  mlp->append(nn::ReLU());
  mlp->append(std::make_shared<nn::Linear>(48, 10)); // 48 is not a multiple of 64: skipped
  auto x = randn({6, 128}, float32);
  auto before = mlp->parameters();

  std::vector<std::string> asked;
  nn::quantize(*mlp, 64, 4, "affine", [&](const std::string& path, const nn::Module& m) {
    asked.push_back(path + ":" + m.name());
    return path != "layers.2";
  });
  EXPECT_EQ(asked, (std::vector<std::string>{"layers.0:Linear", "layers.2:Linear", "layers.4:Linear"}));
  EXPECT_NE(dynamic_cast<nn::QuantizedLinear*>(&(*mlp)[0]), nullptr);
  EXPECT_NE(dynamic_cast<nn::Linear*>(&(*mlp)[2]), nullptr); // refused by the predicate
  EXPECT_NE(dynamic_cast<nn::Linear*>(&(*mlp)[4]), nullptr); // indivisible
  EXPECT_EQ(mlp->children()[0].second->name(), "QuantizedLinear");
  EXPECT_EQ(
      keys(mlp->parameters()),
      (std::set<std::string>{"layers.0.weight", "layers.0.scales", "layers.0.biases", "layers.0.bias",
                             "layers.2.weight", "layers.2.bias", "layers.4.weight", "layers.4.bias"}));

  // The forward pass runs the quantized layer: layer by layer in float64.
  Format f{"affine", 64, 4};
  auto h = maximum(reference_linear(x, dequantized((*mlp)[0], f), before.at("layers.0.bias")), array(0.0));
  h = maximum(reference_linear(h, before.at("layers.2.weight"), before.at("layers.2.bias")), array(0.0));
  auto ref = reference_linear(h, before.at("layers.4.weight"), before.at("layers.4.bias"));
  expect_allclose((*mlp)(x), ref, 1e-4, 1e-4);

  // Quantizing again converts what is left and divisible (default predicate: everything).
  nn::quantize(*mlp, 32, 8);
  EXPECT_NE(dynamic_cast<nn::QuantizedLinear*>(&(*mlp)[2]), nullptr);
  EXPECT_EQ(dynamic_cast<nn::QuantizedLinear&>((*mlp)[2]).bits(), 8);
  EXPECT_EQ(dynamic_cast<nn::QuantizedLinear&>((*mlp)[0]).bits(), 4); // already quantized
  EXPECT_NE(dynamic_cast<nn::Linear*>(&(*mlp)[4]), nullptr); // 48 % 32 != 0 either
}

TEST(NnQuantized, QuantizeNestedSharedAndTrainingMode) {
  auto shared = std::make_shared<nn::Linear>(64, 64);
  auto inner = std::make_shared<nn::Sequential>();
  inner->append(shared);
  inner->append(std::make_shared<nn::Embedding>(10, 64));
  auto outer = std::make_shared<nn::Sequential>();
  outer->append(inner);
  outer->append(shared);
  outer->eval();
  std::vector<std::string> asked;
  nn::quantize(*outer, std::nullopt, std::nullopt, "affine", [&](const std::string& path, const nn::Module&) {
    asked.push_back(path);
    return true;
  });
  EXPECT_EQ(asked, (std::vector<std::string>{"layers.0.layers.0", "layers.0.layers.1", "layers.1"}));
  // The shared Linear becomes one shared QuantizedLinear, in eval mode as its original.
  EXPECT_EQ(&(*inner)[0], &(*outer)[1]);
  auto* q = dynamic_cast<nn::QuantizedLinear*>(&(*outer)[1]);
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(q->training());
  EXPECT_NE(dynamic_cast<nn::QuantizedEmbedding*>(&(*inner)[1]), nullptr);
}

TEST(NnQuantized, QuantizeRefusedByAParentLeavesTheModelUnchanged) {
  Wrapper w;
  auto before = keys(w.parameters());
  auto x = randn({2, 64}, float32);
  auto y0 = to_vector(w(x));
  // inner.layers.0 (in a Sequential) would be swapped first, then "head" is refused.
  expect_throws_naming<std::invalid_argument>([&] { nn::quantize(w, 32, 4); }, "[nn.Module.replace_child]");
  EXPECT_EQ(keys(w.parameters()), before);
  EXPECT_EQ(w.children()[0].second->children()[0].second->name(), "Linear");
  EXPECT_EQ(to_vector(w(x)), y0);
  // A predicate that skips the refused layer makes it work.
  nn::quantize(w, 32, 4, "affine", [](const std::string& path, const nn::Module&) { return path != "head"; });
  EXPECT_EQ(w.children()[0].second->children()[0].second->name(), "QuantizedLinear");

  Replaceable r;
  auto before_r = r(x);
  nn::quantize(r, 64, 8);
  EXPECT_EQ(r.children()[0].second->name(), "QuantizedLinear");
  expect_allclose(r(x), before_r, 0.05, 0.05); // 8 bits: close to the float layer
}

TEST(NnQuantized, QuantizedEmbeddingForwardAndAsLinear) {
  for (const auto& f : kFormats) {
    SCOPED_TRACE(label(f));
    nn::Embedding emb(37, 128);
    auto q = nn::QuantizedEmbedding::from_embedding(emb, f.group_size, f.bits, f.mode);
    EXPECT_EQ(q->num_embeddings(), 37);
    EXPECT_EQ(q->dims(), 128);
    EXPECT_TRUE(q->trainable_parameters().empty());
    auto table = dequantized(*q, f);
    auto idx = array({3, 0, 36, 5, 5, 17}, int32);
    idx = reshape(idx, {2, 3});
    auto rows = (*q)(idx);
    ASSERT_EQ(rows.shape(), (Shape{2, 3, 128}));
    // MLX: dequantize's dtype: the scales' for affine, bfloat16 for the fp modes.
    EXPECT_EQ(rows.dtype(), f.mode == "affine" ? float32 : bfloat16);
    EXPECT_EQ(to_vector(rows), to_vector(astype(take(table, idx, 0), rows.dtype())));
    EXPECT_EQ((*q)(array(7, int32)).shape(), (Shape{128}));

    auto x = randn({4, 128}, float32);
    auto y = q->as_linear(x);
    ASSERT_EQ(y.shape(), (Shape{4, 37}));
    expect_allclose(y, reference_linear(x, table, std::nullopt), 1e-5, tolerance(x, table));
  }
  nn::QuantizedEmbedding fresh(100, 64);
  EXPECT_EQ(fresh.parameters().at("weight").shape(), (Shape{100, 8}));
  EXPECT_TRUE(fresh.trainable_parameters().empty());
}

TEST(NnQuantized, BadInputThrows) {
  const std::string ql = "[nn.QuantizedLinear]", qe = "[nn.QuantizedEmbedding]";
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(100, 10); }, ql); // 100 % 64
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(0, 10); }, ql);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(64, -1); }, ql);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(64, 4, true, 64, 4, "int4"); }, ql);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(64, 4, true, 64, 7); }, ql);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(64, 4, true, 48, 4); }, ql);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedLinear(64, 4, true, 64, 4, "mxfp4"); }, ql);
  nn::Linear odd(100, 3);
  expect_throws_naming<std::invalid_argument>([&] { nn::QuantizedLinear::from_linear(odd); }, ql);
  nn::QuantizedLinear q(64, 4);
  expect_throws_naming<std::invalid_argument>([&] { q(randn({2, 63}, float32)); }, ql);
  expect_throws_naming<std::invalid_argument>([&] { q(array(1.0f)); }, ql);
  // Integer x: affine promotes it with the scales (MLX's result_type), fp modes refuse it.
  EXPECT_EQ(q(randint({2, 64}, 0, 3, int32)).dtype(), float32);
  nn::QuantizedLinear fp(64, 4, true, std::nullopt, std::nullopt, "mxfp4");
  expect_throws_naming<std::invalid_argument>([&] { fp(randint({2, 64}, 0, 3, int32)); }, "[quantized_matmul]");

  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedEmbedding(10, 48); }, qe);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedEmbedding(0, 64); }, qe);
  expect_throws_naming<std::invalid_argument>([] { nn::QuantizedEmbedding(10, 64, 16, 4, "mxfp8"); }, qe);
  nn::QuantizedEmbedding e(10, 64);
  expect_throws_naming<std::invalid_argument>([&] { e(array({1.0f, 2.0f})); }, qe);
  expect_throws_naming<std::invalid_argument>([&] { e.as_linear(randn({3, 32}, float32)); }, qe);

  // nn::quantize checks the format before touching the model.
  nn::Sequential s({std::make_shared<nn::Linear>(64, 8)});
  expect_throws_naming<std::invalid_argument>([&] { nn::quantize(s, 64, 4, "int4"); }, "[nn.quantize]");
  expect_throws_naming<std::invalid_argument>([&] { nn::quantize(s, 16, 4); }, "[nn.quantize]");
  EXPECT_EQ(s[0].name(), "Linear");

  // replace_child: unknown names and null children.
  expect_throws_naming<std::invalid_argument>(
      [&] { s.replace_child("layers.7", std::make_shared<nn::Linear>(2, 2)); }, "[nn.Module.replace_child]");
  expect_throws_naming<std::invalid_argument>([&] { s.replace_child("layers.0", nullptr); }, "[nn.Module.replace_child]");
  EXPECT_EQ(s[0].name(), "Linear");
}

// ---------------------------------------------------------------------------------------
// Fashion-MNIST: the trainer's MLP (examples/nuvec_mnist.cpp: 784-512-256-10, Adam with bias
// correction, batch 128) trained briefly, then quantized to 4 bits, group 64.

namespace {

struct Split {
  array x = array(0.0f); // (n, 784) float32 in [0, 1]
  array y = array(0);    // (n,) int32
  int n = 0;
};

fs::path fashion_dir() {
  if (const char* d = std::getenv("NUVEC_FASHION_MNIST")) return d;
  return "/usr/share/datasets/fashion-mnist";
}

std::optional<fs::path> find_idx(const std::string& stem) {
  for (const std::string& name : {stem, stem + ".gz"}) {
    if (fs::is_regular_file(fashion_dir() / name)) return fashion_dir() / name;
  }
  return std::nullopt;
}

Split load_split(const std::string& prefix) {
  auto images = load_idx(find_idx(prefix + "-images-idx3-ubyte")->string());
  auto labels = load_idx(find_idx(prefix + "-labels-idx1-ubyte")->string());
  Split s;
  s.n = images.shape(0);
  s.x = divide(astype(reshape(images, {s.n, 784}), float32), array(255.0f));
  s.y = astype(labels, int32);
  eval({s.x, s.y});
  return s;
}

double accuracy(nn::Module& model, const Split& test) {
  model.eval();
  int64_t correct = 0;
  for (int i = 0; i < test.n; i += 2000) {
    const int count = std::min(2000, test.n - i);
    auto x = slice(test.x, {i, 0}, {i + count, 784});
    auto y = slice(test.y, {i}, {i + count});
    correct += sum(equal(astype(argmax(model(x), 1), int32), y)).item<int64_t>();
  }
  model.train();
  return 100.0 * static_cast<double>(correct) / test.n;
}

std::shared_ptr<nn::Sequential> mlp(int inputs) {
  auto m = std::make_shared<nn::Sequential>();
  m->append(std::make_shared<nn::Linear>(inputs, 512));
  m->append(nn::ReLU());
  m->append(std::make_shared<nn::Linear>(512, 256));
  m->append(nn::ReLU());
  m->append(std::make_shared<nn::Linear>(256, 10));
  return m;
}

int count_quantized(const nn::Sequential& m) {
  int n = 0;
  for (size_t i = 0; i < m.size(); ++i) n += dynamic_cast<const nn::QuantizedLinear*>(&m[i]) != nullptr;
  return n;
}

} // namespace

TEST(NnQuantized, FashionMnistMlpKeepsItsAccuracyAt4Bits) {
  for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    if (!find_idx(stem)) {
      GTEST_SKIP() << stem << "[.gz] not in " << fashion_dir()
                   << " (sudo apt-get install dataset-fashion-mnist, or set NUVEC_FASHION_MNIST)";
    }
  }
  Split train = load_split("train"), test = load_split("t10k");
  nn::seed(0);
  auto model = mlp(784);
  optimizers::Adam adam(1e-3, {0.9, 0.999}, 1e-8, /*bias_correction=*/true);
  auto loss_fn = [&](const std::vector<array>& in) {
    return nn::losses::cross_entropy((*model)(in[0]), in[1], std::nullopt, -1, 0.0f, "mean");
  };
  auto step = nn::value_and_grad(*model, loss_fn);
  constexpr int kEpochs = 2, kBatch = 128;
  std::vector<int32_t> order(train.n);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(1000 + epoch));
    for (int start = 0; start < train.n; start += kBatch) {
      const int count = std::min(kBatch, train.n - start);
      array idx(order.begin() + start, {count}, int32);
      auto [loss, grads] = step({take(train.x, idx, 0), take(train.y, idx, 0)});
      adam.update(*model, grads);
      auto outs = nn::tree_leaves(model->parameters());
      auto state = adam.state_arrays();
      outs.insert(outs.end(), state.begin(), state.end());
      eval(outs);
    }
  }
  const double float_acc = accuracy(*model, test);
  EXPECT_GT(float_acc, 80.0);

  // The same weights with the input padded by 48 zero pixels to 832 = 13 * 64, so the
  // first layer (784 inputs, not a multiple of any group size) can be quantized as well.
  auto padded = std::make_shared<nn::Sequential>();
  padded->append(std::make_shared<nn::Lambda>(
      [](const array& x) { return concatenate({x, zeros({x.shape(0), 48}, x.dtype())}, 1); }, "Pad"));
  auto body = mlp(832);
  for (auto& l : body->children()) padded->append(l.second);
  auto p = model->parameters();
  padded->update({{"layers.1.weight", concatenate({p.at("layers.0.weight"), zeros({512, 48})}, 1)},
                  {"layers.1.bias", p.at("layers.0.bias")},
                  {"layers.3.weight", p.at("layers.2.weight")},
                  {"layers.3.bias", p.at("layers.2.bias")},
                  {"layers.5.weight", p.at("layers.4.weight")},
                  {"layers.5.bias", p.at("layers.4.bias")}});
  const double padded_acc = accuracy(*padded, test);
  EXPECT_NEAR(padded_acc, float_acc, 0.05);

  nn::quantize(*model, 64, 4); // the 784-input layer is skipped (784 % 64 != 0)
  EXPECT_EQ(count_quantized(*model), 2);
  const double q_acc = accuracy(*model, test);
  nn::quantize(*padded, 64, 4);
  EXPECT_EQ(count_quantized(*padded), 3);
  const double q_all_acc = accuracy(*padded, test);
  std::cout << std::fixed << std::setprecision(2) << "Fashion-MNIST MLP, " << kEpochs << " epochs: float32 " << float_acc << "%, 4-bit group 64 "
            << q_acc << "% (2 of 3 layers), " << q_all_acc << "% (all 3 layers, input padded to 832)\n" << std::defaultfloat;
  RecordProperty("float_accuracy", std::to_string(float_acc));
  RecordProperty("quantized_accuracy", std::to_string(q_acc));
  RecordProperty("quantized_all_accuracy", std::to_string(q_all_acc));
  EXPECT_LT(float_acc - q_acc, 1.0);
  EXPECT_LT(float_acc - q_all_acc, 1.0);
}

TEST(NnQuantized, UnfreezeKeepsPackedWeightsFrozen) {
  // Fine-tuning a quantized model: unfreeze() must not make the packed words trainable (they
  // have no gradient), nor the fp modes' uint8 scale codes; affine scales and biases have a
  // gradient and unfreeze as in MLX (test_nn.py's test_quantize_freeze: unfreeze(keys=
  // ["scales"]) leaves something trainable); the bias becomes trainable and a step works.
  {
    nuvec::nn::QuantizedLinear fp(64, 8, false, std::nullopt, std::nullopt, "mxfp4");
    fp.unfreeze();
    EXPECT_TRUE(fp.trainable_parameters().empty());
    nuvec::nn::QuantizedEmbedding table(10, 64);
    table.unfreeze();
    auto te = table.trainable_parameters();
    EXPECT_EQ(te.count("weight"), 0u);
    EXPECT_EQ(te.count("scales"), 1u);
    EXPECT_EQ(te.count("biases"), 1u);
    for (const std::string name : {"scales", "biases"}) {
      SCOPED_TRACE(name);
      nuvec::nn::QuantizedLinear by_name(64, 8, false);
      by_name.unfreeze({name});
      auto t = by_name.trainable_parameters();
      EXPECT_EQ(t.size(), 1u);
      EXPECT_EQ(t.count(name), 1u);
      // The gradient through the layer (sum(x · Wᵀ), W = s·q + b per group) against central
      // differences on one output's group.
      auto x = nuvec::random::normal({3, 64});
      auto loss = [&](const nuvec::array& p) {
        by_name.update({{name, p}});
        return nuvec::sum(by_name(x));
      };
      const nuvec::array p0 = by_name.parameters().at(name);
      auto g = nuvec::grad(loss)(p0);
      const double h = 1e-2;
      std::vector<float> unit(p0.size(), 0.0f);
      unit[5] = 1.0f; // output 5's group (one a row at 64 inputs)
      const nuvec::array e(unit.begin(), p0.shape(), nuvec::float32);
      auto bump = [&](double d) { return loss(nuvec::add(p0, nuvec::multiply(nuvec::array(float(d)), e))).item<float>(); };
      const double want = (bump(h) - bump(-h)) / (2 * h);
      EXPECT_NEAR(nuvec::sum(nuvec::multiply(g, e)).item<float>(), want, 1e-2 * (1 + std::abs(want)));
    }
  }
  nuvec::nn::QuantizedLinear layer(64, 8, true);
  layer.unfreeze();
  auto trainable = layer.trainable_parameters();
  EXPECT_EQ(trainable.count("weight"), 0u);
  EXPECT_EQ(trainable.count("scales"), 1u);
  EXPECT_EQ(trainable.count("biases"), 1u);
  EXPECT_EQ(trainable.count("bias"), 1u);
  EXPECT_EQ(layer.parameters().count("weight"), 1u);
  auto x = nuvec::random::normal({3, 64});
  auto loss = [&](const nuvec::array& b) {
    layer.update({{"bias", b}});
    return nuvec::sum(layer(x));
  };
  auto g = nuvec::grad(loss)(layer.parameters().at("bias"));
  nuvec::eval(g);
  EXPECT_EQ(g.shape(), nuvec::Shape({8}));
}
