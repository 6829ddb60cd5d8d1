// nuvec tests: export_function / import_function (.nuvecfn files) and print_graph /
// export_to_dot. Round trips over a table of functions that touches every primitive family
// the table in src/export/primitive_table.cpp stores, a re-import in a fresh process,
// shapeless imports, several traces in one file, and the errors (MLX's export.cpp types).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "nuvec/export.h"
#include "nuvec/graph_utils.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nx = nuvec;
using nx::array;
using nx::testing::randn;
using nx::testing::scratch_dir;

namespace {

std::string path_for(const std::string& name) {
  return (scratch_dir() / (name + ".nuvecfn")).string();
}

struct Case {
  const char* name;
  std::function<std::vector<array>(const nx::Args&)> fun;
  nx::Args inputs;
};

// One function per primitive family (or a few together); inputs are evaluated host data.
std::vector<Case> cases() {
  auto f32 = [](nx::Shape s) {
    auto a = randn(s, nx::float32);
    a.eval();
    return a;
  };
  auto ints = [](std::vector<int> v, nx::Shape s) { return array(v.begin(), s, nx::int32); };
  array captured = f32({3, 4}); // stored as a constant
  return {
      {"unary_binary", [](const nx::Args& x) {
         return std::vector<array>{nx::negative(nx::exp(x[0])) + nx::sin(x[1]) * 2.0f,
                                   nx::maximum(x[0], x[1]) >= x[1], nx::logaddexp(x[0], x[1])};
       }, {f32({3, 4}), f32({3, 4})}},
      {"divmod_select_astype", [](const nx::Args& x) {
         auto dm = nx::divmod(x[0], x[1]);
         return std::vector<array>{dm[0], dm[1], nx::where(x[0] > 0.0f, x[0], x[1]),
                                   nx::astype(x[0] * 10.0f, nx::int32)};
       }, {f32({5}), nx::abs(f32({5})) + 0.5f}},
      {"captured_constant_broadcast", [captured](const nx::Args& x) {
         return std::vector<array>{nx::matmul(x[0], captured) + nx::array({1.0f, 2.0f, 3.0f, 4.0f}),
                                   nx::broadcast_to(x[1], {2, 3})};
       }, {f32({2, 3}), f32({3})}},
      {"reductions", [](const nx::Args& x) {
         return std::vector<array>{nx::sum(x[0], 1), nx::max(x[0], 0, true), nx::argmax(x[0], 1),
                                   nx::logsumexp(x[0], 0), nx::all(x[0] > -10.0f)};
       }, {f32({4, 5})}},
      {"shapes_and_slices", [](const nx::Args& x) {
         auto r = nx::reshape(nx::transpose(x[0]), {2, 6});
         auto s = nx::slice(x[0], {1, 0}, {3, 4}, {1, 2});
         auto u = nx::slice_update(x[0], nx::zeros({1, 4}), {0, 0}, {1, 4});
         return std::vector<array>{r, s, u, nx::concatenate({x[0], x[0]}, 0),
                                   nx::squeeze(nx::expand_dims(x[0], 0), 0)};
       }, {f32({3, 4})}},
      {"indexing", [ints](const nx::Args& x) {
         auto idx = ints({2, 0, 1}, {3});
         auto along = ints({0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, {3, 4});
         return std::vector<array>{nx::take(x[0], idx, 0), nx::take_along_axis(x[0], along, 0),
                                   nx::put_along_axis(x[0], along, x[0] * 2.0f, 0),
                                   nx::scatter_add(x[0], idx, nx::ones({3, 1, 4}), 0)};
       }, {f32({3, 4})}},
      {"matmul_addmm_conv", [](const nx::Args& x) {
         return std::vector<array>{nx::addmm(x[2], x[0], x[1], 0.5f, 2.0f),
                                   nx::conv1d(nx::reshape(x[0], {1, 4, 3}), nx::ones({2, 2, 3}), 1, 1),
                                   nx::conv2d(nx::reshape(x[0], {1, 2, 2, 3}), nx::ones({2, 2, 2, 3}))};
       }, {f32({4, 3}), f32({3, 5}), f32({4, 5})}},
      {"softmax_sort_scan", [](const nx::Args& x) {
         return std::vector<array>{nx::softmax(x[0], -1), nx::sort(x[0], 1), nx::argsort(x[0], 0),
                                   nx::partition(x[0], 1, 1), nx::argpartition(x[0], 2, 1),
                                   nx::cumsum(x[0], 1, true, false), nx::cumprod(x[0], 0)};
       }, {f32({3, 5})}},
      {"random_fft_linalg", [](const nx::Args& x) {
         auto k = nx::random::key(7);
         auto spd = nx::matmul(x[0], nx::transpose(x[0])) + 4.0f * nx::eye(3);
         return std::vector<array>{nx::random::uniform({3, 3}, nx::float32, k) + x[0],
                                   nx::abs(nx::fft::fft(x[0])), nx::linalg::inv(spd, nx::Device::cpu),
                                   nx::arange(0.0, 3.0, 0.5) * 2.0f};
       }, {f32({3, 3})}},
      {"views_plumbing_dynamic", [ints](const nx::Args& x) {
         auto start = ints({1}, {1});
         auto mask = nx::array({true, false, true, false, true, true}, {2, 3});
         auto d = nx::depends({x[0] * 2.0f}, {nx::exp(x[0])});
         auto cov = nx::array({2.0f, 0.5f, 0.5f, 1.0f}, {2, 2});
         return std::vector<array>{
             nx::as_strided(x[0], {2, 2}, {1, 3}, 1), nx::contiguous(nx::transpose(x[0])),
             nx::copy(x[0]), nx::view(x[0], nx::int32), d[0],
             nx::slice(x[0], start, {1}, {2}), nx::slice_update(x[0], nx::zeros({2, 1}), start, {1}),
             nx::masked_scatter(x[0], mask, nx::ones({4})),
             nx::random::multivariate_normal(nx::zeros({2}), cov, {3}, nx::float32, nx::random::key(3))};
       }, {f32({2, 3})}},
      {"identity_and_no_input_use", [](const nx::Args& x) {
         return std::vector<array>{x[0], nx::zeros({2, 2})};
       }, {f32({2})}},
  };
}

void expect_same(const std::vector<array>& expected, const std::vector<array>& got, const char* name) {
  ASSERT_EQ(expected.size(), got.size()) << name;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].shape(), got[i].shape()) << name << " output " << i;
    EXPECT_EQ(expected[i].dtype(), got[i].dtype()) << name << " output " << i;
    EXPECT_TRUE(nx::allclose(expected[i], got[i], 1e-5, 1e-5, true).item<bool>())
        << name << " output " << i << "\nexpected " << expected[i] << "\ngot " << got[i];
  }
}

} // namespace

TEST(Export, RoundTripEveryFamily) {
  for (auto& c : cases()) {
    auto path = path_for(c.name);
    nx::export_function(path, c.fun, c.inputs);
    auto imported = nx::import_function(path);
    expect_same(c.fun(c.inputs), imported(c.inputs), c.name);
  }
}

// The child half of FreshProcess: runs only when NUVEC_EXPORT_CHILD_DIR is set.
TEST(Export, DISABLED_ChildImports) {
  const char* dir = std::getenv("NUVEC_EXPORT_CHILD_DIR");
  ASSERT_NE(dir, nullptr);
  for (auto& c : cases()) {
    std::string base = std::string(dir) + "/" + c.name;
    nx::Args inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i) inputs.push_back(nx::load(base + ".in" + std::to_string(i) + ".npy"));
    std::vector<array> expected;
    for (size_t i = 0;; ++i) {
      std::string f = base + ".out" + std::to_string(i) + ".npy";
      if (!std::ifstream(f)) break;
      expected.push_back(nx::load(f));
    }
    expect_same(expected, nx::import_function(base + ".nuvecfn")(inputs), c.name);
  }
}

TEST(Export, FreshProcessImport) {
  auto dir = scratch_dir() / "fresh";
  std::filesystem::create_directories(dir);
  for (auto& c : cases()) {
    std::string base = (dir / c.name).string();
    nx::export_function(base + ".nuvecfn", c.fun, c.inputs);
    for (size_t i = 0; i < c.inputs.size(); ++i) nx::save(base + ".in" + std::to_string(i) + ".npy", c.inputs[i]);
    auto out = c.fun(c.inputs);
    for (size_t i = 0; i < out.size(); ++i) nx::save(base + ".out" + std::to_string(i) + ".npy", out[i]);
  }
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string cmd = "NUVEC_EXPORT_CHILD_DIR='" + dir.string() + "' '" + self +
                    "' --gtest_also_run_disabled_tests --gtest_filter=Export.DISABLED_ChildImports > '" +
                    (dir / "child.log").string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream log(dir / "child.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(rc, 0) << text.str();
  EXPECT_NE(text.str().find("[  PASSED  ] 1 test"), std::string::npos) << text.str();
}

TEST(Export, KwargsAndArgsWithKwargs) {
  auto path = path_for("kwargs");
  auto fun = [](const nx::Args& args, const nx::Kwargs& kw) {
    return std::vector<array>{args[0] * kw.at("scale") + kw.at("shift")};
  };
  nx::export_function(path, fun, {array({1.0f, 2.0f})}, {{"scale", array(3.0f)}, {"shift", array(1.0f)}});
  auto f = nx::import_function(path);
  auto out = f({array({2.0f, 4.0f})}, {{"shift", array(0.5f)}, {"scale", array(2.0f)}})[0];
  EXPECT_TRUE(nx::array_equal(out, array({4.5f, 8.5f})).item<bool>());
  EXPECT_THROW(f({array({2.0f, 4.0f})}, {{"shift", array(0.5f)}}), std::invalid_argument);
  EXPECT_THROW(f({array({2.0f, 4.0f}), array(0.5f), array(2.0f)}), std::invalid_argument);
}

TEST(Export, ShapelessAcceptsOtherShapes) {
  auto path = path_for("shapeless");
  auto fun = [](const nx::Args& x) {
    return std::vector<array>{nx::sum(nx::exp(x[0]) * 2.0f + x[1], -1), nx::matmul(x[0], nx::transpose(x[1]))};
  };
  nx::export_function(path, fun, {randn({2, 3}, nx::float32), randn({2, 3}, nx::float32)}, /*shapeless=*/true);
  auto f = nx::import_function(path);
  for (nx::Shape s : {nx::Shape{2, 3}, nx::Shape{5, 7}, nx::Shape{1, 1}}) {
    nx::Args in = {randn(s, nx::float32), randn(s, nx::float32)};
    expect_same(fun(in), f(in), "shapeless");
  }
  // Rank changes and mismatched element-wise shapes are refused, not computed wrongly.
  EXPECT_THROW(f({randn({6}, nx::float32), randn({6}, nx::float32)}), std::invalid_argument);
  EXPECT_THROW(f({randn({2, 3}, nx::float32), randn({2, 4}, nx::float32)}), std::invalid_argument);
  // Dtypes still must match.
  EXPECT_THROW(f({randn({2, 3}, nx::float64), randn({2, 3}, nx::float64)}), std::invalid_argument);
}

TEST(Export, ShapelessRefusesShapesAPrimitiveFixes) {
  auto path = path_for("shapeless_reshape");
  auto fun = [](const nx::Args& x) { return std::vector<array>{nx::reshape(x[0], {6})}; };
  nx::export_function(path, fun, {randn({2, 3}, nx::float32)}, true);
  auto f = nx::import_function(path);
  EXPECT_EQ(f({randn({2, 3}, nx::float32)})[0].shape(), nx::Shape{6});
  EXPECT_THROW(f({randn({3, 3}, nx::float32)}), std::invalid_argument);
}

TEST(Export, NotShapelessChecksShapes) {
  auto path = path_for("shaped");
  nx::export_function(path, [](const nx::Args& x) { return std::vector<array>{x[0] + 1.0f}; },
                      {array({1.0f, 2.0f})});
  auto f = nx::import_function(path);
  EXPECT_THROW(f({array({1.0f, 2.0f, 3.0f})}), std::invalid_argument);
  EXPECT_THROW(f({array({1, 2})}), std::invalid_argument);
  EXPECT_THROW(f({}), std::invalid_argument);
}

TEST(Export, SeveralTracesInOneFile) {
  auto path = path_for("traces");
  auto fun = [](const nx::Args& x) {
    array acc = nx::zeros({2});
    for (auto& a : x) acc = acc + a;
    return std::vector<array>{acc};
  };
  {
    auto ex = nx::exporter(path, fun, false, "meta");
    ex({array({1.0f, 2.0f})});
    ex({array({1.0f, 2.0f}), array({3.0f, 4.0f})});
    ex({array(1.0f)}); // same count, other shape
    EXPECT_THROW(ex({array({5.0f, 6.0f})}), std::runtime_error); // same signature again
    ex.close();
    EXPECT_THROW(ex({array(1, nx::int32)}), std::runtime_error);
  }
  auto f = nx::import_function(path);
  EXPECT_EQ(f.metadata(), "meta");
  EXPECT_TRUE(nx::array_equal(f({array({1.0f, 1.0f})})[0], array({1.0f, 1.0f})).item<bool>());
  EXPECT_TRUE(nx::array_equal(f({array({1.0f, 1.0f}), array({2.0f, 2.0f})})[0], array({3.0f, 3.0f})).item<bool>());
  EXPECT_TRUE(nx::array_equal(f({array(5.0f)})[0], array({5.0f, 5.0f})).item<bool>());
}

TEST(Export, ConstantsSharedByTracesAreStoredOnce) {
  auto path1 = path_for("const_once");
  auto path2 = path_for("const_twice");
  array big = nx::ones({256, 256});
  big.eval();
  auto fun = [big](const nx::Args& x) { return std::vector<array>{nx::sum(big) + x[0]}; };
  {
    auto ex = nx::exporter(path1, fun);
    ex({array(1.0f)});
  }
  {
    auto ex = nx::exporter(path2, fun);
    ex({array(1.0f)});
    ex({array({1.0f, 2.0f})});
  }
  auto one = std::filesystem::file_size(path1), two = std::filesystem::file_size(path2);
  EXPECT_GT(one, 256u * 256u * 4u);
  EXPECT_LT(two, one + 4096u);
  auto f = nx::import_function(path2);
  EXPECT_TRUE(nx::array_equal(f({array({1.0f, 2.0f})})[0], array({65537.0f, 65538.0f})).item<bool>());
}

// A primitive no row of the table covers.
class Unlisted : public nx::Primitive {
 public:
  explicit Unlisted(nx::Stream s) : Primitive(s) {}
  void eval_cpu(const std::vector<array>& in, std::vector<array>& out) override { out[0].copy_shared_buffer(in[0]); }
  void eval_gpu(const std::vector<array>& in, std::vector<array>& out) override { eval_cpu(in, out); }
  std::vector<array> jvp(const std::vector<array>&, const std::vector<array>& t, const std::vector<int>&) override { return t; }
  std::vector<array> vjp(const std::vector<array>&, const std::vector<array>& c, const std::vector<int>&,
                         const std::vector<array>&) override { return c; }
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& in, const std::vector<int>& ax) override {
    return {in, ax};
  }
  bool is_equivalent(const nx::Primitive&) const override { return false; }
  std::vector<nx::Shape> output_shapes(const std::vector<array>& in) override { return {in[0].shape()}; }
  const char* name() const override { return "Unlisted"; }
};

TEST(Export, UnsupportedPrimitiveThrowsAndLeavesAReadableFile) {
  auto path = path_for("unsupported");
  auto fun = [](const nx::Args& x) -> std::vector<array> {
    if (x[0].ndim() == 0) return {x[0] + 1.0f};
    return {array(x[0].shape(), x[0].dtype(), std::make_shared<Unlisted>(nx::default_stream(nx::Device::cpu)), {x[0]})};
  };
  auto ex = nx::exporter(path, fun);
  ex({array(1.0f)});
  try {
    ex({array({1.0f, 2.0f})});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Unlisted"), std::string::npos) << e.what();
  }
  auto f = nx::import_function(path);
  EXPECT_EQ(f({array(1.0f)})[0].item<float>(), 2.0f);
  EXPECT_THROW(f({array({1.0f, 2.0f})}), std::invalid_argument);
}

TEST(Export, BadFilesThrowRuntimeError) {
  EXPECT_THROW(nx::import_function(path_for("does_not_exist")), std::runtime_error);
  auto path = path_for("corrupt");
  nx::export_function(path, [](const nx::Args& x) { return std::vector<array>{nx::exp(x[0]) * 3.0f}; },
                      {array({1.0f, 2.0f})});
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(b.data(), b.size());
  };
  for (size_t cut : {size_t(4), bytes.size() / 2, bytes.size() - 1}) {
    write(bytes.substr(0, cut));
    EXPECT_THROW(nx::import_function(path), std::runtime_error) << "cut at " << cut;
  }
  std::string bad = bytes;
  bad[0] = 'X';
  write(bad);
  EXPECT_THROW(nx::import_function(path), std::runtime_error);
  bad = bytes;
  bad[8] = 99; // format version
  write(bad);
  EXPECT_THROW(nx::import_function(path), std::runtime_error);
}

TEST(Export, OtherStreamsReplayOnStreamsOfThisProcess) {
  auto path = path_for("streams");
  auto s = nx::new_stream(nx::Device::cpu);
  nx::export_function(path, [s](const nx::Args& x) { return std::vector<array>{nx::abs(x[0], s) + 1.0f}; },
                      {array({-1.0f, 2.0f})});
  auto out = nx::import_function(path)({array({-3.0f, 4.0f})})[0];
  // Read the node's stream before evaluation detaches the graph.
  ASSERT_EQ(out.inputs().size(), 2u);
  EXPECT_NE(out.inputs()[0].primitive().stream(), nx::default_stream(nx::Device::cpu));
  EXPECT_EQ(out.inputs()[0].primitive().stream().device, nx::Device(nx::Device::cpu));
  EXPECT_TRUE(nx::array_equal(out, array({4.0f, 5.0f})).item<bool>());
}

TEST(Export, CustomFunctionForwardReplaysAndRulesSayTheyAreMissing) {
  auto path = path_for("custom");
  auto fun = nx::custom_vjp(
      [](const nx::Args& x) { return std::vector<array>{nx::sin(x[0])}; },
      [](const nx::Args&, const nx::Args& c, const nx::Args&) { return std::vector<array>{c[0] * 10.0f}; });
  nx::export_function(path, fun, {array({0.5f, 1.0f})});
  auto f = nx::import_function(path);
  EXPECT_TRUE(nx::allclose(f({array({0.5f, 1.0f})})[0], nx::sin(array({0.5f, 1.0f}))).item<bool>());
  auto g = nx::grad([&f](const nx::Args& x) { return nx::sum(f(x)[0]); });
  EXPECT_THROW(g({array({0.5f, 1.0f})}), std::invalid_argument);
}

TEST(Export, ImportedGraphsDifferentiate) {
  auto path = path_for("grad");
  nx::export_function(path, [](const nx::Args& x) { return std::vector<array>{nx::sum(nx::sin(x[0]) * x[0])}; },
                      {array({0.5f, 1.0f})});
  auto f = nx::import_function(path);
  auto g = nx::grad([&f](const nx::Args& x) { return f(x)[0]; })({array({0.5f, 1.0f})})[0];
  auto x = array({0.5f, 1.0f});
  EXPECT_TRUE(nx::allclose(g, nx::cos(x) * x + nx::sin(x)).item<bool>());
}

TEST(GraphUtils, PrintGraphListsInputsOutputsAndNodes) {
  auto x = array({1.0f, 2.0f});
  auto y = array({3.0f, 4.0f});
  auto z = nx::exp(x + y);
  std::ostringstream os;
  nx::print_graph(os, z);
  EXPECT_EQ(os.str(),
            "Inputs: A [(2,), float32], B [(2,), float32]\n"
            "Outputs: C [(2,), float32]\n"
            "Add A [(2,), float32], B [(2,), float32] -> D [(2,), float32]\n"
            "Exp D [(2,), float32] -> C [(2,), float32]\n");
  nx::NodeNamer namer;
  namer.set_name(x, "x");
  std::ostringstream named;
  nx::print_graph(named, namer, std::vector<array>{z});
  EXPECT_EQ(named.str().rfind("Inputs: x [(2,), float32]", 0), 0u) << named.str();
}

TEST(GraphUtils, ExportToDotDrawsEdges) {
  auto x = array({1.0f, 2.0f});
  auto dm = nx::divmod(x, array({1.0f, 1.0f}));
  std::ostringstream os;
  nx::export_to_dot(os, dm[0], dm[1]);
  auto s = os.str();
  EXPECT_EQ(s.rfind("digraph {\n", 0), 0u);
  EXPECT_EQ(s.back(), '}');
  EXPECT_NE(s.find("{ rank=source; A; }"), std::string::npos) << s;
  EXPECT_NE(s.find("[label =\"DivMod\", shape=rectangle]"), std::string::npos) << s;
  EXPECT_NE(s.find("rank=sink; C"), std::string::npos) << s;
  EXPECT_NE(s.find("rank=sink; D"), std::string::npos) << s;
}

// The round-trip table reaches every family of src/export/primitive_table.cpp (by one op
// name each) except CustomTransforms, tested below, and CovarianceSqrt (no parameters).
TEST(Export, RoundTripTableReachesEveryFamily) {
  std::set<std::string> names;
  for (auto& c : cases()) {
    std::ostringstream os;
    nx::print_graph(os, c.fun(c.inputs));
    std::istringstream lines(os.str());
    std::string line;
    while (std::getline(lines, line)) names.insert(line.substr(0, line.find(' ')));
  }
  for (const char* n :
       {"Abs", "Add", "DivMod", "Select", "AsType", "View", "Copy", "Contiguous", "StopGradient",
        "Depends", "AsStrided", "Full", "Arange", "Reshape", "Transpose", "Broadcast", "Squeeze",
        "ExpandDims", "Slice", "SliceUpdate", "DynamicSlice", "DynamicSliceUpdate", "Concatenate",
        "Sum", "ArgMax", "Sort", "ArgSort", "Partition", "ArgPartition", "CumSum", "Softmax",
        "GatherAxis", "ScatterAxis", "Gather", "Scatter", "MaskedRank", "Matmul", "AddMM",
        "Convolution", "FFT", "Inverse", "RandomBits"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}
