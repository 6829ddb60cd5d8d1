// OpenAI's completions and chat completions API as nuvec-lm serve speaks it: request bodies
// parsed and checked into an EngineRequest (sampling, max_tokens) plus stop strings, and the
// response bodies, server-sent-event chunks and error bodies written back. No I/O here
// (src/lm/serve/server.cpp does the HTTP).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nuvec/lm/chat_template.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/tokenizer.h"

namespace nuvec::lm::serve {

/// A request the server refuses: answered with HTTP `status` (4xx) and error_body().
class ApiError : public std::runtime_error {
 public:
  /// `param`: the request field at fault ("" for none); `code`: OpenAI's machine-readable
  /// code ("" for none, e.g. "context_length_exceeded", "model_not_found").
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error");
  int status;
  std::string param;
  std::string code;
  std::string type;
};

/// OpenAI's error body: {"error": {"message", "type", "param", "code"}} (param and code null
/// when empty).
std::string error_body(const ApiError& error);

/// The two generation endpoints.
enum class Endpoint { completions, chat };

/// What the requests are checked against (one per server).
struct ProtocolContext {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr; ///< nullptr: chat requests are refused.
  std::string model_name;
  int context_length = 0;      ///< The model's max_position_embeddings.
  int vocab_size = 0;          ///< The model's vocabulary (prompt token ids must be below it).
  int default_max_tokens = 16; ///< /v1/completions' max_tokens when absent.
};

/// A checked request.
struct ParsedRequest {
  Endpoint endpoint = Endpoint::completions;
  EngineRequest engine;            ///< Prompt tokens, sampling options, max_tokens, stop_at_eos.
  std::vector<std::string> stop;   ///< Stop strings (text level).
  bool stream = false;             ///< Answer as server-sent events.
  bool include_usage = false;      ///< stream_options.include_usage: a last chunk with usage.
};

/// Parses the JSON `body` of a request to `endpoint`: the prompt (completions: a string, a
/// list of token ids, or a one-element list of either; encoded with the tokenizer's special
/// tokens) or the messages (chat: rendered with the chat template, add_generation_prompt,
/// plus chat_template_kwargs; encoded without special tokens), model, max_tokens (chat also
/// max_completion_tokens), temperature, top_p, top_k, min_p, repetition_penalty, seed, stop,
/// stream, stream_options, ignore_eos; n, best_of, echo, logprobs, presence_penalty,
/// frequency_penalty, logit_bias, suffix, tools, functions, tool_choice, function_call and
/// response_format only at their neutral values; other fields ignored. Chat messages need a
/// role of system, developer, user, assistant or tool, and content unless the assistant's.
/// max_tokens defaults to default_max_tokens (completions) or the rest of the context (chat),
/// cut to what the context holds; asked for explicitly, it must fit.
/// Throws ApiError: 400 for a body that is not a JSON object (or nested deeper than 64),
/// a field of the wrong type or out of range, an unsupported feature, an empty prompt, a token
/// id outside the vocabulary, a prompt that leaves no room in the context or a max_tokens
/// past it (code "context_length_exceeded", OpenAI's and vLLM's rule), a template that fails
/// to render, no chat template; 404 (code "model_not_found") for another model's name.
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const ProtocolContext& context);

/// How a request ended, in OpenAI's words: "stop" (eos, a stop string, stopped by the
/// server), "length" (max_tokens or the context); the engine's other reasons are passed on.
std::string finish_reason(const EngineResult& result, bool stop_string);

/// The fixed parts of every body of one response.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::completions;
  std::string id;      ///< "cmpl-N" or "chatcmpl-N".
  int64_t created = 0; ///< Unix seconds.
  std::string model;
};

/// Token counts of a response.
struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

/// The whole (non-streamed) response: a "text_completion" or "chat.completion" object with
/// one choice and usage.
nlohmann::ordered_json response_json(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                             const Usage& usage);

/// One streamed chunk ("text_completion" or "chat.completion.chunk") carrying `text`, and
/// `finish_reason` on the last one (null before). Chat's first chunk (`first`) carries the
/// role.
nlohmann::ordered_json chunk_json(const ResponseMeta& meta, const std::string& text,
                          const std::optional<std::string>& finish_reason, bool first);

/// The chunk after the last one when stream_options.include_usage: no choices, the usage.
nlohmann::ordered_json usage_chunk_json(const ResponseMeta& meta, const Usage& usage);

/// GET /v1/models/{model}: the model object (id, object "model", created, owned_by).
nlohmann::ordered_json model_json(const std::string& model_name, int64_t created);

/// GET /v1/models: a list with the one model.
nlohmann::ordered_json models_json(const std::string& model_name, int64_t created);

/// A server-sent event carrying `data`: "data: <json>\n\n" (invalid UTF-8 replaced).
std::string sse_event(const nlohmann::ordered_json& data);

/// The event that ends a stream: "data: [DONE]\n\n".
extern const char* const kSseDone;

/// `j` as compact JSON text, invalid UTF-8 replaced by U+FFFD.
std::string dump(const nlohmann::ordered_json& j);

} // namespace nuvec::lm::serve
