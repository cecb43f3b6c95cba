// The raw bytes each token id contributes to decoded text, for byte-level constraints
// (structured output): ByteLevel tokens unmapped to their bytes, <0xAB> byte-fallback tokens as
// the byte, "▁" as a space. Decoder steps that act on the whole text (Strip, Fuse) are not
// applied: these are the bytes of a token in the middle of an output.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rlt::tok {

// Entry id: the bytes of token id; nullopt for special added tokens and ids without a token.
std::vector<std::optional<std::string>> token_byte_strings(const Tokenizer& tokenizer);

}  // namespace rlt::tok
