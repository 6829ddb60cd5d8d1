// nuvec-lm: run language models from Hugging Face / mlx-lm model directories.
//   nuvec-lm generate --model DIR --prompt TEXT [sampling flags]
//   nuvec-lm convert  --model DIR --out DIR2 [--quantize --bits 4 --group-size 64] [--dtype T]
// Library: include/nuvec/lm/lm.h. Tokens are printed as they are produced; the timings go to
// stderr.
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nuvec/device.h"
#include "nuvec/lm/lm.h"

namespace nx = nuvec;
namespace lm = nuvec::lm;

namespace {

const char* kUsage =
    "usage: nuvec-lm COMMAND [flags]\n"
    "\n"
    "commands:\n"
    "  generate   complete a prompt:   nuvec-lm generate --model DIR --prompt TEXT\n"
    "  convert    cast or quantize:    nuvec-lm convert --model DIR --out DIR2 --quantize\n"
    "\n"
    "generate flags:\n"
    "  --model DIR             a Hugging Face or mlx-lm model directory (config.json,\n"
    "                          *.safetensors, tokenizer.json)\n"
    "  --prompt TEXT           the prompt (raw text; special tokens written out are recognised)\n"
    "  --max-tokens N          new tokens at most (default 256)\n"
    "  --temp T                sampling temperature; 0 is greedy (default 0)\n"
    "  --top-k K  --top-p P  --min-p P  --repetition-penalty R   as transformers' generate\n"
    "  --seed S                seed of the sampler\n"
    "  --stop TEXT             stop when TEXT is produced (repeatable; left out of the output)\n"
    "  --ignore-eos            do not stop at the end-of-sequence token\n"
    "  --dtype T               float32, bfloat16 or float16 (default: the checkpoint's)\n"
    "  --device cpu|gpu        where to run (default: gpu when there is one)\n"
    "\n"
    "convert flags:\n"
    "  --model DIR --out DIR2  input and output directories\n"
    "  --quantize              quantize linear and embedding layers (mlx-lm's layout)\n"
    "  --bits B                2, 3, 4, 5, 6 or 8 (default 4)\n"
    "  --group-size G          32, 64 or 128 (default 64)\n"
    "  --mode M                affine, mxfp4, mxfp8 or nvfp4 (default affine)\n"
    "  --dtype T               cast the floating weights first\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "nuvec-lm: " << msg << "\n\n" << kUsage;
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

int cmd_generate(int argc, char** argv) {
  Flags f = parse(argc, argv, {"ignore-eos"},
                  {"model", "prompt", "max-tokens", "temp", "top-k", "top-p", "min-p", "repetition-penalty",
                   "seed", "stop", "dtype", "device"});
  if (!f.has("model") || !f.has("prompt")) {
    usage_error("generate needs --model and --prompt");
  }
  pick_device(f);
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
  auto [model, tokenizer] = lm::load(f.get("model"), dtype_flag(f));
  std::vector<int> prompt = tokenizer.encode(f.get("prompt"), true);
  lm::GenerationResult r = lm::generate(model, tokenizer, prompt, o, [](const std::string& piece) {
    std::cout << piece << std::flush;
    return true;
  });
  std::cout << "\n";
  int n = int(r.tokens.size());
  std::cerr << "prompt: " << r.prompt_tokens << " tokens, " << (r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0)
            << " tokens/s\n"
            << "generation: " << n << " tokens, " << (n > 1 && r.decode_seconds > 0 ? (n - 1) / r.decode_seconds : 0)
            << " tokens/s (" << r.finish_reason << ")\n";
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
    if (cmd == "convert") {
      return cmd_convert(argc, argv);
    }
  } catch (const std::exception& e) {
    std::cerr << "nuvec-lm " << cmd << ": " << e.what() << "\n";
    return 2;
  }
  usage_error("unknown command '" + cmd + "'");
}
