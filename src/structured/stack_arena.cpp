#include "structured/stack_arena.h"

namespace rlt::structured {
namespace {

uint64_t hash_node(uint32_t pos, int32_t parent) {
  uint64_t h = (uint64_t{pos} << 32) ^ static_cast<uint32_t>(parent);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

void StackArena::clear() {
  nodes_.clear();
  table_.clear();
}

void StackArena::grow() {
  table_.assign(table_.empty() ? 1024 : table_.size() * 2, -1);
  const size_t mask = table_.size() - 1;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    size_t slot = hash_node(nodes_[id].pos, nodes_[id].parent) & mask;
    while (table_[slot] != -1) slot = (slot + 1) & mask;
    table_[slot] = static_cast<int32_t>(id);
  }
}

int32_t StackArena::intern(uint32_t pos, int32_t parent) {
  if ((nodes_.size() + 1) * 2 > table_.size()) grow();
  const size_t mask = table_.size() - 1;
  size_t slot = hash_node(pos, parent) & mask;
  for (;;) {
    const int32_t id = table_[slot];
    if (id == -1) break;
    const StackNode& n = nodes_[static_cast<size_t>(id)];
    if (n.pos == pos && n.parent == parent) return id;
    slot = (slot + 1) & mask;
  }
  const auto id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({pos, parent});
  table_[slot] = id;
  return id;
}

void StackExpander::new_round() {
  if (++round_ == 0) {  // wrapped: forget every stamp
    stamp_.assign(stamp_.size(), 0);
    round_ = 1;
  }
}

void StackExpander::expand(uint32_t pos, int32_t parent, StackSet& out) {
  expand_into(pos, parent, out);
}

void StackExpander::expand_into(uint32_t pos, int32_t parent, StackSet& out) {
  // Iterative (a work list, not recursion): a grammar's chain of calls before its first byte may
  // be as long as it has rules.
  work_.clear();
  work_.push_back({pos, parent});
  while (!work_.empty()) {
    const auto [p, below] = work_.back();
    work_.pop_back();
    const int32_t id = arena_.intern(p, below);
    if (static_cast<size_t>(id) >= stamp_.size()) stamp_.resize(arena_.size() * 2, 0);
    if (stamp_[static_cast<size_t>(id)] == round_) continue;
    stamp_[static_cast<size_t>(id)] = round_;
    const Element& e = grammar_.elements[p];
    switch (e.kind) {
      case Element::Kind::kBytes:
        if (out.tops.size() < kMaxStacks) {
          out.tops.push_back(id);
        } else {
          out.overflowed = true;
        }
        break;
      case Element::Kind::kEnd:
        if (below == StackArena::kBottom) {
          out.reached_bottom = true;
        } else {
          const StackNode n = arena_.node(below);
          work_.push_back({n.pos, n.parent});
        }
        break;
      case Element::Kind::kRule: {
        // The continuation after the call; a call at the end of its sequence returns straight to
        // the frame below (a tail call), so repetition does not grow the stack.
        const int32_t ret = grammar_.elements[p + 1].kind == Element::Kind::kEnd
                                ? below
                                : arena_.intern(p + 1, below);
        const auto& alts = grammar_.alternatives[e.value];
        for (auto it = alts.rbegin(); it != alts.rend(); ++it) work_.push_back({*it, ret});
        break;
      }
    }
  }
}

void StackExpander::advance(const StackSet& in, uint8_t byte, StackSet& out) {
  out.clear();
  new_round();
  for (int32_t top : in.tops) {
    const StackNode n = arena_.node(top);
    if (grammar_.byte_sets[grammar_.elements[n.pos].value].test(byte))
      expand_into(n.pos + 1, n.parent, out);
  }
}

ByteSet StackExpander::next_bytes(const StackSet& set) const {
  ByteSet bytes;
  for (int32_t top : set.tops)
    bytes |= grammar_.byte_sets[grammar_.elements[arena_.node(top).pos].value];
  return bytes;
}

}  // namespace rlt::structured
