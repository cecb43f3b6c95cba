#include "spec/ngram_drafter.h"

#include <algorithm>

namespace rlt::spec {
namespace {

// The context prompt ++ output, read in place.
class Context {
 public:
  Context(std::span<const int32_t> prompt, std::span<const int32_t> output) : prompt_(prompt), output_(output) {}
  int64_t size() const { return static_cast<int64_t>(prompt_.size() + output_.size()); }
  int32_t operator[](int64_t i) const {
    const auto p = static_cast<int64_t>(prompt_.size());
    return i < p ? prompt_[static_cast<size_t>(i)] : output_[static_cast<size_t>(i - p)];
  }

 private:
  std::span<const int32_t> prompt_, output_;
};

// Start of the latest occurrence of the last n tokens that ends before the context does, or -1.
int64_t latest_match(const Context& c, int64_t n) {
  const int64_t len = c.size(), suffix = len - n;
  for (int64_t s = suffix - 1; s >= 0; --s) {
    // The last token first: most starts fail there.
    if (c[s + n - 1] != c[len - 1]) continue;
    int64_t k = 0;
    while (k < n - 1 && c[s + k] == c[suffix + k]) ++k;
    if (k == n - 1) return s;
  }
  return -1;
}

}  // namespace

void NgramDrafter::propose(std::span<const int32_t> prompt, std::span<const int32_t> output, int32_t max_tokens,
                           std::vector<int32_t>& out) const {
  const Context c(prompt, output);
  const int64_t len = c.size();
  if (max_tokens <= 0) return;
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const int64_t s = latest_match(c, n);
    if (s < 0) continue;
    // Position s + n + j lies before len + j: in the context, or a proposal made already.
    const size_t first = out.size();
    for (int64_t j = 0; j < max_tokens; ++j) {
      const int64_t at = s + n + j;
      out.push_back(at < len ? c[at] : out[first + static_cast<size_t>(at - len)]);
    }
    return;
  }
}

}  // namespace rlt::spec
