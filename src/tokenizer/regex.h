// PCRE2 (UTF + UCP + JIT) regexes that behave like the Oniguruma regexes Hugging Face tokenizers
// compiles from tokenizer.json: same character classes and the same match iteration.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rlt/status.h"

namespace rlt::tok {

struct Span {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // Compiles a pattern written for Oniguruma (tokenizer.json "Regex" values). Escapes whose
  // meaning differs in PCRE2 are rewritten: \s \S (White_Space), \w \W (Oniguruma's word set),
  // \h \H (hex digits), \uHHHH. Unsupported constructs are refused with their position.
  static Result<Regex> compile(std::string_view onig_pattern);
  // Compiles a PCRE2 pattern as written.
  static Result<Regex> compile_raw(std::string_view pcre2_pattern);
  // A regex matching `text` literally (tokenizer.json "String" patterns).
  static Result<Regex> literal(std::string_view text);

  // Appends every match in `text` (valid UTF-8). Iterates like the Rust onig crate's
  // find_iter: after a match ending at e, an empty match at e is skipped.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  // Whether the pattern matches at offset 0 of `text` (valid UTF-8).
  bool matches_at_start(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  Regex(std::shared_ptr<const Code> code, std::string pattern)
      : code_(std::move(code)), pattern_(std::move(pattern)) {}
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

// Exposed for tests: the Oniguruma -> PCRE2 rewrite compile() applies.
Result<std::string> translate_onig_pattern(std::string_view onig_pattern);

}  // namespace rlt::tok
