// What the penalties need to know about a request's tokens, kept incrementally: O(1) amortized
// per appended token, and O(distinct tokens) — not O(vocab) — for the sampler to read.
//
// Thread-safety: a plain value owned by its request; copy it with the request on preemption.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rlt::sampling {

class TokenHistory {
 public:
  TokenHistory() = default;
  explicit TokenHistory(std::span<const int32_t> prompt) { add_prompt(prompt); }

  // Prompt ids count for the repetition penalty only (vLLM); call before any append().
  void add_prompt(std::span<const int32_t> prompt);
  // One generated (sampled and committed) token.
  void append(int32_t token);

  // Every distinct id of prompt + generated tokens, in first-seen order.
  std::span<const int32_t> distinct_tokens() const { return distinct_; }
  // Every distinct generated id, in first-seen order, and its count (parallel arrays).
  std::span<const int32_t> generated_tokens() const { return generated_; }
  std::span<const int32_t> generated_counts() const { return generated_counts_; }
  int64_t num_generated() const { return num_generated_; }

 private:
  void note_seen(int32_t token);

  std::vector<int32_t> distinct_;
  std::unordered_set<int32_t> seen_;
  std::vector<int32_t> generated_;
  std::vector<int32_t> generated_counts_;
  std::unordered_map<int32_t, size_t> generated_slot_;  // id -> index into generated_
  int64_t num_generated_ = 0;
};

}  // namespace rlt::sampling
