// nuvec-lm: run language models from Hugging Face / mlx-lm model directories.
//   nuvec-lm generate --model DIR --prompt TEXT [sampling flags]
//   nuvec-lm chat     --model DIR [--system TEXT]            (stdin lines are user turns)
//   nuvec-lm serve    --model DIR [--port N] [--host H]      (an OpenAI-compatible server)
//   nuvec-lm convert  --model DIR --out DIR2 [--quantize --bits 4 --group-size 64] [--dtype T]
//   nuvec-lm train    [--data DIR] [--out DIR] [--steps N]   (a small Llama from scratch)
// Library: include/nuvec/lm/lm.h. Tokens are printed as they are produced; the timings go to
// stderr.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nuvec/device.h"
#include "nuvec/lm/chat_template.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/lm.h"
#include "nuvec/lm/stop_strings.h"
#include "nuvec/lm/serve.h"
#include "nuvec/lm/train.h"
#include "report.h"

namespace nx = nuvec;
namespace lm = nuvec::lm;

namespace {

const char* kUsage =
    "usage: nuvec-lm COMMAND [flags]\n"
    "\n"
    "commands:\n"
    "  generate   complete a prompt:   nuvec-lm generate --model DIR --prompt TEXT\n"
    "  chat       converse (stdin):    nuvec-lm chat --model DIR [--system TEXT]\n"
    "  serve      OpenAI-compatible:   nuvec-lm serve --model DIR [--port N] [--host H]\n"
    "  convert    cast or quantize:    nuvec-lm convert --model DIR --out DIR2 --quantize\n"
    "  train      train from scratch:  nuvec-lm train [--data DIR] [--out DIR] [--steps N]\n"
    "\n"
    "generate flags:\n"
    "  --model DIR             a Hugging Face or mlx-lm model directory (config.json,\n"
    "                          *.safetensors, tokenizer.json)\n"
    "  --prompt TEXT           the prompt (raw text; special tokens written out are recognised)\n"
    "  --batch FILE            instead of --prompt: each line of FILE is a prompt; all run at once\n"
    "                          through the serving engine, one JSON line of output per prompt\n"
    "  --max-tokens N          new tokens at most (default 256)\n"
    "  --temp T                sampling temperature; 0 is greedy (default 0)\n"
    "  --top-k K  --top-p P  --min-p P  --repetition-penalty R   as transformers' generate\n"
    "  --seed S                seed of the sampler\n"
    "  --stop TEXT             stop when TEXT is produced (repeatable; left out of the output)\n"
    "  --ignore-eos            do not stop at the end-of-sequence token\n"
    "  --no-cuda-graphs        (GPU) decode with the dense cache's loop, not replayed CUDA graphs\n"
    "  --dtype T               float32, bfloat16 or float16 (default: the checkpoint's)\n"
    "  --device cpu|gpu        where to run (default: gpu when there is one)\n"
    "\n"
    "chat flags: generate's (but --prompt), and\n"
    "  --system TEXT           a system message first\n"
    "  --chat-template FILE    a Jinja chat template instead of the model's\n"
    "  --no-thinking           enable_thinking=false for templates that have it (Qwen3)\n"
    "  each stdin line is a user turn; /reset starts over, /exit ends\n"
    "\n"
    "serve flags (GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions;\n"
    "streaming with server-sent events; SIGINT or SIGTERM stops it):\n"
    "  --model DIR             the model directory\n"
    "  --host H                address to listen on (default 127.0.0.1; 0.0.0.0 for all)\n"
    "  --port N                TCP port (default 8080; 0 picks a free one, printed)\n"
    "  --model-name NAME       the model id clients name (default: the directory's name)\n"
    "  --chat-template FILE    a Jinja chat template instead of the model's\n"
    "  --block-size N          positions per KV block (default 16)\n"
    "  --num-blocks N          KV blocks (default: on a GPU --gpu-memory-fraction of free memory,\n"
    "                          on the CPU at most 8192; either way at most 16 full contexts)\n"
    "  --gpu-memory-fraction F share of free GPU memory the KV blocks take (default 0.5)\n"
    "  --no-cuda-graphs        build every engine step's graph (no CUDA graph replay)\n"
    "  --max-batch-tokens N    tokens one engine step computes (default 512)\n"
    "  --max-running N         sequences decoded at once (default 256)\n"
    "  --no-prefix-sharing     do not share equal prompt blocks between requests\n"
    "  --prefix-state-rows N   hybrid models: Gated DeltaNet state snapshots kept for prefix\n"
    "                          sharing (default max-running / 8; 0: no sharing for them)\n"
    "  --threads N             HTTP connections served at once (default 512); one more waits,\n"
    "                          /health included\n"
    "  --max-model-len N       the context offered, prompt and completion (default: the model's,\n"
    "                          or what one request can have of the KV pool if less)\n"
    "  --log                   a line on stderr per request\n"
    "  --dtype T  --device cpu|gpu   as generate\n"
    "\n"
    "convert flags:\n"
    "  --model DIR --out DIR2  input and output directories\n"
    "  --quantize              quantize linear and embedding layers (mlx-lm's layout)\n"
    "  --bits B                2, 3, 4, 5, 6 or 8 (default 4)\n"
    "  --group-size G          32, 64 or 128 (default 64)\n"
    "  --mode M                affine, mxfp4, mxfp8 or nvfp4 (default affine)\n"
    "  --dtype T               cast the floating weights first\n"
    "\n"
    "train flags (a small Llama on Debian's fortune cookies; about 5 minutes on 2 CPU cores):\n"
    "  --data DIR              text files to learn (default /usr/share/games/fortunes, from\n"
    "                          apt-get install fortunes fortunes-min); lines holding only \"%\"\n"
    "                          separate documents\n"
    "  --out DIR               checkpoint directory, Hugging Face layout (default lm-run)\n"
    "  --layers N --hidden N --heads N --kv-heads N --intermediate N   model sizes\n"
    "                          (default 4, 128, 4, 4, 384)\n"
    "  --context N             tokens per sequence (default 128)\n"
    "  --vocab N               BPE vocabulary size (default 2048)\n"
    "  --steps N --batch N     updates and sequences per update (default 1200, 8)\n"
    "  --lr X --min-lr X --warmup N   AdamW peak rate, cosine floor, warm-up steps\n"
    "                          (default 3e-3, lr / 10, 50)\n"
    "  --weight-decay X --grad-clip X  (default 0.1 on matrices, 1.0)\n"
    "  --dtype T               float32 or bfloat16/float16 compute with float32 master weights\n"
    "                          (default bfloat16 on the gpu, float32 on the cpu)\n"
    "  --seed N                initialisation, held-out split and batches (default 0)\n"
    "  --eval-every N --eval-fraction X --eval-tokens N   held-out loss every N steps on\n"
    "                          the first N tokens of X of the documents (default 100, 0.05, 16384)\n"
    "  --save-every N          checkpoint every N steps and at the end (default 300)\n"
    "  --resume                continue the run in --out (its settings are the defaults)\n"
    "  --no-plot               no PNG of the loss curve (loss.csv is always written)\n"
    "  --progress / --no-progress   force the progress bar on or off\n"
    "  --device cpu|gpu        where to run (default: gpu when there is one)\n";

// One line, not the 80 of the usage (which `nuvec-lm --help` prints).
[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "nuvec-lm: " << msg << " (nuvec-lm --help lists the commands and flags)\n";
  std::exit(1);
}

// Flags as --name value or --name=value; repeated flags keep every value.
struct Flags {
  std::multimap<std::string, std::string> values;
  std::map<std::string, bool> switches;

  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  bool has(const std::string& name) const { return values.count(name) > 0 || switches.count(name) > 0; }
  double number(const std::string& name, double fallback, double lo, double hi) const {
    if (!values.count(name)) {
      return fallback;
    }
    std::string v = get(name);
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(d >= lo && d <= hi)) {
      std::ostringstream m;
      m << "--" << name << " must be a number in [" << lo << ", " << hi << "]; got '" << v << "'";
      usage_error(m.str());
    }
    return d;
  }
};

Flags parse(int argc, char** argv, const std::vector<std::string>& switch_names,
            const std::vector<std::string>& value_names) {
  Flags f;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      usage_error("unexpected argument '" + arg + "'");
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (std::find(switch_names.begin(), switch_names.end(), name) != switch_names.end()) {
      f.switches[name] = true;
    } else if (std::find(value_names.begin(), value_names.end(), name) != value_names.end()) {
      if (!has_value) {
        if (i + 1 >= argc) {
          usage_error("--" + name + " needs a value");
        }
        value = argv[++i];
      }
      f.values.emplace(name, value);
    } else {
      usage_error("unknown flag --" + name);
    }
  }
  return f;
}

std::optional<nx::Dtype> dtype_flag(const Flags& f) {
  if (!f.has("dtype")) {
    return std::nullopt;
  }
  std::string d = f.get("dtype");
  if (d == "float32") return nx::float32;
  if (d == "bfloat16") return nx::bfloat16;
  if (d == "float16") return nx::float16;
  usage_error("--dtype must be float32, bfloat16 or float16; got '" + d + "'");
}

void pick_device(const Flags& f) {
  std::string d = f.get("device", nx::is_available(nx::Device(nx::Device::gpu)) ? "gpu" : "cpu");
  if (d != "cpu" && d != "gpu") {
    usage_error("--device must be cpu or gpu; got '" + d + "'");
  }
  if (d == "gpu" && !nx::is_available(nx::Device(nx::Device::gpu))) {
    std::cerr << "nuvec-lm: --device gpu: no GPU is available (no CUDA device, or nuvec was built without CUDA)\n";
    std::exit(2);
  }
  nx::set_default_device(nx::Device(d == "gpu" ? nx::Device::gpu : nx::Device::cpu));
}

// The sampling and stopping flags generate and chat share.
const std::vector<std::string> kGenerationFlags = {"max-tokens", "temp", "top-k", "top-p", "min-p",
                                                   "repetition-penalty", "seed", "stop", "dtype", "device"};

lm::GenerationOptions generation_options(const Flags& f) {
  lm::GenerationOptions o;
  o.max_tokens = int(f.number("max-tokens", 256, 1, 1e9));
  o.sampling.temperature = float(f.number("temp", 0, 0, 1e6));
  o.sampling.top_k = int(f.number("top-k", 0, 0, 1e9));
  o.sampling.top_p = float(f.number("top-p", 1, 1e-9, 1));
  o.sampling.min_p = float(f.number("min-p", 0, 0, 1));
  o.sampling.repetition_penalty = float(f.number("repetition-penalty", 1, 1e-6, 1e6));
  if (f.has("seed")) {
    o.sampling.seed = uint64_t(f.number("seed", 0, 0, 1e18));
  }
  auto range = f.values.equal_range("stop");
  for (auto it = range.first; it != range.second; ++it) {
    o.stop_strings.push_back(it->second);
  }
  o.stop_at_eos = !f.has("ignore-eos");
  o.cuda_graphs = !f.has("no-cuda-graphs");
  return o;
}

void print_stats(const lm::GenerationResult& r) {
  int n = int(r.tokens.size());
  std::cerr << "prompt: " << r.prompt_tokens << " tokens, " << (r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0)
            << " tokens/s\n"
            << "generation: " << n << " tokens, " << (n > 1 && r.decode_seconds > 0 ? (n - 1) / r.decode_seconds : 0)
            << " tokens/s (" << r.finish_reason << ")\n";
}

bool print_piece(const std::string& piece) {
  std::cout << piece << std::flush;
  return true;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// generate --batch FILE: every non-empty line of FILE is a prompt (blank lines are skipped:
// "index" counts prompts, "line" is the line number); all of them run through one serving
// engine (continuous batching) and each result is printed as a JSON line, in order. Exits 1
// when some prompt failed (its line says why) or the file holds none.
int generate_batch_file(const Flags& f, const lm::GenerationOptions& o) {
  std::ifstream in(f.get("batch"));
  if (!in) {
    std::cerr << "nuvec-lm: cannot read --batch " << f.get("batch") << "\n";
    return 2;
  }
  std::vector<std::string> prompts;
  std::vector<int> line_numbers;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back(); // a file with CRLF line ends
    if (!line.empty()) {
      prompts.push_back(line);
      line_numbers.push_back(number);
    }
  }
  if (prompts.empty()) {
    std::cerr << "nuvec-lm: --batch " << f.get("batch") << " holds no prompt\n";
    return 1;
  }
  auto [model, tokenizer] = lm::load(f.get("model"), dtype_flag(f));
  struct Output {
    std::unique_ptr<lm::StopStringDecoder> decoder;
    std::string text;
    lm::EngineResult result;
  };
  // Before the engine: its destructor reports requests still pending into them.
  std::vector<Output> outputs(prompts.size());
  lm::EngineOptions eo;
  eo.compiled_steps = o.cuda_graphs;
  lm::Engine engine(model, eo);
  for (size_t i = 0; i < prompts.size(); ++i) {
    lm::EngineRequest r;
    r.prompt = tokenizer.encode(prompts[i], true);
    r.sampling = o.sampling;
    if (r.sampling.seed) *r.sampling.seed += i; // each line its own stream, reproducible
    r.max_tokens = o.max_tokens;
    r.stop_at_eos = o.stop_at_eos;
    Output& out = outputs[i];
    out.decoder = std::make_unique<lm::StopStringDecoder>(tokenizer, o.stop_strings);
    try {
      engine.submit(
          std::move(r),
          [&out](int token) {
            out.text += out.decoder->push(token);
            return !out.decoder->stopped();
          },
          [&out](const lm::EngineResult& res) {
            out.text += out.decoder->finish();
            out.result = res;
          });
    } catch (const std::invalid_argument& e) {
      out.result.finish_reason = std::string("error: ") + e.what(); // this line alone: the others run
    }
  }
  engine.run_until_idle();
  int failed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Output& out = outputs[i];
    failed += out.result.finish_reason.rfind("error", 0) == 0;
    nlohmann::json line = {{"index", i},
                           {"line", line_numbers[i]},
                           {"prompt", prompts[i]},
                           {"text", out.text},
                           {"finish_reason", out.decoder->stopped() ? std::string("stop") : out.result.finish_reason},
                           {"prompt_tokens", out.result.prompt_tokens},
                           {"completion_tokens", out.result.tokens.size()}};
    std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  const lm::EngineStats st = engine.stats();
  std::cerr << prompts.size() << " prompts, " << st.steps << " engine steps, " << st.preemptions << " preemptions";
  if (failed > 0) std::cerr << ", " << failed << " failed";
  std::cerr << "\n";
  return failed > 0 ? 1 : 0;
}

int cmd_generate(int argc, char** argv) {
  Flags f = parse(argc, argv, {"ignore-eos", "no-cuda-graphs"}, with({"model", "prompt", "batch"}, kGenerationFlags));
  if (!f.has("model") || f.has("prompt") == f.has("batch")) {
    usage_error("generate needs --model and one of --prompt and --batch");
  }
  pick_device(f);
  lm::GenerationOptions o = generation_options(f);
  if (f.has("batch")) {
    return generate_batch_file(f, o);
  }
  auto [model, tokenizer] = lm::load(f.get("model"), dtype_flag(f));
  std::vector<int> prompt = tokenizer.encode(f.get("prompt"), true);
  lm::GenerationResult r = lm::generate(model, tokenizer, prompt, o, print_piece);
  std::cout << "\n";
  print_stats(r);
  return 0;
}

// --chat-template FILE, else the template of the --model directory (throws
// std::runtime_error when there is none or the file cannot be read).
lm::ChatTemplate chat_template_flag(const Flags& f) {
  if (!f.has("chat-template")) {
    return lm::ChatTemplate::from_tokenizer_config(f.get("model"));
  }
  std::ifstream in(f.get("chat-template"));
  if (!in) {
    throw std::runtime_error("cannot read " + f.get("chat-template"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return lm::ChatTemplate(ss.str());
}

// A conversation on stdin: each line is a user turn, rendered with the model's chat template
// (tokenizer_config.json or chat_template.jinja, or --chat-template FILE) and answered;
// "/reset" starts over, "/exit" or the end of input ends.
int cmd_chat(int argc, char** argv) {
  Flags f = parse(argc, argv, {"ignore-eos", "no-thinking", "no-cuda-graphs"},
                  with({"model", "system", "chat-template"}, kGenerationFlags));
  if (!f.has("model")) {
    usage_error("chat needs --model");
  }
  pick_device(f);
  lm::GenerationOptions o = generation_options(f);
  auto [model, tokenizer] = lm::load(f.get("model"), dtype_flag(f));
  lm::ChatTemplate chat_template = chat_template_flag(f);
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (f.has("no-thinking")) {
    extra["enable_thinking"] = false;
  }
  auto fresh = [&] {
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    if (f.has("system")) {
      m.push_back({{"role", "system"}, {"content", f.get("system")}});
    }
    return m;
  };
  nlohmann::ordered_json messages = fresh();
  std::string line;
  while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
    if (line == "/exit") {
      break;
    }
    if (line == "/reset") {
      messages = fresh();
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string text = lm::apply_chat_template(chat_template, messages, true, extra);
    // The template writes the special tokens itself (transformers: add_special_tokens=False).
    lm::GenerationResult r = lm::generate(model, tokenizer, tokenizer.encode(text, false), o, print_piece);
    std::cout << "\n";
    print_stats(r);
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
  }
  return 0;
}

volatile sig_atomic_t g_stop_signal = 0;

// An OpenAI-compatible server (include/nuvec/lm/serve.h): the engine steps on its own thread,
// the HTTP server answers on its pool; SIGINT or SIGTERM stops both.
int cmd_serve(int argc, char** argv) {
  Flags f = parse(argc, argv, {"no-prefix-sharing", "no-cuda-graphs", "log"},
                  {"model", "host", "port", "model-name", "chat-template", "block-size", "num-blocks",
                   "gpu-memory-fraction", "max-batch-tokens", "max-running", "prefix-state-rows", "threads", "dtype",
                   "device", "max-model-len"});
  if (!f.has("model")) {
    usage_error("serve needs --model");
  }
  pick_device(f);
  lm::ServeOptions so;
  so.host = f.get("host", so.host);
  so.port = int(f.number("port", so.port, 0, 65535));
  so.threads = int(f.number("threads", so.threads, 1, 4096));
  so.max_model_len = int(f.number("max-model-len", 0, 1, 1e9));
  so.log_requests = f.has("log");
  std::string dir = f.get("model");
  while (dir.size() > 1 && dir.back() == '/') {
    dir.pop_back();
  }
  so.model_name = f.get("model-name", dir.substr(dir.find_last_of('/') + 1));
  lm::EngineOptions eo;
  eo.block_size = int(f.number("block-size", eo.block_size, 1, 4096));
  eo.num_blocks = int(f.number("num-blocks", eo.num_blocks, 0, 1e9));
  eo.max_batch_tokens = int(f.number("max-batch-tokens", eo.max_batch_tokens, 1, 1e9));
  eo.max_running = int(f.number("max-running", eo.max_running, 1, 1e9));
  eo.prefix_sharing = !f.has("no-prefix-sharing");
  eo.prefix_state_rows = int(f.number("prefix-state-rows", eo.prefix_state_rows, -1, 1 << 30));
  eo.gpu_memory_fraction = float(f.number("gpu-memory-fraction", eo.gpu_memory_fraction, 1e-6, 1.0));
  eo.compiled_steps = !f.has("no-cuda-graphs");
  // The model first: a directory without one fails with that alone.
  auto [model, tokenizer] = lm::load(f.get("model"), dtype_flag(f));
  try {
    so.chat_template = chat_template_flag(f);
  } catch (const std::runtime_error& e) {
    if (f.has("chat-template")) {
      throw;
    }
    std::cerr << "nuvec-lm serve: no chat template (" << e.what()
              << "); /v1/chat/completions will refuse requests (--chat-template FILE gives one)\n";
  }
  lm::Engine engine(model, eo);
  engine.start();
  lm::Server server(engine, tokenizer, so);
  int port = server.start();
  lm::EngineStats stats = engine.stats();
  std::cout << "nuvec-lm serve: " << so.model_name << " (" << stats.total_blocks << " KV blocks of "
            << eo.block_size << ", a context of " << server.context_length() << " tokens) listening on http://" << so.host << ":" << port << std::endl;
  // Any thread may take the signal; the handler only sets the flag this loop watches.
  struct sigaction on_signal {};
  on_signal.sa_handler = [](int sig) { g_stop_signal = sig; };
  sigaction(SIGINT, &on_signal, nullptr);
  sigaction(SIGTERM, &on_signal, nullptr);
  while (!g_stop_signal) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int sig = g_stop_signal;
  std::cout << "nuvec-lm serve: stopping (signal " << sig << ")" << std::endl;
  server.stop();
  engine.stop();
  return 0;
}

int cmd_convert(int argc, char** argv) {
  Flags f = parse(argc, argv, {"quantize"}, {"model", "out", "bits", "group-size", "mode", "dtype"});
  if (!f.has("model") || !f.has("out")) {
    usage_error("convert needs --model and --out");
  }
  nx::set_default_device(nx::Device(nx::Device::cpu));
  std::optional<lm::QuantizationSpec> spec;
  if (f.has("quantize")) {
    spec = lm::QuantizationSpec{int(f.number("group-size", 64, 1, 1024)), int(f.number("bits", 4, 1, 8)),
                                f.get("mode", "affine")};
  }
  lm::convert(f.get("model"), f.get("out"), spec, dtype_flag(f));
  std::cout << "wrote " << f.get("out") << "\n";
  return 0;
}


// nuvec-lm train: the corpus, a Trainer (include/nuvec/lm/train.h), a progress bar and the
// held-out loss every --eval-every steps, the loss curve as CSV and PNG, then samples.
int cmd_train(int argc, char** argv) {
  Flags f = parse(argc, argv, {"resume", "no-plot", "progress", "no-progress"},
                  {"data", "out", "layers", "hidden", "heads", "kv-heads", "intermediate", "context", "vocab",
                   "steps", "batch", "lr", "min-lr", "warmup", "weight-decay", "grad-clip", "dtype", "seed",
                   "eval-every", "eval-fraction", "eval-tokens", "save-every", "device"});
  pick_device(f);
  const bool on_gpu = nx::default_device() == nx::Device::gpu;
  lm::TrainOptions o;
  const std::string out = f.get("out", o.out);
  if (f.has("resume")) {
    try {
      o = lm::read_train_options(out); // the saved run's settings are the defaults
    } catch (const std::exception& e) {
      std::cerr << "nuvec-lm train: --resume: no run to continue in " << out << " (" << e.what()
                << ").\nRun without --resume first, or point --out at that run's directory.\n";
      return 3;
    }
    o.resume = true;
  } else {
    o.data = lm::kFortunesDir;
    o.dtype = on_gpu ? nx::bfloat16 : nx::float32;
  }
  o.out = out;
  o.data = f.get("data", o.data);
  auto count = [&](const char* name, auto& field, double lo) {
    field = static_cast<std::remove_reference_t<decltype(field)>>(f.number(name, double(field), lo, 1e12));
  };
  count("layers", o.layers, 1);
  count("hidden", o.hidden, 1);
  count("heads", o.heads, 1);
  count("kv-heads", o.kv_heads, 1);
  count("intermediate", o.intermediate, 1);
  count("context", o.context, 2);
  count("vocab", o.vocab, 257);
  count("steps", o.steps, 1);
  count("batch", o.batch, 1);
  count("warmup", o.warmup, 0);
  count("seed", o.seed, 0);
  count("eval-every", o.eval_every, 0);
  count("eval-tokens", o.eval_tokens, 0);
  count("save-every", o.save_every, 0);
  o.lr = f.number("lr", o.lr, 1e-12, 10);
  o.min_lr = f.number("min-lr", f.has("lr") && !f.has("min-lr") ? o.lr / 10 : o.min_lr, 0, 10);
  o.weight_decay = f.number("weight-decay", o.weight_decay, 0, 10);
  o.grad_clip = f.number("grad-clip", o.grad_clip, 0, 1e12);
  o.eval_fraction = f.number("eval-fraction", o.eval_fraction, 0, 0.5);
  if (auto d = dtype_flag(f)) o.dtype = *d;
  if (!o.resume && !f.has("warmup")) o.warmup = std::min<int64_t>(o.warmup, o.steps / 10); // short runs
  const bool progress = f.has("progress") || (!f.has("no-progress") && isatty(STDOUT_FILENO));
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const auto t_start = clock::now();

  lm::Corpus corpus;
  try {
    corpus = lm::read_corpus(o.data);
  } catch (const std::exception& e) {
    std::cerr << "nuvec-lm train: cannot read the corpus: " << e.what() << "\n";
    if (o.data == lm::kFortunesDir) {
      std::cerr << "The default corpus is Debian's fortune cookies: sudo apt-get install fortunes fortunes-min\n"
                   "(or point --data at a directory of text files).\n";
    }
    return 2;
  }
  std::cout << "nuvec-lm train: " << corpus.documents.size() << " documents from " << corpus.files.size()
            << " files in " << o.data;
  if (!corpus.skipped.empty()) std::cout << " (" << corpus.skipped.size() << " files skipped: not UTF-8 text)";
  std::cout << "\n" << (o.resume ? "reading the checkpoint in " + o.out : "training the BPE tokenizer (vocab " + std::to_string(o.vocab) + ")")
            << " and tokenizing..." << std::flush;
  auto t0 = clock::now();
  lm::Trainer trainer(o, corpus.documents);
  std::cout << std::fixed << std::setprecision(1) << " " << seconds(t0) << " s\n" << std::defaultfloat
            << std::setprecision(6);

  const lm::ModelConfig& c = trainer.config();
  const lm::TrainDataInfo& d = trainer.data_info();
  std::cout << "model: llama, " << c.num_hidden_layers << " layers, hidden " << c.hidden_size << ", " << c.num_attention_heads
            << " heads (" << c.num_key_value_heads << " key/value), head_dim " << c.head_dim << ", intermediate "
            << c.intermediate_size << ", context " << c.max_position_embeddings << ", vocab " << c.vocab_size << ": "
            << trainer.parameter_count() << " parameters\n"
            << "data: " << d.train_documents << " documents (" << d.train_tokens << " tokens) to train on, "
            << d.eval_documents << " held out (" << d.eval_tokens << " tokens)\n"
            << "optimizer: AdamW lr " << o.lr << " (" << o.warmup << " warm-up steps, cosine to " << o.min_lr
            << "), betas (" << o.beta1 << ", " << o.beta2 << "), weight decay " << o.weight_decay
            << " (not on norms), gradient clip " << o.grad_clip << "; batch " << o.batch << " x " << o.context
            << " tokens\n"
            << "run: " << o.steps << " steps, " << nx::dtype_name(o.dtype) << (o.dtype == nx::float32 ? "" : " (float32 master weights)")
            << " on " << (on_gpu ? "gpu" : "cpu") << ", seed " << o.seed << "; held-out loss "
            << (o.eval_every > 0 ? "every " + std::to_string(o.eval_every) + " steps" : std::string("at the end"))
            << " (first " << o.eval_tokens << " tokens); checkpoints "
            << (o.save_every > 0 ? "every " + std::to_string(o.save_every) + " steps" : std::string("at the end"))
            << " in " << o.out << "\n";
  if (o.resume) {
    std::cout << (trainer.step() >= o.steps ? "already trained: step " : "resumed at step ") << trainer.step()
              << " of " << o.steps << " (--steps N continues to N)\n";
  } else {
    std::cout << "held-out loss before training: " << std::setprecision(4) << trainer.evaluate() << "\n"
              << std::defaultfloat << std::setprecision(6);
  }

  double window = 0;
  int window_steps = 0;
  bool bar_open = false;
  auto last_draw = clock::now() - std::chrono::seconds(1);
  trainer.run([&](const lm::TrainProgress& p) {
    const lm::TrainRecord& r = p.record;
    window += r.loss;
    ++window_steps;
    const bool evaluated = !std::isnan(r.eval_loss);
    const std::string step = "step " + std::to_string(r.step) + "/" + std::to_string(p.total_steps);
    if (progress && (clock::now() - last_draw > std::chrono::milliseconds(100) || evaluated || r.step == p.total_steps)) {
      std::ostringstream s;
      s << "loss " << std::fixed << std::setprecision(4) << window / window_steps << "  lr " << std::scientific
        << std::setprecision(2) << r.learning_rate << "  " << std::fixed << std::setprecision(0) << r.tokens_per_second
        << " tokens/s";
      nx::examples::draw_progress(step, r.step, p.total_steps, s.str());
      bar_open = true;
      last_draw = clock::now();
    }
    if (evaluated) {
      if (bar_open) std::cout << "\n";
      bar_open = false;
      std::cout << step << "  train loss " << std::fixed << std::setprecision(4) << window / window_steps
                << "  held-out loss " << r.eval_loss << "  " << std::setprecision(0) << r.tokens_per_second
                << " tokens/s  " << std::setprecision(1) << seconds(t_start) << " s"
                << (p.checkpoint.empty() ? "" : "  (saved)") << "\n" << std::defaultfloat << std::setprecision(6)
                << std::flush;
      window = 0;
      window_steps = 0;
    }
    return true;
  });
  if (bar_open) std::cout << "\n";

  const std::string csv = o.out + "/loss.csv";
  std::cout << "checkpoint: " << o.out << " (config.json, model.safetensors, tokenizer.json, ...)\nloss curve: " << csv
            << "\n";
  if (!f.has("no-plot")) {
    std::ostringstream plot;
    plot << "set datafile separator ','\n"
            "set title 'nuvec-lm train: " << c.num_hidden_layers << " layers, hidden " << c.hidden_size
         << ", vocab " << c.vocab_size << "'\n"
            "set xlabel 'step'\nset ylabel 'cross entropy (nats per token)'\nset grid\nset key top right\n"
            "plot '" << csv << "' using 1:2 skip 1 with lines lw 1 title 'train loss (batch)', \\\n"
            "     '' using 1:3 skip 1 with linespoints lw 2 pt 7 title 'held-out loss'\n";
    nx::examples::write_plot(csv, o.out + "/loss.png", plot.str());
  }

  lm::Model model = trainer.model();
  const int eot = *trainer.tokenizer().token_to_id(lm::kEndOfText);
  std::cout << "\nsamples (temperature 0.8, top_p 0.95, seed " << o.seed << "):\n";
  const std::vector<std::string> prompts = {"", "The ", "A "};
  for (size_t i = 0; i < prompts.size(); ++i) {
    // The tokenizer puts spaces before words ("Ġword"), so a prompt's trailing space is left
    // for the model to produce with the next word rather than fed as a lone " " token.
    std::string prompt = prompts[i];
    while (!prompt.empty() && prompt.back() == ' ') prompt.pop_back();
    std::vector<int> ids = {eot};
    for (int id : trainer.tokenizer().encode(prompt, false)) ids.push_back(id);
    lm::GenerationOptions g;
    g.max_tokens = 100;
    g.sampling.temperature = 0.8f;
    g.sampling.top_p = 0.95f;
    g.sampling.seed = o.seed + i;
    std::cout << "--- prompt \"" << prompts[i] << "\"\n" << prompt;
    lm::generate(model, trainer.tokenizer(), ids, g, [](const std::string& piece) {
      std::cout << piece << std::flush;
      return true;
    });
    std::cout << "\n";
  }
  std::cout << std::fixed << std::setprecision(1) << "total " << seconds(t_start) << " s\n" << std::defaultfloat;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  try {
    if (cmd == "generate") {
      return cmd_generate(argc, argv);
    }
    if (cmd == "chat") {
      return cmd_chat(argc, argv);
    }
    if (cmd == "serve") {
      return cmd_serve(argc, argv);
    }
    if (cmd == "convert") {
      return cmd_convert(argc, argv);
    }
    if (cmd == "train") {
      return cmd_train(argc, argv);
    }
  } catch (const std::exception& e) {
    std::cerr << "nuvec-lm " << cmd << ": " << e.what() << "\n";
    return 2;
  }
  usage_error("unknown command '" + cmd + "'");
}
