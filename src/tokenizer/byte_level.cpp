#include "tokenizer/byte_level.h"

#include <array>

#include "common/utf8.h"

namespace rlt::tok::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_char{};
  std::array<std::string, 256> byte_utf8;
  std::array<int16_t, 512> char_byte{};  // every mapped character is below U+0200

  Tables() {
    char_byte.fill(-1);
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = direct[b] ? static_cast<char32_t>(b) : next++;
      byte_char[b] = c;
      byte_utf8[b] = utf8::encode(c);
      char_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view byte_to_utf8(uint8_t b) {
  return tables().byte_utf8[b];
}

int char_to_byte(char32_t cp) {
  return cp < 512 ? tables().char_byte[cp] : -1;
}

void map_bytes(std::string_view raw, std::string& out) {
  const Tables& t = tables();
  for (char c : raw) out.append(t.byte_utf8[static_cast<uint8_t>(c)]);
}

void unmap_token(std::string_view token, std::string& out) {
  const size_t start = out.size();
  size_t i = 0;
  while (i < token.size()) {
    char32_t cp = 0;
    i += utf8::decode(token, i, cp);
    const int b = char_to_byte(cp);
    if (b < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(b));
  }
}

}  // namespace rlt::tok::byte_level
