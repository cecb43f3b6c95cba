#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

namespace rlt::structured {
namespace {

// Past this many stack nodes, a matcher rebuilds its arena from its live stacks only.
constexpr size_t kCompactNodes = size_t{1} << 16;

bool test_bit(std::span<const uint64_t> bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}
void set_bit(std::span<uint64_t> bits, int32_t id) {
  bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::vector<int32_t> terminators)
    : grammar_(std::move(grammar)),
      terminators_(std::move(terminators)),
      expander_(grammar_->grammar(), arena_) {
  const Grammar& g = grammar_->grammar();
  expander_.new_round();
  for (uint32_t start : g.alternatives[g.root])
    expander_.expand(start, StackArena::kBottom, state_);
}

bool GrammarMatcher::is_terminator(int32_t id) const {
  return std::find(terminators_.begin(), terminators_.end(), id) != terminators_.end();
}

bool GrammarMatcher::run_bytes(const StackSet& from, std::string_view bytes, StackSet* out) {
  last_run_overflowed_ = false;
  const StackSet* cur = &from;
  StackSet* bufs[2] = {&scratch_a_, &scratch_b_};
  for (size_t i = 0; i < bytes.size(); ++i) {
    StackSet& next = *bufs[i & 1];
    expander_.advance(*cur, static_cast<uint8_t>(bytes[i]), next);
    last_run_overflowed_ = next.overflowed;
    if (next.empty() || next.overflowed) return false;
    cur = &next;
  }
  if (out != nullptr && cur != out) *out = *cur;
  return !cur->empty();
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return bytes.empty();
  StackSet next;
  if (!run_bytes(state_, bytes, &next)) {
    overflowed_ = last_run_overflowed_;
    return false;
  }
  state_ = std::move(next);
  compact_if_large();
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (is_terminator(id)) {
    if (!terminated_ && !state_.reached_bottom) return false;
    terminated_ = true;
    return true;
  }
  if (terminated_) return false;
  const std::string_view bytes = grammar_->vocab().token_bytes(id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

std::string GrammarMatcher::state_key() const {
  std::vector<std::vector<uint32_t>> stacks;
  for (int32_t top : state_.tops) {
    std::vector<uint32_t> s;
    for (int32_t n = top; n != StackArena::kBottom; n = arena_.node(n).parent)
      s.push_back(arena_.node(n).pos);
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key;
  for (const auto& s : stacks) {
    const uint32_t size = static_cast<uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&size), sizeof size);
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  }
  return key;
}

void GrammarMatcher::fill_next_token_mask(std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  if (!terminated_ && !state_.tops.empty()) {
    const std::string key = state_key();
    if (auto cached = grammar_->cached_mask(key)) {
      std::memcpy(mask.data(), cached->data(),
                  std::min(mask.size(), cached->size()) * sizeof(uint64_t));
    } else {
      // Tokens accepted within the top frame of some stack, then the uncertain ones checked
      // against that stack in full.
      std::vector<std::shared_ptr<const PositionMasks>> tables;
      uint32_t frames[CompiledGrammar::kFrameDepth];
      for (int32_t top : state_.tops) {
        size_t depth = 0;
        for (int32_t n = top; n != StackArena::kBottom && depth < CompiledGrammar::kFrameDepth;
             n = arena_.node(n).parent)
          frames[depth++] = arena_.node(n).pos;
        tables.push_back(grammar_->frame_masks({frames, depth}));
        const PositionMasks& pm = *tables.back();
        const size_t words = std::min(mask.size(), pm.accepted.size());
        for (size_t w = 0; w < words; ++w) mask[w] |= pm.accepted[w];
      }
      for (size_t i = 0; i < state_.tops.size(); ++i) {
        single_.clear();
        single_.tops.push_back(state_.tops[i]);
        for (int32_t id : tables[i]->uncertain) {
          if (test_bit(mask, id)) continue;
          if (run_bytes(single_, grammar_->vocab().token_bytes(id), nullptr)) set_bit(mask, id);
        }
      }
      grammar_->store_mask(key,
                           std::make_shared<const std::vector<uint64_t>>(mask.begin(), mask.end()));
    }
  }
  // A terminator ends the output (the scheduler stops on it), so it is allowed exactly when the
  // text is complete — even a stop id that is an ordinary token with bytes.
  const bool complete = terminated_ || state_.reached_bottom;
  for (int32_t id : terminators_) {
    if (id < 0 || static_cast<size_t>(id) >> 6 >= mask.size()) continue;
    if (complete) {
      set_bit(mask, id);
    } else {
      mask[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
    }
  }
}

void GrammarMatcher::compact_if_large() {
  if (arena_.size() < kCompactNodes) return;
  // Copy the live stacks into a fresh arena, bottom frame first.
  StackArena fresh;
  std::vector<int32_t> tops;
  for (int32_t top : state_.tops) {
    std::vector<uint32_t> chain;
    for (int32_t n = top; n != StackArena::kBottom; n = arena_.node(n).parent)
      chain.push_back(arena_.node(n).pos);
    int32_t parent = StackArena::kBottom;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) parent = fresh.intern(*it, parent);
    tops.push_back(parent);
  }
  arena_ = std::move(fresh);
  state_.tops = std::move(tops);
  expander_.new_round();
}

}  // namespace rlt::structured
