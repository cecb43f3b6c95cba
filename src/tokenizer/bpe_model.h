// The BPE model (tokenizer.json "model" of type BPE): turns one pre-tokenized piece into ids by
// applying merges lowest rank first, exactly as Hugging Face's BPE::merge_word does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlt/status.h"

namespace rlt::tok {

struct BpeConfig {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // Fails when a merge names a token (or a merge result) missing from the vocabulary, as HF does.
  static Result<std::unique_ptr<BpeModel>> create(BpeConfig config);
  ~BpeModel();

  // Appends the ids of `word` (valid UTF-8). Returns false only when a character is unknown
  // and the configured unk_token is itself not in the vocabulary (HF raises an error then).
  // Thread-safe.
  bool tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no vocabulary entry has this id.
  const std::string* id_to_token(int32_t id) const;
  // Number of vocabulary entries (HF's BPE::get_vocab_size).
  size_t vocab_size() const;
  const std::optional<std::string>& unk_token() const;

 private:
  struct Impl;
  explicit BpeModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlt::tok
