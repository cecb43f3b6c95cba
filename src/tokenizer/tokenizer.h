// rlt's Hugging Face-compatible tokenizer: loads tokenizer.json and encodes / decodes exactly as
// the `tokenizers` library does (same ids, same text). See docs/tokenizer.md.
//
// Thread safety: a Tokenizer is immutable after loading; every const method may be called from
// any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlt/status.h"
#include "tokenizer/added_token.h"

namespace rlt::tok {

class Tokenizer {
 public:
  // Loads a tokenizer.json. Components rlt does not implement are refused with their name
  // (kUnimplemented); malformed files give kInvalidArgument naming the offending field.
  static Result<std::shared_ptr<const Tokenizer>> from_file(const std::string& path);
  static Result<std::shared_ptr<const Tokenizer>> from_json_string(std::string_view json);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`, identical to HF `Tokenizer.encode(text, add_special_tokens).ids`.
  // `text` may hold any bytes: invalid UTF-8 is first repaired like Python's
  // bytes.decode("utf-8", "replace") (each maximal ill-formed subsequence -> U+FFFD).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`, identical to HF `Tokenizer.decode(ids, skip_special_tokens)`. Like HF, ids
  // with no token are skipped. The result is always valid UTF-8.
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // HF get_vocab_size(with_added_tokens=True): model entries plus added tokens not in the model.
  size_t vocab_size() const;
  // Whether `id` decodes to a special added token (skipped with skip_special_tokens).
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlt::tok
