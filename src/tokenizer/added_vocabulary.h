// Added tokens (tokenizer.json "added_tokens"): special and user tokens that are matched in the
// text before the model runs, with HF's lstrip / rstrip / single_word / normalized semantics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rlt/status.h"
#include "tokenizer/added_token.h"

namespace rlt::tok {

class BpeModel;
class Normalizer;

// A segment of text: either plain text [begin, end) to normalize and encode, or an added token.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;  // -1 = plain text
};

class AddedVocabulary {
 public:
  // Registers tokens in file order and assigns ids as HF does: a token already in the model
  // vocabulary keeps the model's id, a new one gets the next free id. `normalizer` (may be null)
  // is applied to the contents of normalized tokens for matching.
  static Result<AddedVocabulary> build(const std::vector<AddedToken>& tokens, const BpeModel& model,
                                       const Normalizer* normalizer);

  // Splits raw input on non-normalized tokens (pass = kRaw), or a normalized segment on
  // normalized tokens (pass = kNormalized). Appends segments covering all of `text`.
  enum class Pass { kRaw, kNormalized };
  void split(std::string_view text, Pass pass, std::vector<Segment>& out) const;
  bool has_tokens(Pass pass) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* by_id(int32_t id) const;
  bool is_special_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Trie;
  std::vector<AddedToken> tokens_;  // in registration order (specials first, like HF)
  std::unordered_map<std::string, int32_t> content_to_id_;
  std::unordered_map<int32_t, size_t> id_to_index_;
  std::unordered_set<std::string> special_contents_;
  std::shared_ptr<const Trie> raw_trie_;
  std::shared_ptr<const Trie> normalized_trie_;
};

}  // namespace rlt::tok
