// Hugging Face chat templates (see include/nuvec/lm/chat_template.h): loading from a model
// directory as transformers does (chat_template.jinja over tokenizer_config.json's
// "chat_template"), and apply_chat_template's context (tokenization_utils_base.py,
// apply_chat_template -> utils/chat_template_utils.py, render_jinja_template). The Jinja engine
// is src/lm/jinja/.
#include "nuvec/lm/chat_template.h"

#include "lm/jinja/ast.h"
#include "lm/jinja/interpreter.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace nuvec::lm {

using ojson = nlohmann::ordered_json;

struct ChatTemplate::Impl {
  std::string source;
  Options options;
  jinja::Body body;
  ojson special_tokens = ojson::object();
};

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("[lm.ChatTemplate] cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ojson read_json(const std::filesystem::path& path) {
  try {
    return ojson::parse(read_file(path));
  } catch (const ojson::parse_error& e) {
    throw std::runtime_error("[lm.ChatTemplate] " + path.string() + " is not valid JSON: " + e.what());
  }
}

// tokenizer_config.json's "chat_template": a string, or named templates of which transformers
// uses "default" when no other name is asked for.
std::optional<std::string> config_template(const ojson& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    for (const auto& t : value)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
  }
  return std::nullopt;
}

} // namespace

namespace {

std::shared_ptr<ChatTemplate::Impl> parse(std::string source, ChatTemplate::Options options) {
  auto impl = std::make_shared<ChatTemplate::Impl>();
  impl->body = jinja::parse_template(source, options.max_nesting);
  impl->source = std::move(source);
  impl->options = std::move(options);
  return impl;
}

} // namespace

ChatTemplate::ChatTemplate(std::string source, Options options) : impl_(parse(std::move(source), std::move(options))) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& model_dir, Options options) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  ojson config = ojson::object();
  if (fs::exists(dir / "tokenizer_config.json")) config = read_json(dir / "tokenizer_config.json");
  std::optional<std::string> source;
  if (fs::exists(dir / "chat_template.jinja")) {
    source = read_file(dir / "chat_template.jinja");
  } else if (config.contains("chat_template")) {
    source = config_template(config["chat_template"]);
  } else if (fs::exists(dir / "chat_template.json")) {
    const ojson j = read_json(dir / "chat_template.json");
    if (j.contains("chat_template")) source = config_template(j["chat_template"]);
  }
  if (!source)
    throw std::runtime_error("[lm.ChatTemplate] " + model_dir +
                             " has no chat template (chat_template.jinja, or \"chat_template\" in "
                             "tokenizer_config.json or chat_template.json)");
  auto impl = parse(std::move(*source), std::move(options));
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    const ojson& v = config[key];
    if (v.is_string()) {
      impl->special_tokens[key] = v;
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      impl->special_tokens[key] = v["content"];
    }
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    ojson extra = ojson::array();
    for (const auto& v : config["additional_special_tokens"]) {
      if (v.is_string()) extra.push_back(v);
      else if (v.is_object() && v.contains("content")) extra.push_back(v["content"]);
    }
    impl->special_tokens["additional_special_tokens"] = std::move(extra);
  }
  return ChatTemplate(std::shared_ptr<const Impl>(std::move(impl)));
}

std::string ChatTemplate::render(const ojson& context) const {
  if (!context.is_object()) throw std::invalid_argument("[lm.ChatTemplate] the render context must be a JSON object");
  const jinja::Value vars = jinja::from_json(context);
  jinja::Interpreter in({impl_->options.max_call_depth, impl_->options.max_iterations, impl_->options.clock});
  try {
    return in.render(impl_->body, vars.dict());
  } catch (const jinja::RenderError& e) {
    throw std::runtime_error("[lm.ChatTemplate] line " + std::to_string(in.line()) + ": " + e.what());
  }
}

const std::string& ChatTemplate::source() const { return impl_->source; }

const ojson& ChatTemplate::special_tokens() const { return impl_->special_tokens; }

std::string apply_chat_template(const ChatTemplate& tmpl, const ojson& messages, bool add_generation_prompt) {
  return apply_chat_template(tmpl, messages, add_generation_prompt, ojson::object());
}

std::string apply_chat_template(const ChatTemplate& tmpl, const ojson& messages, bool add_generation_prompt,
                                const ojson& extra) {
  if (!messages.is_array()) throw std::invalid_argument("[lm.apply_chat_template] messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object())
    throw std::invalid_argument("[lm.apply_chat_template] extra must be a JSON object");
  ojson context = ojson::object();
  context["messages"] = messages;
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [k, v] : tmpl.special_tokens().items()) context[k] = v;
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) context[k] = v;
  return tmpl.render(context);
}

} // namespace nuvec::lm
