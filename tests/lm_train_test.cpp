// nuvec::lm::train (include/nuvec/lm/train.h): a tiny model learns a small built-in corpus
// (the loss falls well below ln(vocab)); its checkpoint loads with lm::load and gives the
// in-memory logits; a resumed run ends with the weights of the uninterrupted one; bfloat16
// compute keeps float32 master weights; read_corpus's file rules; bad options throw; the
// `nuvec-lm train` command end to end (train, resume, bad flags).
#include "nuvec/lm/train.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nuvec/io.h"
#include "nuvec/lm/lm.h"
#include "nuvec/ops.h"

using namespace nuvec;
using namespace nuvec::lm;
namespace fs = std::filesystem;

namespace {

// Fortune-like sentences, each one document.
std::vector<std::string> corpus() {
  const std::vector<std::string> subjects = {"A friend", "The cat", "Your future", "A stranger", "The moon",
                                             "Good luck", "A small dog", "The river"};
  const std::vector<std::string> verbs = {"will bring", "brings", "will find", "hides"};
  const std::vector<std::string> objects = {"a bright surprise.", "fresh work today.", "strange news soon.",
                                            "the answer you seek."};
  std::vector<std::string> docs;
  for (size_t i = 0; i < subjects.size(); ++i) {
    for (size_t j = 0; j < verbs.size(); ++j) {
      docs.push_back(subjects[i] + " " + verbs[j] + " " + objects[(i + j) % objects.size()]);
    }
  }
  return docs;
}

// A scratch directory of this process (ctest may run the cpu and gpu variants of a test at
// once), emptied first and removed with the object.
struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& name)
      : path(fs::temp_directory_path() / ("nuvec_lm_train_test_" + std::to_string(getpid()) + "_" + name)) {
    fs::remove_all(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TrainOptions tiny(const fs::path& out) {
  TrainOptions o;
  o.layers = 2;
  o.hidden = 32;
  o.heads = 2;
  o.kv_heads = 1;
  o.intermediate = 64;
  o.context = 24;
  o.vocab = 320;
  o.batch = 8;
  o.steps = 40;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.warmup = 4;
  o.eval_fraction = 0.1;
  o.eval_every = 20;
  o.eval_tokens = 256;
  o.save_every = 0;
  o.out = out.string();
  return o;
}

float max_abs_diff(const array& a, const array& b) {
  return max(abs(subtract(astype(a, float32), astype(b, float32)))).item<float>();
}

} // namespace

TEST(LmTrain, LossFallsAndTheCheckpointLoads) {
  Scratch scratch("loads");
  const fs::path& out = scratch.path;
  TrainOptions o = tiny(out);
  o.steps = 50;
  int callbacks = 0;
  Trainer t = train(o, corpus(), [&](const TrainProgress& p) {
    ++callbacks;
    EXPECT_EQ(p.total_steps, 50);
    EXPECT_EQ(p.checkpoint.empty(), p.record.step != 50);
    EXPECT_EQ(std::isnan(p.record.eval_loss), p.record.step % 20 != 0 && p.record.step != 50);
    return true;
  });
  EXPECT_EQ(callbacks, 50);
  ASSERT_EQ(t.step(), 50);
  const auto& h = t.history();
  ASSERT_EQ(h.size(), 50u);
  const double ln_v = std::log(double(t.config().vocab_size));
  EXPECT_NEAR(h[0].loss, ln_v, 0.3); // random initialisation: about uniform
  double last = 0;
  for (size_t i = h.size() - 5; i < h.size(); ++i) last += h[i].loss / 5;
  EXPECT_LT(last, 0.4 * h[0].loss) << "first " << h[0].loss << ", last five " << last;
  EXPECT_LT(h.back().eval_loss, 0.6 * h[0].loss);
  EXPECT_GT(h.back().learning_rate, 0.0);
  EXPECT_LT(h.back().learning_rate, o.lr);

  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json", "optimizer.safetensors", "trainer_state.json", "loss.csv"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
  EXPECT_FALSE(fs::exists(out / ".partial"));
  auto config = nlohmann::json::parse(std::ifstream(out / "config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["max_position_embeddings"], o.context);
  EXPECT_EQ(config["bos_token_id"], 0);
  EXPECT_EQ(config["eos_token_id"], 0);
  auto tc = nlohmann::json::parse(std::ifstream(out / "tokenizer_config.json"));
  EXPECT_EQ(tc["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(tc["eos_token"], kEndOfText);

  auto [model, tokenizer] = lm::load(out.string());
  const std::string text = "The cat will bring fresh work today.";
  std::vector<int> ids = tokenizer.encode(text, false);
  EXPECT_EQ(ids, t.tokenizer().encode(text, false));
  EXPECT_EQ(tokenizer.decode(ids), text);
  ids.insert(ids.begin(), 0);
  array tokens(ids.begin(), {1, int(ids.size())}, int32);
  array loaded = model(tokens);
  array in_memory = t.model()(tokens);
  EXPECT_EQ(loaded.shape(), (Shape{1, int(ids.size()), t.config().vocab_size}));
  EXPECT_EQ(max_abs_diff(loaded, in_memory), 0.0f);

  // Generation from the loaded model runs and stops within the context.
  GenerationOptions g;
  g.max_tokens = 10;
  g.sampling.temperature = 0.8f;
  g.sampling.top_p = 0.95f;
  g.sampling.seed = 1;
  auto r = generate(model, tokenizer, {0}, g);
  EXPECT_LE(r.tokens.size(), 10u);
}

TEST(LmTrain, ResumeGivesTheUninterruptedWeights) {
  Scratch whole_dir("whole"), split_dir("split");
  const fs::path &a = whole_dir.path, &b = split_dir.path;
  TrainOptions o = tiny(a);
  o.steps = 24;
  o.eval_every = 10;
  Trainer whole = train(o, corpus());

  o.out = b.string();
  Trainer first = train(o, corpus(), [](const TrainProgress& p) { return p.record.step < 11; });
  EXPECT_EQ(first.step(), 11);
  auto state = nlohmann::json::parse(std::ifstream(b / "trainer_state.json"));
  EXPECT_EQ(state["step"], 11);

  o.resume = true;
  o.eval_every = 7; // free to change, as steps, save_every and out
  Trainer resumed(o, corpus());
  EXPECT_EQ(resumed.step(), 11);
  ASSERT_EQ(resumed.history().size(), 11u);
  resumed.run();
  EXPECT_EQ(resumed.step(), 24);
  ASSERT_EQ(resumed.history().size(), 24u);
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(resumed.history()[i].loss, whole.history()[i].loss) << "step " << i + 1;
  }
  for (const auto& [name, w] : whole.weights()) {
    EXPECT_EQ(max_abs_diff(resumed.weights().at(name), w), 0.0f) << name;
  }
  // The loss curve was continued, not restarted.
  std::ifstream csv(b / "loss.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 25);
}

TEST(LmTrain, Bfloat16KeepsFloat32Masters) {
  Scratch scratch("bf16");
  const fs::path& out = scratch.path;
  TrainOptions o = tiny(out);
  o.dtype = bfloat16;
  o.steps = 6;
  o.warmup = 2;
  Trainer t = train(o, corpus());
  for (const auto& [name, w] : t.weights()) EXPECT_EQ(w.dtype(), float32) << name;
  EXPECT_TRUE(std::isfinite(t.history().back().loss));
  EXPECT_EQ(t.model().dtype(), bfloat16);
  auto saved = load_weights(out.string());
  EXPECT_EQ(saved.at("model.embed_tokens.weight").dtype(), bfloat16);
  auto [opt, meta] = load_safetensors((out / "optimizer.safetensors").string());
  ASSERT_TRUE(opt.count("master.model.embed_tokens.weight"));
  EXPECT_EQ(max_abs_diff(opt.at("master.model.embed_tokens.weight"), t.weights().at("model.embed_tokens.weight")), 0.0f);

  o.resume = true;
  o.steps = 8;
  Trainer resumed(o, corpus());
  EXPECT_EQ(max_abs_diff(resumed.weights().at("lm_head.weight"), t.weights().at("lm_head.weight")), 0.0f);
}

TEST(LmTrain, ReadCorpusSplitsFortuneFiles) {
  Scratch scratch("corpus");
  const fs::path& dir = scratch.path;
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "b") << "First fortune.\n%\nSecond,\non two lines.\n%\n   \n%\nThird.\n";
  std::ofstream(dir / "a.txt") << "A whole file.\n\n";
  std::ofstream(dir / "sub" / "c") << "Nested.\r\n%\r\nCRLF.\r\n";
  std::ofstream(dir / "b.dat") << "index";
  std::ofstream(dir / "binary", std::ios::binary) << std::string("x\0y", 3);
  std::ofstream(dir / "latin1", std::ios::binary) << "caf\xe9";
  fs::create_symlink(dir / "b", dir / "b.u8");
  Corpus c = read_corpus(dir.string());
  EXPECT_EQ(c.documents, (std::vector<std::string>{"A whole file.", "First fortune.", "Second,\non two lines.",
                                                   "Third.", "Nested.", "CRLF."}));
  EXPECT_EQ(c.files.size(), 3u);
  EXPECT_EQ(c.skipped.size(), 2u);
  EXPECT_THROW(read_corpus((dir / "missing").string()), std::runtime_error);
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_THROW(read_corpus(dir.string()), std::runtime_error);
}

TEST(LmTrain, BadOptionsThrow) {
  Scratch scratch("bad");
  const fs::path& out = scratch.path;
  auto expect_invalid = [&](auto change) {
    TrainOptions o = tiny(out);
    change(o);
    EXPECT_THROW(o.validate(), std::invalid_argument);
    EXPECT_THROW((void)Trainer(o, corpus()), std::invalid_argument);
  };
  expect_invalid([](TrainOptions& o) { o.layers = 0; });
  expect_invalid([](TrainOptions& o) { o.hidden = 30; });    // 2 heads: head_dim 15, odd
  expect_invalid([](TrainOptions& o) { o.heads = 3; });      // does not divide 32
  expect_invalid([](TrainOptions& o) { o.kv_heads = 3; });   // does not divide 2 heads
  expect_invalid([](TrainOptions& o) { o.context = 1; });
  expect_invalid([](TrainOptions& o) { o.vocab = 256; });
  expect_invalid([](TrainOptions& o) { o.batch = 0; });
  expect_invalid([](TrainOptions& o) { o.steps = 0; });
  expect_invalid([](TrainOptions& o) { o.lr = 0; });
  expect_invalid([](TrainOptions& o) { o.min_lr = 1; });
  expect_invalid([](TrainOptions& o) { o.warmup = 40; });
  expect_invalid([](TrainOptions& o) { o.weight_decay = -1; });
  expect_invalid([](TrainOptions& o) { o.grad_clip = -1; });
  expect_invalid([](TrainOptions& o) { o.beta2 = 1; });
  expect_invalid([](TrainOptions& o) { o.dtype = int32; });
  expect_invalid([](TrainOptions& o) { o.eval_fraction = 0.9; });
  expect_invalid([](TrainOptions& o) { o.eval_every = -1; });
  expect_invalid([](TrainOptions& o) { o.out = ""; });
  EXPECT_THROW((void)Trainer(tiny(out), {}), std::invalid_argument);
  EXPECT_THROW((void)Trainer(tiny(out), {"", ""}), std::invalid_argument);
  EXPECT_NO_THROW(tiny(out).validate());

  // Resuming: no checkpoint; another model size; other documents.
  TrainOptions o = tiny(out);
  o.resume = true;
  EXPECT_THROW((void)Trainer(o, corpus()), std::runtime_error);
  o.resume = false;
  o.steps = 2;
  o.warmup = 1;
  train(o, corpus());
  o.resume = true;
  o.hidden = 64;
  EXPECT_THROW((void)Trainer(o, corpus()), std::invalid_argument);
  o.hidden = 32;
  auto other = corpus();
  other.pop_back();
  EXPECT_THROW((void)Trainer(o, other), std::invalid_argument);
  EXPECT_NO_THROW((void)Trainer(o, corpus()));
  EXPECT_EQ(read_train_options(out.string()).hidden, 32);
}

namespace {

// nuvec-lm sits in <build>/examples/ beside this test's <build>/tests/ (or NUVEC_LM_BIN).
fs::path lm_program() {
  if (const char* p = std::getenv("NUVEC_LM_BIN")) return p;
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "examples" / "nuvec-lm";
}

std::pair<int, std::string> run_lm(const std::string& args) {
  const std::string cmd = "'" + lm_program().string() + "' " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST(LmTrainCli, TrainsResumesAndRejectsBadFlags) {
  if (!fs::exists(lm_program())) GTEST_SKIP() << "no " << lm_program() << " (build the nuvec-lm target)";
  Scratch data_dir("cli_data"), out_dir("cli_out");
  const fs::path &data = data_dir.path, &out = out_dir.path;
  fs::create_directories(data);
  {
    std::ofstream f(data / "fortunes");
    for (const auto& d : corpus()) f << d << "\n%\n";
  }
  // Repeated flags keep their first value, so each run names each flag once.
  const std::string base = "train --device cpu --data '" + data.string() + "' --out '" + out.string() +
      "' --kv-heads 1 --intermediate 64 --context 24 --vocab 300 --batch 4 --eval-every 3 --no-plot --no-progress";
  const std::string common = base + " --layers 1 --hidden 32 --heads 2";
  auto [code, text] = run_lm(common + " --steps 6");
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(has(text, "32 documents from 1 files")) << text;
  EXPECT_TRUE(has(text, "model: llama, 1 layers, hidden 32")) << text;
  EXPECT_TRUE(has(text, "step 3/6")) << text;
  EXPECT_TRUE(has(text, "step 6/6")) << text;
  EXPECT_TRUE(has(text, "--- prompt \"The \"")) << text;
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));

  std::tie(code, text) = run_lm(common + " --steps 8 --resume");
  ASSERT_EQ(code, 0) << text;
  EXPECT_TRUE(has(text, "resumed at step 6 of 8")) << text;
  EXPECT_TRUE(has(text, "step 8/8")) << text;
  EXPECT_FALSE(has(text, "step 3/")) << text;
  EXPECT_EQ(read_train_options(out.string()).steps, 8);

  std::tie(code, text) = run_lm(base + " --steps 8 --resume --layers 1 --heads 2 --hidden 64");
  EXPECT_EQ(code, 2) << text;
  EXPECT_TRUE(has(text, "option hidden must be the checkpoint's")) << text;
  std::tie(code, text) = run_lm(base + " --layers 1 --hidden 32 --heads 3");
  EXPECT_EQ(code, 2) << text;
  EXPECT_TRUE(has(text, "heads must divide hidden")) << text;
  std::tie(code, text) = run_lm(base + " --layers 0 --hidden 32 --heads 2");
  EXPECT_EQ(code, 1) << text;
  EXPECT_TRUE(has(text, "--layers must be a number")) << text;
  std::tie(code, text) = run_lm(common + " --bogus 1");
  EXPECT_EQ(code, 1) << text;
  std::tie(code, text) = run_lm("train --device cpu --resume --out '" + (out / "nothing").string() + "'");
  EXPECT_EQ(code, 3) << text;
  std::tie(code, text) = run_lm("train --device cpu --data '" + (data / "missing").string() + "'");
  EXPECT_EQ(code, 2) << text;
  EXPECT_TRUE(has(text, "cannot read the corpus")) << text;
}
