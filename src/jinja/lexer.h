// Jinja lexer with the whitespace rules transformers' chat-template environment uses:
// trim_blocks, lstrip_blocks, "-"/"+" markers, newline normalization and the dropped trailing
// newline (keep_trailing_newline = False), as jinja2 3.x's lexer applies them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlt::jinja {

struct Token {
  enum class Type {
    kText,
    kVariableBegin,
    kVariableEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInteger,
    kFloat,
    kOperator,
    kEof
  };
  Type type;
  std::string value;  // text, name, operator, or the unescaped string literal
  size_t pos;         // byte offset in the normalized source
};

struct LexedTemplate {
  std::string source;  // after newline normalization (positions refer to it)
  std::vector<Token> tokens;
};

// Throws TemplateError on malformed input (unclosed tags or strings, stray characters).
LexedTemplate lex(std::string_view source);

// "line L, column C" of a byte offset, for error messages.
std::string describe_position(const std::string& source, size_t pos);

// Python str.isspace for one code point.
bool py_isspace(char32_t c);

}  // namespace rlt::jinja
