// The HTTP server of nuvec-lm serve (include/nuvec/lm/serve.h) on cpp-httplib: routes,
// streaming with server-sent events, cancellation of requests whose client has gone.
#include "nuvec/lm/serve.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <thread>

#include "lm/serve/openai_protocol.h"
#include "lm/serve/peer_watch.h"
#include "lm/serve/request_channel.h"

namespace nuvec::lm {

namespace {

using serve::ApiError;
using serve::Endpoint;

// How often a waiting handler looks at its client and at stop().
constexpr std::chrono::milliseconds kPoll{100};

void fail_options(const std::string& what) {
  throw std::invalid_argument("[lm.serve] " + what);
}

void answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(serve::error_body(e), "application/json");
}

// The longest request (prompt and completion) the engine's KV pool holds: a request of n
// tokens computes n − 1 positions (its last token is never fed back), and the engine refuses
// one that needs more blocks than the pool has.
int64_t pool_context(const Engine& engine) {
  return int64_t(engine.stats().total_blocks) * engine.options().block_size + 1;
}

// The method a route of this server takes, or null for a path it does not serve.
const char* allowed_method(const std::string& path) {
  if (path == "/health" || path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) return "GET"; // any name
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  return nullptr;
}

} // namespace

struct Server::Impl {
  Engine& engine;
  const Tokenizer& tokenizer;
  ServeOptions options;
  serve::ProtocolContext protocol;
  httplib::Server http;
  std::thread listener;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::atomic<bool> listening_ended{false};
  int listen_socket = -1;
  int port = 0;
  int64_t created = std::time(nullptr);

  Impl(Engine& engine, const Tokenizer& tokenizer, ServeOptions opts)
      : engine(engine), tokenizer(tokenizer), options(std::move(opts)) {
    const ModelConfig& config = engine.model().config();
    protocol.tokenizer = &tokenizer;
    protocol.chat_template = options.chat_template ? &*options.chat_template : nullptr;
    protocol.model_name = options.model_name;
    // One request of the whole context must fit the pool (the Server's constructor checked
    // an explicit max_model_len).
    protocol.context_length = options.max_model_len > 0
        ? options.max_model_len
        : int(std::min<int64_t>(config.max_position_embeddings, pool_context(engine)));
    protocol.vocab_size = config.vocab_size;
    protocol.default_max_tokens = options.default_max_tokens;
    routes();
  }

  void routes() {
    const size_t threads = size_t(options.threads);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(options.max_body_bytes);
    // SO_REUSEADDR only: httplib's default SO_REUSEPORT would let a second server bind a port
    // that is in use and share its connections.
    http.set_socket_options([this](int sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_socket = sock;
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      EngineStats s = engine.stats();
      nlohmann::ordered_json j = {{"status", "ok"},
                          {"running", s.running},
                          {"waiting", s.waiting},
                          {"free_blocks", s.free_blocks},
                          {"total_blocks", s.total_blocks},
                          {"free_state_slots", s.free_state_slots},
                          {"state_slots", s.state_slots},
                          {"prefix_states", s.prefix_states},
                          {"steps", s.steps},
                          {"preemptions", s.preemptions},
                          {"shared_block_hits", s.shared_block_hits}};
      res.set_content(serve::dump(j), "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve::dump(serve::models_json(options.model_name, created)), "application/json");
    });
    // OpenAI's models.retrieve; a model name may hold '/' (organisation/name); an empty one is
    // no model either.
    http.Get(R"(/v1/models/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] != options.model_name) {
        answer_error(res, ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist; this server serves '" +
                                            options.model_name + "'",
                                   "model", "model_not_found"));
        return;
      }
      res.set_content(serve::dump(serve::model_json(options.model_name, created)), "application/json");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::completions, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::chat, req, res);
    });
    // httplib's own refusals (unknown path 404, 413, a request it cannot parse) get
    // OpenAI's body too; answers that already have one keep it.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      // A known path asked with another method: 405 with the method it takes.
      const char* allowed = allowed_method(req.path);
      if (res.status == 404 && allowed != nullptr) {
        res.status = 405;
        res.set_header("Allow", allowed);
      }
      std::string what = res.status == 405   ? req.method + " " + req.path + " is not allowed; use " + allowed
                         : res.status == 404 ? "no route " + req.method + " " + req.path
                         : res.status == 413 ? std::string("the request body is too large")
                                             : "the request was refused (HTTP " + std::to_string(res.status) +
                                 "): a POST needs a JSON body with its Content-Length";
      answer_error(res, ApiError(res.status, what));
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what += std::string(": ") + e.what();
      } catch (...) {
      }
      answer_error(res, ApiError(500, what, "", "", "server_error"));
    });
    if (options.log_requests) {
      http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        std::cerr << req.method << " " << req.path << " " << res.status << "\n";
      });
    }
  }

  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    serve::ParsedRequest parsed;
    std::shared_ptr<serve::RequestChannel> channel;
    try {
      parsed = serve::parse_request(endpoint, req.body, protocol);
      try {
        channel = serve::RequestChannel::submit(engine, tokenizer, parsed.engine, parsed.stop);
      } catch (const std::invalid_argument& e) {
        throw ApiError(400, e.what(), endpoint == Endpoint::chat ? "messages" : "prompt");
      }
    } catch (const ApiError& e) {
      answer_error(res, e);
      return;
    }
    serve::ResponseMeta meta{endpoint, (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(channel->id()),
                             int64_t(std::time(nullptr)), options.model_name};
    serve::PeerWatch peer = serve::PeerWatch::find(req.local_port, req.remote_addr, req.remote_port);
    const int prompt_tokens = int(parsed.engine.prompt.size());
    if (parsed.stream) {
      stream(res, channel, meta, peer, prompt_tokens, parsed.include_usage);
    } else {
      whole(res, channel, meta, peer, prompt_tokens);
    }
  }

  // Waits for the end and answers with one JSON body.
  void whole(httplib::Response& res, const std::shared_ptr<serve::RequestChannel>& channel,
             const serve::ResponseMeta& meta, const serve::PeerWatch& peer, int prompt_tokens) {
    std::string text;
    for (;;) {
      serve::ChannelUpdate u = channel->take(kPoll);
      text += u.text;
      if (u.finished) {
        if (u.result.finish_reason.rfind("error", 0) == 0) {
          answer_error(res, ApiError(500, u.result.finish_reason, "", "", "server_error"));
          return;
        }
        serve::Usage usage{prompt_tokens, int(u.result.tokens.size())};
        res.set_content(serve::dump(serve::response_json(meta, text, serve::finish_reason(u.result, u.stop_string), usage)),
                        "application/json");
        return;
      }
      if (stopping || peer.closed()) {
        engine.cancel(channel->id());
        answer_error(res, ApiError(503, "the server is stopping or the client has gone", "", "", "server_error"));
        return;
      }
    }
  }

  // Answers with server-sent events as the text comes; a client that goes away (a failed
  // write, a closed connection, or the server stopping) cancels the request.
  void stream(httplib::Response& res, const std::shared_ptr<serve::RequestChannel>& channel,
              const serve::ResponseMeta& meta, const serve::PeerWatch& peer, int prompt_tokens, bool include_usage) {
    auto first = std::make_shared<bool>(true);
    auto ended = std::make_shared<bool>(false);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, channel, meta, peer, prompt_tokens, include_usage, first, ended](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& event) {
            if (!sink.write(event.data(), event.size())) {
              engine.cancel(channel->id());
              return false;
            }
            return true;
          };
          if (*first && meta.endpoint == Endpoint::chat) {
            *first = false;
            if (!send(serve::sse_event(serve::chunk_json(meta, "", std::nullopt, true)))) {
              return false;
            }
          }
          *first = false;
          for (;;) {
            serve::ChannelUpdate u = channel->take(kPoll);
            if (!u.text.empty() && !send(serve::sse_event(serve::chunk_json(meta, u.text, std::nullopt, false)))) {
              return false;
            }
            if (u.finished) {
              *ended = true;
              if (u.result.finish_reason.rfind("error", 0) == 0) {
                ApiError e(500, u.result.finish_reason, "", "", "server_error");
                if (!send("data: " + serve::error_body(e) + "\n\n")) {
                  return false;
                }
              } else {
                serve::Usage usage{prompt_tokens, int(u.result.tokens.size())};
                std::string reason = serve::finish_reason(u.result, u.stop_string);
                if (!send(serve::sse_event(serve::chunk_json(meta, "", reason, false))) ||
                    (include_usage && !send(serve::sse_event(serve::usage_chunk_json(meta, usage))))) {
                  return false;
                }
              }
              if (!send(serve::kSseDone)) {
                return false;
              }
              sink.done();
              return true;
            }
            if (stopping || peer.closed()) {
              engine.cancel(channel->id());
              return false;
            }
            if (!u.text.empty()) {
              return true; // back to httplib, which checks the socket before calling again
            }
          }
        },
        [this, channel, ended](bool success) {
          if (!success && !*ended) {
            engine.cancel(channel->id());
          }
        });
  }
};

Server::Server(Engine& engine, const Tokenizer& tokenizer, ServeOptions options) {
  if (options.threads < 1) {
    fail_options("threads must be at least 1; got " + std::to_string(options.threads));
  }
  if (options.port < 0 || options.port > 65535) {
    fail_options("port must be in [0, 65535]; got " + std::to_string(options.port));
  }
  if (options.model_name.empty()) {
    fail_options("model_name is empty");
  }
  const int max_len = engine.model().config().max_position_embeddings;
  if (options.max_model_len < 0 || options.max_model_len > max_len) {
    fail_options("max_model_len must be in [0, " + std::to_string(max_len) + "] (0: the model's context); got " +
                 std::to_string(options.max_model_len));
  }
  // A context asked for that the pool cannot hold would admit requests that are then refused.
  if (options.max_model_len > 0 && pool_context(engine) < options.max_model_len) {
    const int block = engine.options().block_size, blocks = engine.stats().total_blocks;
    fail_options("the KV pool holds " + std::to_string(int64_t(blocks) * block) + " positions (" +
                 std::to_string(blocks) + " blocks of " + std::to_string(block) + "), fewer than one request of the " +
                 std::to_string(options.max_model_len) + "-token max_model_len needs (" +
                 std::to_string(options.max_model_len - 1) + "); give more KV blocks or a smaller max_model_len");
  }
  impl_ = std::make_unique<Impl>(engine, tokenizer, std::move(options));
}

Server::~Server() {
  stop();
}

int Server::start() {
  if (impl_->started.exchange(true)) {
    throw std::logic_error("[lm.serve] the server has already been started");
  }
  std::signal(SIGPIPE, SIG_IGN);
  const ServeOptions& o = impl_->options;
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
  } else {
    errno = 0;
    if (!impl_->http.bind_to_port(o.host, port)) {
      port = -1;
    }
  }
  if (port < 0) {
    const int err = errno; // bind's, when it was the step that failed
    impl_->started = false;
    throw std::runtime_error("[lm.serve] cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             (err != 0 ? std::string(" (") + std::strerror(err) + ")" : std::string()));
  }
  impl_->port = port;
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
  // library); a burst of clients overflows it and their connections stall or fail. Listening
  // again only changes the backlog.
  if (impl_->listen_socket >= 0) {
    ::listen(impl_->listen_socket, SOMAXCONN);
  }
  impl_->listener = std::thread([this] {
    impl_->http.listen_after_bind();
    impl_->listening_ended = true;
  });
  // stop() must not come before the listener runs (httplib's stop() ignores a server that
  // is not running yet).
  while (!impl_->http.is_running() && !impl_->listening_ended) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port;
}

void Server::stop() {
  if (!impl_ || !impl_->listener.joinable()) {
    return;
  }
  impl_->stopping = true;
  impl_->http.stop();
  impl_->listener.join();
}

int Server::port() const {
  return impl_->port;
}

int Server::context_length() const {
  return impl_->protocol.context_length;
}

} // namespace nuvec::lm
