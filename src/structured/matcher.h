// One constrained output's parse state: which tokens may come next (a bitmask over the vocabulary)
// and the token-by-token advance of the state once one is chosen.
//
// `terminators` (the model's end-of-sequence ids and the request's stop ids) are allowed exactly
// when the text so far is a complete sentence of the grammar (never for their bytes, since they
// end the output); once one is accepted the output is
// over and only terminators stay allowed. Every other token is allowed iff its bytes extend the
// text to a prefix of some sentence. Tokens with no bytes (special tokens) are never allowed.
//
// Not thread-safe (one matcher per request); the CompiledGrammar it reads may be shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/stack_arena.h"

namespace rlt::structured {

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> terminators);

  // Sets bit id of `mask` (mask_words() words) for every token allowed next.
  void fill_next_token_mask(std::span<uint64_t> mask);
  // Advances by `id`; false (state unchanged) when it is not allowed.
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, prefilled text); false (state unchanged) if they do not fit.
  bool accept_bytes(std::string_view bytes);

  bool is_complete() const { return state_.reached_bottom; }  // a terminator is allowed now
  bool is_terminated() const { return terminated_; }          // a terminator was accepted
  // A token was refused because the grammar is too ambiguous to follow exactly there (more than
  // StackExpander::kMaxStacks parse stacks): the caller should end the output with this reason.
  bool overflowed() const { return overflowed_; }
  size_t mask_words() const { return grammar_->vocab().mask_words(); }

 private:
  bool is_terminator(int32_t id) const;
  // Whether some stack of `from` survives `bytes` (then copied into `out` unless null).
  bool run_bytes(const StackSet& from, std::string_view bytes, StackSet* out);
  // The canonical text of the current stacks (the whole-step mask cache key).
  std::string state_key() const;
  void compact_if_large();

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<int32_t> terminators_;
  StackArena arena_;
  StackExpander expander_;
  StackSet state_;
  StackSet scratch_a_, scratch_b_, single_;
  bool terminated_ = false;
  bool overflowed_ = false;
  bool last_run_overflowed_ = false;
};

}  // namespace rlt::structured
