// A grammar bound to a token vocabulary, with the per-position token masks that make a step's
// mask a union of bitsets (the adaptive-mask idea of XGrammar):
//
// for the top frames of a stack (its byte-set position P and the kFrameDepth - 1 continuations
// below it), a walk of the token trie from a stack holding only those frames sorts every token into
//   - accepted: some path consumes all its bytes without leaving those frames (or leaves them
//     exactly at the token's last byte) — allowed whatever the rest of the stack is;
//   - uncertain: its bytes run past the frames — the rest of the stack decides, so the matcher
//     checks these few tokens against its real stacks at run time;
//   - rejected: everything else.
// Inside a JSON string (a character's rule, the repetition, the string's closing quote: three
// frames) almost every token is accepted and only the ones holding the closing quote followed by
// more bytes are uncertain. Tables are computed on first use and shared by every matcher.
//
// Thread-safe: the lazily computed tables are behind a mutex, so matchers on several threads may
// share one CompiledGrammar.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/token_vocabulary.h"

namespace rlt::structured {

struct PositionMasks {
  std::vector<uint64_t> accepted;  // bit per token id
  std::vector<int32_t> uncertain;
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }

  // Frames a table covers: the top position and the continuations below it.
  static constexpr size_t kFrameDepth = 3;

  // The table of a stack whose top frames are `frames` (positions, top first; at most
  // kFrameDepth, fewer only when the stack is that shallow).
  std::shared_ptr<const PositionMasks> frame_masks(std::span<const uint32_t> frames) const;


  // Whole-step masks by matcher state (the canonical text of its stacks), bounded in bytes.
  std::shared_ptr<const std::vector<uint64_t>> cached_mask(const std::string& key) const;
  void store_mask(const std::string& key, std::shared_ptr<const std::vector<uint64_t>> mask) const;

 private:
  PositionMasks compute(std::span<const uint32_t> frames) const;

  // Bounds on the caches (bytes, keys included); past one, that cache starts over (entries in use
  // stay alive through their shared_ptr).
  static constexpr size_t kMaxFrameBytes = size_t{128} << 20;
  static constexpr size_t kMaxMaskBytes = size_t{64} << 20;

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const PositionMasks>> frames_;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<uint64_t>>> masks_;
  mutable size_t frame_bytes_ = 0, mask_bytes_ = 0;
};

}  // namespace rlt::structured
