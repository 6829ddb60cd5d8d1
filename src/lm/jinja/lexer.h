// The tokens of a Jinja template: text between tags, and the tokens of each {{ }} and {% %}
// tag, lexed as jinja2/lexer.py (3.1) does with trim_blocks=True, lstrip_blocks=True and
// keep_trailing_newline=False (transformers' chat template environment).
#pragma once

#include "lm/jinja/value.h"

#include <string>
#include <vector>

namespace nuvec::lm::jinja {

enum class Tok { Name, String, Int, Float, Op, End };

struct Token {
  Tok kind;
  std::string text;  // name, operator, or decoded string
  Value value;       // Int, Float
  int line;
};

struct Item {
  enum Kind { Text, Var, Block } kind;
  std::string text;
  std::vector<Token> tokens;  // ends with an End token
  int line;
};

// Throws std::invalid_argument("[lm.ChatTemplate] line N: what").
[[noreturn]] void syntax_error(int line, const std::string& what);

// Splits `source` into text and tags: whitespace control (-, +), trim_blocks, lstrip_blocks and
// {% raw %} are applied here, comments dropped. Throws std::invalid_argument for unterminated
// tags, comments and strings and for characters that start no token.
std::vector<Item> lex_template(const std::string& source);

} // namespace nuvec::lm::jinja
