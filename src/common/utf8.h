// UTF-8 primitives shared by the tokenizer: decoding, encoding, and the lossy repair that
// Python's bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy both perform.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rlt::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Byte length of the sequence that starts with `lead`, assuming well-formed UTF-8.
inline size_t seq_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point at s[i] of a *valid* UTF-8 string; returns its byte length.
inline size_t decode(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  if (b0 < 0xE0) {
    cp = ((b0 & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
    return 2;
  }
  if (b0 < 0xF0) {
    cp = ((b0 & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
         (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    return 3;
  }
  cp = ((b0 & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
       ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
       (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
  return 4;
}

// Decodes the last code point of a valid, non-empty UTF-8 string.
char32_t last_code_point(std::string_view s);

void append(std::string& out, char32_t cp);

inline std::string encode(char32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

size_t count_code_points(std::string_view s);

bool is_valid(std::string_view s);

// Replaces every maximal ill-formed subsequence with U+FFFD (Unicode §3.9 "best practice",
// which both Python's "replace" handler and Rust's from_utf8_lossy follow).
std::string repair(std::string_view s);

// Incremental form of repair(): bytes arrive in arbitrary chunks, only complete characters
// come out, and finish() flushes a truncated tail as one U+FFFD. Feeding any split of a byte
// string and then finish() yields exactly repair() of the whole.
class LossyDecoder {
 public:
  void push(std::string_view bytes, std::string& out);
  void finish(std::string& out);
  bool has_pending() const { return pending_len_ > 0; }

 private:
  void push_byte(unsigned char b, std::string& out);
  unsigned char pending_[4] = {};
  size_t pending_len_ = 0;
  size_t needed_ = 0;  // total length of the sequence being collected
};

}  // namespace rlt::utf8
