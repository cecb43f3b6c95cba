#include "sampling/history.h"

#include <gtest/gtest.h>

#include <vector>

namespace rlt::sampling {
namespace {

std::vector<int32_t> to_vector(std::span<const int32_t> s) {
  return {s.begin(), s.end()};
}

TEST(TokenHistory, PromptCountsForDistinctTokensButNotForGeneratedCounts) {
  const std::vector<int32_t> prompt = {7, 3, 7, 9};
  TokenHistory h(prompt);
  EXPECT_EQ(to_vector(h.distinct_tokens()), (std::vector<int32_t>{7, 3, 9}));
  EXPECT_TRUE(h.generated_tokens().empty());
  EXPECT_EQ(h.num_generated(), 0);

  for (int32_t t : {3, 5, 3, 3, 11}) h.append(t);
  EXPECT_EQ(to_vector(h.distinct_tokens()), (std::vector<int32_t>{7, 3, 9, 5, 11}));
  EXPECT_EQ(to_vector(h.generated_tokens()), (std::vector<int32_t>{3, 5, 11}));
  EXPECT_EQ(to_vector(h.generated_counts()), (std::vector<int32_t>{3, 1, 1}));
  EXPECT_EQ(h.num_generated(), 5);
}

TEST(TokenHistory, CopiesAreIndependentSnapshots) {
  TokenHistory h;
  h.append(1);
  TokenHistory snapshot = h;
  h.append(1);
  h.append(2);
  EXPECT_EQ(to_vector(snapshot.generated_counts()), (std::vector<int32_t>{1}));
  snapshot.append(1);
  EXPECT_EQ(to_vector(snapshot.generated_counts()), (std::vector<int32_t>{2}));
  EXPECT_EQ(to_vector(h.generated_counts()), (std::vector<int32_t>{2, 1}));
}

}  // namespace
}  // namespace rlt::sampling
