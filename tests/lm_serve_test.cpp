// nuvec-lm serve's HTTP server (include/nuvec/lm/serve.h) in-process on an ephemeral port of
// 127.0.0.1, over an Engine running the tiny Qwen3 checkpoint of tests/data/lm (float32),
// spoken to with cpp-httplib's client: completions and chat completions, whole and streamed,
// equal to lm::generate (greedy); usage counts; stop strings; many concurrent streams; a
// client that goes away mid-stream has its request cancelled and its blocks freed; malformed
// requests get a 4xx with OpenAI's error body and the server keeps serving.
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "nuvec/lm/chat_template.h"
#include "nuvec/lm/engine.h"
#include "nuvec/lm/lm.h"
#include "nuvec/lm/serve.h"

using namespace nuvec;
using namespace nuvec::lm;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// tests/data/lm/<arch> (NUVEC_LM_TEST_DATA replaces tests/data/lm for a binary run elsewhere).
std::string fixture(const std::string& arch) {
  const char* root = std::getenv("NUVEC_LM_TEST_DATA");
  return ((root ? fs::path(root) : fs::path(__FILE__).parent_path() / "data" / "lm") / arch).string();
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What a streamed answer carried.
struct Streamed {
  std::string text;
  std::string finish_reason;
  std::optional<json> usage;
  int chunks = 0;
  bool done = false; // ended with data: [DONE]
  std::vector<std::string> pieces;
};

Streamed parse_events(const std::string& body, bool chat) {
  Streamed s;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated event: " << body.substr(at);
    if (end == std::string::npos) {
      break;
    }
    std::string event = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    EXPECT_FALSE(s.done) << "an event after [DONE]";
    json j = json::parse(data);
    if (j.contains("usage") && j["choices"].empty()) {
      s.usage = j["usage"];
      continue;
    }
    ++s.chunks;
    EXPECT_EQ(j["object"], chat ? "chat.completion.chunk" : "text_completion");
    const json& c = j["choices"][0];
    std::string piece = chat ? c["delta"].value("content", "") : c["text"].get<std::string>();
    s.text += piece;
    if (!piece.empty()) {
      s.pieces.push_back(piece);
    }
    if (!c["finish_reason"].is_null()) {
      s.finish_reason = c["finish_reason"];
    }
  }
  return s;
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = load(fixture("qwen3"), float32);
    model_ = new Model(std::move(loaded.first));
    tokenizer_ = new Tokenizer(std::move(loaded.second));
    engine_ = new Engine(*model_);
    engine_->start();
    ServeOptions o;
    o.port = 0;
    o.model_name = "tiny-qwen3";
    o.chat_template = ChatTemplate(
        read_text(fs::path(__FILE__).parent_path() / "data" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"));
    o.max_body_bytes = 1 << 20;
    server_ = new Server(*engine_, *tokenizer_, o);
    port_ = server_->start();
  }
  static void TearDownTestSuite() {
    delete server_;
    engine_->stop();
    delete engine_;
    delete tokenizer_;
    delete model_;
  }

  static std::unique_ptr<httplib::Client> client() {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(120, 0);
    return c;
  }

  static httplib::Result post(const std::string& path, const std::string& body) {
    return client()->Post(path.c_str(), body, "application/json");
  }

  // The answer of a request, whole; expects 200.
  static json whole(const std::string& path, json body) {
    body["stream"] = false;
    auto r = post(path, body.dump());
    EXPECT_TRUE(r) << "no answer";
    if (!r) {
      return json();
    }
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    return json::parse(r->body);
  }

  // The answer of a request, streamed; expects 200 and server-sent events.
  static Streamed streamed(const std::string& path, json body) {
    body["stream"] = true;
    auto r = post(path, body.dump());
    EXPECT_TRUE(r) << "no answer";
    if (!r) {
      return {};
    }
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    Streamed s = parse_events(r->body, path == "/v1/chat/completions");
    EXPECT_TRUE(s.done) << r->body;
    return s;
  }

  static GenerationResult reference(const std::vector<int>& prompt, int max_tokens,
                                    std::vector<std::string> stops = {}) {
    GenerationOptions o;
    o.max_tokens = max_tokens;
    o.stop_strings = std::move(stops);
    o.cuda_graphs = false; // the dense loop, not the engine under test
    return generate(*model_, *tokenizer_, prompt, o);
  }

  static void expect_blocks_free() {
    auto t0 = std::chrono::steady_clock::now();
    EngineStats s = engine_->stats();
    while ((s.running != 0 || s.waiting != 0 || s.free_blocks != s.total_blocks) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      s = engine_->stats();
    }
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.waiting, 0);
    EXPECT_EQ(s.free_blocks, s.total_blocks);
  }

  static inline Model* model_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline Engine* engine_ = nullptr;
  static inline Server* server_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(ServeTest, HealthAndModels) {
  auto h = client()->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  json health = json::parse(h->body);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["total_blocks"], engine_->stats().total_blocks);
  EXPECT_GT(health["free_blocks"].get<int>(), 0); // counted from the start, not from the first step
  EXPECT_EQ(health["state_slots"], 0);             // qwen3: no Gated DeltaNet layers
  auto m = client()->Get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "tiny-qwen3");
  EXPECT_EQ(models["data"][0]["object"], "model");
  // models.retrieve: the model object, or model_not_found.
  auto one = client()->Get("/v1/models/tiny-qwen3");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(json::parse(one->body), models["data"][0]);
  auto other = client()->Get("/v1/models/org/gpt-4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["error"]["code"], "model_not_found");
  auto empty = client()->Get("/v1/models/"); // no name: no such model (it was a 405 for GET)
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 404);
  EXPECT_EQ(json::parse(empty->body)["error"]["code"], "model_not_found");
  EXPECT_EQ(health["preemptions"], 0);
  EXPECT_TRUE(health["steps"].is_number_integer());
  EXPECT_TRUE(health["shared_block_hits"].is_number_integer());
  auto none = client()->Get("/v1/nothing");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_TRUE(json::parse(none->body)["error"].contains("message"));
  // A served path with another method: 405, naming the method it takes.
  auto get_completions = client()->Get("/v1/completions");
  ASSERT_TRUE(get_completions);
  EXPECT_EQ(get_completions->status, 405);
  EXPECT_EQ(get_completions->get_header_value("Allow"), "POST");
  EXPECT_TRUE(json::parse(get_completions->body)["error"].contains("message"));
  auto delete_models = client()->Delete("/v1/models");
  ASSERT_TRUE(delete_models);
  EXPECT_EQ(delete_models->status, 405);
  EXPECT_EQ(delete_models->get_header_value("Allow"), "GET");
}

// Greedy completions, whole and streamed, equal lm::generate on the same prompt, with its
// finish reason and token counts.
TEST_F(ServeTest, CompletionsEqualGenerate) {
  for (std::string prompt : {"the people", "hello world, this is", "x"}) {
    std::vector<int> ids = tokenizer_->encode(prompt, true);
    GenerationResult ref = reference(ids, 24);
    json body = {{"model", "tiny-qwen3"}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
    json w = whole("/v1/completions", body);
    EXPECT_EQ(w["object"], "text_completion");
    EXPECT_EQ(w["model"], "tiny-qwen3");
    EXPECT_EQ(w["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    EXPECT_EQ(w["choices"][0]["text"], ref.text) << prompt;
    EXPECT_EQ(w["choices"][0]["finish_reason"], ref.finish_reason);
    EXPECT_EQ(w["usage"]["prompt_tokens"], int(ids.size()));
    EXPECT_EQ(w["usage"]["completion_tokens"], int(ref.tokens.size()));
    EXPECT_EQ(w["usage"]["total_tokens"], int(ids.size() + ref.tokens.size()));

    body["stream_options"] = {{"include_usage", true}};
    Streamed s = streamed("/v1/completions", body);
    EXPECT_EQ(s.text, ref.text) << prompt;
    EXPECT_EQ(s.finish_reason, ref.finish_reason);
    ASSERT_TRUE(s.usage);
    EXPECT_EQ((*s.usage)["prompt_tokens"], int(ids.size()));
    EXPECT_EQ((*s.usage)["completion_tokens"], int(ref.tokens.size()));
    EXPECT_GT(s.chunks, 1);

    // The same prompt as token ids.
    json by_ids = {{"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}};
    EXPECT_EQ(whole("/v1/completions", by_ids)["choices"][0]["text"], ref.text);
  }
  expect_blocks_free();
}

// max_tokens ends with "length"; ignore_eos runs to it.
TEST_F(ServeTest, MaxTokensAndIgnoreEos) {
  json body = {{"prompt", "the people"}, {"max_tokens", 7}, {"temperature", 0}, {"ignore_eos", true}};
  json w = whole("/v1/completions", body);
  EXPECT_EQ(w["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(w["usage"]["completion_tokens"], 7);
  // Up to the end of the context (256 tokens) is served; one more is refused (the
  // malformed-request test).
  const int prompt_tokens = w["usage"]["prompt_tokens"].get<int>();
  body["max_tokens"] = 256 - prompt_tokens;
  json full = whole("/v1/completions", body);
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["completion_tokens"], 256 - prompt_tokens);
}

// Chat completions render the messages with the chat template (generation prompt added,
// no special tokens added by the tokenizer) and answer as generate does on that prompt.
TEST_F(ServeTest, ChatCompletionsEqualGenerate) {
  nlohmann::ordered_json messages = {{{"role", "system"}, {"content", "be brief"}},
                                     {{"role", "user"}, {"content", "hello there"}}};
  ChatTemplate tmpl(read_text(fs::path(__FILE__).parent_path() / "data" / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"));
  std::vector<int> ids = tokenizer_->encode(apply_chat_template(tmpl, messages, true), false);
  GenerationResult ref = reference(ids, 20);
  json body = {{"model", "tiny-qwen3"}, {"messages", messages}, {"max_tokens", 20}, {"temperature", 0}};
  json w = whole("/v1/chat/completions", body);
  EXPECT_EQ(w["object"], "chat.completion");
  EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(w["choices"][0]["message"]["content"], ref.text);
  EXPECT_EQ(w["choices"][0]["finish_reason"], ref.finish_reason);
  EXPECT_EQ(w["usage"]["prompt_tokens"], int(ids.size()));
  EXPECT_EQ(w["usage"]["completion_tokens"], int(ref.tokens.size()));
  Streamed s = streamed("/v1/chat/completions", body);
  EXPECT_EQ(s.text, ref.text);
  EXPECT_EQ(s.finish_reason, ref.finish_reason);
  // Content given as text parts, and max_completion_tokens, give the same.
  json parts = body;
  parts["messages"][1]["content"] = json::array({{{"type", "text"}, {"text", "hello "}}, {{"type", "text"}, {"text", "there"}}});
  parts.erase("max_tokens");
  parts["max_completion_tokens"] = 20;
  EXPECT_EQ(whole("/v1/chat/completions", parts)["choices"][0]["message"]["content"], ref.text);
}

// A stop string ends the answer before it (whole and streamed, never sent in a chunk), as
// generate's stop strings do.
TEST_F(ServeTest, StopStrings) {
  std::vector<int> ids = tokenizer_->encode("the people", true);
  GenerationOptions o;
  o.max_tokens = 40;
  o.stop_at_eos = false;
  std::string full = generate(*model_, *tokenizer_, ids, o).text;
  ASSERT_GE(full.size(), 12u) << full;
  // Characters 4 to 6 (whole UTF-8 sequences).
  auto char_start = [&](size_t n) {
    size_t at = 0;
    for (; n > 0 && at < full.size(); --n) {
      do {
        ++at;
      } while (at < full.size() && (static_cast<unsigned char>(full[at]) & 0xC0) == 0x80);
    }
    return at;
  };
  std::string stop = full.substr(char_start(4), char_start(7) - char_start(4));
  ASSERT_FALSE(stop.empty());
  GenerationResult ref = reference(ids, 40, {stop, "never appears \x01"});
  ASSERT_EQ(ref.finish_reason, "stop");
  ASSERT_EQ(ref.text, full.substr(0, full.find(stop)));
  json body = {{"prompt", "the people"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true},
               {"stop", {stop, "never appears \x01"}}};
  json w = whole("/v1/completions", body);
  EXPECT_EQ(w["choices"][0]["text"], ref.text);
  EXPECT_EQ(w["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(w["usage"]["completion_tokens"], int(ref.tokens.size()));
  Streamed s = streamed("/v1/completions", body);
  EXPECT_EQ(s.text, ref.text);
  EXPECT_EQ(s.finish_reason, "stop");
  for (auto& piece : s.pieces) {
    EXPECT_EQ(piece.find(stop), std::string::npos);
  }
  body["stop"] = stop; // a single string
  EXPECT_EQ(whole("/v1/completions", body)["choices"][0]["text"], ref.text);
  expect_blocks_free();
}

// A seed makes sampling reproducible.
TEST_F(ServeTest, SeededSamplingRepeats) {
  json body = {{"prompt", "the people"}, {"max_tokens", 16}, {"temperature", 0.9}, {"top_p", 0.95},
               {"top_k", 50}, {"min_p", 0.01}, {"repetition_penalty", 1.1}, {"seed", 1234}};
  json a = whole("/v1/completions", body), b = whole("/v1/completions", body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(streamed("/v1/completions", body).text, a["choices"][0]["text"].get<std::string>());
}

// 64 clients streaming at once, each with its own prompt and length, each get their own
// answer (batched in the engine, equal to each alone).
TEST_F(ServeTest, ConcurrentStreams) {
  constexpr int kClients = 64;
  std::vector<std::string> prompts;
  std::vector<int> lengths;
  std::vector<std::string> expected;
  for (int i = 0; i < kClients; ++i) {
    prompts.push_back("client " + std::to_string(i) + (i % 3 ? " says hello" : " the people of"));
    lengths.push_back(8 + (i * 5) % 23);
    expected.push_back(reference(tokenizer_->encode(prompts[i], true), lengths[i]).text);
  }
  std::vector<Streamed> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      json body = {{"prompt", prompts[i]}, {"max_tokens", lengths[i]}, {"temperature", 0}, {"stream", true}};
      auto r = post("/v1/completions", body.dump());
      if (r && r->status == 200) {
        got[i] = parse_events(r->body, false);
      } else {
        ADD_FAILURE() << "client " << i << ": " << (r ? "HTTP " + std::to_string(r->status) + " " + r->body
                                                        : "error " + httplib::to_string(r.error()));
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(got[i].done) << "client " << i;
    EXPECT_EQ(got[i].text, expected[i]) << "client " << i;
  }
  expect_blocks_free();
}

// A client that goes away after a few chunks has its request cancelled: its blocks are
// freed long before the request could have ended on its own.
TEST_F(ServeTest, DisconnectCancels) {
  for (bool chat : {false, true}) {
    // Up to the end of the context: chat's default, 240 tokens for completions.
    json body = {{"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
    if (chat) {
      body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
    } else {
      body["prompt"] = "the people";
      body["max_tokens"] = 240;
    }
    const int64_t steps0 = engine_->stats().steps;
    httplib::Request req;
    req.method = "POST";
    req.path = chat ? "/v1/chat/completions" : "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    int events = 0;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      events += int(std::count(data, data + n, '\n')) / 2;
      return events < 3; // then the client closes the connection
    };
    auto c = client();
    auto r = c->send(req);
    EXPECT_FALSE(r); // cancelled by the receiver
    c.reset();
    expect_blocks_free();
    // The context (256) would take about 250 steps; the cancel comes a few tokens after the
    // close (a failed write or the closed socket).
    EXPECT_LT(engine_->stats().steps - steps0, 150) << (chat ? "chat" : "completions");
  }
  // Unstreamed: the handler sees the closed connection while waiting.
  {
    const int64_t steps0 = engine_->stats().steps;
    auto c = client();
    c->set_read_timeout(0, 30000); // gives up after 30 ms and closes
    auto r = c->Post("/v1/completions", json({{"prompt", "the people"}, {"max_tokens", 240}, {"ignore_eos", true}}).dump(),
                     "application/json");
    c.reset();
    expect_blocks_free();
    EXPECT_LT(engine_->stats().steps - steps0, 200);
  }
}

// Malformed requests get a 4xx with OpenAI's error body, and the server serves on.
TEST_F(ServeTest, MalformedRequestsGetErrors) {
  std::string huge;
  for (int i = 0; i < 3000; ++i) {
    huge += "word" + std::to_string(i) + " ";
  }
  struct Case {
    std::string path, body;
    int status;
    std::string param;
    std::string code = ""; // checked when set
  };
  const std::string C = "/v1/completions", K = "/v1/chat/completions";
  std::vector<Case> cases = {
      {C, "", 400, ""},
      {C, "{", 400, ""},
      {C, "[]", 400, ""},
      {C, "null", 400, ""},
      {C, "\"prompt\"", 400, ""},
      {C, "{\"prompt\": \"a\\ud800\"}", 400, ""},
      {C, "{\"prompt\": \"\xff\xfe\"}", 400, ""},
      {C, std::string(200, '[') + std::string(200, ']'), 400, ""},
      {C, "{}", 400, "prompt"},
      {C, R"({"prompt": 5})", 400, "prompt"},
      {C, R"({"prompt": {"a": 1}})", 400, "prompt"},
      {C, R"({"prompt": ""})", 400, "prompt"},
      {C, R"({"prompt": []})", 400, "prompt"},
      {C, R"({"prompt": ["a", "b"]})", 400, "prompt"},
      {C, R"({"prompt": [1, "b"]})", 400, "prompt"},
      {C, R"({"prompt": [1, 2.5]})", 400, "prompt"},
      {C, R"({"prompt": [999999]})", 400, "prompt"},
      {C, R"({"prompt": [-1]})", 400, "prompt"},
      {C, R"({"prompt": [18446744073709551615]})", 400, "prompt"},
      {C, R"({"prompt": "hi", "model": "gpt-4"})", 404, "model"},
      {C, json({{"prompt", huge}}).dump(), 400, "prompt", "context_length_exceeded"},
      {C, json({{"prompt", std::vector<int>(300, 5)}}).dump(), 400, "prompt", "context_length_exceeded"},
      {K, R"({"prompt": "hi"})", 400, "messages"},
      {K, R"({"messages": "hi"})", 400, "messages"},
      {K, R"({"messages": []})", 400, "messages"},
      {K, R"({"messages": [{"content": "x"}]})", 400, "messages"},
      {K, R"({"messages": [5]})", 400, "messages"},
      {K, R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages"},
      {K, R"({"messages": [{"role": "user"}]})", 400, "messages"},
      {K, R"({"messages": [{"role": "user", "content": null}]})", 400, "messages"},
      {K, R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400, "messages"},
      {K, R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 300})", 400,
       "max_completion_tokens", "context_length_exceeded"},
      {K, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400, "messages"},
      {K, R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 3})", 400,
       "chat_template_kwargs"},
      // The request's messages are the template's: kwargs may not replace them.
      {K, R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})", 400,
       "chat_template_kwargs"},
      // max_tokens is checked even when max_completion_tokens is what counts.
      {K, R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4, "max_tokens": "bad"})",
       400, "max_tokens"},
      {K, json({{"messages", {{{"role", "user"}, {"content", huge}}}}}).dump(), 400, "messages", "context_length_exceeded"},
  };
  // Parameters of the wrong type or out of range, beside a good prompt.
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad_values = {
      {"max_tokens", {"-1", "0", "2.5", R"("ten")", "1e300"}}, {"temperature", {"-1", R"("hot")"}},
      {"top_p", {"0", "1.5"}}, {"top_k", {"-2", "1.5"}}, {"min_p", {"2"}}, {"repetition_penalty", {"0"}},
      {"seed", {R"("x")"}}, {"stop", {"5", "[1]"}}, {"stream", {R"("yes")"}}, {"stream_options", {"1"}},
      {"n", {"2"}}, {"echo", {"true"}}, {"logprobs", {"3"}}, {"presence_penalty", {"1"}},
      {"logit_bias", {R"({"1": 5})"}}, {"model", {"7"}}, {"max_tokens", {"300", "2147483647"}},
      {"suffix", {R"("tail")"}}, {"tools", {R"([{"type": "function"}])"}}, {"functions", {R"([{}])"}},
      {"tool_choice", {R"("auto")"}}, {"response_format", {R"({"type": "json_object"})", R"("text")"}}};
  for (auto& [param, values] : bad_values) {
    for (auto& value : values) {
      // A max_tokens past the 256 of the context: refused as OpenAI and vLLM do.
      const bool past = param == "max_tokens" && (value == "300" || value == "2147483647");
      cases.push_back({C, R"({"prompt": "hi", ")" + param + "\": " + value + "}", 400, param,
                       past ? "context_length_exceeded" : ""});
    }
  }
  for (auto& c : cases) {
    auto r = post(c.path, c.body);
    ASSERT_TRUE(r) << c.body.substr(0, 200);
    EXPECT_EQ(r->status, c.status) << c.body.substr(0, 200) << " -> " << r->body;
    json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_EQ(e["error"]["param"], c.param.empty() ? json(nullptr) : json(c.param)) << c.body.substr(0, 200);
    if (!c.code.empty()) {
      EXPECT_EQ(e["error"]["code"], c.code) << c.body.substr(0, 200);
    }
  }
  // A body past max_body_bytes (1 MiB here) is refused (413), or the connection cut.
  auto big = post(C, std::string(2 << 20, ' '));
  if (big) {
    EXPECT_EQ(big->status, 413);
  }

  // Mutations of good bodies: each answered below 500 (a mutation may still be valid).
  std::mt19937 rng(7);
  const std::vector<std::string> good = {
      json({{"prompt", "the people"}, {"max_tokens", 3}, {"temperature", 0.5}, {"stop", {"x"}}}).dump(),
      json({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}}).dump()};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 300 && std::chrono::steady_clock::now() < deadline; ++i) {
    int which = i % 2;
    std::string body = good[which];
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      size_t at = rng() % body.size();
      switch (rng() % 4) {
        case 0: body[at] = char(rng() % 256); break;
        case 1: body.erase(at, 1 + rng() % 8); break;
        case 2: body.insert(at, std::string(1 + rng() % 4, "{}[]\",:0-e\\"[rng() % 11])); break;
        default: body.resize(at); break;
      }
    }
    auto r = post(which ? K : C, body);
    ASSERT_TRUE(r) << body;
    EXPECT_LT(r->status, 500) << body << " -> " << r->body;
    if (r->status >= 400) {
      json e = json::parse(r->body, nullptr, false);
      EXPECT_TRUE(e.is_object() && e.contains("error")) << r->body;
    }
  }
  // Still serving, and still right.
  std::vector<int> ids = tokenizer_->encode("the people", true);
  EXPECT_EQ(whole(C, {{"prompt", "the people"}, {"max_tokens", 10}, {"temperature", 0}})["choices"][0]["text"],
            reference(ids, 10).text);
  expect_blocks_free();
}

// The hybrid Qwen3-Next (Gated DeltaNet state rows) and GPT-OSS (sinks, sliding windows)
// served to 16 concurrent streaming clients: each gets generate()'s text, and every block
// and state row is free afterwards.
TEST(ServeArchitectures, HybridAndSlidingWindowModelsServeConcurrentStreams) {
  for (const char* arch : {"qwen3_next", "gpt_oss"}) {
    SCOPED_TRACE(arch);
    auto loaded = load(fixture(arch), float32);
    const Model& model = loaded.first;
    const Tokenizer& tokenizer = loaded.second;
    Engine engine(model);
    engine.start();
    ServeOptions o;
    o.port = 0;
    Server server(engine, tokenizer, o);
    const int port = server.start();
    constexpr int kClients = 16;
    std::vector<std::string> prompts, expected;
    std::vector<int> lengths;
    for (int i = 0; i < kClients; ++i) {
      prompts.push_back("client " + std::to_string(i) + (i % 3 ? " says hello to the people" : " of"));
      lengths.push_back(6 + (i * 7) % 19);
      GenerationOptions g;
      g.max_tokens = lengths[i];
      g.cuda_graphs = false;
      expected.push_back(generate(model, tokenizer, tokenizer.encode(prompts[i], true), g).text);
    }
    std::vector<Streamed> got(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        json body = {{"prompt", prompts[i]}, {"max_tokens", lengths[i]}, {"temperature", 0}, {"stream", true}};
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        if (r && r->status == 200) {
          got[i] = parse_events(r->body, false);
        } else {
          ADD_FAILURE() << "client " << i << ": " << (r ? "HTTP " + std::to_string(r->status) + " " + r->body
                                                          : "error " + httplib::to_string(r.error()));
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < kClients; ++i) {
      EXPECT_TRUE(got[i].done) << "client " << i;
      EXPECT_EQ(got[i].text, expected[i]) << "client " << i;
    }
    // /health counts the state rows (Qwen3-Next's 256 = max_running; none for GPT-OSS), all free.
    httplib::Client c("127.0.0.1", port);
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    const json health = json::parse(h->body);
    const int rows = std::string(arch) == "qwen3_next" ? 256 : 0;
    EXPECT_EQ(health["state_slots"], rows);
    EXPECT_EQ(health["free_state_slots"], rows);
    server.stop();
    engine.stop();
    EngineStats st = engine.stats();
    EXPECT_EQ(st.free_blocks, st.total_blocks);
    EXPECT_EQ(st.state_slots, rows);
    EXPECT_EQ(st.free_state_slots, rows);
    EXPECT_EQ(st.running, 0);
  }
}

TEST(ServeOptionsTest, BadOptionsThrow) {
  auto loaded = load(fixture("qwen3"), float32);
  Engine engine(loaded.first);
  ServeOptions o;
  o.threads = 0;
  EXPECT_THROW((Server{engine, loaded.second, o}), std::invalid_argument);
  o = ServeOptions();
  o.port = 70000;
  EXPECT_THROW((Server{engine, loaded.second, o}), std::invalid_argument);
  o = ServeOptions();
  o.model_name = "";
  EXPECT_THROW((Server{engine, loaded.second, o}), std::invalid_argument);
  const int context = loaded.first.config().max_position_embeddings;
  for (int len : {-1, context + 1}) {
    o = ServeOptions();
    o.max_model_len = len;
    EXPECT_THROW((Server{engine, loaded.second, o}), std::invalid_argument) << len;
  }
  // A KV pool that cannot hold one request of the whole context (8 blocks of 16 against 256
  // positions): the context offered is what one request can have of it (129 tokens: the last
  // is never fed back), so no admitted request is refused for room; a max_model_len asked
  // for beyond it is refused at the start, as vLLM does; a request past the context gets
  // context_length_exceeded.
  {
    EngineOptions small;
    small.num_blocks = 8;
    small.block_size = 16;
    Engine tight(loaded.first, small);
    ASSERT_LT(8 * 16, context - 1);
    o = ServeOptions();
    o.port = 0;
    o.max_model_len = 8 * 16 + 2;
    try {
      Server refused(tight, loaded.second, o);
      ADD_FAILURE() << "a max_model_len the pool cannot hold was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("KV pool"), std::string::npos) << e.what();
    }
    o.max_model_len = 0;
    tight.start();
    Server fits(tight, loaded.second, o);
    EXPECT_EQ(fits.context_length(), 8 * 16 + 1);
    httplib::Client c("127.0.0.1", fits.start());
    auto ok = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 4})", "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    auto past = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 200})", "application/json");
    ASSERT_TRUE(past);
    EXPECT_EQ(past->status, 400) << past->body;
    EXPECT_EQ(json::parse(past->body)["error"]["code"], "context_length_exceeded");
    // The whole offered context in one request: admitted and run (the pool holds it).
    auto whole = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 127, "ignore_eos": true})", "application/json");
    ASSERT_TRUE(whole);
    EXPECT_EQ(whole->status, 200) << whole->body;
    EXPECT_EQ(json::parse(whole->body)["usage"]["completion_tokens"], 127) << whole->body;
    fits.stop();
    tight.stop();
    o.max_model_len = 8 * 16 + 1;
    Server asked(tight, loaded.second, o);
    EXPECT_EQ(asked.context_length(), 8 * 16 + 1);
  }
  // A port already taken.
  o = ServeOptions();
  o.port = 0;
  Server a(engine, loaded.second, o);
  o.port = a.start();
  Server b(engine, loaded.second, o);
  EXPECT_THROW(b.start(), std::runtime_error);
  EXPECT_THROW(a.start(), std::logic_error);
}

} // namespace
