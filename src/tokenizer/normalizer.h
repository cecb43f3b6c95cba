// Normalizers: whole-string rewrites applied to each text segment before pre-tokenization
// (tokenizer.json "normalizer"). Offsets are not tracked: rlt only needs the ids.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace rlt::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place; `scratch` is working memory owned by the caller.
  virtual void normalize(std::string& text, std::string& scratch) const = 0;
};

namespace normalizers {

std::unique_ptr<Normalizer> unicode_form(unicode::NormalForm form);
std::unique_ptr<Normalizer> lowercase();
// Removes leading/trailing White_Space characters.
std::unique_ptr<Normalizer> strip(bool left, bool right);
// Removes combining marks (general category M).
std::unique_ptr<Normalizer> strip_accents();
// Replaces every match of `pattern` (empty matches included, as HF does) with `content`.
std::unique_ptr<Normalizer> replace(Regex pattern, std::string content);
// Prepends / appends `s` to non-empty text.
std::unique_ptr<Normalizer> prepend(std::string s);
std::unique_ptr<Normalizer> append(std::string s);
std::unique_ptr<Normalizer> sequence(std::vector<std::unique_ptr<Normalizer>> steps);

}  // namespace normalizers

// Shared by the Replace normalizer and the Replace decoder.
void replace_all(const Regex& pattern, std::string_view content, const std::string& in,
                 std::string& out);

}  // namespace rlt::tok
