// Requests and responses of OpenAI's API (src/lm/serve/openai_protocol.h).
#include "lm/serve/openai_protocol.h"

#include <cmath>
#include <limits>

namespace nuvec::lm::serve {

using nlohmann::ordered_json;
using json = nlohmann::ordered_json;

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code, std::string type)
    : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)), type(std::move(type)) {}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_body(const ApiError& error) {
  json e = {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return dump(json{{"error", e}});
}

namespace {

constexpr int kMaxNesting = 64;

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "") {
  throw ApiError(400, message, param, code);
}

// The deepest nesting of arrays and objects in `text` (outside strings), so that a body of a
// million '[' is refused before a parser walks it.
int nesting(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A field of the request object: absent or null give nullptr.
const ordered_json* field(const ordered_json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A bound as a message shows it: 0, 0.5, 100 (not std::to_string's 0.000000).
std::string shortest(double x) {
  return ordered_json(x).dump();
}

double number(const ordered_json& body, const char* name, double fallback, double lo, double hi,
              bool lo_open = false) {
  const ordered_json* v = field(body, name);
  if (!v) {
    return fallback;
  }
  if (!v->is_number()) {
    bad(name, std::string("'") + name + "' must be a number");
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
    bad(name, std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + shortest(lo) + ", " + shortest(hi) +
                  "]; got " + v->dump());
  }
  return d;
}

int64_t integer(const ordered_json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const ordered_json* v = field(body, name);
  if (!v) {
    return fallback;
  }
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))) {
    bad(name, std::string("'") + name + "' must be an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]; got " + v->dump());
  }
  int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) {
    bad(name, std::string("'") + name + "' must be an integer in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]; got " + v->dump());
  }
  return i;
}

bool boolean(const ordered_json& body, const char* name, bool fallback) {
  const ordered_json* v = field(body, name);
  if (!v) {
    return fallback;
  }
  if (!v->is_boolean()) {
    bad(name, std::string("'") + name + "' must be a boolean");
  }
  return v->get<bool>();
}

// Fields accepted only at the value that changes nothing (this server has one choice, no
// log-probabilities, no presence/frequency penalties).
void neutral_only(const ordered_json& body) {
  if (integer(body, "n", 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()) != 1) {
    bad("n", "only n = 1 is supported");
  }
  if (integer(body, "best_of", 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()) != 1) {
    bad("best_of", "only best_of = 1 is supported");
  }
  if (boolean(body, "echo", false)) {
    bad("echo", "echo is not supported");
  }
  if (const ordered_json* v = field(body, "logprobs"); v && !(v->is_boolean() && !v->get<bool>()) &&
                                                     !(v->is_number_integer() && v->get<int64_t>() == 0)) {
    bad("logprobs", "logprobs are not supported");
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (number(body, name, 0, -2, 2) != 0) {
      bad(name, std::string(name) + " is not supported (use repetition_penalty)");
    }
  }
  if (const ordered_json* v = field(body, "logit_bias"); v && !(v->is_object() && v->empty())) {
    bad("logit_bias", "logit_bias is not supported");
  }
  if (const ordered_json* v = field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty())) {
    bad("suffix", "suffix (insertion) is not supported");
  }
  for (const char* name : {"tools", "functions"}) {
    if (const ordered_json* v = field(body, name); v && !(v->is_array() && v->empty())) {
      bad(name, std::string(name) + " (function calling) are not supported");
    }
  }
  for (const char* name : {"tool_choice", "function_call"}) {
    if (const ordered_json* v = field(body, name); v && !(v->is_string() && v->get<std::string>() == "none")) {
      bad(name, std::string(name) + " is not supported (function calling)");
    }
  }
  if (const ordered_json* v = field(body, "response_format")) {
    auto type = v->is_object() ? v->find("type") : v->end();
    if (!v->is_object() || type == v->end() || *type != "text") {
      bad("response_format", "only response_format {\"type\": \"text\"} is supported (no JSON or schema mode)");
    }
  }
}

SamplingOptions sampling(const ordered_json& body) {
  SamplingOptions s;
  s.temperature = float(number(body, "temperature", 1.0, 0, 100));
  s.top_p = float(number(body, "top_p", 1.0, 0, 1, /*lo_open=*/true));
  int64_t top_k = integer(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max());
  s.top_k = top_k < 0 ? 0 : int(top_k); // vLLM: -1 disables
  s.min_p = float(number(body, "min_p", 0, 0, 1));
  s.repetition_penalty = float(number(body, "repetition_penalty", 1, 0, 100, /*lo_open=*/true));
  if (const ordered_json* v = field(body, "seed")) {
    if (!v->is_number_integer()) {
      bad("seed", "'seed' must be an integer");
    }
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
  }
  return s;
}

std::vector<std::string> stop_strings(const ordered_json& body) {
  const ordered_json* v = field(body, "stop");
  if (!v) {
    return {};
  }
  if (v->is_string()) {
    return {v->get<std::string>()};
  }
  if (!v->is_array() || v->size() > 16) {
    bad("stop", "'stop' must be a string or a list of at most 16 strings");
  }
  std::vector<std::string> stops;
  for (auto& s : *v) {
    if (!s.is_string()) {
      bad("stop", "'stop' must be a string or a list of at most 16 strings");
    }
    stops.push_back(s.get<std::string>());
  }
  return stops;
}

std::vector<int> token_list(const ordered_json& list, const ProtocolContext& context) {
  std::vector<int> ids;
  ids.reserve(list.size());
  for (auto& t : list) {
    if (!t.is_number_integer()) {
      bad("prompt", "a token-id prompt must hold integers only");
    }
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= context.vocab_size || (t.is_number_unsigned() && t.get<uint64_t>() >= uint64_t(context.vocab_size))) {
      bad("prompt", "token id " + t.dump() + " is outside the vocabulary of " + std::to_string(context.vocab_size));
    }
    ids.push_back(int(id));
  }
  return ids;
}

std::vector<int> encode(const std::string& text, bool special, const ProtocolContext& context, const char* param) {
  try {
    return context.tokenizer->encode(text, special);
  } catch (const std::invalid_argument& e) {
    bad(param, std::string("cannot encode the text: ") + e.what());
  }
}

std::vector<int> completion_prompt(const ordered_json& body, const ProtocolContext& context) {
  const ordered_json* p = field(body, "prompt");
  if (!p) {
    bad("prompt", "'prompt' is required");
  }
  const ordered_json* one = p;
  if (p->is_array() && !p->empty() && !(*p)[0].is_number()) {
    if (p->size() != 1) {
      bad("prompt", "only one prompt per request is supported");
    }
    one = &(*p)[0];
  }
  if (one->is_string()) {
    return encode(one->get<std::string>(), true, context, "prompt");
  }
  if (one->is_array()) {
    return token_list(*one, context);
  }
  bad("prompt", "'prompt' must be a string, a list of token ids, or a list holding one of them");
}

// A message's content as text: a string, null, or a list of {"type": "text", "text": ...}.
std::string message_text(const ordered_json& content) {
  if (content.is_null()) {
    return "";
  }
  if (content.is_string()) {
    return content.get<std::string>();
  }
  if (!content.is_array()) {
    bad("messages", "a message's content must be a string or a list of text parts");
  }
  std::string text;
  for (auto& part : content) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto t = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || *type != "text" || t == part.end() || !t->is_string()) {
      bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text += t->get<std::string>();
  }
  return text;
}

std::vector<int> chat_prompt(const ordered_json& body, const ProtocolContext& context) {
  if (!context.chat_template) {
    bad("messages", "this server has no chat template (the model directory has none; see --chat-template)");
  }
  const ordered_json* m = field(body, "messages");
  if (!m || !m->is_array() || m->empty()) {
    bad("messages", "'messages' must be a non-empty list");
  }
  ordered_json messages = ordered_json::array();
  for (auto& msg : *m) {
    auto role = msg.is_object() ? msg.find("role") : msg.end();
    if (role == msg.end() || !role->is_string()) {
      bad("messages", "each message must be an object with a string 'role'");
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
      bad("messages", "a message's role must be system, developer, user, assistant or tool; got '" + r + "'");
    }
    auto content = msg.find("content");
    // OpenAI: only an assistant's message may go without content (it then carries tool calls).
    if (r != "assistant" && (content == msg.end() || content->is_null())) {
      bad("messages", "a " + r + " message needs 'content'");
    }
    ordered_json out = msg;
    out["content"] = message_text(content == msg.end() ? ordered_json(nullptr) : *content);
    messages.push_back(std::move(out));
  }
  ordered_json extra = ordered_json::object();
  if (const ordered_json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) {
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    if (kw->contains("messages")) {
      // The template's messages are the request's (vLLM passes them apart, so naming them
      // again fails there too); add_generation_prompt and the rest may be overridden.
      bad("chat_template_kwargs", "'chat_template_kwargs' must not hold 'messages'; the request's messages are used");
    }
    extra = *kw;
  }
  std::string text;
  try {
    text = apply_chat_template(*context.chat_template, messages, true, extra);
  } catch (const std::exception& e) {
    bad("messages", std::string("the chat template failed: ") + e.what());
  }
  // The template writes the special tokens itself (transformers: add_special_tokens=False).
  return encode(text, false, context, "messages");
}

} // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& body_text, const ProtocolContext& context) {
  if (nesting(body_text) > kMaxNesting) {
    bad("", "the JSON body is nested deeper than " + std::to_string(kMaxNesting));
  }
  ordered_json body;
  try {
    body = ordered_json::parse(body_text);
  } catch (const ordered_json::exception& e) {
    bad("", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) {
    bad("", "the body must be a JSON object");
  }
  if (const ordered_json* model = field(body, "model")) {
    if (!model->is_string()) {
      bad("model", "'model' must be a string");
    }
    if (model->get<std::string>() != context.model_name) {
      throw ApiError(404, "The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                              context.model_name + "'",
                     "model", "model_not_found");
    }
  }
  ParsedRequest r;
  r.endpoint = endpoint;
  neutral_only(body);
  r.engine.sampling = sampling(body);
  r.stop = stop_strings(body);
  r.stream = boolean(body, "stream", false);
  if (const ordered_json* so = field(body, "stream_options")) {
    if (!so->is_object()) {
      bad("stream_options", "'stream_options' must be an object");
    }
    r.include_usage = boolean(*so, "include_usage", false);
  }
  r.engine.stop_at_eos = !boolean(body, "ignore_eos", false);
  r.engine.prompt = endpoint == Endpoint::chat ? chat_prompt(body, context) : completion_prompt(body, context);
  const int n = int(r.engine.prompt.size());
  if (n == 0) {
    bad(endpoint == Endpoint::chat ? "messages" : "prompt", "the prompt is empty");
  }
  if (n >= context.context_length) {
    bad(endpoint == Endpoint::chat ? "messages" : "prompt",
        "This model's maximum context length is " + std::to_string(context.context_length) +
            " tokens; the prompt has " + std::to_string(n) + " tokens, which leaves no room to generate",
        "context_length_exceeded");
  }
  const int room = context.context_length - n;
  const char* max_name = "max_tokens";
  if (endpoint == Endpoint::chat && field(body, "max_completion_tokens")) {
    max_name = "max_completion_tokens";
    integer(body, "max_tokens", 0, 1, std::numeric_limits<int32_t>::max()); // checked, though unused
  }
  // Asked for more than the context holds: refused, as OpenAI and vLLM do; the default (16 for
  // completions, the rest of the context for chat) is cut to fit.
  const int64_t asked = integer(body, max_name, 0, 1, std::numeric_limits<int32_t>::max());
  if (asked > room) {
    bad(max_name,
        "This model's maximum context length is " + std::to_string(context.context_length) + " tokens; you asked for " +
            std::to_string(n + asked) + " (" + std::to_string(n) + " in the prompt, " + std::to_string(asked) +
            " for the completion). Reduce the prompt or '" + max_name + "'",
        "context_length_exceeded");
  }
  const int64_t fallback = endpoint == Endpoint::chat ? room : std::min<int64_t>(context.default_max_tokens, room);
  r.engine.max_tokens = int(asked > 0 ? asked : fallback);
  return r;
}

std::string finish_reason(const EngineResult& result, bool stop_string) {
  if (stop_string) {
    return "stop";
  }
  return result.finish_reason;
}

namespace {

json head(const ResponseMeta& meta, const char* object) {
  return json{{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

json usage_json(const Usage& usage) {
  return json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

} // namespace

json response_json(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                   const Usage& usage) {
  const bool chat = meta.endpoint == Endpoint::chat;
  json j = head(meta, chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return j;
}

json chunk_json(const ResponseMeta& meta, const std::string& text, const std::optional<std::string>& finish_reason,
                bool first) {
  const bool chat = meta.endpoint == Endpoint::chat;
  json j = head(meta, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}};
  if (chat) {
    json delta = json::object();
    if (first) {
      delta["role"] = "assistant";
    }
    if (!text.empty() || first) {
      delta["content"] = text;
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  j["choices"] = json::array({choice});
  return j;
}

json usage_chunk_json(const ResponseMeta& meta, const Usage& usage) {
  json j = head(meta, meta.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json model_json(const std::string& model_name, int64_t created) {
  return json{{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "nuvec"}};
}

json models_json(const std::string& model_name, int64_t created) {
  return json{{"object", "list"}, {"data", json::array({model_json(model_name, created)})}};
}

std::string sse_event(const json& data) {
  return "data: " + dump(data) + "\n\n";
}

const char* const kSseDone = "data: [DONE]\n\n";

} // namespace nuvec::lm::serve
