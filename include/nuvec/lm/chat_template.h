// Chat templates of Hugging Face models: the Jinja2 template of tokenizer_config.json's
// "chat_template" (or of chat_template.jinja) rendered as transformers'
// PreTrainedTokenizerBase.apply_chat_template renders it.
//
// The environment is transformers' (utils/chat_template_utils.py, _cached_compile_jinja_template):
// jinja2 3.1's ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True and the
// loopcontrols extension, jinja2's default Undefined, transformers' tojson (json.dumps with
// ensure_ascii=False, sort_keys=False), raise_exception and strftime_now. Checked against Python's
// jinja2 3.1 on Llama 3.1/3.2/3.3, Qwen3, Qwen3-Next (2507) and gpt-oss templates
// (tests/data/chat_templates/, scripts/gen_chat_template_cases.py).
//
// Supported Jinja: {{ }}, {% %}, {# #}, whitespace control (-, +), {% raw %}; if/elif/else;
// for (tuple targets, an `if` filter, else, loop.index/index0/revindex/revindex0/first/last/
// length/previtem/nextitem/depth/cycle, break, continue); set (names, tuples, namespace
// attributes, block set with filters); macro (defaults, varargs, kwargs, caller) and call;
// filter blocks; with; transformers' {% generation %}. Expressions: literals (str with Python
// escapes, int, float, list, dict, tuple as list), attribute/item access, slicing, calls,
// filters, tests, arithmetic, ~, comparisons (chained), in/not in, and/or/not, x if c else y.
// Filters: abs attr batch capitalize center count d default dictsort e escape first float
// forceescape format indent int items join last length list lower map max min pprint reject
// rejectattr replace reverse round safe select selectattr sort string sum title tojson trim
// truncate unique upper wordcount. Tests: defined undefined none boolean true false integer float
// number string mapping sequence iterable callable sameas escaped in eq/equalto/== ne/!= lt/< le/<=
// gt/> ge/>= lower upper odd even divisibleby filter test. Methods: str strip/lstrip/rstrip/split/
// rsplit/splitlines/startswith/endswith/replace/upper/lower/title/capitalize/find/rfind/index/
// rindex/count/join/is*/center/ljust/rjust/zfill/removeprefix/removesuffix/partition/
// rpartition/format ({} fields only); dict get/keys/values/items/copy; list index/count.
// Globals: range (at most 100000 items, as the sandbox), dict, namespace, raise_exception,
// strftime_now.
// Not supported (a template using them is rejected when parsed): include, import, extends, block,
// recursive loops, *args/**kwargs in calls, tuple subscripts, the filters groupby, slice,
// striptags, urlize, urlencode, wordwrap, xmlattr, filesizeformat, random. Values differ from
// Python only in ways chat templates do not observe: tuples are lists, dict keys are strings,
// dict.keys()/values()/items() and range() print as lists, ints are 64-bit (overflow throws).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace nuvec::lm {

// Limits and the clock of a ChatTemplate (ChatTemplate::Options).
struct ChatTemplateOptions {
  // Parsing: nesting depth of blocks ({% if %} in {% for %} ...) and of expressions (each
  // parenthesis, bracket, brace, call argument list, `not` or unary minus opens a level).
  int max_nesting = 256;
  // Rendering: nesting of macro calls (recursion such as gpt-oss's render_typescript_type).
  int max_call_depth = 128;
  // Rendering: loop iterations plus macro calls in one render.
  std::int64_t max_iterations = 10'000'000;
  // strftime_now's clock (local time of the returned instant); std::chrono::system_clock::now
  // when empty. Set it for reproducible output of templates that print the date.
  std::function<std::chrono::system_clock::time_point()> clock;
};

// A parsed chat template. Immutable after construction: render() may be called from several
// threads at once, and copies share the parsed tree.
class ChatTemplate {
 public:
  using Options = ChatTemplateOptions;


  // Parses `source` once; render() then walks the tree.
  // Throws std::invalid_argument ("[lm.ChatTemplate] line N: ...") for a syntax error, an unknown
  // or unsupported tag, filter or test, an unclosed block (N is the line that opened it) or
  // nesting deeper than options.max_nesting.
  explicit ChatTemplate(std::string source, Options options = {});

  // Loads the template of a Hugging Face model directory: chat_template.jinja when present,
  // else tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"}
  // from which "default" is taken), else chat_template.json's. bos_token, eos_token, pad_token
  // and unk_token of tokenizer_config.json (strings or {"content": ...} objects) are kept for
  // apply_chat_template.
  // Throws std::runtime_error when no template is found or a file cannot be read or parsed as
  // JSON, and what the constructor throws.
  static ChatTemplate from_tokenizer_config(const std::string& model_dir, Options options = {});

  // Renders the template with the keys of `context` (a JSON object) as its variables. Keys keep
  // their order in an ordered_json (as Python dicts do, which tojson shows); an nlohmann::json
  // converts implicitly, with its keys sorted.
  // Throws std::invalid_argument when `context` is not an object; std::runtime_error whose
  // what() is exactly the message for the template's raise_exception(message); and
  // std::runtime_error ("[lm.ChatTemplate] line N: TypeError: ...") for errors jinja2 would raise
  // at render time (using an undefined value, unsupported operand types, exceeding max_call_depth
  // or max_iterations, ...).
  std::string render(const nlohmann::ordered_json& context) const;

  // The template text.
  const std::string& source() const;

  // The special tokens read by from_tokenizer_config (e.g. {"bos_token": "<|begin_of_text|>"});
  // an empty object for a template built from a string.
  const nlohmann::ordered_json& special_tokens() const;

  struct Impl;

 private:
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The prompt of a conversation, as transformers' apply_chat_template(messages, tokenize=False,
// add_generation_prompt=..., tools=..., **kwargs): the context holds `messages`, `tools` (null
// unless `extra` has "tools"), `documents` (null unless given), `add_generation_prompt`, the
// template's special tokens, then every key of `extra` (e.g. {"enable_thinking": false},
// {"reasoning_effort": "high"}, {"date_string": "26 Jul 2024"}), which overrides those before it.
// Throws std::invalid_argument when `messages` is not an array or `extra` not an object (or
// null), and what ChatTemplate::render throws.
std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt);
std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                bool add_generation_prompt, const nlohmann::ordered_json& extra);

} // namespace nuvec::lm
