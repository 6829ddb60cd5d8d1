// An OpenAI-compatible HTTP server over a serving Engine (nuvec-lm serve): GET /health,
// GET /v1/models, POST /v1/completions and POST /v1/chat/completions, streamed as server-sent
// events or answered whole, on cpp-httplib.
//
// Requests follow OpenAI's API (and vLLM's extensions top_k, min_p, repetition_penalty,
// ignore_eos, chat_template_kwargs); a malformed one gets a 4xx answer with OpenAI's error
// body {"error": {"message", "type", "param", "code"}}. Stop strings are matched in the
// decoded text (StopStringDecoder); a streaming client that goes away has its request
// cancelled, which frees its KV blocks.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nuvec/lm/chat_template.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/tokenizer.h"

namespace nuvec::lm {

/// Where the server listens and what it serves.
struct ServeOptions {
  std::string host = "127.0.0.1";   ///< Address to bind (localhost by default; "0.0.0.0" for every interface).
  int port = 8080;                  ///< TCP port; 0 picks a free one (Server::port() tells which).
  std::string model_name = "model"; ///< The id /v1/models lists; a request naming another model gets 404.
  /// The template of /v1/chat/completions (absent: chat requests get 400 "no chat template").
  std::optional<ChatTemplate> chat_template;
  /// HTTP worker threads: connections served at once (>= 1). Each open connection holds one
  /// (a stream for its whole length), and a connection past them waits for a free one,
  /// /health included: give at least the concurrent clients expected.
  int threads = 512;
  /// The context offered to requests, prompt and completion together (vLLM's
  /// max_model_len), at most the model's max_position_embeddings. 0: that, or less when the
  /// engine's KV pool cannot hold one request of it (blocks · block_size + 1 tokens: the last
  /// token is never fed back), so that no request the protocol admits is refused for room.
  int max_model_len = 0;
  size_t max_body_bytes = 16 << 20; ///< Larger request bodies get 413.
  int default_max_tokens = 16;      ///< /v1/completions' max_tokens when absent (OpenAI's default);
                                    ///< chat completions default to the rest of the context.
  bool log_requests = false;        ///< A line on stderr per request: method, path, status.
};

/// The HTTP server. The engine must be stepping (Engine::start()) while requests are served;
/// the server only submits and cancels. Writes to a closed socket must not kill the process,
/// so start() sets SIGPIPE to be ignored.
class Server {
 public:
  /// A server for `engine` (whose model it serves) and `tokenizer` (the model's; it encodes
  /// prompts and decodes outputs). Both must outlive the server. Throws
  /// std::invalid_argument ("[lm.serve] ...") for bad options (threads < 1, a port outside
  /// [0, 65535], an empty model_name, max_model_len outside [0, max_position_embeddings], or
  /// a max_model_len the engine's KV pool cannot hold one request of: vLLM refuses to start
  /// then too, as such requests could never run).
  Server(Engine& engine, const Tokenizer& tokenizer, ServeOptions options);
  /// Stops the server (stop()).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds host:port and serves on a background thread; returns the port bound (the chosen
  /// one when options.port is 0). Throws std::runtime_error ("[lm.serve] ...") when the
  /// address cannot be bound, std::logic_error when already started.
  int start();
  /// Stops listening, cancels the requests still being answered and joins the background
  /// thread. Idempotent; safe from any thread but a request handler.
  void stop();
  /// The port bound (0 before start()).
  int port() const;
  /// The context offered to requests (ServeOptions::max_model_len, resolved).
  int context_length() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

} // namespace nuvec::lm
