#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "common/utf8.h"

namespace rlt::tok {
namespace {

// Oniguruma's \w for UTF-8 (checked against the HF library): Alphabetic, marks, decimal digits,
// connector punctuation, plus the Latin-1 ctype table's extra "word" bytes ² ³ ¹ ¼ ½ ¾.
constexpr std::string_view kOnigWordSet =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
constexpr std::string_view kHexSet = "0-9a-fA-F";

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::string pcre2_error(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: PCRE2 match data and JIT stacks must not be shared across threads.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Patterns like \s+(?!\S) backtrack over long whitespace runs: give JIT room to grow.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<std::string> translate_onig_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  size_t class_start = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return invalid_argument("regex ends with a lone backslash");
      const char e = p[++i];
      switch (e) {
        case 's':
          out += "\\p{White_Space}";
          break;
        case 'S':
          out += "\\P{White_Space}";
          break;
        case 'w':
          if (in_class) {
            out += kOnigWordSet;
          } else {
            out += '[';
            out += kOnigWordSet;
            out += ']';
          }
          break;
        case 'h':
          if (in_class) {
            out += kHexSet;
          } else {
            out += '[';
            out += kHexSet;
            out += ']';
          }
          break;
        case 'W':
        case 'H':
          if (in_class) {
            return unimplemented(fmt::format(
                "regex construct \\{} inside a character class (offset {}) is not supported", e,
                i - 1));
          }
          out += "[^";
          out += e == 'W' ? kOnigWordSet : kHexSet;
          out += ']';
          break;
        case 'u':
          if (i + 4 < p.size() && is_hex(p[i + 1]) && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
              is_hex(p[i + 4])) {
            out += "\\x{";
            out.append(p.substr(i + 1, 4));
            out += '}';
            i += 4;
          } else {
            return invalid_argument(
                fmt::format("regex \\u at offset {} needs 4 hex digits", i - 1));
          }
          break;
        default:
          out += '\\';
          out += e;
          break;
      }
      continue;
    }
    if (in_class) {
      if (c == '[' && !(i + 1 < p.size() && p[i + 1] == ':')) {
        return unimplemented(
            fmt::format("regex nested character class at offset {} is not supported", i));
      }
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        return unimplemented(fmt::format(
            "regex character class intersection '&&' at offset {} is not supported", i));
      }
      if (c == '[') {  // POSIX class [:name:]: copy through to its closing ":]"
        const size_t close = p.find(":]", i + 2);
        if (close == std::string_view::npos) {
          return invalid_argument(fmt::format("regex unterminated [: at offset {}", i));
        }
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
      // A ']' right after '[' or '[^' is a literal in both dialects.
      if (c == ']' && i != class_start) in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      class_start = i + 1;
      if (class_start < p.size() && p[class_start] == '^') {
        out += '^';
        ++i;
        ++class_start;
      }
      continue;
    }
    out += c;
  }
  if (in_class) return invalid_argument("regex has an unterminated character class");
  return out;
}

Result<Regex> Regex::compile_raw(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    return invalid_argument(fmt::format("regex /{}/ does not compile at offset {}: {}", pattern,
                                        err_offset, pcre2_error(err)));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(holder), std::string(pattern));
}

Result<Regex> Regex::compile(std::string_view onig_pattern) {
  RLT_ASSIGN_OR_RETURN(std::string translated, translate_onig_pattern(onig_pattern));
  auto r = compile_raw(translated);
  if (!r.ok()) return r.status().with_context(fmt::format("regex /{}/", onig_pattern));
  r->pattern_ = std::string(onig_pattern);
  return r;
}

Result<Regex> Regex::literal(std::string_view text) {
  std::string p;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ ").find(c) != std::string_view::npos) p += '\\';
    p += c;
  }
  auto r = compile_raw(p);
  if (r.ok()) r->pattern_ = std::string(text);
  return r;
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), last_end, 0,
                                                st.data, st.context)
                              : pcre2_match(code_->code, subject, text.size(), last_end,
                                            PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: stop like a non-match
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0];
    const size_t e = ov[1];
    if (s == e && have_last && last_match_end == e) {
      // Step over one character, as the onig crate does, to avoid looping on the empty match.
      last_end +=
          last_end < text.size() ? utf8::seq_len(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    out.push_back({s, e});
  }
}

bool Regex::matches_at_start(std::string_view text) const {
  MatchState& st = match_state();
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, st.data, st.context);
  return rc >= 0;
}

}  // namespace rlt::tok
