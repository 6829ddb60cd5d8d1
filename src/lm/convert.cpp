// nuvec-lm convert (include/nuvec/lm/convert.h).
#include "nuvec/lm/convert.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nuvec/lm/model.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec::lm {

namespace fs = std::filesystem;
using json = nlohmann::json;

void convert(const std::string& src_dir, const std::string& dst_dir, std::optional<QuantizationSpec> quantize_spec,
             std::optional<Dtype> dtype) {
  std::error_code ec;
  if (fs::equivalent(src_dir, dst_dir, ec)) {
    throw std::runtime_error("[lm.convert] the output directory is the input directory " + src_dir);
  }
  Model model = Model::load(src_dir, dtype);
  WeightMap out;
  for (auto& [name, w] : model.weights()) {
    const bool module_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && w.ndim() >= 2;
    const std::string module = module_weight ? name.substr(0, name.size() - 7) : "";
    const bool plain = module_weight && issubdtype(w.dtype(), floating) && !model.weights().count(module + ".scales");
    if (quantize_spec && plain && w.shape(-1) % quantize_spec->group_size == 0) {
      auto q = quantize(w, quantize_spec->group_size, quantize_spec->bits, quantize_spec->mode);
      out.insert_or_assign(module + ".weight", q[0]);
      out.insert_or_assign(module + ".scales", q[1]);
      if (q.size() > 2) {
        out.insert_or_assign(module + ".biases", q[2]);
      }
    } else {
      out.insert_or_assign(name, w);
    }
  }
  fs::create_directories(dst_dir, ec);
  save_weights(dst_dir, out);

  std::ifstream in(fs::path(src_dir) / "config.json");
  json config = json::parse(in);
  if (quantize_spec) {
    json q = {{"group_size", quantize_spec->group_size}, {"bits", quantize_spec->bits}, {"mode", quantize_spec->mode}};
    config["quantization"] = q;
    config["quantization_config"] = q;
  }
  if (dtype) {
    std::string name = *dtype == bfloat16 ? "bfloat16" : *dtype == float16 ? "float16" : "float32";
    config["torch_dtype"] = name;
  }
  std::ofstream cfg(fs::path(dst_dir) / "config.json");
  cfg << config.dump(2);
  if (!cfg) {
    throw std::runtime_error("[lm.convert] cannot write " + (fs::path(dst_dir) / "config.json").string());
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                           "special_tokens_map.json", "chat_template.jinja"}) {
    if (fs::exists(fs::path(src_dir) / file)) {
      fs::copy_file(fs::path(src_dir) / file, fs::path(dst_dir) / file, fs::copy_options::overwrite_existing);
    }
  }
}

} // namespace nuvec::lm
