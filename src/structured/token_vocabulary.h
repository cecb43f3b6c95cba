// The model's tokens as byte strings in a trie, built once per tokenizer and shared by every
// grammar: the matcher walks the trie instead of each token, so tokens that share a prefix share
// the work of matching it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlt::structured {

class TokenVocabulary {
 public:
  struct Node {
    uint32_t first_child = 0;  // children are nodes [first_child, first_child + num_children)
    uint32_t num_children = 0;
    uint8_t byte = 0;  // the byte on the edge into this node
    // Tokens that end here: token_order()[tokens_begin, tokens_end). Tokens in this node's
    // subtree: token_order()[tokens_begin, subtree_end).
    uint32_t tokens_begin = 0, tokens_end = 0, subtree_end = 0;
  };

  // `bytes[id]`: what token id stands for; nullopt (special tokens) or empty: a token no grammar
  // ever allows (only terminators may end a constrained output). `vocab_size` >= bytes.size() is
  // the model's row width (ids past the tokenizer's are padding and never allowed).
  TokenVocabulary(const std::vector<std::optional<std::string>>& bytes, size_t vocab_size);

  size_t vocab_size() const { return vocab_size_; }
  size_t mask_words() const { return (vocab_size_ + 63) / 64; }
  std::string_view token_bytes(int32_t id) const;
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes_[0] is the root
  const std::vector<int32_t>& token_order() const { return token_order_; }

 private:
  size_t vocab_size_;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_order_;
};

}  // namespace rlt::structured
