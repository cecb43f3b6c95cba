#include "jinja/lexer.h"

#include <fmt/format.h>

#include "common/utf8.h"
#include "jinja/value.h"

namespace rlt::jinja {
namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Length of the run of Python-whitespace characters starting at `pos`.
size_t space_run(std::string_view s, size_t pos) {
  size_t i = pos;
  while (i < s.size()) {
    char32_t c = 0;
    const size_t n = utf8::decode(s, i, c);
    if (!py_isspace(c)) break;
    i += n;
  }
  return i - pos;
}

// Python str.rstrip() (Unicode whitespace).
std::string_view rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    char32_t c = 0;
    utf8::decode(s, start, c);
    if (!py_isspace(c)) break;
    end = start;
  }
  return s.substr(0, end);
}

bool all_space(std::string_view s) {
  return space_run(s, 0) == s.size();
}

// jinja2 reads string literals with Python's "unicode-escape" codec.
std::string unescape(std::string_view body, const std::string& src, size_t pos) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t digits) {
      if (i + digits >= body.size()) {
        throw TemplateError("truncated \\x/\\u escape in string literal at " +
                            describe_position(src, pos));
      }
      uint32_t v = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = body[i + k];
        v *= 16;
        if (h >= '0' && h <= '9')
          v += h - '0';
        else if (h >= 'a' && h <= 'f')
          v += h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
          v += h - 'A' + 10;
        else
          throw TemplateError("bad escape in string literal at " + describe_position(src, pos));
      }
      i += digits;
      utf8::append(out, v);
    };
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;  // line continuation
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      case 'N':
        throw TemplateError("\\N{...} escapes are not supported (at " +
                            describe_position(src, pos) + ")");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          utf8::append(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) { out_.source = std::move(src); }

  LexedTemplate run() {
    const std::string& s = out_.source;
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s.size()) {
      const size_t tag = find_tag(pos);
      std::string_view text = std::string_view(s).substr(pos, tag - pos);
      if (tag == s.size()) {
        emit_text(text, pos);
        break;
      }
      const char kind = s[tag + 1];  // '{' variable, '%' block, '#' comment
      const char sign = tag + 2 < s.size() ? s[tag + 2] : '\0';
      if (sign == '-') {
        text = rstrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the indentation before a block/comment tag that starts its line.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      emit_text(text, pos);
      size_t p = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        p = close_comment(tag, p);
      } else if (kind == '{') {
        push(Token::Type::kVariableBegin, "", tag);
        p = lex_tag(p, false, tag);
      } else {
        push(Token::Type::kBlockBegin, "", tag);
        const size_t first = out_.tokens.size();
        p = lex_tag(p, true, tag);
        if (out_.tokens.size() == first + 2 && out_.tokens[first].type == Token::Type::kName &&
            out_.tokens[first].value == "raw") {
          out_.tokens.resize(first - 1);  // drop "{% raw %}"
          p = raw_block(p);
        }
      }
      line_starting = p > 0 && s[p - 1] == '\n';
      pos = p;
    }
    push(Token::Type::kEof, "", s.size());
    return std::move(out_);
  }

 private:
  void push(Token::Type t, std::string v, size_t pos) {
    out_.tokens.push_back({t, std::move(v), pos});
  }
  void emit_text(std::string_view text, size_t pos) {
    if (!text.empty()) push(Token::Type::kText, std::string(text), pos);
  }

  size_t find_tag(size_t pos) const {
    const std::string& s = out_.source;
    for (size_t i = pos; i + 1 < s.size(); ++i) {
      if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    }
    return s.size();
  }

  // After "-X}" whitespace is consumed; after "%}"/"#}" one newline (trim_blocks); "+%}" keeps it.
  size_t after_end(size_t end_pos, char sign, bool trim) const {
    const std::string& s = out_.source;
    if (sign == '-') return end_pos + space_run(s, end_pos);
    if (sign != '+' && trim && end_pos < s.size() && s[end_pos] == '\n') return end_pos + 1;
    return end_pos;
  }

  size_t close_comment(size_t tag, size_t p) {
    const std::string& s = out_.source;
    const size_t end = s.find("#}", p);
    if (end == std::string::npos) {
      throw TemplateError("unclosed comment at " + describe_position(s, tag));
    }
    const char sign = end > p ? s[end - 1] : '\0';
    return after_end(end + 2, sign == '-' || sign == '+' ? sign : '\0', true);
  }

  // Lexes expression tokens up to the tag end; returns the position after it.
  size_t lex_tag(size_t p, bool block, size_t tag) {
    const std::string& s = out_.source;
    std::vector<char> balance;
    while (true) {
      p += space_run(s, p);
      if (p >= s.size()) {
        throw TemplateError(std::string("unclosed ") + (block ? "block" : "variable") +
                            " tag opened at " + describe_position(s, tag));
      }
      if (balance.empty()) {
        const std::string_view rest = std::string_view(s).substr(p);
        const char* end = block ? "%}" : "}}";
        for (const char sign : {'-', '+', '\0'}) {
          if (!block && sign == '+') continue;
          const std::string marker = sign ? std::string(1, sign) + end : std::string(end);
          if (rest.substr(0, marker.size()) == marker) {
            push(block ? Token::Type::kBlockEnd : Token::Type::kVariableEnd, "", p);
            return after_end(p + marker.size(), sign, block);
          }
        }
      }
      const char c = s[p];
      if (is_name_start(c)) {
        size_t e = p;
        while (e < s.size() && is_name_char(s[e])) ++e;
        push(Token::Type::kName, s.substr(p, e - p), p);
        p = e;
      } else if (is_digit(c)) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < s.size() && s[e] != c) e += s[e] == '\\' ? 2 : 1;
        if (e >= s.size())
          throw TemplateError("unclosed string literal at " + describe_position(s, p));
        push(Token::Type::kString, unescape(std::string_view(s).substr(p + 1, e - p - 1), s, p), p);
        p = e + 1;
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                     "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                     "|",  "(",  ")",  "[",  "]",  "{",  "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (s.compare(p, std::char_traits<char>::length(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (op == nullptr) {
          throw TemplateError(fmt::format("unexpected character '{}' at {}", s.substr(p, 1),
                                          describe_position(s, p)));
        }
        const std::string o(op);
        if (o == "(" || o == "[" || o == "{") {
          balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
        } else if (o == ")" || o == "]" || o == "}") {
          if (balance.empty() || balance.back() != o[0]) {
            throw TemplateError("unexpected '" + o + "' at " + describe_position(s, p));
          }
          balance.pop_back();
        }
        push(Token::Type::kOperator, o, p);
        p += o.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    const std::string& s = out_.source;
    size_t e = p;
    auto digits = [&] {
      while (e < s.size() &&
             (is_digit(s[e]) || (s[e] == '_' && e + 1 < s.size() && is_digit(s[e + 1]))))
        ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < s.size() && s[e] == '.' && is_digit(s[e + 1])) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
      size_t k = e + 1;
      if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
      if (k < s.size() && is_digit(s[k])) {
        is_float = true;
        e = k;
        digits();
      }
    }
    std::string text;
    for (size_t k = p; k < e; ++k) {
      if (s[k] != '_') text += s[k];
    }
    push(is_float ? Token::Type::kFloat : Token::Type::kInteger, text, p);
    return e;
  }

  // Content up to {% endraw %} is literal text.
  size_t raw_block(size_t p) {
    const std::string& s = out_.source;
    size_t search = p;
    while (true) {
      const size_t open = s.find("{%", search);
      if (open == std::string::npos)
        throw TemplateError("missing {% endraw %} at " + describe_position(s, p));
      size_t k = open + 2;
      const char sign = k < s.size() && (s[k] == '-' || s[k] == '+') ? s[k] : '\0';
      if (sign) ++k;
      k += space_run(s, k);
      if (s.compare(k, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      k += 6;
      k += space_run(s, k);
      const char end_sign = k < s.size() && (s[k] == '-' || s[k] == '+') ? s[k] : '\0';
      if (end_sign) ++k;
      if (s.compare(k, 2, "%}") != 0)
        throw TemplateError("malformed {% endraw %} at " + describe_position(s, open));
      std::string_view text = std::string_view(s).substr(p, open - p);
      if (sign == '-') text = rstrip(text);
      emit_text(text, p);
      return after_end(k + 2, end_sign, true);
    }
  }

  LexedTemplate out_;
};

}  // namespace

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string describe_position(const std::string& source, size_t pos) {
  size_t line = 1;
  size_t col = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return fmt::format("line {}, column {}", line, col);
}

LexedTemplate lex(std::string_view source) {
  // jinja2 normalizes \r\n and \r to \n and drops one trailing newline.
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace rlt::jinja
