#include "structured/gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "structured/utf8_ranges.h"

namespace rlt::structured {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Grammar> parse() {
    if (!utf8::is_valid(text_)) return invalid_argument("the grammar is not valid UTF-8");
    skip_space();
    if (at_end()) return error("the grammar is empty; it needs at least a `root ::= ...` rule");
    while (!at_end()) {
      RLT_ASSIGN_OR_RETURN(std::string name, parse_name());
      skip_space();
      if (!consume("::=")) return error(fmt::format("expected '::=' after rule name '{}'", name));
      const uint32_t rule = builder_.rule(name);
      if (builder_.defined(rule)) return error(fmt::format("rule '{}' is defined twice", name));
      defined_.push_back(name);
      RLT_RETURN_IF_ERROR(parse_alternatives(rule, /*depth=*/0));
      skip_space();
    }
    if (std::find(defined_.begin(), defined_.end(), "root") == defined_.end())
      return invalid_argument("the grammar has no `root` rule; matching starts at `root ::= ...`");
    return builder_.finish(builder_.rule("root"));
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  Status error(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return invalid_argument(fmt::format("grammar, line {} column {}: {}", line, column, what));
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  Result<std::string> parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) return error(fmt::format("expected a rule name, found '{}'", peek()));
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a `name ::=` starts at the current position (the end of the rule before it).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() &&
           (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r'))
      ++p;
    return text_.substr(p, 3) == "::=";
  }

  Status parse_alternatives(uint32_t rule, int depth) {
    if (depth > 64) return error("groups nest more than 64 deep");
    for (;;) {
      std::vector<Element> seq;
      RLT_RETURN_IF_ERROR(parse_sequence(seq, depth));
      builder_.add_alternative(rule, seq);
      elements_ += seq.size() + 1;
      if (elements_ > kMaxGrammarElements) return error("the grammar is too large");
      skip_space();
      if (peek() != '|') return Status::ok_status();
      ++pos_;
    }
  }

  Status parse_sequence(std::vector<Element>& seq, int depth) {
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) return Status::ok_status();
      std::vector<Element> item;
      RLT_RETURN_IF_ERROR(parse_primary(item, depth));
      RLT_RETURN_IF_ERROR(parse_quantifier(item));
      seq.insert(seq.end(), item.begin(), item.end());
    }
  }

  Status parse_primary(std::vector<Element>& item, int depth) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (!at_end() && peek() != '"') {
        RLT_ASSIGN_OR_RETURN(char32_t cp, parse_char());
        utf8::append(bytes, cp);
      }
      if (!consume("\"")) return error("unterminated string literal");
      for (char b : bytes) item.push_back(builder_.bytes(ByteSet::single(static_cast<uint8_t>(b))));
      return Status::ok_status();
    }
    if (c == '[') {
      ++pos_;
      const bool negate = consume("^");
      std::vector<CodePointRange> ranges;
      while (!at_end() && peek() != ']') {
        RLT_ASSIGN_OR_RETURN(char32_t lo, parse_char());
        char32_t hi = lo;
        if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
          ++pos_;
          RLT_ASSIGN_OR_RETURN(hi, parse_char());
          if (hi < lo) return error("a character range runs backwards");
        }
        ranges.push_back({lo, hi});
      }
      if (!consume("]")) return error("unterminated character class");
      item.push_back(char_class_element(builder_, normalize_ranges(std::move(ranges), negate)));
      return Status::ok_status();
    }
    if (c == '.') {
      ++pos_;
      item.push_back(char_class_element(builder_, normalize_ranges({{0, kMaxCodePoint}}, false)));
      return Status::ok_status();
    }
    if (c == '(') {
      ++pos_;
      const uint32_t group = builder_.fresh_rule("group");
      RLT_RETURN_IF_ERROR(parse_alternatives(group, depth + 1));
      skip_space();
      if (!consume(")")) return error("expected ')' to close the group");
      item.push_back(GrammarBuilder::ref(group));
      return Status::ok_status();
    }
    if (is_name_char(c)) {
      RLT_ASSIGN_OR_RETURN(std::string name, parse_name());
      item.push_back(GrammarBuilder::ref(builder_.rule(name)));
      return Status::ok_status();
    }
    return error(fmt::format("unexpected character '{}'", c));
  }

  Result<int> parse_count() {
    const size_t start = pos_;
    long long v = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition)
        return error(fmt::format("a repetition bound above {} is not supported", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) return error("expected a number in the repetition bounds");
    return static_cast<int>(v);
  }

  Status parse_quantifier(std::vector<Element>& item) {
    const char c = peek();
    int min = 1, max = 1;  // max -1: unbounded
    if (c == '*') {
      min = 0, max = -1;
    } else if (c == '+') {
      min = 1, max = -1;
    } else if (c == '?') {
      min = 0, max = 1;
    } else if (c == '{') {
      ++pos_;
      skip_space();
      RLT_ASSIGN_OR_RETURN(min, parse_count());
      skip_space();
      max = min;
      if (consume(",")) {
        skip_space();
        if (peek() == '}') {
          max = -1;
        } else {
          RLT_ASSIGN_OR_RETURN(max, parse_count());
        }
        skip_space();
      }
      if (peek() != '}') return error("expected '}' to close the repetition bounds");
      if (max != -1 && max < min)
        return error(
            fmt::format("repetition {{{},{}}}: the maximum is below the minimum", min, max));
    } else {
      return Status::ok_status();
    }
    ++pos_;
    // The repeated unit as one element.
    Element unit = item.size() == 1 ? item[0] : Element{};
    if (item.size() != 1) {
      const uint32_t wrap = builder_.fresh_rule("seq");
      builder_.add_alternative(wrap, item);
      unit = GrammarBuilder::ref(wrap);
    }
    item.assign(static_cast<size_t>(min), unit);
    elements_ += static_cast<size_t>(min);
    if (max == -1) {
      // star ::= unit star | ""  (a tail call: the matcher's stack does not grow)
      const uint32_t star = builder_.fresh_rule("star");
      builder_.add_alternative(star, {unit, GrammarBuilder::ref(star)});
      builder_.add_alternative(star, {});
      item.push_back(GrammarBuilder::ref(star));
    } else if (max > min) {
      // opt_k ::= unit opt_{k-1} | ""  — at most max - min more units.
      uint32_t tail = 0;
      for (int k = 0; k < max - min; ++k) {
        const uint32_t opt = builder_.fresh_rule("opt");
        if (k == 0) {
          builder_.add_alternative(opt, {unit});
        } else {
          builder_.add_alternative(opt, {unit, GrammarBuilder::ref(tail)});
        }
        builder_.add_alternative(opt, {});
        tail = opt;
      }
      item.push_back(GrammarBuilder::ref(tail));
      elements_ += static_cast<size_t>(3 * (max - min));
    }
    if (elements_ > kMaxGrammarElements) return error("the grammar is too large");
    return Status::ok_status();
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      if (!std::isxdigit(static_cast<unsigned char>(h)))
        return error(fmt::format("expected {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                             ? h - '0'
                                             : (std::tolower(h) - 'a' + 10));
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded character.
  Result<char32_t> parse_char() {
    if (at_end()) return error("unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return U'\n';
        case 'r':
          return U'\r';
        case 't':
          return U'\t';
        case '0':
          return U'\0';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '.':
        case '\'':
          return static_cast<char32_t>(e);
        case 'x':
          return check_scalar(parse_hex(2));
        case 'u':
          return check_scalar(parse_hex(4));
        case 'U':
          return check_scalar(parse_hex(8));
        default:
          return error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    char32_t cp = 0;
    pos_ += utf8::decode(text_, pos_, cp);  // valid: checked in parse()
    return cp;
  }

  Result<char32_t> check_scalar(Result<uint32_t> cp) {
    if (!cp.ok()) return cp.status();
    if (*cp > kMaxCodePoint || (*cp >= 0xD800 && *cp <= 0xDFFF))
      return error(fmt::format("U+{:X} is not a Unicode scalar value", *cp));
    return static_cast<char32_t>(*cp);
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t elements_ = 0;
  GrammarBuilder builder_;
  std::vector<std::string> defined_;
};

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

Result<Grammar> parse_gbnf(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace rlt::structured
