// nuvec::lm::ChatTemplate: Jinja chat templates of Hugging Face models. The expected outputs come
// from Python's jinja2 3.1 in transformers' environment (scripts/gen_chat_template_cases.py writes
// tests/data/chat_templates/cases.json for the real templates stored there, and snippets.json for
// one small template per engine construct); the rest checks errors, limits, loading from a model
// directory and apply_chat_template.
#include "nuvec/lm/chat_template.h"

#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using nuvec::lm::apply_chat_template;
using nuvec::lm::ChatTemplate;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

fs::path data_dir() { return fs::path(__FILE__).parent_path() / "data" / "chat_templates"; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The instant the generator fixed strftime_now to: 2025-03-14 09:26:53, local time.
std::chrono::system_clock::time_point fixed_now() {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 14;
  t.tm_hour = 9;
  t.tm_min = 26;
  t.tm_sec = 53;
  t.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&t));
}

ChatTemplate::Options fixed_clock() {
  ChatTemplate::Options o;
  o.clock = fixed_now;
  return o;
}

std::string render(const std::string& source, const ojson& context = ojson::object()) {
  return ChatTemplate(source, fixed_clock()).render(context);
}

// The what() of the std::invalid_argument that parsing `source` throws ("" if none).
std::string parse_error(const std::string& source) {
  try {
    ChatTemplate t(source);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The what() of the std::runtime_error that rendering throws ("" if none).
std::string render_error(const std::string& source, const ojson& context = ojson::object(),
                         ChatTemplate::Options options = {}) {
  try {
    ChatTemplate(source, std::move(options)).render(context);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// One generated case: a template (file name or inline text), its context, and the expected
// output, raise_exception message or jinja2 error ("ClassName: message").
struct Case {
  std::string label, template_name, source;
  ojson context, expected;
};

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// The entries of `key` in tests/data/chat_templates/`file`; real-template cases name a stored
// template file, snippets carry their template text.
std::vector<Case> load(const char* file, const char* key) {
  std::vector<Case> out;
  const fs::path path = data_dir() / file;
  if (!fs::exists(path)) return out;
  const ojson doc = ojson::parse(read_text(path));
  for (const auto& c : doc[key]) {
    Case k;
    k.context = c["context"];
    k.expected = c.contains("expected") ? ojson{{"output", c["expected"]}}
                 : c.contains("raised") ? ojson{{"raised", c["raised"]}}
                                        : ojson{{"error", c["error"]}};
    const std::string name = c["name"].get<std::string>();
    const std::string tmpl = c["template"].get<std::string>();
    if (std::string(key) == "cases") {
      k.template_name = tmpl;
      k.label = sanitize(tmpl.substr(0, tmpl.rfind('.')) + "__" + name);
    } else {
      k.source = tmpl;
      k.label = sanitize(name);
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<Case> load_cases() { return load("cases.json", "cases"); }
std::vector<Case> load_snippets() { return load("snippets.json", "snippets"); }

const ChatTemplate& stored_template(const std::string& name) {
  static std::map<std::string, ChatTemplate> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, ChatTemplate(read_text(data_dir() / name), fixed_clock())).first;
  return it->second;
}

void check_case(const ChatTemplate& t, const Case& c) {
  if (c.expected.contains("output")) {
    EXPECT_EQ(t.render(c.context), c.expected["output"].get<std::string>());
  } else if (c.expected.contains("raised")) {
    // raise_exception(message): a std::runtime_error whose what() is the message.
    try {
      t.render(c.context);
      ADD_FAILURE() << "expected raise_exception(" << c.expected["raised"] << ")";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), c.expected["raised"].get<std::string>());
    }
  } else {
    // jinja2 raised "Class: message"; ours names the same Python exception class.
    const std::string want = c.expected["error"].get<std::string>();
    const std::string cls = want.substr(0, want.find(':'));
    try {
      t.render(c.context);
      ADD_FAILURE() << "expected " << want;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(cls + ":"), std::string::npos) << e.what() << "\njinja2: " << want;
    }
  }
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class RealTemplates : public ::testing::TestWithParam<Case> {};
class Constructs : public ::testing::TestWithParam<Case> {};

auto case_name = [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; };

} // namespace

// ---- against jinja2 -------------------------------------------------------------------------

TEST_P(RealTemplates, MatchesJinja2) { check_case(stored_template(GetParam().template_name), GetParam()); }
INSTANTIATE_TEST_SUITE_P(ChatTemplate, RealTemplates, ::testing::ValuesIn(load_cases()), case_name);

TEST_P(Constructs, MatchesJinja2) { check_case(ChatTemplate(GetParam().source, fixed_clock()), GetParam()); }
INSTANTIATE_TEST_SUITE_P(ChatTemplate, Constructs, ::testing::ValuesIn(load_snippets()), case_name);

TEST(ChatTemplate, GeneratedDataIsPresent) {
  EXPECT_GE(load_cases().size(), 80u) << "run scripts/gen_chat_template_cases.py";
  EXPECT_GE(load_snippets().size(), 50u);
  for (const char* name : {"meta-llama-Llama-3.3-70B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
                           "Qwen-Qwen3-0.6B.jinja", "unsloth-qwen3-instruct-2507.jinja",
                           "unsloth-qwen3-thinking-2507.jinja", "openai-gpt-oss-120b.jinja"})
    EXPECT_TRUE(fs::exists(data_dir() / name)) << name;
}

// ---- parse errors ---------------------------------------------------------------------------

TEST(ChatTemplate, ParseErrorsNameTheLine) {
  auto expect_parse_error = [](const std::string& source, const std::string& line, const std::string& fragment) {
    const std::string what = parse_error(source);
    EXPECT_NE(what.find("[lm.ChatTemplate] line " + line + ":"), std::string::npos) << source << " -> " << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << source << " -> " << what;
  };
  expect_parse_error("a\n{{ x | nosuchfilter }}", "2", "no filter named 'nosuchfilter'");
  expect_parse_error("{% if x is nosuchtest %}{% endif %}", "1", "no test named 'nosuchtest'");
  expect_parse_error("line 1\n{% for m in messages %}\n{{ m }}\n", "2", "'for' block");
  expect_parse_error("{% if a %}\n{% for b in c %}\n{% endif %}", "3", "unknown tag 'endif'");
  expect_parse_error("x\n\n{% if true %}never closed", "3", "'if' block");
  expect_parse_error("{% macro m() %}", "1", "'macro' block");
  expect_parse_error("{{ 1 +  }}", "1", "unexpected");
  expect_parse_error("\n{{ (1, 2 }}", "2", "unexpected '}'");
  expect_parse_error("{{ 'unterminated }}", "1", "unterminated string");
  expect_parse_error("{{ a b }}", "1", "unexpected 'b'");
  expect_parse_error("{% include 'x.jinja' %}", "1", "not supported");
  expect_parse_error("{% frobnicate %}", "1", "unknown tag 'frobnicate'");
  expect_parse_error("{% break %}", "1", "outside of a for loop");
  expect_parse_error("{# never closed", "1", "missing end of comment");
  expect_parse_error("ok\n{{ value", "2", "unexpected end of template");
  expect_parse_error("{{ x ! y }}", "1", "unexpected char '!'");
  expect_parse_error("{% for x in y recursive %}{% endfor %}", "1", "recursive");
}

TEST(ChatTemplate, RenderErrorsNameTheLine) {
  const std::string what = render_error("one\ntwo\n{{ missing.attr }}");
  EXPECT_NE(what.find("[lm.ChatTemplate] line 3: UndefinedError: 'missing' is undefined"), std::string::npos) << what;
  EXPECT_NE(render_error("{{ 1 + 'a' }}").find("TypeError"), std::string::npos);
  EXPECT_THROW(ChatTemplate("x").render(ojson::array()), std::invalid_argument);
}

TEST(ChatTemplate, RaiseExceptionMessageIsExact) {
  EXPECT_EQ(render_error("{% if messages|length == 0 %}{{ raise_exception('no messages!') }}{% endif %}",
                         {{"messages", ojson::array()}}),
            "no messages!");
}

// ---- limits ---------------------------------------------------------------------------------

TEST(ChatTemplate, DeepNestingIsRejectedNotACrash) {
  const int n = 100000;
  EXPECT_NE(parse_error("{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(parse_error("{{ " + std::string(n, '[') + std::string(n, ']') + " }}").find("nested too deeply"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
  EXPECT_NE(parse_error(blocks).find("nested too deeply"), std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < n; ++i) nots += "not ";
  EXPECT_NE(parse_error(nots + "x }}").find("nested too deeply"), std::string::npos);
  std::string negs = "{{ ";
  for (int i = 0; i < n; ++i) negs += "-";
  EXPECT_NE(parse_error(negs + "1 }}").find("nested too deeply"), std::string::npos);
  // Nesting within the limit parses and renders.
  const std::string text = std::string(200, '(') + "1" + std::string(200, ')');
  EXPECT_EQ(render(text), text);  // plain text
  EXPECT_EQ(render("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}"), "1");
}

TEST(ChatTemplate, DeepValuesAreRefusedNotACrash) {
  // A template can nest values without limit through a namespace; jinja2 fails with
  // RecursionError when printing them, we when building them (printing, comparing and freeing
  // such values would overflow the C++ stack).
  const std::string what = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  EXPECT_NE(what.find("RecursionError"), std::string::npos) << what;
  EXPECT_NE(render_error("{% set ns = namespace(x=none) %}{% for i in range(100000) %}"
                         "{% set ns.x = namespace(y=ns.x) %}{% endfor %}")
                .find("RecursionError"),
            std::string::npos);
  // 100 levels are fine.
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(99) %}{% set ns.x = [ns.x] %}{% endfor %}"
                   "{{ ns.x|tojson|length }}"),
            "200");
  // A namespace holding itself prints as Python's reprlib prints it.
  EXPECT_EQ(render("{% set ns = namespace(x=none) %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'x': None, 'me': <Namespace {...}>}>");
  // So does a context nested deeper than the limit.
  ojson deep = ojson::array();
  for (int i = 0; i < 2000; ++i) deep = ojson::array({std::move(deep)});
  EXPECT_THROW(ChatTemplate("{{ x|length }}").render({{"x", deep}}), std::invalid_argument);
}

TEST(ChatTemplate, RunawayRecursionThrows) {
  const std::string what = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(what.find("RecursionError"), std::string::npos) << what;
  ChatTemplate::Options shallow;
  shallow.max_call_depth = 5;
  const std::string src = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(N) }}";
  EXPECT_EQ(ChatTemplate(src, shallow).render({{"N", 4}}), "01234");
  EXPECT_NE(render_error(src, {{"N", 5}}, shallow).find("RecursionError"), std::string::npos);
}

TEST(ChatTemplate, RunawayLoopsThrow) {
  ChatTemplate::Options o;
  o.max_iterations = 100000;
  const std::string what =
      render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ojson::object(), o);
  EXPECT_NE(what.find("max_iterations"), std::string::npos) << what;
  // The default budget stops the same template too (10 million steps), in well under a minute.
  EXPECT_NE(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
                .find("max_iterations"),
            std::string::npos);
}

// ---- clock, model directories, apply_chat_template -----------------------------------------

TEST(ChatTemplate, ClockIsInjectable) {
  ChatTemplate::Options o;
  o.clock = [] { return fixed_now() + std::chrono::hours(24 * 365); };
  EXPECT_EQ(ChatTemplate("{{ strftime_now('%Y-%m-%d') }}", o).render(ojson::object()), "2026-03-14");
  // Without a clock, strftime_now reads the system clock.
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char year[8];
  std::strftime(year, sizeof year, "%Y", &local);
  EXPECT_EQ(ChatTemplate("{{ strftime_now('%Y') }}").render(ojson::object()), year);
}

TEST(ChatTemplate, ApplyChatTemplateBuildsTransformersContext) {
  const ChatTemplate t(read_text(data_dir() / "Qwen-Qwen3-0.6B.jinja"));
  const ojson messages = {{{"role", "user"}, {"content", "Hi"}}};
  EXPECT_EQ(apply_chat_template(t, messages, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(t, messages, true, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(apply_chat_template(t, messages, false), "<|im_start|>user\nHi<|im_end|>\n");
  // tools and documents are always defined (None unless given), as in transformers.
  const ChatTemplate probe("{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}");
  EXPECT_EQ(apply_chat_template(probe, ojson::array(), false), "True True True False");
  EXPECT_EQ(apply_chat_template(probe, ojson::array(), true, {{"tools", ojson::array({1})}}), "True False True True");
  EXPECT_THROW(apply_chat_template(probe, ojson::object(), true), std::invalid_argument);
  EXPECT_THROW(apply_chat_template(probe, ojson::array(), true, ojson::array()), std::invalid_argument);
}

TEST(ChatTemplate, MatchesGeneratedCaseThroughApplyChatTemplate) {
  // The generated context is exactly apply_chat_template's: rebuild it from its parts.
  for (const Case& c : load_cases()) {
    if (c.template_name != "meta-llama-Llama-3.2-3B-Instruct.jinja" || !c.expected.contains("output")) continue;
    const ChatTemplate t(read_text(data_dir() / c.template_name), fixed_clock());
    ojson extra = ojson::object();
    for (const auto& [k, v] : c.context.items())
      if (k != "messages" && k != "add_generation_prompt") extra[k] = v;
    SCOPED_TRACE(c.label);
    EXPECT_EQ(apply_chat_template(t, c.context["messages"], c.context["add_generation_prompt"].get<bool>(), extra),
              c.expected["output"].get<std::string>());
  }
}

TEST(ChatTemplate, FromTokenizerConfig) {
  const fs::path dir = fs::temp_directory_path() / ("nuvec_chat_template_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string llama = read_text(data_dir() / "meta-llama-Llama-3.3-70B-Instruct.jinja");
  {
    ojson config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<|begin_of_text|>"}, {"lstrip", false}}},
                    {"eos_token", "<|eot_id|>"},
                    {"pad_token", nullptr},
                    {"chat_template", llama}};
    std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  }
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(dir.string(), fixed_clock());
  EXPECT_EQ(t.source(), llama);
  EXPECT_EQ(t.special_tokens(), (ojson{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}));
  const ojson messages = {{{"role", "user"}, {"content", "Hello"}}};
  EXPECT_EQ(apply_chat_template(t, messages, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // chat_template.jinja takes precedence over tokenizer_config.json's template.
  std::ofstream(dir / "chat_template.jinja") << "{{ bos_token }}[{{ messages[0].content }}]";
  EXPECT_EQ(apply_chat_template(ChatTemplate::from_tokenizer_config(dir.string()), messages, false),
            "<|begin_of_text|>[Hello]");
  fs::remove(dir / "chat_template.jinja");
  // Named templates: "default" is used.
  {
    ojson config = {{"chat_template", ojson::array({{{"name", "tool_use"}, {"template", "T"}},
                                                    {{"name", "default"}, {"template", "D"}}})}};
    std::ofstream(dir / "tokenizer_config.json") << config.dump();
  }
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(dir.string()).render(ojson::object()), "D");
  {
    std::ofstream(dir / "tokenizer_config.json") << "{\"eos_token\": \"x\"}";
  }
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(dir.string()), std::runtime_error);
  {
    std::ofstream(dir / "tokenizer_config.json") << "{not json";
  }
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(dir.string()), std::runtime_error);
  fs::remove_all(dir);
}

TEST(ChatTemplate, KeyOrderIsKept) {
  // Python dicts keep insertion order and transformers' tojson does not sort: neither do we.
  const ojson ctx = ojson::parse(R"({"tool": {"name": "f", "description": "d", "parameters": {"b": 1, "a": 2}}})");
  EXPECT_EQ(render("{{ tool|tojson }}|{% for k in tool.parameters %}{{ k }}{% endfor %}", ctx),
            R"({"name": "f", "description": "d", "parameters": {"b": 1, "a": 2}}|ba)");
  // An nlohmann::json context converts implicitly (its keys are sorted).
  const nlohmann::json sorted = {{"x", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(ChatTemplate("{{ x|tojson }}").render(sorted), R"({"a": 2, "b": 1})");
}

TEST(ChatTemplate, RendersConcurrently) {
  const ChatTemplate& t = stored_template("openai-gpt-oss-120b.jinja");
  const std::vector<Case> cases = load_cases();
  std::vector<const Case*> gptoss;
  for (const Case& c : cases)
    if (c.template_name == "openai-gpt-oss-120b.jinja" && c.expected.contains("output")) gptoss.push_back(&c);
  ASSERT_FALSE(gptoss.empty());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 5; ++rep)
        for (const Case* c : gptoss)
          if (t.render(c->context) != c->expected["output"].get<std::string>()) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}
