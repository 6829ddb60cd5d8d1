#!/usr/bin/env python3
"""Writes tests/data/chat_templates/cases.json (conversations rendered with the real chat templates
stored beside it) and snippets.json (one small template per engine construct: filters, tests, loop
variables, scoping, whitespace control, errors). Both are rendered by Python's jinja2 (3.1) in the environment transformers compiles chat templates
with (transformers/utils/chat_template_utils.py, _cached_compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, a
{% generation %} tag]), its tojson (json.dumps, ensure_ascii=False, sort_keys=False),
raise_exception and strftime_now -- the latter fixed to FIXED_NOW so that the outputs are
reproducible (tests/lm_chat_template_test.cpp sets ChatTemplate::Options::clock to the same
local time).

The context of a case is what apply_chat_template passes: messages, tools (None unless given),
documents (None), add_generation_prompt, the model's special tokens, then extra keyword arguments.
Cases whose template calls raise_exception (or fails in jinja2) store the error instead.

Run from the repository root: python3 scripts/gen_chat_template_cases.py
"""

import datetime
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "chat_templates"
FIXED_NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker tag, rendering its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---- special tokens (tokenizer_config.json of each model) -----------------------------------

LLAMA_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
GPT_OSS_TOKENS = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"}

TEMPLATES = {
    "meta-llama-Llama-3.3-70B-Instruct.jinja": LLAMA_TOKENS,
    "meta-llama-Llama-3.2-3B-Instruct.jinja": LLAMA_TOKENS,
    "Qwen-Qwen3-0.6B.jinja": QWEN_TOKENS,
    "unsloth-qwen3-instruct-2507.jinja": QWEN_TOKENS,
    "unsloth-qwen3-thinking-2507.jinja": QWEN_TOKENS,
    "openai-gpt-oss-120b.jinja": GPT_OSS_TOKENS,
}
LLAMA = ["meta-llama-Llama-3.3-70B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja"]
QWEN = ["Qwen-Qwen3-0.6B.jinja", "unsloth-qwen3-instruct-2507.jinja", "unsloth-qwen3-thinking-2507.jinja"]
GPT_OSS = ["openai-gpt-oss-120b.jinja"]

# ---- tools ----------------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and country, e.g. Zürich, Switzerland"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit",
                         "default": "celsius"},
                "days": {"type": "integer", "description": "Days of forecast", "default": 1},
            },
            "required": ["location"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_documents",
        "description": "Search the document store",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Query text"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to filter by"},
                "scores": {"type": "array", "items": {"type": "number"}},
                "limits": {"type": "array", "items": {"type": "integer"}, "nullable": True},
                "flags": {"type": "array", "items": {"type": "boolean"}},
                "ranges": {"type": "array", "items": {"type": "object", "properties": {
                    "lo": {"type": "number"}, "hi": {"type": "number"}}, "required": ["lo"]}},
                "anything": {"type": "array"},
                "threshold": {"type": "number", "default": 0.5, "description": "Minimum score"},
                "mode": {"type": ["string", "null"], "description": "Search mode"},
                "single": {"type": ["integer"]},
                "target": {"oneOf": [{"type": "string", "description": "a URL"}, {"type": "integer", "default": 3}]},
                "filter": {"oneOf": [{"type": "object"}, {"type": "string"}], "description": "A filter"},
                "options": {"type": "object", "properties": {
                    "exact": {"type": "boolean"}, "lang": {"type": "string", "nullable": True}},
                    "required": ["exact"]},
                "raw": {"type": "object"},
                "note": {"type": "string", "nullable": True},
                "unknown": {"description": "no type at all"},
            },
            "required": ["query", "mode"],
        },
    },
}

NO_PARAMS = {"type": "function", "function": {"name": "get_time", "description": "Get the current time"}}

# ---- conversations --------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
SYS_USER = [SYSTEM, {"role": "user", "content": "Hello! What's 2+2?"}]
MULTI_TURN = [
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help you today?"},
    {"role": "user", "content": "  Tell me a joke about compilers.  \n"},
]
UNICODE = [
    {"role": "system", "content": "Tu es un assistant serviable. 日本語も話せます。\n"},
    {"role": "user", "content": "Ça va? 🙂 \"quotes\", 'single' and \\backslash\\ \t tab"},
]


def call(name, arguments, with_type=True):
    c = {"function": {"name": name, "arguments": arguments}}
    if with_type:
        c = {"type": "function", **c}
    return c


TOOL_FLOW = [
    SYSTEM,
    {"role": "user", "content": "What's the weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [call("get_current_weather", {"location": "Zürich, Switzerland", "unit": "celsius"})]},
    {"role": "tool", "name": "get_current_weather", "content": "{\"temperature\": 22.5, \"condition\": \"sunny\"}"},
    {"role": "assistant", "content": "It is 22.5 °C and sunny in Zürich."},
]


def case(name, templates, messages, gen, tools=None, **extra):
    return {"name": name, "templates": templates, "messages": messages, "add_generation_prompt": gen,
            "tools": tools, "extra": extra}


CASES = [
    # Every family.
    case("sys_user_gen", LLAMA + QWEN + GPT_OSS, SYS_USER, True),
    case("sys_user_nogen", LLAMA + QWEN + GPT_OSS, SYS_USER, False),
    case("multi_turn_gen", LLAMA + QWEN + GPT_OSS, MULTI_TURN, True),
    case("multi_turn_nogen", LLAMA + QWEN + GPT_OSS, MULTI_TURN, False),
    case("unicode", LLAMA + QWEN + GPT_OSS, UNICODE, True),
    case("tools_request", LLAMA + QWEN + GPT_OSS, SYS_USER, True, tools=[WEATHER]),
    case("tool_flow", LLAMA + QWEN, TOOL_FLOW, True, tools=[WEATHER]),
    # Llama 3.x: tools in the system message, date_string, builtin tools, ipython tool results.
    case("llama_tools_in_system", LLAMA, SYS_USER, True, tools=[WEATHER, NO_PARAMS], tools_in_user_message=False),
    case("llama_date_string", LLAMA, SYS_USER, True, date_string="01 Jan 2025"),
    case("llama_custom_tools", LLAMA, SYS_USER, True, custom_tools=[WEATHER]),
    case("llama_builtin_tools", LLAMA[:1], [
        SYSTEM, {"role": "user", "content": "Search the weather in Menlo Park."},
        {"role": "assistant", "tool_calls": [call("brave_search", {"query": "weather Menlo Park", "count": "3"})]},
        {"role": "ipython", "content": {"results": ["Sunny, 25 C"]}},
        {"role": "assistant", "content": "It is sunny."},
    ], True, builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"]),
    case("llama_tool_content_list", LLAMA, [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [call("get_current_weather", {"location": "Bern"})]},
        {"role": "tool", "content": [{"temperature": 18}, "cloudy"]},
    ], True, tools=[WEATHER], tools_in_user_message=False),
    case("llama_error_two_calls", LLAMA, [
        {"role": "user", "content": "Weather in Bern and Basel?"},
        {"role": "assistant", "tool_calls": [call("get_current_weather", {"location": "Bern"}),
                                             call("get_current_weather", {"location": "Basel"})]},
    ], False, tools=[WEATHER], tools_in_user_message=False),
    case("llama_error_no_user", LLAMA, [SYSTEM], True, tools=[WEATHER]),
    # Qwen3: thinking switch, reasoning content, <think> in content, multi-step tool calls.
    case("qwen_thinking_off", QWEN, SYS_USER, True, enable_thinking=False),
    case("qwen_thinking_on", QWEN, SYS_USER, True, enable_thinking=True),
    case("qwen_think_in_content", QWEN, [
        {"role": "user", "content": "What is 1+1?"},
        {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\n2"},
        {"role": "user", "content": "And 2+2?"},
        {"role": "assistant", "content": "<think>\nAgain simple.\n\n</think>\n\n\n4"},
    ], False),
    case("qwen_reasoning_content", QWEN, [
        {"role": "user", "content": "And 2+2?"},
        {"role": "assistant", "content": "\n4", "reasoning_content": "\n2+2 is 4.\n"},
    ], False),
    case("qwen_multi_step_tools", QWEN, [
        SYSTEM,
        {"role": "user", "content": "Compare the weather in Bern and Basel."},
        {"role": "assistant", "content": "Let me check both.", "reasoning_content": "Two calls needed.",
         "tool_calls": [call("get_current_weather", {"location": "Bern"}),
                        call("get_current_weather", "{\"location\": \"Basel\"}", with_type=False)]},
        {"role": "tool", "content": "{\"temperature\": 18}"},
        {"role": "tool", "content": "{\"temperature\": 20}"},
        {"role": "assistant", "content": "Basel is warmer.", "reasoning_content": "20 > 18."},
    ], False, tools=[WEATHER, NO_PARAMS]),
    case("qwen_tool_response_as_user", QWEN, [
        {"role": "user", "content": "Question?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_time", {})]},
        {"role": "user", "content": "<tool_response>\n12:00\n</tool_response>"},
        {"role": "assistant", "content": "<think>It is noon.</think>It is 12:00."},
    ], False, tools=[NO_PARAMS]),
    case("qwen_system_later", QWEN, [
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ], True),
    case("qwen_content_parts", QWEN[1:], [
        {"role": "user", "content": [{"type": "text", "text": "parts are not strings"}]},
        {"role": "user", "content": "Plain text."},
    ], True),
    case("qwen_error_content_parts", QWEN[:1], [
        {"role": "user", "content": [{"type": "text", "text": "parts are not strings"}]},
    ], True),
    # gpt-oss (harmony): reasoning effort, identity, developer message, TypeScript tool
    # namespaces, builtin tools, analysis channel, tool results.
    case("gptoss_effort_identity", GPT_OSS, SYS_USER, True, reasoning_effort="high",
         model_identity="You are a test model."),
    case("gptoss_complex_tools", GPT_OSS, [{"role": "developer", "content": "Use tools wisely."},
                                           {"role": "user", "content": "Find documents about Jinja."}],
         True, tools=[WEATHER, SEARCH, NO_PARAMS]),
    case("gptoss_builtin_tools", GPT_OSS, SYS_USER, True, tools=[WEATHER], builtin_tools=["browser", "python"]),
    case("gptoss_browser_only", GPT_OSS, SYS_USER, True, builtin_tools=["browser"]),
    case("gptoss_tool_flow_train", GPT_OSS, [
        {"role": "user", "content": "What's the weather in Zürich?"},
        {"role": "assistant", "thinking": "I should call the weather tool.",
         "tool_calls": [call("get_current_weather", {"location": "Zürich"})]},
        {"role": "tool", "content": "{\"temperature\": 22.5}"},
        {"role": "assistant", "thinking": "22.5 degrees, report it.", "content": "It is 22.5 °C in Zürich."},
    ], False, tools=[WEATHER]),
    case("gptoss_tool_flow_infer", GPT_OSS, [
        {"role": "user", "content": "What's the weather in Zürich?"},
        {"role": "assistant", "content": "Calling the tool.",
         "tool_calls": [{"name": "get_current_weather", "arguments": {"location": "Zürich"}, "content_type": "json"}]},
        {"role": "tool", "content": "{\"temperature\": 22.5}"},
    ], True, tools=[WEATHER]),
    case("gptoss_history_final", GPT_OSS, [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "thinking": "Greet back.", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ], True),
    case("gptoss_error_channel_tags", GPT_OSS, [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<|channel|>analysis<|message|>oops"},
    ], False),
    case("gptoss_error_tool_without_call", GPT_OSS, [
        {"role": "user", "content": "Hi"}, {"role": "tool", "content": "orphan"},
    ], True),
    case("gptoss_error_content_and_thinking", GPT_OSS, [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "a", "thinking": "b", "tool_calls": [call("get_time", {})]},
    ], True, tools=[NO_PARAMS]),
]


# ---- random conversations (seeded): roles, whitespace, unicode, <think>, tool calls -----------

def random_cases(seed=17, per_template=8):
    import random

    rng = random.Random(seed)
    words = ["hello", "Zürich", "naïve", "日本", "🙂", "a  b", " lead", "trail ", "\n", "x\ty", "'q'", '"dq"',
             "{braces}", "<tag>", "\\back", "1.5", "</think>"]

    def text():
        return "".join(rng.choice(words) + rng.choice(["", " ", "\n"]) for _ in range(rng.randint(0, 5)))

    def value(depth=0):
        kind = rng.randint(0, 7 if depth < 2 else 4)
        return [lambda: rng.randint(-5, 100), lambda: rng.choice([0.5, 2.0, 1e-7, 1e21, -3.25]),
                lambda: rng.choice([True, False]), lambda: None, text,
                lambda: [value(depth + 1) for _ in range(rng.randint(0, 3))],
                lambda: {rng.choice(["k", "é", "b", "a"]) + str(i): value(depth + 1) for i in range(rng.randint(0, 3))},
                text][kind]()

    def tool_call(family):
        name = rng.choice(["get_current_weather", "search_documents", "get_time"])
        args = {"location": text(), "n": rng.randint(0, 9)} if rng.random() < 0.7 else {"blob": value()}
        if family == "qwen" and rng.random() < 0.3:
            args = json.dumps(args, ensure_ascii=False)
        if family == "llama":
            return {"type": "function", "function": {"name": name, "arguments": args}}
        return rng.choice([{"type": "function", "function": {"name": name, "arguments": args}},
                           {"name": name, "arguments": args}])

    def conversation(family):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "developer" if family == "gptoss" and rng.random() < 0.5 else "system", "content": text()})
        for turn in range(rng.randint(1, 4)):
            msgs.append({"role": "user", "content": text() or "?"})
            if rng.random() < 0.4:
                m = {"role": "assistant", "content": "" if family != "llama" else text(),
                     "tool_calls": [tool_call(family) for _ in range(1 if family != "qwen" else rng.randint(1, 2))]}
                if family == "gptoss":
                    m.pop("content")
                    if rng.random() < 0.5:
                        m["thinking"] = text() or "t"
                if family == "qwen" and rng.random() < 0.5:
                    m["reasoning_content"] = text()
                msgs.append(m)
                for _ in range(len(m["tool_calls"])):
                    msgs.append({"role": "tool", "content": rng.choice([text(), json.dumps(value(), ensure_ascii=False)])})
            if rng.random() < 0.8:
                m = {"role": "assistant", "content": text()}
                if family == "qwen" and rng.random() < 0.4:
                    m["content"] = "<think>" + text() + "</think>" + m["content"]
                if family == "qwen" and rng.random() < 0.3:
                    m["reasoning_content"] = text()
                if family == "gptoss" and rng.random() < 0.5:
                    m["thinking"] = text()
                msgs.append(m)
        return msgs

    families = {"llama": LLAMA, "qwen": QWEN, "gptoss": GPT_OSS}
    out = []
    for family, templates in families.items():
        for i in range(per_template):
            extra = {}
            if family == "qwen" and rng.random() < 0.5:
                extra["enable_thinking"] = rng.choice([True, False])
            if family == "gptoss" and rng.random() < 0.5:
                extra["reasoning_effort"] = rng.choice(["low", "high"])
            if family == "llama" and rng.random() < 0.5:
                extra["tools_in_user_message"] = False
            tools = rng.choice([None, [WEATHER], [WEATHER, SEARCH, NO_PARAMS]])
            out.append(case("random_%d" % i, templates, conversation(family), rng.random() < 0.5, tools=tools, **extra))
    return out


CASES += random_cases()


# ---- engine constructs: one template per feature, expected output from jinja2 ----------------
# (name, template, context). Outputs that Python prints as tuples are avoided: the C++ engine
# represents tuples as lists.

USERS = [{"name": "Al", "age": 30, "admin": True, "tags": ["a"]},
         {"name": "Bo", "age": 25, "admin": False, "tags": ["b", "c"]}]
OBJ = {"z": 1, "a": [1, 2, {"b": None}], "é": "ü\u0001\t", "t": True, "f": 2.50}
BASE = {"d": {"a": 1, "b": "two"}, "l": [1, 2, 3], "s": "héllo", "users": USERS, "obj": OBJ, "name": "World"}

SNIPPETS = [
    ("print_values", "{{ none }}|{{ true }}|{{ false }}|{{ 1 }}|{{ -2 }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|"
     "{{ 1.5e-7 }}|{{ 100000000000000000.0 }}|{{ 12345.678 }}|{{ 'a' }}|{{ [1, 'a', none, true, 2.5] }}|"
     "{{ {'a': 1, 'b': [1, 2]} }}|{{ d }}|{{ -0.0 }}", {}),
    ("string_literals", "{{ 'a\\tb\\n' }}|{{ \"it's\" }}|{{ 'x\\u00e9\\x41\\101' }}|{{ 'adjacent' \"strings\" }}|"
     "{{ '\\d\\'' }}|{{ 'multi\nline' }}", {}),
    ("repr_strings", "{{ ['it\\'s', \"q\\\"\", 'both\\'\"', 'nl\\n', 'é', '\\x01', 'back\\\\slash', '\\u00a0'] }}", {}),
    ("number_literals", "{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ 2E-3 }}|{{ 10.0 }}", {}),
    ("arithmetic", "{{ 7 + 2 }}|{{ 7 - 2.5 }}|{{ 7 * 3 }}|{{ 7 / 2 }}|{{ 6 / 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|"
     "{{ 7.5 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7.5 % 2 }}|{{ -7.5 % 2 }}|{{ 2 ** 10 }}|"
     "{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ 'ab' * 3 }}|{{ 2 * 'ab' }}|{{ [1] * 2 }}|{{ [1] + [2] }}|"
     "{{ 'a' ~ 1 ~ none ~ true ~ missing }}|{{ -(3) }}|{{ +3 }}|{{ true + 1 }}|{{ 1 + 2.0 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 'a' ~ 2 * 3 }}|{{ 'x' + 'y' ~ 'z' }}|{{ -2 ** 2 }}|"
     "{{ not 1 == 2 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ l|length - 1 }}|{{ -1|abs }}|{{ not true or true }}|"
     "{{ 1 if 0 else 2 if 0 else 3 }}", BASE),
    ("comparisons", "{{ 1 == 1.0 }}|{{ true == 1 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 != 2 }}|"
     "{{ none == none }}|{{ 2 >= 2 }}|{{ 'ab' in 'cabd' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|"
     "{{ 3 not in [1] }}|{{ x in [1] }}|{{ 'a' in x }}|{{ [1, [2]] == [1, [2]] }}|{{ {'a': 1} == {'a': 1.0} }}|"
     "{{ x == x }}|{{ 'é' > 'e' }}", {}),
    ("logic", "{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 1 }}|{{ none or [] }}|{{ not '' }}|{{ 'a' if 0 else 'b' }}|"
     "{{ 'a' if 1 }}|[{{ 'a' if 0 }}]|{{ [] or {} or 0 }}|{{ (param_spec or {}).x is defined }}", {}),
    ("undefined", "{{ missing }}|{{ missing is defined }}|{{ missing is undefined }}|{{ missing|default('d') }}|"
     "{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ missing|d('e') }}|{{ missing|length }}|"
     "{{ missing|list }}|{{ missing ~ 'x' }}|{{ d.nokey }}|{{ d['nokey'] is defined }}|{{ l[10] is defined }}|"
     "{{ missing|string }}|{{ missing|lower }}|{{ missing|trim }}|{{ missing|join(',') }}|{{ missing|first }}|"
     "{% for x in missing %}never{% else %}empty{% endfor %}|{{ none.x is defined }}|{{ missing|items|list }}",
     BASE),
    ("attribute_item", "{{ d.a }}|{{ d['b'] }}|{{ l[0] }}|{{ l[-1] }}|{{ l.0 }}|{{ s[1] }}|{{ s[-1] }}|"
     "{{ users[1].name }}|{{ users[0]['tags'][0] }}|{{ d['items'] is callable }}|{{ d.items is callable }}|"
     "{{ {'items': 5}['items'] }}|{{ l['count'](2) }}", BASE),
    ("slicing", "{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ l[5:] }}|{{ l[-10:2] }}|{{ s[1:3] }}|"
     "{{ s[::-1] }}|{{ l[3:0:-1] }}|{{ l[:] }}|{{ s[-2:] }}|{{ l[1:2:] }}", BASE),
    ("if_elif_else", "{% for x in [1, 2, 3, 'a'] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x is string %}"
     "str{% else %}other{% endif %};{% endfor %}", {}),
    ("loop_variables", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.depth }}"
     "{{ loop.depth0 }}{{ loop.cycle('a', 'b') }};{% endfor %}", BASE),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}"
     "{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("loop_over_dict", "{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|"
     "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}|{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|"
     "{% for c in 'hé' %}[{{ c }}]{% endfor %}", BASE),
    ("loop_filter_else_controls", "{% for x in range(10) if x is odd %}{{ x }}/{{ loop.length }},{% endfor %}|"
     "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}"
     "{% endfor %}|{% for x in [] %}a{% else %}b{% endfor %}|{% for x in [0] if x %}a{% else %}c{% endfor %}", {}),
    ("scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }}|"
     "{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% for i in [1] %}{% set z = 3 %}{% endfor %}{{ z }}|"
     "{% for i in [1, 2] %}{% if i == 1 %}{% set w = 7 %}{% endif %}[{{ w }}]{% endfor %}|"
     "{% for message in l %}{% set message = message * 10 %}{{ message }}{% endfor %}{{ message }}", BASE),
    ("namespace", "{% set ns = namespace(count=0, found=false, items=[]) %}{% for i in range(3) %}"
     "{% set ns.count = ns.count + i %}{% if i == 1 %}{% set ns.found = true %}{% endif %}{% endfor %}"
     "{{ ns.count }}|{{ ns.found }}|{{ ns.items }}|{{ ns.missing is defined }}|"
     "{% set n2 = namespace(d) %}{{ n2.a }}{{ n2.b }}", BASE),
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = [3, 4] %}{% set c, e = t %}{{ c }}{{ e }}|"
     "{% set block %}  Hello {{ name }}  {% endset %}[{{ block }}]|"
     "{% set up | upper | trim %} abc {% endset %}[{{ up }}]", BASE),
    ("macros", "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}"
     "{% endmacro %}{{ greet('Ann') }}|{{ greet('Bob', 'Hi') }}|{{ greet(name='Cy', punct='?') }}|"
     "{% macro m(a) %}{{ a }}:{{ varargs|length }}:{{ varargs|join(',') }}:{{ kwargs.x }}{% endmacro %}"
     "{{ m(1, 2, 3, x=4) }}|{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}"
     "{% endmacro %}{{ fact(10) }}|{% macro defaults(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ defaults('x') }}|"
     "{% macro noargs() %}[{{ name }}]{% endmacro %}{{ noargs() }}|{% macro miss(a, b) %}{{ b is defined }}"
     "{% endmacro %}{{ miss(1) }}", BASE),
    ("macro_scope", "{% set g = 'global' %}{% macro m() %}{{ g }}{% set g = 'local' %}{{ g }}{% endmacro %}"
     "{{ m() }}{{ g }}|{% for i in [1] %}{% macro inner() %}{{ i }}{% endmacro %}{{ inner() }}{% endfor %}", {}),
    ("call_blocks", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
     "{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}|{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}"
     "{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}", {}),
    ("filter_with_raw_generation", "{% filter upper %}hello {{ 'world' }}{% endfilter %}|"
     "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a is defined }}|"
     "{% raw %}{{ not rendered }} {% if %}{% endraw %}|{% generation %}gen{{ 1 }}{% endgeneration %}", {}),
    ("comments", "a{# comment #}b{#- trimmed -#}  c\n  {# own line #}\nd{# multi\nline #}e", {}),
    ("ws_lstrip_trim", "  {% if true %}\n  yes\n  {% endif %}\nend\n  {{ 'var' }}\n  {% for i in [1, 2] %}\n"
     "  - {{ i }}\n  {% endfor %}\ndone", {}),
    ("ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c|a {{- ' b ' -}} c|x\n\n  {{- 'y' }}|{{ 'p' -}}\n\n  q", {}),
    ("ws_plus", "  {{ 'x' }}\n  {%+ if true %}y{% endif +%}\nz|  {#+ c #}w", {}),
    ("ws_crlf_trailing", "x\r\ny\r{% if true %}\r\nz{% endif %}\n\n", {}),
    ("ws_trailing_newline", "a\n", {}),
    ("ws_raw_lstrip", "  {% raw %}\n  r\n  {% endraw %}\nafter", {}),
    ("filters_1", "{{ -3|abs }}|{{ (-2.5)|abs }}|{{ 'hello world'|capitalize }}|{{ 'hELLO'|capitalize }}|"
     "{{ 'abc'|center(9) }}|{{ l|count }}|{% for k, v in {'b': 1, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}|"
     "{% for k, v in {'b': 1, 'a': 2, 'C': 0}|dictsort(by='value', reverse=true) %}{{ k }}{{ v }}{% endfor %}|"
     "{% for k, v in {'b': 1, 'a': 2, 'C': 0}|dictsort(true) %}{{ k }}{% endfor %}|"
     "{{ '<a href=\"x\">&\\'</a>'|e }}|{{ '<b>'|escape }}|{{ [3, 1, 2]|first }}|{{ [3, 1, 2]|last }}|"
     "{{ 'abc'|first }}|{{ 'abc'|last }}|{{ {'k': 1, 'j': 2}|first }}", BASE),
    ("filters_numbers", "{{ '3.5'|float }}|{{ 'x'|float }}|{{ 'x'|float(1.5) }}|{{ ' 1e3 '|float }}|"
     "{{ '42'|int }}|{{ '0x1A'|int(base=16) }}|{{ '1A'|int(0, 16) }}|{{ ' 7 '|int }}|{{ '3.9'|int }}|"
     "{{ 3.9|int }}|{{ -3.9|int }}|{{ 'z'|int(-1) }}|{{ true|int }}|{{ '1_000'|int }}|{{ none|int }}|"
     "{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 1234.5|round(-2) }}|{{ 2.1|round(0, 'ceil') }}|"
     "{{ 2.9|round(method='floor') }}|{{ 5|round }}|{{ 1.23456|round(3) }}", {}),
    ("filters_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, first=true) }}|"
     "{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ 'one'|indent(first=true) }}", {}),
    ("filters_sequences", "{{ l|join(', ') }}|{{ users|map(attribute='name')|join('/') }}|"
     "{{ users|map(attribute='height', default=0)|list }}|{{ ['a', 'B']|map('upper')|list }}|"
     "{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|map(attribute='name')|list }}|"
     "{{ users|selectattr('name', 'equalto', 'Bo')|list|length }}|{{ [1, 2, 3, 4]|select('odd')|list }}|"
     "{{ [1, 2, 3, 4]|reject('even')|list }}|{{ ['a', '', none, 'b']|select|list }}|"
     "{{ ['x', 'code', 'y']|reject('equalto', 'code')|join(',') }}|{{ users|map(attribute='tags.0')|list }}|"
     "{{ [1, 5, 3]|select('>', 2)|list }}|{{ users|map(attribute='name')|map('lower')|join }}|"
     "{{ [[1, 2], [3]]|map('length')|list }}|{{ users|join(',', attribute='age') }}", BASE),
    ("filters_sort", "{{ [3, 1, 2]|max }}|{{ [3, 1, 2]|min }}|{{ ['b', 'A', 'c']|max }}|{{ ['b', 'A', 'c']|min }}|"
     "{{ users|max(attribute='age') }}|{{ []|max is defined }}|{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|"
     "{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}|{{ [3, 1, 2]|sort(reverse=true) }}|"
     "{{ users|sort(attribute='name', reverse=true)|map(attribute='name')|join }}|"
     "{{ ['a', 'A', 'b', 'a']|unique|list }}|{{ ['a', 'A']|unique(case_sensitive=true)|list }}|"
     "{{ l|reverse|list }}|{{ 'abc'|reverse }}|{{ [1, 2.5]|sum }}|{{ users|sum(attribute='age') }}|"
     "{{ [[1], [2]]|sum(start=[]) }}|{{ ['b', 'a']|sort|first }}", BASE),
    ("filters_strings", "{{ 'Hello World'|lower }}|{{ 'hi'|upper }}|{{ 'straße'|upper }}|{{ 'a b'|replace(' ', '_') }}|"
     "{{ 'aaa'|replace('a', 'b', 2) }}|{{ '<b>'|safe }}|{{ 5|string ~ 'x' }}|{{ [1]|string }}|"
     "{{ 'hello wORLD foo-bar (baz) [q] <t>'|title }}|{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|"
     "{{ 'a b c d e f g h i j'|truncate(9) }}|{{ 'a b c d e f g h i j'|truncate(9, true) }}|"
     "{{ 'abcdefghijklmnop'|truncate(10, leeway=0) }}|{{ 'short'|truncate(3, leeway=5) }}|"
     "{{ 'one two, three_four'|wordcount }}|{{ '%s-%d-%05.1f-%x-%r'|format('a', 3, 2.25, 255, 'q') }}|"
     "{{ 'abc'|list }}|{{ d|list }}|{{ [[1, 2], [3]]|batch(2)|list|length }}|{{ l|batch(2, 0)|list }}|"
     "{{ {'k': [1, 2]}|pprint }}|{{ 'x'|attr('upper') is callable }}|{{ 'abc'|length }}|{{ s|length }}|"
     "{{ d|length }}|{{ d|items|list|length }}|{{ 'a %s b' % 'x' }}|{{ '%s+%s' % (1, 2) }}", BASE),
    ("filters_tojson", "{{ obj|tojson }}|{{ obj|tojson(indent=2) }}|{{ obj|tojson(separators=(',', ':')) }}|"
     "{{ obj|tojson(sort_keys=true) }}|{{ obj|tojson(ensure_ascii=true) }}|"
     "{{ [1.0, 1e-05, 1e16, -0.0, 123456789.125, 3, 0.1]|tojson }}|{{ 'é\"\\n\U0001F600'|tojson }}|"
     "{{ {}|tojson }}|{{ []|tojson(indent=2) }}|{{ [[]]|tojson(indent='\\t') }}|{{ users|tojson(indent=0) }}", BASE),
    ("tests", "{{ none is none }}|{{ 1 is number }}|{{ true is number }}|{{ 1.0 is float }}|{{ 1 is integer }}|"
     "{{ true is integer }}|{{ true is boolean }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is mapping }}|"
     "{{ [] is sequence }}|{{ 'a' is sequence }}|{{ {} is sequence }}|{{ 1 is sequence }}|{{ 'a' is iterable }}|"
     "{{ 1 is iterable }}|{{ x is iterable }}|{{ x is sequence }}|{{ true is true }}|{{ 1 is true }}|"
     "{{ false is false }}|{{ 0 is false }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|"
     "{{ 9 is divisibleby(2) }}|{{ 'a' is in 'cat' }}|{{ 2 is in [1, 2] }}|{{ 1 is eq 1 }}|{{ 1 is equalto 2 }}|"
     "{{ 1 is ne 2 }}|{{ 1 is lt 2 }}|{{ 1 is le 1 }}|{{ 2 is gt 1 }}|{{ 2 is ge 3 }}|{{ 1 is lessthan 2 }}|"
     "{{ 2 is greaterthan 1 }}|{{ 'abc' is lower }}|{{ 'ABC' is upper }}|{{ none is sameas none }}|"
     "{{ range is callable }}|{{ 'upper' is filter }}|{{ 'odd' is test }}|{{ 'nope' is filter }}|"
     "{{ x is not defined }}|{{ 1 is not none }}|{{ 'a' is not string }}|{{ d is mapping and d.a is number }}|"
     "{{ l is sameas l }}|{{ 'x' if x is defined else 'y' }}", BASE),
    ("str_methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|"
     "{{ '\\n\\na\\n'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b  c '.split() }}|{{ 'a,b,c'.split(',', 1) }}|"
     "{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  a b c  '.split(none, 1) }}|{{ '  a b c  '.rsplit(none, 1) }}|"
     "{{ 'l1\\nl2\\r\\nl3\\n'.splitlines() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.startswith(('x', 'a')) }}|"
     "{{ 'abc'.endswith('bc') }}|{{ 'abc'.startswith('b', 1) }}|{{ 'a-b-c'.replace('-', '+') }}|"
     "{{ 'a-b-c'.replace('-', '', 1) }}|{{ 'ab'.replace('', '.') }}|{{ 'Hi'.upper() }}|{{ 'Hi'.lower() }}|"
     "{{ 'hello wORLD'.title() }}|{{ \"it's a test\".title() }}|{{ 'hELLO'.capitalize() }}|{{ s.find('l') }}|"
     "{{ 'hello'.rfind('l') }}|{{ 'hello'.find('z') }}|{{ 'hello'.index('e') }}|{{ 'hello'.count('l') }}|"
     "{{ '-'.join(['a', 'b']) }}|{{ '12'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}|"
     "{{ 'ab'.islower() }}|{{ 'AB'.isupper() }}|{{ 'ab'.center(7, '*') }}|{{ 'ab'.ljust(4, '.') }}|"
     "{{ 'ab'.rjust(4) }}|{{ '-5'.zfill(4) }}|{{ 'prefix_x'.removeprefix('prefix_') }}|"
     "{{ 'x.txt'.removesuffix('.txt') }}|{{ 'a=b=c'.partition('=')|join('|') }}|"
     "{{ 'a=b=c'.rpartition('=')|join('|') }}|{{ '{} and {}'.format(1, 'two') }}|{{ '{0}{name}'.format('x', name='y') }}|"
     "{{ 'straße'.upper() }}|{{ s.upper() }}|{{ 'a</think>b'.split('</think>')[-1] }}", BASE),
    ("list_dict_methods", "{{ [1, 2, 2].count(2) }}|{{ [1, 2].index(2) }}|{{ d.get('a') }}|{{ d.get('zz') }}|"
     "{{ d.get('zz', 'dflt') }}|{{ d.keys()|list }}|{{ d.values()|list }}|"
     "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}|{{ d.copy() == d }}", BASE),
    ("globals", "{{ range(3)|list }}|{{ range(1, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }}|"
     "{{ dict(a=1, b='x') }}|{{ namespace(a=1).a }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %d') }}|"
     "{{ strftime_now is defined }}", {}),
    # Errors jinja2 raises while rendering (the C++ test checks the exception class name).
    ("error_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("error_division_by_zero", "{{ 1 / 0 }}", {}),
    ("error_mutating_method", "{{ [1].append(2) }}", {}),
    ("error_range_too_big", "{{ range(100001)|length }}", {}),
    ("error_unorderable", "{{ 1 < 'a' }}", {}),
    ("error_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("error_macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("error_macro_unknown_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("error_raise_exception", "{{ raise_exception('custom ' ~ 42) }}", {}),
    ("error_set_attr_non_namespace", "{% set x = 1 %}{% set x.y = 2 %}", {}),
    ("error_undefined_attribute", "{{ none.x.y }}", {}),
    ("error_undefined_call", "{{ 'abc'.nomethod() }}", {}),
    ("error_undefined_arithmetic", "{{ missing + 1 }}", {}),
    ("error_undefined_tojson", "{{ missing|tojson }}", {}),
    ("error_percent_format", "{{ 'a %d' % 'x' }}", {}),
    ("error_not_callable", "{{ 'a'() }}", {}),
]


def render_snippets(env):
    out = []
    for name, source, context in SNIPPETS:
        entry = {"name": name, "template": source, "context": context}
        try:
            entry["expected"] = env.from_string(source).render(**context)
        except jinja2.exceptions.UndefinedError as e:
            entry["error"] = "UndefinedError: " + str(e)
        except jinja2.exceptions.TemplateRuntimeError as e:
            entry["error"] = type(e).__name__ + ": " + str(e)
        except jinja2.exceptions.SecurityError as e:
            entry["error"] = "SecurityError: " + str(e)
        except jinja2.exceptions.TemplateError as e:
            entry["raised"] = str(e)
        except Exception as e:  # TypeError, ZeroDivisionError, OverflowError, ...
            entry["error"] = type(e).__name__ + ": " + str(e)
        out.append(entry)
    return out


def main():
    env = make_env()
    compiled = {name: env.from_string((DATA / name).read_text()) for name in TEMPLATES}
    out = []
    for c in CASES:
        for name in c["templates"]:
            context = {"messages": c["messages"], "tools": c["tools"], "documents": None,
                       "add_generation_prompt": c["add_generation_prompt"], **TEMPLATES[name], **c["extra"]}
            entry = {"template": name, "name": c["name"], "context": context}
            try:
                entry["expected"] = compiled[name].render(**context)
            except jinja2.exceptions.UndefinedError as e:
                entry["error"] = "UndefinedError: " + str(e)
            except jinja2.exceptions.TemplateError as e:
                entry["raised"] = str(e)
            out.append(entry)
    doc = {
        "generator": "scripts/gen_chat_template_cases.py (jinja2 %s)" % jinja2.__version__,
        "clock": FIXED_NOW.isoformat(),
        "cases": out,
    }
    path = DATA / "cases.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print("wrote %d cases to %s" % (len(out), path))
    snippets = render_snippets(env)
    doc = {"generator": doc["generator"], "clock": doc["clock"], "snippets": snippets}
    path = DATA / "snippets.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print("wrote %d snippets to %s" % (len(snippets), path))


if __name__ == "__main__":
    main()
