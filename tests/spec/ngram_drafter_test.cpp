// Prompt lookup against a brute-force statement of its rule, on random contexts of a small
// alphabet (many matches), plus the worked cases that pin the rule down.
#include <gtest/gtest.h>

#include <random>

#include "spec/ngram_drafter.h"

namespace rlt::spec {
namespace {

std::vector<int32_t> propose(const NgramDrafter& d, std::vector<int32_t> prompt, std::vector<int32_t> output,
                             int32_t k) {
  std::vector<int32_t> out;
  d.propose(prompt, output, k, out);
  return out;
}

// The rule, written as plainly as possible: for n = max..min, the latest start s < len - n with
// ctx[s, s + n) == ctx[len - n, len); propose ctx'[s + n + j] where ctx' grows by the proposals.
std::vector<int32_t> brute_force(const std::vector<int32_t>& ctx, int32_t min_n, int32_t max_n, int32_t k) {
  const auto len = static_cast<int64_t>(ctx.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(ctx.begin() + s, ctx.begin() + s + n, ctx.end() - n)) continue;
      std::vector<int32_t> grown = ctx, out;
      for (int64_t j = 0; j < k; ++j) {
        out.push_back(grown[static_cast<size_t>(s + n + j)]);
        grown.push_back(out.back());
      }
      return out;
    }
  }
  return {};
}

TEST(NgramDrafter, WorkedCases) {
  const NgramDrafter d(2, 4);
  // "the cat sat . the cat" -> the latest "the cat" is followed by "sat .".
  EXPECT_EQ(propose(d, {1, 2, 3, 4, 1, 2}, {}, 2), (std::vector<int32_t>{3, 4}));
  // The output continues the prompt: the context is their concatenation.
  EXPECT_EQ(propose(d, {1, 2, 3, 4}, {1, 2}, 3), (std::vector<int32_t>{3, 4, 1}));
  // The longest suffix wins over a later, shorter match.
  EXPECT_EQ(propose(d, {7, 8, 9, 5, 6, 8, 9, 1, 7, 8, 9}, {}, 1), (std::vector<int32_t>{5}));
  // No suffix of two tokens occurred before: nothing.
  EXPECT_TRUE(propose(d, {1, 2, 3, 4, 5}, {}, 4).empty());
  // A repeating pattern goes on through the proposals themselves.
  EXPECT_EQ(propose(d, {5, 6, 5, 6}, {}, 5), (std::vector<int32_t>{5, 6, 5, 6, 5}));
  // k = 0 and tiny contexts propose nothing.
  EXPECT_TRUE(propose(d, {1, 2, 1, 2}, {}, 0).empty());
  EXPECT_TRUE(propose(d, {1}, {}, 3).empty());
  EXPECT_TRUE(propose(d, {}, {1, 1}, 3).empty());  // one token before the suffix of two: no room
  EXPECT_EQ(propose(NgramDrafter(1, 1), {}, {1, 1}, 2), (std::vector<int32_t>{1, 1}));
}

TEST(NgramDrafter, AppendsAfterWhatTheCallerHas) {
  const NgramDrafter d(1, 3);
  std::vector<int32_t> out{42};
  d.propose(std::vector<int32_t>{1, 2, 1}, std::vector<int32_t>{}, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{42, 2, 1}));
}

TEST(NgramDrafter, MatchesTheRuleOnRandomContexts) {
  std::mt19937 rng(7);
  int matched = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 4);
    const int32_t k = static_cast<int32_t>(rng() % 9);
    const int alphabet = 2 + static_cast<int>(rng() % 5);
    std::vector<int32_t> prompt(rng() % 40), output(rng() % 20);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % alphabet);
    for (auto& t : output) t = static_cast<int32_t>(rng() % alphabet);
    std::vector<int32_t> ctx = prompt;
    ctx.insert(ctx.end(), output.begin(), output.end());
    const auto got = propose(NgramDrafter(min_n, max_n), prompt, output, k);
    ASSERT_EQ(got, brute_force(ctx, min_n, max_n, k))
        << "trial " << trial << " min " << min_n << " max " << max_n << " k " << k;
    matched += !got.empty();
  }
  EXPECT_GT(matched, 1000);  // the alphabet is small: most contexts repeat a suffix
}

}  // namespace
}  // namespace rlt::spec
