// Decoders (tokenizer.json "decoder"): turn the token strings of an id sequence back into text.
// Held as plain data so the batch path (here) and the streaming path (decode_stream.h) interpret
// the same description. A Sequence decoder is flattened into one chain.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace rlt::tok {

struct DecoderStep {
  enum class Kind { kByteLevel, kMetaspace, kByteFallback, kFuse, kStrip, kReplace };
  Kind kind = Kind::kFuse;
  // kMetaspace: replacement character; kStrip: the character stripped.
  char32_t ch = 0;
  PrependScheme scheme = PrependScheme::kAlways;  // kMetaspace
  size_t start = 0;                               // kStrip: chars stripped from the front
  size_t stop = 0;                                // kStrip: chars stripped from the back
  std::optional<Regex> pattern;                   // kReplace
  std::optional<std::string> literal;             // kReplace with a String pattern
  std::string content;                            // kReplace replacement
};

struct DecoderChain {
  bool present = false;  // false: tokenizer.json has no decoder (tokens are joined with ' ')
  std::vector<DecoderStep> steps;
};

// HF's Decoder::decode_chain for one step.
void apply_decoder_step(const DecoderStep& step, std::vector<std::string>& tokens);

// HF's decode: apply the chain, then concatenate (or join with ' ' without a decoder).
std::string run_decoder(const DecoderChain& chain, std::vector<std::string> tokens);

// "<0xAB>" -> 0xAB; -1 if `token` is not a byte token (exactly six characters, two hex digits).
int parse_byte_token(std::string_view token);

// Strips up to `start` leading and `stop` trailing `ch` characters from `token`.
std::string strip_token(std::string_view token, char32_t ch, size_t start, size_t stop);

}  // namespace rlt::tok
