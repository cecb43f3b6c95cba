// The matcher's parse stacks, shared and hash-consed. A stack is a chain of nodes (the position in
// Grammar::elements to match next, and the node below it holding the continuation to return to);
// equal stacks are the same node id, so a set of stacks is a set of ids and advancing a stack by
// a byte allocates only the frames that change.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace rlt::structured {

struct StackNode {
  uint32_t pos = 0;
  int32_t parent = -1;  // StackArena::kBottom: the outermost frame
};

class StackArena {
 public:
  static constexpr int32_t kBottom = -1;

  int32_t intern(uint32_t pos, int32_t parent);
  const StackNode& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  void clear();

 private:
  void grow();
  std::vector<StackNode> nodes_;
  std::vector<int32_t> table_;  // open addressing over node ids; -1 empty
};

// The stacks a matcher may be in: the tops (each at a byte-set element), and whether some path
// has emptied its stack (reached the end of the outermost frame).
struct StackSet {
  std::vector<int32_t> tops;
  bool reached_bottom = false;
  bool overflowed = false;  // StackExpander::kMaxStacks was reached: stacks were dropped

  bool empty() const { return tops.empty() && !reached_bottom; }
  void clear() {
    tops.clear();
    reached_bottom = false;
    overflowed = false;
  }
};

// Advances stack sets over one grammar. Each expansion round visits a (position, stack) pair at
// most once, so nullable rules cannot multiply the work.
class StackExpander {
 public:
  // At most this many stacks per set: a safety bound for very ambiguous grammars. A set that
  // reached it is marked `overflowed`; the matcher then fails the request with a clear error
  // rather than continue on a partial set.
  static constexpr size_t kMaxStacks = 4096;

  StackExpander(const Grammar& grammar, StackArena& arena) : grammar_(grammar), arena_(arena) {}

  // The stacks reached from a frame at `pos` above `parent`, expanded until each top is a byte
  // set (added to `out`), or the outermost frame ends (out.reached_bottom).
  void expand(uint32_t pos, int32_t parent, StackSet& out);
  // `out` = the stacks of `in` after matching `byte` (out is cleared first).
  void advance(const StackSet& in, uint8_t byte, StackSet& out);
  // The bytes any top of `set` accepts next.
  ByteSet next_bytes(const StackSet& set) const;
  // Starts a new dedup round (expand() calls within a round share it; advance() starts its own).
  void new_round();

 private:
  void expand_into(uint32_t pos, int32_t parent, StackSet& out);
  const Grammar& grammar_;
  StackArena& arena_;
  std::vector<uint32_t> stamp_;                     // per node id: the round that visited it
  std::vector<std::pair<uint32_t, int32_t>> work_;  // expand_into's work list
  uint32_t round_ = 0;
};

}  // namespace rlt::structured
