// GPT-2's reversible byte <-> character map: every byte becomes a printable character so that
// byte-level BPE vocabularies are ordinary strings (space -> 'Ġ', newline -> 'Ċ', ...).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rlt::tok::byte_level {

// The regex HF's ByteLevel pre-tokenizer applies when use_regex is true (Oniguruma syntax).
inline constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// UTF-8 of the character byte `b` maps to (1 or 2 bytes).
std::string_view byte_to_utf8(uint8_t b);
// The byte a mapped character stands for, or -1 if `cp` is not in the map.
int char_to_byte(char32_t cp);
// Appends the mapped characters of every byte of `raw`.
void map_bytes(std::string_view raw, std::string& out);
// Inverts map_bytes for a token: its bytes if every character is in the map, otherwise the
// token's own UTF-8 (what HF's ByteLevel decoder does for added tokens such as "<|im_end|>").
void unmap_token(std::string_view token, std::string& out);

}  // namespace rlt::tok::byte_level
