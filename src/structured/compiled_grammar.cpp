#include "structured/compiled_grammar.h"

#include <algorithm>

#include "structured/stack_arena.h"

namespace rlt::structured {
namespace {

void set_bit(std::vector<uint64_t>& bits, int32_t id) {
  bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

// The trie walk of one frame set (see the header). Stack sets are interned as states with
// memoized byte transitions (a lazily built DFA): inside a string the walk meets the same few
// states at every trie node, so most steps are one table lookup instead of a stack expansion.
class PositionWalk {
 public:
  PositionWalk(const Grammar& grammar, const TokenVocabulary& vocab, PositionMasks& out)
      : vocab_(vocab), expander_(grammar, arena_), out_(out) {}

  void run(std::span<const uint32_t> frames) {
    out_.accepted.assign(vocab_.mask_words(), 0);
    int32_t node = StackArena::kBottom;
    for (size_t i = frames.size(); i-- > 0;) node = arena_.intern(frames[i], node);
    StackSet start;
    start.tops.push_back(node);  // the top is a byte-set position: already expanded
    visit(0, intern_state(start), /*escaped_above=*/false);
  }

 private:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;
  // Past this many states, transitions are no longer memoized (a bound on the tables' memory).
  static constexpr size_t kMaxMemoStates = 4096;

  struct State {
    StackSet stacks;
    ByteSet next;                  // bytes some top accepts
    std::vector<int32_t> targets;  // [256] memoized transitions (kUnknown), or empty
  };

  int32_t intern_state(StackSet& s) {
    std::sort(s.tops.begin(), s.tops.end());
    std::string key(reinterpret_cast<const char*>(s.tops.data()), s.tops.size() * sizeof(int32_t));
    key += s.reached_bottom ? '1' : '0';
    auto [it, inserted] = index_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
    if (inserted) {
      State st;
      st.next = expander_.next_bytes(s);
      st.stacks = s;
      if (states_.size() < kMaxMemoStates) st.targets.assign(256, kUnknown);
      states_.push_back(std::move(st));
    }
    return it->second;
  }

  int32_t step(int32_t from, uint8_t byte) {
    if (!states_[static_cast<size_t>(from)].next.test(byte)) return kDead;
    if (!states_[static_cast<size_t>(from)].targets.empty()) {
      const int32_t memo = states_[static_cast<size_t>(from)].targets[byte];
      if (memo != kUnknown) return memo;
    }
    expander_.advance(states_[static_cast<size_t>(from)].stacks, byte, scratch_);
    const int32_t to = scratch_.empty() ? kDead : intern_state(scratch_);
    if (!states_[static_cast<size_t>(from)].targets.empty())
      states_[static_cast<size_t>(from)].targets[byte] = to;
    return to;
  }

  void visit(uint32_t node_index, int32_t state, bool escaped_above) {
    const TokenVocabulary::Node node = vocab_.nodes()[node_index];
    for (uint32_t c = node.first_child; c < node.first_child + node.num_children; ++c) {
      const TokenVocabulary::Node& child = vocab_.nodes()[c];
      const int32_t to = step(state, child.byte);
      if (to == kDead && !escaped_above) continue;  // no token below can match
      const bool matched_here = to != kDead;
      for (uint32_t t = child.tokens_begin; t < child.tokens_end; ++t) {
        const int32_t id = vocab_.token_order()[t];
        if (matched_here) {
          set_bit(out_.accepted, id);
        } else {
          out_.uncertain.push_back(id);
        }
      }
      const bool escaped =
          escaped_above || (to != kDead && states_[static_cast<size_t>(to)].stacks.reached_bottom);
      if (to == kDead || states_[static_cast<size_t>(to)].stacks.tops.empty()) {
        // Longer tokens continue past the frames (or past a path that died): only the stacks
        // below can decide them.
        if (escaped) {
          for (uint32_t t = child.tokens_end; t < child.subtree_end; ++t)
            out_.uncertain.push_back(vocab_.token_order()[t]);
        }
        continue;
      }
      visit(c, to, escaped);
    }
  }

  const TokenVocabulary& vocab_;
  StackArena arena_;
  StackExpander expander_;
  PositionMasks& out_;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> index_;
  StackSet scratch_;
};

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

PositionMasks CompiledGrammar::compute(std::span<const uint32_t> frames) const {
  PositionMasks out;
  PositionWalk(grammar_, *vocab_, out).run(frames);
  return out;
}

std::shared_ptr<const PositionMasks> CompiledGrammar::frame_masks(
    std::span<const uint32_t> frames) const {
  const std::string key(reinterpret_cast<const char*>(frames.data()), frames.size_bytes());
  {
    std::lock_guard lock(mutex_);
    if (auto it = frames_.find(key); it != frames_.end()) return it->second;
  }
  // Computed outside the lock (a walk can take milliseconds); a race computes it twice.
  auto table = std::make_shared<const PositionMasks>(compute(frames));
  const size_t bytes = key.size() + table->accepted.size() * sizeof(uint64_t) +
                       table->uncertain.size() * sizeof(int32_t);
  std::lock_guard lock(mutex_);
  if (frame_bytes_ + bytes > kMaxFrameBytes) {
    frames_.clear();
    frame_bytes_ = 0;
  }
  auto [it, inserted] = frames_.emplace(key, std::move(table));
  if (inserted) frame_bytes_ += bytes;
  return it->second;
}

std::shared_ptr<const std::vector<uint64_t>> CompiledGrammar::cached_mask(
    const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = masks_.find(key);
  return it == masks_.end() ? nullptr : it->second;
}

void CompiledGrammar::store_mask(const std::string& key,
                                 std::shared_ptr<const std::vector<uint64_t>> mask) const {
  const size_t bytes = key.size() + mask->size() * sizeof(uint64_t);
  std::lock_guard lock(mutex_);
  if (mask_bytes_ + bytes > kMaxMaskBytes) {  // a new working set: start over
    masks_.clear();
    mask_bytes_ = 0;
  }
  if (masks_.emplace(key, std::move(mask)).second) mask_bytes_ += bytes;
}

}  // namespace rlt::structured
