#include "structured/regex_to_gbnf.h"

#include <fmt/format.h>

#include <cctype>
#include <vector>

#include "common/utf8.h"
#include "structured/gbnf.h"
#include "structured/utf8_ranges.h"

namespace rlt::structured {
namespace {

using Ranges = std::vector<CodePointRange>;

// Class escapes as sets both regex dialects a schema's `pattern` may be checked with agree on
// (ECMAScript's, which JSON Schema names, and Python's `re`, which the jsonschema package uses):
// what is generated must match under either. \d and \w are their ASCII sets; \D and \W generate
// ASCII only (Python counts every Unicode digit and letter as \d / \w); \s is the whitespace both
// agree on and \S excludes the whitespace of either.
Ranges digit_ranges() {
  return {{'0', '9'}};
}
Ranges word_ranges() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
Ranges space_common() {
  return {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
}
Ranges space_any() {
  Ranges r = space_common();
  r.insert(r.end(), {{0x1C, 0x1F}, {0x85, 0x85}, {0xFEFF, 0xFEFF}});
  return normalize_ranges(r, false);
}
Ranges ascii_except(Ranges r) {
  r = normalize_ranges(std::move(r), true);
  Ranges out;
  for (auto [lo, hi] : r) {
    if (lo <= 0x7F) out.push_back({lo, std::min<char32_t>(hi, 0x7F)});
  }
  return out;
}

std::string class_char(char32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '"')
    return fmt::format("\\{}", static_cast<char>(cp));
  if (cp < 0x20 || cp == 0x7F) return fmt::format("\\x{:02X}", static_cast<unsigned>(cp));
  std::string s;
  utf8::append(s, cp);
  return s;
}

// A GBNF class for normalized ranges (possibly empty: a class no character matches).
std::string class_text(const Ranges& ranges) {
  if (ranges.empty()) return "[^\\x00-\\U0010FFFF]";
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += class_char(lo);
    if (hi > lo) {
      out += '-';
      out += class_char(hi);
    }
  }
  out += ']';
  return out;
}

// How character `cp` is written inside a JSON string.
std::string json_escaped(char32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      break;
  }
  if (cp < 0x20) return fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
  std::string s;
  utf8::append(s, cp);
  return s;
}

class RegexParser {
 public:
  RegexParser(std::string_view re, RegexTarget target) : re_(re), target_(target) {}

  Result<std::string> parse() {
    if (!utf8::is_valid(re_)) return error("the expression is not valid UTF-8");
    bool anchored_start = false, anchored_end = false;
    if (!re_.empty() && re_.front() == '^') {
      anchored_start = true;
      re_.remove_prefix(1);
    }
    if (!re_.empty() && re_.back() == '$' && (re_.size() < 2 || re_[re_.size() - 2] != '\\')) {
      anchored_end = true;
      re_.remove_suffix(1);
    }
    RLT_ASSIGN_OR_RETURN(std::string body, parse_alternation(0));
    if (pos_ < re_.size()) return error(fmt::format("unbalanced ')'"));
    std::string out = "(";
    out += body;
    out += ')';
    if (target_ == RegexTarget::kText) return out;
    // JSON Schema patterns search: unanchored ends accept any characters.
    std::string any = "(";
    any += chars_of(normalize_ranges({{0, kMaxCodePoint}}, false));
    any += ")*";
    if (!anchored_start) out.insert(0, any + " ");
    if (!anchored_end) {
      out += ' ';
      out += any;
    }
    return out;
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument(
        fmt::format("regular expression '{}': {} (at offset {})", std::string(re_), what, pos_));
  }
  bool at_end() const { return pos_ >= re_.size(); }
  char peek() const { return at_end() ? '\0' : re_[pos_]; }

  // One character of `ranges` as GBNF: a class, or for JSON strings the escaped forms.
  std::string chars_of(const Ranges& ranges) const {
    if (target_ == RegexTarget::kText) return class_text(ranges);
    // Characters a JSON string holds raw, and the ones it must escape.
    Ranges raw;
    std::vector<std::string> escaped;
    for (auto [lo, hi] : ranges) {
      for (char32_t c = lo; c <= hi && c < 0x20; ++c)
        escaped.push_back(gbnf_literal(json_escaped(c)));
      for (char32_t c : {U'"', U'\\'}) {
        if (c >= lo && c <= hi) escaped.push_back(gbnf_literal(json_escaped(c)));
      }
      if (hi >= 0x20) raw.push_back({std::max<char32_t>(lo, 0x20), hi});
    }
    raw = normalize_ranges(raw, false);
    Ranges cleaned;
    for (auto [lo, hi] : raw) {
      // Remove '"' and '\\' from the raw ranges.
      char32_t start = lo;
      for (char32_t cut : {U'"', U'\\'}) {
        if (cut >= start && cut <= hi) {
          if (cut > start) cleaned.push_back({start, cut - 1});
          start = cut + 1;
        }
      }
      if (start <= hi) cleaned.push_back({start, hi});
    }
    std::string out =
        cleaned.empty() && !escaped.empty() ? "" : class_text(normalize_ranges(cleaned, false));
    for (const auto& e : escaped) out += (out.empty() ? "" : " | ") + e;
    return "(" + out + ")";
  }

  std::string literal_of(char32_t cp) const {
    if (target_ == RegexTarget::kJsonString) return gbnf_literal(json_escaped(cp));
    std::string s;
    utf8::append(s, cp);
    return gbnf_literal(s);
  }

  Result<std::string> parse_alternation(int depth) {
    if (depth > 64) return error("groups nest more than 64 deep");
    std::string out;
    for (;;) {
      RLT_ASSIGN_OR_RETURN(std::string branch, parse_branch(depth));
      out += branch.empty() ? "\"\"" : branch;
      if (peek() != '|') return out;
      ++pos_;
      out += " | ";
    }
  }

  Result<std::string> parse_branch(int depth) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      RLT_ASSIGN_OR_RETURN(std::string atom, parse_atom(depth));
      RLT_ASSIGN_OR_RETURN(std::string quant, parse_quantifier());
      if (!out.empty()) out += " ";
      out += quant.empty() ? atom : "(" + atom + ")" + quant;
    }
    return out;
  }

  Result<int> parse_int() {
    long long v = 0;
    const size_t start = pos_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + (peek() - '0');
      if (v > 4096) return error("a repetition bound above 4096 is not supported");
      ++pos_;
    }
    if (pos_ == start) return -1;
    return static_cast<int>(v);
  }

  Result<std::string> parse_quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t save = pos_;
      ++pos_;
      RLT_ASSIGN_OR_RETURN(int min, parse_int());
      if (min < 0) {  // not a quantifier: a literal '{' (as in most engines)
        pos_ = save;
        return std::string();
      }
      int max = min;
      if (peek() == ',') {
        ++pos_;
        RLT_ASSIGN_OR_RETURN(max, parse_int());
      }
      if (peek() != '}') return error("expected '}' to close the repetition bounds");
      ++pos_;
      if (max >= 0 && max < min) return error("a repetition's maximum is below its minimum");
      q = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    } else {
      return std::string();
    }
    if (peek() == '?') {
      ++pos_;  // lazy: the same language
    } else if (peek() == '+') {
      return error("possessive quantifiers are not supported");
    }
    return q;
  }

  Result<uint32_t> parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char h = peek();
      if (!std::isxdigit(static_cast<unsigned char>(h))) return error("expected hex digits");
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                             ? h - '0'
                                             : std::tolower(h) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a class escape (\d ...) into `ranges`, or one character.
  Result<bool> parse_escape(Ranges& ranges) {
    if (at_end()) return error("a trailing backslash");
    const char e = re_[pos_++];
    switch (e) {
      case 'd':
        ranges = digit_ranges();
        return true;
      case 'w':
        ranges = word_ranges();
        return true;
      case 's':
        ranges = space_common();
        return true;
      case 'D':
        ranges = ascii_except(digit_ranges());
        return true;
      case 'W':
        ranges = ascii_except(word_ranges());
        return true;
      case 'S':
        ranges = normalize_ranges(space_any(), true);
        return true;
      case 'n':
        ranges = {{'\n', '\n'}};
        return false;
      case 'r':
        ranges = {{'\r', '\r'}};
        return false;
      case 't':
        ranges = {{'\t', '\t'}};
        return false;
      case 'f':
        ranges = {{'\f', '\f'}};
        return false;
      case 'v':
        ranges = {{'\v', '\v'}};
        return false;
      case '0':
        ranges = {{0, 0}};
        return false;
      case 'x': {
        RLT_ASSIGN_OR_RETURN(uint32_t v, parse_hex(2));
        ranges = {{v, v}};
        return false;
      }
      case 'u': {
        uint32_t v = 0;
        if (peek() == '{') {
          ++pos_;
          const size_t start = pos_;
          while (!at_end() && peek() != '}') ++pos_;
          if (at_end() || pos_ == start || pos_ - start > 6)
            return error("a malformed \\u{...} escape");
          const size_t end = pos_;
          pos_ = start;
          RLT_ASSIGN_OR_RETURN(v, parse_hex(end - start));
          ++pos_;
        } else {
          RLT_ASSIGN_OR_RETURN(v, parse_hex(4));
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
          return error("an escape outside the Unicode scalar values");
        ranges = {{v, v}};
        return false;
      }
      case 'b':
      case 'B':
        return error("word boundaries (\\b, \\B) are not supported");
      case 'p':
      case 'P':
        return error("Unicode property classes (\\p{...}) are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(e)))
          return error("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e)))
          return error(fmt::format("unknown escape '\\{}'", e));
        ranges = {{static_cast<char32_t>(static_cast<unsigned char>(e)),
                   static_cast<char32_t>(static_cast<unsigned char>(e))}};
        return false;
    }
  }

  Result<char32_t> parse_utf8_char() {
    char32_t cp = 0;
    pos_ += utf8::decode(re_, pos_, cp);  // valid: checked in parse()
    return cp;
  }

  Result<std::string> parse_class() {
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    Ranges ranges;
    bool first = true;
    bool has_class_escape = false;  // then a negated class generates ASCII only (see above)
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      if (re_.substr(pos_, 2) == "[:") return error("POSIX classes ([:alpha:]) are not supported");
      Ranges item;
      bool is_class = false;
      if (peek() == '\\') {
        ++pos_;
        const char escape = peek();
        RLT_ASSIGN_OR_RETURN(is_class, parse_escape(item));
        has_class_escape = has_class_escape || is_class;
        if (negate && escape == 's') item = space_any();  // excluded: the whitespace of either
      } else {
        RLT_ASSIGN_OR_RETURN(char32_t cp, parse_utf8_char());
        item = {{cp, cp}};
      }
      if (!is_class && peek() == '-' && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi_item;
        bool hi_class = false;
        if (peek() == '\\') {
          ++pos_;
          RLT_ASSIGN_OR_RETURN(hi_class, parse_escape(hi_item));
        } else {
          RLT_ASSIGN_OR_RETURN(char32_t cp, parse_utf8_char());
          hi_item = {{cp, cp}};
        }
        if (hi_class) return error("a class escape cannot end a range");
        if (hi_item[0].first < item[0].first) return error("a character range runs backwards");
        item = {{item[0].first, hi_item[0].first}};
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    if (at_end()) return error("an unterminated character class");
    ++pos_;  // ']'
    if (negate && has_class_escape) return chars_of(ascii_except(std::move(ranges)));
    return chars_of(normalize_ranges(std::move(ranges), negate));
  }

  Result<std::string> parse_atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        const std::string_view rest = re_.substr(pos_);
        if (rest.starts_with("?:")) {
          pos_ += 2;
        } else if (rest.starts_with("?P<") || (rest.starts_with("?<") && !rest.starts_with("?<=") &&
                                               !rest.starts_with("?<!"))) {
          pos_ = re_.find('>', pos_);
          if (pos_ == std::string_view::npos) return error("an unterminated group name");
          ++pos_;
        } else if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") ||
                   rest.starts_with("?<!")) {
          return error("lookaround assertions are not supported");
        } else {
          return error("inline flags and other (?...) groups are not supported");
        }
      }
      RLT_ASSIGN_OR_RETURN(std::string inner, parse_alternation(depth + 1));
      if (peek() != ')') return error("an unclosed group");
      ++pos_;
      return "(" + inner + ")";
    }
    if (c == '[') {
      ++pos_;
      return parse_class();
    }
    if (c == '.') {
      ++pos_;
      // Any character but a line terminator (ECMAScript's; Python's excludes only \n).
      return chars_of(normalize_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true));
    }
    if (c == '^' || c == '$')
      return error(fmt::format("'{}' is supported only at the very start or end", c));
    if (c == '*' || c == '+' || c == '?')
      return error(fmt::format("'{}' has nothing to repeat", c));
    if (c == '\\') {
      ++pos_;
      Ranges ranges;
      RLT_ASSIGN_OR_RETURN(bool is_class, parse_escape(ranges));
      return is_class ? chars_of(ranges) : literal_of(ranges[0].first);
    }
    RLT_ASSIGN_OR_RETURN(char32_t cp, parse_utf8_char());
    return literal_of(cp);
  }

  std::string_view re_;
  RegexTarget target_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view regex, RegexTarget target) {
  return RegexParser(regex, target).parse();
}

}  // namespace rlt::structured
