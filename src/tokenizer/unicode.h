// Unicode character properties and normalization, with the exact definitions the Hugging Face
// tokenizers library uses (Rust's char methods), backed by utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace rlt::tok::unicode {

// Rust char::is_whitespace: the White_Space property.
bool is_whitespace(char32_t cp);
// Rust char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t cp);
// General category P* (Pc Pd Pe Pf Pi Po Ps).
bool is_punctuation(char32_t cp);
// General category M* (Mn Mc Me).
bool is_mark(char32_t cp);
// Rust regex `\w` (UTS #18 word: Alphabetic, M, Nd, Pc, Join_Control).
bool is_word_char(char32_t cp);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes valid UTF-8 `in` into `out` (overwritten).
void normalize(std::string_view in, NormalForm form, std::string& out);

// Rust char::to_lowercase applied per character: simple lowercase mappings plus the one
// unconditional multi-character mapping (U+0130 -> "i\u0307"); no context (final sigma stays σ).
void lowercase(std::string_view in, std::string& out);

}  // namespace rlt::tok::unicode
