// A tokenizer described by GGUF metadata (`tokenizer.ggml.*`) rebuilt as the tokenizer.json that
// computes the same ids, so that one implementation serves both formats.
//
// - model "gpt2": byte-level BPE; `pre` names llama.cpp's pre-tokenizer, mapped to the
//   tokenizer.json pre-tokenizer of the models that use it (smollm, gpt2, llama3, qwen2, default
//   and their aliases); CONTROL tokens become special added tokens, USER_DEFINED ones plain added
//   tokens.
// - model "llama": SentencePiece BPE with byte fallback, as transformers converts it: merges
//   derived from the piece scores, "▁" for spaces, a prefix space unless add_space_prefix is false.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlt/status.h"

namespace rlt::tok {

class Tokenizer;

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct GgufVocab {
  std::string model;                 // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                   // tokenizer.ggml.pre; empty = "default"
  std::vector<std::string> tokens;   // id -> token text
  std::vector<int32_t> token_types;  // empty: all normal
  std::vector<std::string> merges;   // gpt2: "left right", highest priority first
  std::vector<float> scores;         // llama: one per token
  std::optional<int32_t> bos, eos, unk;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// The tokenizer.json text; unknown models and pre-tokenizer names are refused by name.
Result<std::string> tokenizer_json_from_gguf(const GgufVocab& vocab);
Result<std::shared_ptr<const Tokenizer>> tokenizer_from_gguf(const GgufVocab& vocab);

// The pre-tokenizer names tokenizer_json_from_gguf knows, for messages and docs.
const std::vector<std::string>& known_gguf_pre_tokenizers();

}  // namespace rlt::tok
