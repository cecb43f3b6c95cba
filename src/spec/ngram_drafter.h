// Prompt lookup, the model-free drafter: a request's context is its prompt followed by its
// output; the drafter finds the latest earlier occurrence of the context's last n tokens (n from
// the longest size down to the shortest) and proposes the tokens that followed it. Works for
// every model: input-grounded outputs (summaries, edits, code that quotes the file it was given)
// repeat long runs of their context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rlt::spec {

class NgramDrafter {
 public:
  // 1 <= min_n <= max_n (SpeculativeConfig::validate checks the user's values).
  NgramDrafter(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}

  // Appends up to `max_tokens` proposals to `out` (none when no suffix of min_n tokens or more
  // occurred earlier). A match close to the end continues into the proposals themselves, so a
  // repeating pattern is proposed as it would go on.
  void propose(std::span<const int32_t> prompt, std::span<const int32_t> output, int32_t max_tokens,
               std::vector<int32_t>& out) const;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace rlt::spec
