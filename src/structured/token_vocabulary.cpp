#include "structured/token_vocabulary.h"

#include <algorithm>
#include <numeric>

namespace rlt::structured {

TokenVocabulary::TokenVocabulary(const std::vector<std::optional<std::string>>& bytes,
                                 size_t vocab_size)
    : vocab_size_(std::max(vocab_size, bytes.size())) {
  bytes_.resize(bytes.size());
  std::vector<int32_t> ids;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!bytes[i] || bytes[i]->empty()) continue;
    bytes_[i] = *bytes[i];
    ids.push_back(static_cast<int32_t>(i));
  }
  // Sorted by bytes, the tokens of every subtree are contiguous and in DFS order; the trie is
  // built breadth-first over ranges of this order so that each node's children are adjacent.
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  token_order_ = ids;

  struct Pending {
    uint32_t node;
    size_t depth, begin, end;  // tokens [begin, end) of token_order_ share `depth` leading bytes
  };
  nodes_.push_back(Node{});
  nodes_[0].subtree_end = static_cast<uint32_t>(ids.size());
  std::vector<Pending> queue{{0, 0, 0, ids.size()}};
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.begin;
    // Tokens ending exactly at this depth come first in sorted order.
    while (i < p.end && bytes_[ids[i]].size() == p.depth) ++i;
    nodes_[p.node].tokens_begin = static_cast<uint32_t>(p.begin);
    nodes_[p.node].tokens_end = static_cast<uint32_t>(i);
    nodes_[p.node].subtree_end = static_cast<uint32_t>(p.end);
    nodes_[p.node].first_child = static_cast<uint32_t>(nodes_.size());
    while (i < p.end) {
      const auto b = static_cast<uint8_t>(bytes_[ids[i]][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<uint8_t>(bytes_[ids[j]][p.depth]) == b) ++j;
      Node child;
      child.byte = b;
      nodes_.push_back(child);
      ++nodes_[p.node].num_children;
      queue.push_back({static_cast<uint32_t>(nodes_.size() - 1), p.depth + 1, i, j});
      i = j;
    }
  }
}

std::string_view TokenVocabulary::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return {};
  return bytes_[static_cast<size_t>(id)];
}

}  // namespace rlt::structured
